// Package group is the consumer group coordinator: the classic Kafka group
// protocol with client-side assignment (JoinGroup, SyncGroup, Heartbeat,
// LeaveGroup, OffsetCommit, OffsetFetch, DescribeGroups, ListGroups,
// DeleteGroups, OffsetDelete), static membership (KIP-345) and the
// MEMBER_ID_REQUIRED round trip (KIP-394); and the consumer group protocol
// of KIP-848 (ConsumerGroupHeartbeat, ConsumerGroupDescribe) with
// server-side assignment (package assign), member epochs, reconciliation,
// member-epoch commits and online migration between the two.
//
// A Coordinator serves the groups of the shards its broker was assigned
// (metastore.GroupShard). A group's membership is stored in its record
// (metastore.GroupRecord, the value of the group's generation record):
// a classic group's as of its last generation and assignment, a consumer
// group's after every change and before any member learns of it. When a
// shard moves, the new coordinator reads its groups again (at once those
// that may have members, so their sessions run) and continues them:
// members keep their generation or epoch and their partitions.
//
// Every write for a group (its record, offset commits, offset expiry) is
// conditioned on the record's version as this coordinator last read or
// wrote it, so a coordinator that lost the group can never store
// anything, and a member of an older generation can never move a
// committed offset, even if it does not know it was superseded.
//
// Committed offsets expire as Kafka's offsets.retention.minutes says
// (Options.OffsetsRetention; expiredOffsets has the rules): an empty
// group's offsets retention after it became empty, a simple group's each
// retention after its commit, a Stable consumer group's offsets of topics
// no member subscribes to retention after their commit; an empty group
// left without offsets is deleted. What retention counts from survives a
// move: every offset record carries its commit time, and the group's
// index entry (metastore.GroupInfo) when it became empty and a lower
// bound of its commit times, so the check finds due groups that are not
// in memory from the shard's index alone. Records stored before these
// times were kept count from when they are first loaded, and that time is
// written back. Offsets also carry the id of the topic they were
// committed against (Options.TopicID), so ForgetTopic of a deleted topic
// spares offsets committed to a topic created again under its name.
//
// Time comes from Options.Clock. Session, rebalance, sync and handed-out
// member id deadlines are checked by one loop (Coordinator.run) on a
// ticker of that clock every tickInterval, which also runs the offset
// expiry check every Options.OffsetsRetentionCheckInterval; requests read
// the same clock, so a test with a clock.Fake drives all of them by hand.
// Only the bounds on metastore calls (metaTimeout) run on real time.
//
// Files: coordinator.go (shards, the group map, the deadline loop),
// group.go (one group's state machine), join.go (JoinGroup, SyncGroup),
// heartbeat.go (Heartbeat, LeaveGroup), offsets.go (OffsetCommit,
// OffsetFetch, OffsetDelete), admin.go (DescribeGroups, ListGroups,
// DeleteGroups), retention.go (offset expiry), classicstate.go (a
// classic group's stored membership), consumer.go (a consumer group's
// state and stored form), cheartbeat.go (ConsumerGroupHeartbeat),
// reconcile.go (reconciliation, a pure function), cclassic.go (classic
// members in consumer groups, migrations), cdescribe.go
// (ConsumerGroupDescribe).
//
// Locks: Coordinator.mu guards the shard set and the group map; each
// group's mu guards that group and its members, and is held across the
// group's metastore calls. The order is group.mu, then Coordinator.mu: a
// goroutine holding a group's mu may take Coordinator.mu (forget does),
// while one holding Coordinator.mu only ever TryLocks a group's mu (the
// run loop, finding idle groups). No goroutine holds two groups' locks.
// Functions that expect a lock held say "Holds g.mu". Options.Valid runs
// with no lock held; Options.PartitionExists, Options.TopicID and
// Options.Topics run with a group's mu held, so they must not call the
// Coordinator, nor wait for a lock whose holder does (the broker calls
// SetShards after releasing its own mu).
package group

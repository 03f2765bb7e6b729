// Package group is the consumer group coordinator: the classic Kafka group
// protocol with client-side assignment (JoinGroup, SyncGroup, Heartbeat,
// LeaveGroup, OffsetCommit, OffsetFetch, DescribeGroups, ListGroups,
// DeleteGroups, OffsetDelete), static membership (KIP-345) and the
// MEMBER_ID_REQUIRED round trip (KIP-394).
//
// A Coordinator serves the groups of the shards its broker was assigned
// (metastore.GroupShard). Membership lives in memory only: when a shard
// moves, the new coordinator starts with every group empty, clients get
// NOT_COORDINATOR or UNKNOWN_MEMBER_ID and rejoin. Committed offsets and
// generations live in the metastore, so they survive the move.
//
// Generations are the versions of the group's generation record in the
// metastore: a rebalance that completes writes the record and uses its new
// version as the generation id. Every offset commit is a transaction
// conditioned on that version, so a member (or a whole coordinator) of an
// older generation can never move a committed offset, even if it does not
// know it was superseded.
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
// DeleteGroups), retention.go (offset expiry).
//
// Locks: Coordinator.mu guards the shard set and the group map; each
// group's mu guards that group and its members, and is held across the
// group's metastore calls. The order is group.mu, then Coordinator.mu: a
// goroutine holding a group's mu may take Coordinator.mu (forget does),
// while one holding Coordinator.mu only ever TryLocks a group's mu (the
// run loop, finding idle groups). No goroutine holds two groups' locks.
// Functions that expect a lock held say "Holds g.mu". Options.Valid runs
// with no lock held; Options.PartitionExists and Options.TopicID run with
// a group's mu held, so they must not call the Coordinator, nor wait for
// a lock whose holder does (the broker calls SetShards after releasing
// its own mu).
package group

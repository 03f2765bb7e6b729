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
// Time comes from Options.Clock. Session, rebalance, sync and handed-out
// member id deadlines are checked by one loop (Coordinator.run) on a
// ticker of that clock every tickInterval, and requests read the same
// clock, so a test with a clock.Fake drives all of them by hand. Only the
// bounds on metastore calls (metaTimeout) run on real time.
//
// Files: coordinator.go (shards, the group map, the deadline loop),
// group.go (one group's state machine), join.go (JoinGroup, SyncGroup),
// heartbeat.go (Heartbeat, LeaveGroup), offsets.go (OffsetCommit,
// OffsetFetch, OffsetDelete), admin.go (DescribeGroups, ListGroups,
// DeleteGroups).
//
// Locks: Coordinator.mu guards the shard set and the group map; each
// group's mu guards that group and its members, and is held across the
// group's metastore calls. The order is group.mu, then Coordinator.mu: a
// goroutine holding a group's mu may take Coordinator.mu (forget does),
// while one holding Coordinator.mu only ever TryLocks a group's mu (the
// run loop, finding idle groups). No goroutine holds two groups' locks.
// Functions that expect a lock held say "Holds g.mu". Options.Valid runs
// with no lock held; Options.PartitionExists runs with a group's mu held,
// so it must not call the Coordinator, nor wait for a lock whose holder
// does (the broker calls SetShards after releasing its own mu).
package group

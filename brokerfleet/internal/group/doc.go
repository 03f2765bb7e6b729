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
package group

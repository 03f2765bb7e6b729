// Package replication moves records from leaders to followers and decides
// who is in sync. Follower runs one fetch loop per leader over a plain
// wire.Conn: a Kafka Fetch with this broker's id as the replica id, whose
// fetch offset tells the leader how far this replica is. Before fetching
// under a new leader epoch a loop reconciles its log with the leader's
// (KIP-101: OffsetForLeaderEpoch, then truncation), and it appends only
// while the partition is still at the epoch the fetch was sent under.
// Each loop keeps an incremental fetch session (KIP-227) with its leader
// (session.go): after one full fetch, a fetch lists only the partitions
// whose fetch offset, leader epoch or log start changed, and the leader
// answers only the partitions with news, so an idle fetch costs the same
// few bytes whatever the number of partitions.
//
// MaintainISR is the leader's side: followers that stop keeping up leave
// the ISR and caught-up ones rejoin, by compare-and-set writes computed
// with metastore.PartitionState.ChangeISR. Throttle caps what a leader
// sends to replicas being added by a reassignment.
//
// Lock order: Follower.mu, then a fetchLoop's connMu; neither is held
// while a partition's lock is taken by the loop's appends.
package replication

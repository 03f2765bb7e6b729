// Package txn is the transaction coordinator (KIP-98): transactional ids,
// their producer ids and epochs, and the two-phase end of every
// transaction. It serves the shards of the group coordinator (a
// transactional id's shard is metastore.GroupShard of it, the key type 1
// of FindCoordinator) that the controller assigns to this broker.
//
// A transaction's state is a metastore record (metastore.Transaction),
// written only by a compare-and-set on its version and on the shard's
// assignment record, so a coordinator that lost its shard, or froze past
// its lease and was replaced, can never commit or abort a transaction or
// write a stale state. The record is the truth; memory is a cache of the
// owned shards' records, loaded whole when a shard is gained (one query),
// so transactions that time out are found without a client asking.
//
// States, as Kafka names them:
//
//	Empty ─AddPartitions/AddOffsets─▶ Ongoing ─EndTxn(commit)─▶ PrepareCommit ─markers─▶ CompleteCommit
//	                                   │     ─EndTxn(abort), timeout,
//	                                   │      InitProducerId (fencing)─▶ PrepareAbort ─markers─▶ CompleteAbort
//	CompleteCommit/CompleteAbort/Empty ─InitProducerId─▶ Empty (epoch bumped)
//
// The decision is the Prepare* write; then the markers are written by
// every partition's leader (Markers, implemented by the broker) and by the
// group coordinators of the groups the transaction commits offsets to,
// and only then does the record become Complete*. A coordinator that gains
// a shard resumes every Prepare* it finds, so a transaction decided just
// before its coordinator died still completes, and no partition is left
// with an open transaction holding back its last stable offset. Markers
// carry the shard's epoch as the coordinator epoch: partitions refuse a
// marker from an older one (TRANSACTION_COORDINATOR_FENCED).
//
// Fencing producers: InitProducerId bumps the epoch (or moves to a new
// producer id when the epoch is exhausted), so an older instance of the
// same transactional id gets PRODUCER_FENCED; while a transaction is
// ongoing it first aborts it under a bumped epoch (the retrying client
// gets CONCURRENT_TRANSACTIONS meanwhile). A producer that presents its
// current id and epoch (KIP-360) may bump again to recover.
//
// Lock order: Coordinator.mu is never held while waiting for an entry's
// mu; an entry's mu may be held while taking Coordinator.mu. Metastore
// writes of a transaction run under its entry's mu; marker writes run
// without it.
package txn

// Package catalog is the one owner of what a broker knows of the cluster:
// topics, their partition states and the local partition logs, the live
// brokers, the group coordinator shards and the controller, read from the
// metastore; and this broker's own registration, whose lease decides
// whether it may act.
//
// The view is an immutable Snapshot, swapped whole by Reconcile, which is
// the only writer: readers (the request handlers, replication, the tier,
// metrics) take Snapshot without locks and never see a half-applied
// change. Reconcile opens the logs of partitions this broker hosts, gives
// each its role (leader epoch, leader or follower, ISR), closes and removes
// those moved away, and removes the logs of deleted topics; only topics it
// loaded from the metastore are ever removed, so a lost or empty metastore
// never deletes local data.
//
// Lock order: Catalog.mu (held by Reconcile, and by LeaveISRs around its
// writes) is taken before any partition's lock and never while holding
// one; Snapshot is lock-free.
package catalog

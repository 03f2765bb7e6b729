// Package partition is one partition as the leader serves it: the segment
// log, the high watermark, the idempotent-producer window and the watchers
// woken when the high watermark moves.
//
// Offsets are assigned under the partition's append lock, so batches land in
// the log in the order the lock is taken; the high watermark is the log end
// offset for "replicated" durability on a single replica, and the fsynced
// offset for "fsync" durability (a background flusher group-commits).
package partition

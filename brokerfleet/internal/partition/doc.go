// Package partition is one replica of a partition on a broker: the segment
// log, its role (leader or follower) as the control plane assigns it, the
// high watermark, the leader-epoch history, the idempotent-producer window
// and the watchers woken when the log end or the high watermark moves.
//
// As leader it assigns offsets under its append lock (so batches land in
// the order the lock is taken, with the idempotence check in the same
// critical section) and its high watermark is the lowest log end among the
// ISR: its own durable end (the log end for "replicated" durability, the
// fsynced end for "fsync", advanced by a group-committing flusher) and the
// fetch offsets its followers report. As follower it appends the leader's
// batches verbatim, takes the leader's high watermark capped by what it
// holds, and truncates a diverged tail by leader epoch.
package partition

// Package share is the partition-leader side of share groups (KIP-932):
// per (group, topic partition) the share start offset, the in-flight
// window of records past it (available, acquired by a member until its
// lock expires, acknowledged, archived) with delivery counts, and the
// share sessions of the members fetching here.
//
// state.go is the state machine, without I/O. partition.go wraps it
// with its lock and persistence: the window is stored in the metastore
// (metastore.ShareState, runs of equal state) with writes conditioned on
// the version last read or written, and acknowledgements are answered
// only once a write that includes them succeeded; writes are group
// commits, so concurrent acknowledgements share one. manager.go loads a
// share partition under its leader epoch and claims it by writing it
// back under that epoch, so a deposed leader's next write fails and it
// drops the state; it also expires locks. session.go is the session
// cache. config.go is the group configs (share.*).
//
// Locks: Partition.mu -> Manager.mu (a fenced partition drops itself
// from the loaded map); whoever holds Manager.mu takes no partition's
// lock. Partition.mu is held across no metastore call (the flusher
// releases it for the write); Sessions.mu is a leaf.
package share

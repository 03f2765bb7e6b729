package broker

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratamq/strata/brokerfleet/internal/partition"
)

// TestChangeLog: a replica's change log holds the partitions woken for it
// from the first read on, in order; a reader gets what it has not seen,
// and ok=false whenever the log cannot cover the gap since its position
// (a new log, a log another reader emptied, an overflow), so that it
// looks at everything instead of trusting its notes.
func TestChangeLog(t *testing.T) {
	var w replicaWaiters
	ps := make([]*partition.Partition, 4)
	for i := range ps {
		ps[i] = new(partition.Partition) // only their addresses count
	}

	// No log before the first read: wakes are not kept for nobody.
	w.wake(ps[0], []int32{1, 2})
	got, pos, ok := w.since(1, 0, nil)
	require.False(t, ok, "a new log covers nothing before it")
	require.Empty(t, got)
	require.NotZero(t, pos, "0 is no reader's position")

	// From then on, in order, duplicates kept, other replicas apart.
	w.wake(ps[1], []int32{1})
	w.wake(ps[2], []int32{2, 1})
	w.wake(ps[1], []int32{1})
	w.wake(ps[3], []int32{2})
	got, next, ok := w.since(1, pos, nil)
	require.True(t, ok)
	require.Equal(t, []*partition.Partition{ps[1], ps[2], ps[1]}, got)
	require.Equal(t, pos+3, next)

	// Nothing new: ok, nothing.
	got, again, ok := w.since(1, next, got[:0])
	require.True(t, ok)
	require.Empty(t, got)
	require.Equal(t, next, again)

	// A second reader of the same replica id (a lingering session) at an
	// older position: the first emptied the log, so it is told it cannot
	// trust its notes, and where the log stands.
	w.wake(ps[3], []int32{1})
	got, _, ok = w.since(1, pos, nil)
	require.False(t, ok, "a position the log no longer reaches back to")
	require.Empty(t, got)
	_, _, ok = w.since(1, next, nil)
	require.False(t, ok, "the other reader emptied the log past this position")

	// Overflow: a log that filled up is emptied, and a reader from before
	// is told so rather than handed a partial list.
	_, pos, ok = w.since(1, 0, nil)
	require.False(t, ok)
	for i := range changeLogMax + 1 {
		w.wake(ps[i%len(ps)], []int32{1})
	}
	got, _, ok = w.since(1, pos, nil)
	require.False(t, ok, "the log overflowed since the position")
	require.Empty(t, got)

	// A position ahead of the log (a stale reader of a log made anew) is
	// not trusted either.
	_, pos, _ = w.since(1, 0, nil)
	_, _, ok = w.since(1, pos+5, nil)
	require.False(t, ok)

	// The log keeps no partition alive once read.
	w.wake(ps[0], []int32{1})
	w.since(1, 0, nil)
	l := w.logs[1]
	require.Empty(t, l.ents)
	require.Nil(t, l.ents[:cap(l.ents)][0], "read entries cleared")

	// Replica ids with a log are bounded: past the bound a reader is never
	// given one and always looks at everything.
	for id := int32(100); len(w.logs) < maxChangeLogs; id++ {
		w.since(id, 0, nil)
	}
	_, _, ok = w.since(-7, 0, nil)
	require.False(t, ok)
	w.wake(ps[0], []int32{-7})
	_, _, ok = w.since(-7, 0, nil)
	require.False(t, ok, "no log past maxChangeLogs")
	require.Len(t, w.logs, maxChangeLogs)
}

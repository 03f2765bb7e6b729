//go:build chaos

package chaos

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// hist builds synthetic histories.
type hist struct{ h *History }

func newHist() *hist { return &hist{NewHistory()} }

// sendOK is an acknowledged send of key's value at p/o.
func (h *hist) sendOK(key, value string, p int32, o int64) {
	h.h.Add(Op{Type: Invoke, F: FSend, Key: key, Value: value})
	h.h.Add(Op{Type: OK, F: FSend, Key: key, Value: value, Partition: p, Offset: o})
}

func (h *hist) sendInfo(key, value string) {
	h.h.Add(Op{Type: Invoke, F: FSend, Key: key, Value: value})
	h.h.Add(Op{Type: Info, F: FSend, Key: key, Value: value, Error: "timeout"})
}

func (h *hist) poll(process int, recs ...Rec) {
	h.h.Add(Op{Type: Invoke, F: FPoll, Process: process})
	h.h.Add(Op{Type: OK, F: FPoll, Process: process, Recs: recs})
}

func (h *hist) final(p int32, end int64, recs ...Rec) {
	h.h.Add(Op{Type: OK, F: FFinal, Partition: p, End: end, Recs: recs})
}

func rec(p int32, o int64, k, v string) Rec { return Rec{Partition: p, Offset: o, Key: k, Value: v} }

// clean is a valid history: two keys on partition 0, one on partition 1,
// polled and finally read.
func clean() *hist {
	h := newHist()
	h.sendOK("a", "a1", 0, 0)
	h.sendOK("b", "b1", 0, 1)
	h.sendOK("a", "a2", 0, 2)
	h.sendOK("c", "c1", 1, 0)
	h.poll(1, rec(0, 0, "a", "a1"), rec(0, 1, "b", "b1"))
	h.poll(1, rec(0, 2, "a", "a2"))
	h.poll(1, rec(1, 0, "c", "c1"))
	return h
}

func finish(h *hist) {
	h.final(0, 3, rec(0, 0, "a", "a1"), rec(0, 1, "b", "b1"), rec(0, 2, "a", "a2"))
	h.final(1, 1, rec(1, 0, "c", "c1"))
}

func TestCheckValid(t *testing.T) {
	h := clean()
	h.sendInfo("a", "a3") // unknown, never stored: fine
	finish(h)
	r := Check(h.h.Ops())
	require.True(t, r.Valid, r.Summary(), r.Examples)
	require.Equal(t, 5, r.Sends)
	require.Equal(t, 4, r.Acked)
	require.Equal(t, 1, r.Indeterminate)
	require.Equal(t, 4, r.Final)
}

func TestCheckLostWrite(t *testing.T) {
	h := clean()
	h.sendOK("a", "a3", 0, 3) // acknowledged, then gone
	finish(h)
	r := Check(h.h.Ops())
	require.False(t, r.Valid)
	require.Equal(t, 1, r.Count(Lost), r.Examples)
	require.Contains(t, r.Examples[Lost][0], `"a3"`)
}

func TestCheckDuplicate(t *testing.T) {
	h := clean()
	h.final(0, 4, rec(0, 0, "a", "a1"), rec(0, 1, "b", "b1"), rec(0, 2, "a", "a2"), rec(0, 3, "b", "b1"))
	h.final(1, 1, rec(1, 0, "c", "c1"))
	r := Check(h.h.Ops())
	require.False(t, r.Valid)
	require.Equal(t, 1, r.Count(Duplicated), r.Examples)
}

func TestCheckReorder(t *testing.T) {
	h := newHist()
	// a2 was sent after a1 but is stored before it; neither is
	// acknowledged, so only the log order shows it.
	h.sendInfo("a", "a1")
	h.sendInfo("a", "a2")
	h.final(0, 2, rec(0, 0, "a", "a2"), rec(0, 1, "a", "a1"))
	r := Check(h.h.Ops())
	require.False(t, r.Valid)
	require.Equal(t, 1, r.Count(Reordered), r.Examples)
	require.Zero(t, r.Count(NonMonotonicSend))
}

func TestCheckNonMonotonicSend(t *testing.T) {
	h := newHist()
	h.sendOK("a", "a1", 0, 1)
	h.sendOK("a", "a2", 0, 0)
	h.final(0, 2, rec(0, 0, "a", "a2"), rec(0, 1, "a", "a1"))
	r := Check(h.h.Ops())
	require.Equal(t, 1, r.Count(NonMonotonicSend), r.Examples)
	require.Equal(t, 1, r.Count(Reordered), r.Examples)
}

func TestCheckInconsistentOffset(t *testing.T) {
	t.Run("one offset two values", func(t *testing.T) {
		h := clean()
		h.poll(2, rec(0, 1, "a", "a2")) // offset 1 holds b1
		finish(h)
		r := Check(h.h.Ops())
		require.False(t, r.Valid)
		require.GreaterOrEqual(t, r.Count(Inconsistent), 1, r.Examples)
	})
	t.Run("acknowledged at another offset", func(t *testing.T) {
		h := newHist()
		h.sendOK("a", "a1", 0, 5)
		h.final(0, 1, rec(0, 0, "a", "a1"))
		r := Check(h.h.Ops())
		require.Equal(t, 1, r.Count(Inconsistent), r.Examples)
	})
	t.Run("two acknowledgements of one offset", func(t *testing.T) {
		h := newHist()
		h.sendOK("a", "a1", 0, 0)
		h.sendOK("b", "b1", 0, 0)
		h.final(0, 2, rec(0, 0, "a", "a1"), rec(0, 1, "b", "b1"))
		r := Check(h.h.Ops())
		require.GreaterOrEqual(t, r.Count(Inconsistent), 1, r.Examples)
	})
	t.Run("polled above the final log", func(t *testing.T) {
		h := clean()
		h.sendInfo("b", "b2")
		h.poll(1, rec(0, 3, "b", "b2")) // seen, then cut by a failover
		finish(h)
		r := Check(h.h.Ops())
		require.Equal(t, 1, r.Count(Inconsistent), r.Examples)
	})
}

func TestCheckFailedButStored(t *testing.T) {
	h := clean()
	h.h.Add(Op{Type: Invoke, F: FSend, Key: "b", Value: "b2"})
	h.h.Add(Op{Type: Fail, F: FSend, Key: "b", Value: "b2", Error: "INVALID_RECORD"})
	h.final(0, 4, rec(0, 0, "a", "a1"), rec(0, 1, "b", "b1"), rec(0, 2, "a", "a2"), rec(0, 3, "b", "b2"))
	h.final(1, 1, rec(1, 0, "c", "c1"))
	r := Check(h.h.Ops())
	require.Equal(t, 1, r.Failed)
	require.Equal(t, 1, r.Count(Inconsistent), r.Examples)
}

func TestCheckPolls(t *testing.T) {
	h := clean()
	h.poll(1, rec(0, 1, "b", "b1")) // back
	h.poll(2, rec(0, 0, "a", "a1"), rec(0, 2, "a", "a2"))
	finish(h)
	r := Check(h.h.Ops())
	require.Equal(t, 1, r.Count(NonMonotonicPoll), r.Examples)
	require.Equal(t, 1, r.Count(PollSkip), r.Examples)
}

func TestCheckGroupSkip(t *testing.T) {
	h := clean()
	h.h.Add(Op{Type: OK, F: FGroup, Process: 7, Recs: []Rec{rec(0, 0, "a", "a1"), rec(0, 2, "a", "a2")}})
	h.h.Add(Op{Type: OK, F: FCommit, Process: 7, Partition: 0, Offset: 3})
	finish(h)
	r := Check(h.h.Ops())
	require.Equal(t, 1, r.Count(GroupSkip), r.Examples)
}

func TestCheckIncomplete(t *testing.T) {
	h := clean()
	h.final(0, 3, rec(0, 0, "a", "a1"), rec(0, 1, "b", "b1"), rec(0, 2, "a", "a2"))
	r := Check(h.h.Ops()) // no final read of partition 1
	require.Equal(t, 1, r.Count(Incomplete), r.Examples)
}

func TestCheckAckGaps(t *testing.T) {
	ops := []Op{
		{Type: Invoke, F: FSend, Key: "a", Value: "a1"},
		{Type: OK, F: FSend, Key: "a", Value: "a1", Time: 1e9},
		{Type: Invoke, F: FNemesis, Value: "kill", Time: 2e9},
		{Type: Invoke, F: FSend, Key: "a", Value: "a2"},
		{Type: OK, F: FSend, Key: "a", Value: "a2", Offset: 1, Time: 5e9},
		{Type: OK, F: FFinal, End: 2, Recs: []Rec{rec(0, 0, "a", "a1"), rec(0, 1, "a", "a2")}},
	}
	r := Check(ops)
	require.True(t, r.Valid, r.Examples)
	require.EqualValues(t, 4e9, r.MaxAckGap)
	require.Len(t, r.FaultGaps, 1)
	require.EqualValues(t, 4e9, r.FaultGaps[0])
}

func TestHistoryJSONLines(t *testing.T) {
	h := clean()
	finish(h)
	var buf bytes.Buffer
	require.NoError(t, WriteJSONLines(&buf, h.h.Ops()))
	ops, err := ReadJSONLines(&buf)
	require.NoError(t, err)
	require.Equal(t, h.h.Ops(), ops)
	require.True(t, Check(ops).Valid, fmt.Sprint(Check(ops).Examples))
}

//go:build chaos

package chaos

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// shareHist builds synthetic share-group histories for CheckShare: one
// partition of n records "v0".."v<n-1>", all acknowledged sends, and a
// clock in milliseconds.
type shareHist struct {
	ops []Op
	n   int
}

const shareTestLimit = 5

func newShareHist(n int) *shareHist {
	h := &shareHist{n: n}
	var recs []Rec
	for i := range n {
		v := fmt.Sprintf("v%d", i)
		h.ops = append(h.ops, Op{Type: Invoke, F: FSend, Key: "k", Value: v}, Op{Type: OK, F: FSend, Key: "k", Value: v, Offset: int64(i)})
		recs = append(recs, Rec{Offset: int64(i), Key: "k", Value: v})
	}
	h.ops = append(h.ops, Op{Type: OK, F: FFinal, End: int64(n), Recs: recs})
	return h
}

func ms(t int64) int64 { return t * int64(time.Millisecond) }

// deliver has process proc polled records [from, to) at time at (ms),
// fetched 1 ms before, each with delivery count.
func (h *shareHist) deliver(proc int, at int64, count int32, from, to int) []Rec {
	var recs []Rec
	for i := from; i < to; i++ {
		recs = append(recs, Rec{Offset: int64(i), Key: "k", Value: fmt.Sprintf("v%d", i), Count: count, Fetched: ms(at - 1)})
	}
	h.ops = append(h.ops, Op{Process: proc, Type: Invoke, F: FShare, Wall: ms(at), Recs: recs})
	return recs
}

// outcome reports proc's accept of recs at time at (ms): typ OK
// (confirmed) or Info.
func (h *shareHist) outcome(proc int, at int64, typ string, recs []Rec) {
	h.ops = append(h.ops, Op{Process: proc, Type: typ, F: FShare, Wall: ms(at), Recs: recs})
}

// drained records the share start offset after the drain.
func (h *shareHist) drained(start int64) {
	h.ops = append(h.ops, Op{Type: OK, F: FShareOffsets, Offset: start, End: int64(h.n)})
}

func (h *shareHist) dlq(values ...string) {
	var recs []Rec
	for _, v := range values {
		recs = append(recs, Rec{Value: v})
	}
	h.ops = append(h.ops, Op{Type: OK, F: FShareDLQ, Recs: recs})
}

func (h *shareHist) check() *ShareResult { return CheckShare(h.ops, shareTestLimit) }

func TestCheckShareValid(t *testing.T) {
	h := newShareHist(10)
	h.outcome(1, 12, OK, h.deliver(1, 10, 1, 0, 4))
	// Process 2's accept is not confirmed (its leader died): redelivered
	// to process 3, which accepts it.
	h.outcome(2, 30, Info, h.deliver(2, 20, 1, 4, 8))
	h.outcome(3, 40, OK, h.deliver(3, 35, 2, 4, 6))
	// Killed before its outcome: it may have accepted v6, v7.
	h.deliver(3, 50, 2, 6, 8)
	// v8 reaches the limit and is dead-lettered; v9 was accepted once
	// with no confirmation.
	for i := int32(1); i <= shareTestLimit; i++ {
		h.outcome(1, 60+int64(i)*10, Info, h.deliver(1, 55+int64(i)*10, i, 8, 9))
	}
	h.outcome(2, 130, Info, h.deliver(2, 120, 1, 9, 10))
	h.dlq("v8")
	h.drained(10)
	r := h.check()
	require.True(t, r.Valid, r.Examples)
	require.Equal(t, 10, r.Produced)
	require.Equal(t, 10, r.Stored)
	require.Equal(t, 10, r.Delivered)
	require.Equal(t, 4+4+2+2+shareTestLimit+1, r.Deliveries)
	require.Equal(t, r.Deliveries-10, r.Redeliveries)
	require.Equal(t, 6, r.Accepted)
	require.Equal(t, 3, r.AckUnknown) // v6, v7, v9
	require.Equal(t, 1, r.DLQ)
	require.EqualValues(t, shareTestLimit, r.MaxDeliveryCount)
	require.Equal(t, 28*time.Millisecond, r.MaxAckGap) // 12 -> 40
}

func TestCheckShareLost(t *testing.T) {
	h := newShareHist(4)
	h.outcome(1, 12, OK, h.deliver(1, 10, 1, 0, 2))
	h.outcome(1, 22, OK, h.deliver(1, 20, 1, 3, 4))
	h.drained(4)
	r := h.check()
	require.False(t, r.Valid)
	require.Equal(t, 1, r.Counts[ShareLost], r.Examples)
	require.Contains(t, r.Examples[ShareLost][0], "v2 (0/2)")
}

func TestCheckShareRedelivered(t *testing.T) {
	h := newShareHist(3)
	h.outcome(1, 12, OK, h.deliver(1, 10, 1, 0, 3))
	// v1 comes back after its accept was confirmed.
	h.outcome(2, 30, Info, h.deliver(2, 20, 2, 1, 2))
	h.drained(3)
	r := h.check()
	require.False(t, r.Valid)
	require.Equal(t, 1, r.Counts[ShareRedelivered], r.Examples)
	require.Contains(t, r.Examples[ShareRedelivered][0], "v1")
}

// The next leader may not know a delivery count that was never stored:
// the same member delivered the same record with the same count after
// its accept was confirmed is a redelivery all the same.
func TestCheckShareRedeliveredSameMemberSameCount(t *testing.T) {
	h := newShareHist(2)
	h.outcome(1, 12, OK, h.deliver(1, 10, 1, 0, 2))
	h.outcome(1, 32, OK, h.deliver(1, 30, 1, 1, 2))
	h.drained(2)
	r := h.check()
	require.False(t, r.Valid)
	require.Equal(t, 1, r.Counts[ShareRedelivered], r.Examples)
	require.Equal(t, 1, r.Counts[ShareDoubleAccept], r.Examples)
}

// A record fetched before the accept that was confirmed, but handed to
// the application after it (it sat in the member's buffer past its lock),
// is stale, not redelivered.
func TestCheckShareStaleIsNotRedelivered(t *testing.T) {
	h := newShareHist(2)
	recs := h.deliver(2, 5, 1, 0, 1) // fetched at 4 ms ...
	h.ops = h.ops[:len(h.ops)-1]
	h.outcome(1, 12, OK, h.deliver(1, 10, 2, 0, 2))
	h.ops = append(h.ops, Op{Process: 2, Type: Invoke, F: FShare, Wall: ms(20), Recs: recs}) // ... polled at 20 ms
	h.outcome(2, 22, Info, recs)
	h.drained(2)
	r := h.check()
	require.True(t, r.Valid, r.Examples)
	require.Equal(t, 1, r.Stale)
}

func TestCheckShareDoubleAccept(t *testing.T) {
	h := newShareHist(2)
	h.outcome(1, 12, OK, h.deliver(1, 10, 1, 0, 2))
	recs := h.deliver(2, 5, 1, 1, 2) // fetched before process 1's accept: not a redelivery ...
	h.ops = h.ops[:len(h.ops)-1]
	h.ops = append(h.ops, Op{Process: 2, Type: Invoke, F: FShare, Wall: ms(15), Recs: recs})
	h.outcome(2, 16, OK, recs) // ... but its accept must have been refused
	h.drained(2)
	r := h.check()
	require.False(t, r.Valid)
	require.Equal(t, 1, r.Counts[ShareDoubleAccept], r.Examples)
	require.Zero(t, r.Counts[ShareRedelivered])
}

func TestCheckShareOverLimit(t *testing.T) {
	h := newShareHist(1)
	h.outcome(1, 12, OK, h.deliver(1, 10, shareTestLimit+1, 0, 1))
	h.drained(1)
	r := h.check()
	require.False(t, r.Valid)
	require.Equal(t, 1, r.Counts[ShareOverLimit], r.Examples)
}

func TestCheckShareInconsistent(t *testing.T) {
	h := newShareHist(2)
	h.outcome(1, 12, OK, h.deliver(1, 10, 1, 0, 2))
	h.outcome(1, 13, OK, []Rec{{Value: "v1"}})                                                // a second outcome
	h.ops = append(h.ops, Op{Process: 1, Type: Invoke, F: FShare, Recs: []Rec{{Value: "x"}}}) // nobody sent it
	h.dlq("y")
	h.drained(2)
	r := h.check()
	require.False(t, r.Valid)
	require.Equal(t, 3, r.Counts[ShareInconsistent], r.Examples)
}

func TestCheckShareIncomplete(t *testing.T) {
	h := newShareHist(3)
	h.outcome(1, 12, OK, h.deliver(1, 10, 1, 0, 3))
	r := h.check()
	require.False(t, r.Valid)
	require.Equal(t, 1, r.Counts[ShareIncomplete], r.Examples) // no start offset recorded
	h.drained(2)
	r = h.check()
	require.Equal(t, 1, r.Counts[ShareIncomplete], r.Examples) // start below the end
	require.Contains(t, r.Examples[ShareIncomplete][0], "below the end offset")
}

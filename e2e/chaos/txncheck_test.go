//go:build chaos

package chaos

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// txnHist builds synthetic transactional histories for CheckTxn.
type txnHist struct {
	input, committed, uncommitted []Rec
	ops                           []Op
	next                          map[int32]int64
}

func newTxnHist() *txnHist { return &txnHist{next: map[int32]int64{}} }

func (h *txnHist) in(p int32, n int) {
	for i := 0; i < n; i++ {
		h.input = append(h.input, Rec{Partition: p, Offset: int64(i), Key: "k", Value: "v" + string(rune('a'+i))})
	}
}

// txn reports a transaction of input records [from, to) of p, ended as
// outcome ("committed", "aborted", ""), and writes its output where the
// outcome says (visible: read_committed shows it).
func (h *txnHist) txn(name string, p int32, from, to int64, outcome string, visible bool) {
	var recs []Rec
	for o := from; o < to; o++ {
		v := OutValue(p, o, "v"+string(rune('a'+int(o))), name)
		rec := Rec{Partition: p, Offset: h.next[p], Value: v}
		h.next[p]++
		recs = append(recs, rec)
		h.uncommitted = append(h.uncommitted, rec)
		if visible {
			h.committed = append(h.committed, rec)
		}
	}
	h.ops = append(h.ops, Op{Type: Invoke, F: FTxn, Value: name, Recs: recs})
	switch outcome {
	case "committed":
		h.ops = append(h.ops, Op{Type: OK, F: FTxn, Value: name, Committed: true})
	case "aborted":
		h.ops = append(h.ops, Op{Type: OK, F: FTxn, Value: name})
	}
}

func (h *txnHist) check() *TxnResult { return CheckTxn(h.input, h.committed, h.uncommitted, h.ops) }

func TestCheckTxnValid(t *testing.T) {
	h := newTxnHist()
	h.in(0, 6)
	h.txn("1-1", 0, 0, 3, "committed", true)
	h.txn("1-2", 0, 3, 5, "aborted", false)
	h.txn("2-1", 0, 3, 5, "", true) // killed before it heard: committed after all
	h.txn("2-2", 0, 5, 6, "committed", true)
	r := h.check()
	require.True(t, r.Valid, r.Examples)
	require.Equal(t, 2, r.AbortedRecords)
	require.Equal(t, 1, r.Unknown)
}

func TestCheckTxnAnomalies(t *testing.T) {
	cases := map[string]func(h *txnHist){
		TxnLost:             func(h *txnHist) { h.txn("1-1", 0, 0, 2, "committed", true) },
		TxnDuplicated:       func(h *txnHist) { h.txn("1-1", 0, 0, 3, "committed", true); h.txn("1-2", 0, 2, 3, "committed", true) },
		TxnAbortedVisible:   func(h *txnHist) { h.txn("1-1", 0, 0, 3, "aborted", true) },
		TxnMissingCommitted: func(h *txnHist) { h.txn("1-1", 0, 0, 3, "committed", false); h.txn("1-2", 0, 0, 3, "", true) },
		TxnPartial: func(h *txnHist) {
			h.txn("1-1", 0, 0, 3, "", true)
			h.committed = h.committed[:2]
			h.txn("1-2", 0, 2, 3, "", true)
		},
		TxnReordered: func(h *txnHist) {
			h.txn("1-1", 0, 1, 3, "committed", true)
			h.txn("1-2", 0, 0, 1, "committed", true)
		},
		TxnUnknown: func(h *txnHist) {
			h.txn("1-1", 0, 0, 3, "committed", true)
			h.ops = h.ops[:0]
		},
	}
	for kind, build := range cases {
		t.Run(kind, func(t *testing.T) {
			h := newTxnHist()
			h.in(0, 3)
			build(h)
			r := h.check()
			require.False(t, r.Valid)
			require.Positive(t, r.Counts[kind], "%s: %v", kind, r.Examples)
		})
	}
}

//go:build chaos

package chaos

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// The transactional scenario: transformer processes run franz-go's
// GroupTransactSession, consuming the workload's topic in one group and
// producing every record, in the same transaction as the group's offset
// commit, to the output topic's partition of the same number. An output
// value is OutValue(input partition, input offset, input value, txn): the
// transaction is "<process>-<seq>". Before ending a transaction a
// transformer reports its output values (FTxn invoke), after it the
// outcome (FTxn ok with Committed, or info when it cannot know), and it
// may be killed anywhere.

// FTxn is a transformer's transaction: invoke with Txn and the output
// values (Recs), then ok (Committed says which way it ended) or info.
const FTxn = "txn"

// Anomaly kinds CheckTxn reports. Every one of them makes the scenario
// invalid.
const (
	// TxnLost: an input record (final read) with no output record in the
	// read_committed read of the output topic.
	TxnLost = "txn-lost"
	// TxnDuplicated: an input record with two or more output records.
	TxnDuplicated = "txn-duplicated"
	// TxnAbortedVisible: a read_committed output record of a transaction
	// that ended aborted.
	TxnAbortedVisible = "txn-aborted-visible"
	// TxnPartial: a transaction some of whose output records are visible
	// to read_committed and others not.
	TxnPartial = "txn-partial"
	// TxnUnknown: a read_committed output record of a transaction no
	// transformer reported before ending it, or whose value does not
	// parse.
	TxnUnknown = "txn-unknown"
	// TxnReordered: an output partition whose records are not in the
	// order of their input offsets.
	TxnReordered = "txn-reordered"
	// TxnMissingCommitted: a transaction a transformer saw commit whose
	// records are not all visible.
	TxnMissingCommitted = "txn-missing-committed"
)

// TxnAnomalyKinds lists the kinds in report order.
var TxnAnomalyKinds = []string{TxnLost, TxnDuplicated, TxnAbortedVisible, TxnPartial, TxnUnknown, TxnReordered, TxnMissingCommitted}

// OutValue is the output value of an input record in transaction txn.
func OutValue(p int32, offset int64, value, txn string) string {
	return fmt.Sprintf("%d/%d|%s|%s", p, offset, value, txn)
}

// parseOut splits an output value.
func parseOut(v string) (at pos, value, txn string, ok bool) {
	parts := strings.Split(v, "|")
	if len(parts) != 3 {
		return pos{}, "", "", false
	}
	ps, os, found := strings.Cut(parts[0], "/")
	p, err1 := strconv.ParseInt(ps, 10, 32)
	o, err2 := strconv.ParseInt(os, 10, 64)
	if !found || err1 != nil || err2 != nil {
		return pos{}, "", "", false
	}
	return pos{int32(p), o}, parts[1], parts[2], true
}

// TxnResult is what CheckTxn found.
type TxnResult struct {
	Valid bool `json:"valid"`
	// Input is the input records, Output the read_committed output
	// records; Txns the transactions reported, Committed and Aborted
	// those whose outcome the transformer saw, Unknown the rest.
	Input     int `json:"input"`
	Output    int `json:"output"`
	Txns      int `json:"txns"`
	Committed int `json:"committed"`
	Aborted   int `json:"aborted"`
	Unknown   int `json:"unknown"`
	// AbortedRecords counts output records of aborted transactions that
	// the read_uncommitted read holds (and read_committed must not).
	AbortedRecords int                 `json:"aborted_records"`
	Counts         map[string]int      `json:"counts"`
	Examples       map[string][]string `json:"examples"`
}

func (r *TxnResult) add(kind, format string, args ...any) {
	r.Counts[kind]++
	if len(r.Examples[kind]) < maxExamples {
		r.Examples[kind] = append(r.Examples[kind], fmt.Sprintf(format, args...))
	}
}

// Summary is one line: the counts of every kind found.
func (r *TxnResult) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "valid=%v input=%d output=%d txns=%d committed=%d aborted=%d unknown=%d aborted_records=%d",
		r.Valid, r.Input, r.Output, r.Txns, r.Committed, r.Aborted, r.Unknown, r.AbortedRecords)
	for _, k := range TxnAnomalyKinds {
		if n := r.Counts[k]; n > 0 {
			fmt.Fprintf(&b, " %s=%d", k, n)
		}
	}
	return b.String()
}

// CheckTxn checks a transactional run: input is the input topic's final
// read, committed and uncommitted the output topic read to its end at
// read_committed and read_uncommitted (each in offset order per
// partition), ops the transformers' FTxn operations.
func CheckTxn(input, committed, uncommitted []Rec, ops []Op) *TxnResult {
	r := &TxnResult{Counts: map[string]int{}, Examples: map[string][]string{}}
	type txnInfo struct {
		values  []string
		outcome string // "", "committed", "aborted"
	}
	txns := map[string]*txnInfo{}
	for _, op := range ops {
		if op.F != FTxn {
			continue
		}
		t := txns[op.Value]
		if t == nil {
			t = &txnInfo{}
			txns[op.Value] = t
		}
		switch op.Type {
		case Invoke:
			for _, rec := range op.Recs {
				t.values = append(t.values, rec.Value)
			}
		case OK:
			t.outcome = "aborted"
			if op.Committed {
				t.outcome = "committed"
			}
		}
	}
	r.Txns = len(txns)
	for _, t := range txns {
		switch t.outcome {
		case "committed":
			r.Committed++
		case "aborted":
			r.Aborted++
		default:
			r.Unknown++
		}
	}

	inputAt := map[pos]string{}
	for _, rec := range input {
		inputAt[pos{rec.Partition, rec.Offset}] = rec.Value
	}
	r.Input = len(inputAt)
	r.Output = len(committed)
	seen := map[pos]int{}
	visible := map[string]bool{}
	lastIn := map[int32]int64{}
	for _, rec := range committed {
		visible[rec.Value] = true
		at, value, txn, ok := parseOut(rec.Value)
		if !ok {
			r.add(TxnUnknown, "output %d/%d: value %q does not parse", rec.Partition, rec.Offset, rec.Value)
			continue
		}
		seen[at]++
		if in, ok := inputAt[at]; ok && in != value {
			r.add(TxnUnknown, "output %d/%d names input %v as %q, the input holds %q", rec.Partition, rec.Offset, at, value, in)
		}
		if at.p != rec.Partition {
			r.add(TxnUnknown, "output %d/%d holds input %v of another partition", rec.Partition, rec.Offset, at)
		}
		if prev, ok := lastIn[rec.Partition]; ok && at.o <= prev {
			r.add(TxnReordered, "output partition %d: input offset %d at output offset %d after input offset %d", rec.Partition, at.o, rec.Offset, prev)
		}
		lastIn[rec.Partition] = at.o
		t := txns[txn]
		switch {
		case t == nil:
			r.add(TxnUnknown, "output %d/%d of transaction %s, which no transformer reported", rec.Partition, rec.Offset, txn)
		case t.outcome == "aborted":
			r.add(TxnAbortedVisible, "output %d/%d of aborted transaction %s visible to read_committed", rec.Partition, rec.Offset, txn)
		}
	}
	for at := range inputAt {
		switch n := seen[at]; {
		case n == 0:
			r.add(TxnLost, "input %v has no committed output", at)
		case n > 1:
			r.add(TxnDuplicated, "input %v has %d committed outputs", at, n)
		}
	}
	names := make([]string, 0, len(txns))
	for name := range txns {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		t := txns[name]
		n := 0
		for _, v := range t.values {
			if visible[v] {
				n++
			}
		}
		switch {
		case n > 0 && n < len(t.values):
			r.add(TxnPartial, "transaction %s: %d of its %d records visible", name, n, len(t.values))
		case t.outcome == "committed" && n < len(t.values):
			r.add(TxnMissingCommitted, "transaction %s committed, %d of its %d records visible", name, n, len(t.values))
		}
	}
	all := map[string]bool{}
	for _, rec := range uncommitted {
		all[rec.Value] = true
	}
	for _, t := range txns {
		if t.outcome != "aborted" {
			continue
		}
		for _, v := range t.values {
			if all[v] {
				r.AbortedRecords++
			}
		}
	}
	r.Valid = len(r.Counts) == 0
	return r
}

//go:build chaos

package chaos

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// The compaction scenario's history: keyed overwrites and deletes of a
// compacted topic (cleanup.policy=compact), read at the end.
const (
	// FTableSend is one write of a key of the compacted topic: invoke
	// carries the key and its value "<key>:<n>" (n counts the key's
	// writes from 0), with Tomb set for a delete (the record's value is
	// null; Value still names the write); ok adds the partition and
	// offset.
	FTableSend = "table-send"
	// FTableFinal is a read of one partition of the compacted topic from
	// its start to End after healing: ok carries its records, a null
	// value as a Rec with Tomb set.
	FTableFinal = "table-final"
)

// Anomaly kinds CheckTable reports.
const (
	// TableLost: a key's final value is older than its last acknowledged
	// write, or the key is gone though its last acknowledged write was a
	// value and no later write that may have been stored deleted it.
	TableLost = "table-lost"
	// TableResurrected: a key is present though its last acknowledged
	// write deleted it and no later write that may have been stored gave
	// it a value.
	TableResurrected = "table-resurrected"
	// TableInconsistent: a value nobody sent, or one whose send failed
	// definitely; a key in two partitions; offsets not increasing; a
	// key's values out of the order they were sent.
	TableInconsistent = "table-inconsistent"
	// TableUncompacted: the read after the cleaner's last chance still
	// holds a key twice or a tombstone past delete.retention.ms.
	TableUncompacted = "table-uncompacted"
	// TableIncomplete: a partition with acknowledged writes has no final
	// read.
	TableIncomplete = "table-incomplete"
)

// TableKinds lists CheckTable's kinds in report order.
var TableKinds = []string{TableLost, TableResurrected, TableInconsistent, TableUncompacted, TableIncomplete}

// TableResult is what CheckTable found.
type TableResult struct {
	Valid bool `json:"valid"`
	// Writes counts write invocations, Deletes those that were deletes;
	// Acked, Failed and Indeterminate their completions.
	Writes        int `json:"writes"`
	Deletes       int `json:"deletes"`
	Acked         int `json:"acked"`
	Failed        int `json:"failed"`
	Indeterminate int `json:"indeterminate"`
	// Keys is how many keys the final state holds, Read how many records
	// the final read returned.
	Keys     int                 `json:"keys"`
	Read     int                 `json:"read"`
	Counts   map[string]int      `json:"counts"`
	Examples map[string][]string `json:"examples"`
}

// Count returns the number of anomalies of kind.
func (r *TableResult) Count(kind string) int { return r.Counts[kind] }

func (r *TableResult) add(kind, format string, args ...any) {
	r.Counts[kind]++
	if len(r.Examples[kind]) < maxExamples {
		r.Examples[kind] = append(r.Examples[kind], fmt.Sprintf(format, args...))
	}
}

// Summary is one line: the counts, and every kind found.
func (r *TableResult) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "table: valid=%v writes=%d deletes=%d acked=%d failed=%d info=%d keys=%d read=%d", r.Valid, r.Writes, r.Deletes, r.Acked, r.Failed, r.Indeterminate, r.Keys, r.Read)
	for _, k := range TableKinds {
		if n := r.Counts[k]; n > 0 {
			fmt.Fprintf(&b, " %s=%d", k, n)
		}
	}
	return b.String()
}

// tableWrite is one write of a key, in send order.
type tableWrite struct {
	n      int
	tomb   bool
	status string // Invoke until completed
	at     pos
}

// seqOf parses the n of a value "<key>:<n>" (-1 if it is not one).
func seqOf(key, value string) int {
	rest, ok := strings.CutPrefix(value, key+":")
	if !ok {
		return -1
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// CheckTable analyses the compaction scenario's history: FTableSend ops
// (each key written in order by one process) and one FTableFinal per
// partition, read after healing. clean, if not nil, is a later read (one
// record list per partition) taken once the cleaner had time to compact
// everything and delete.retention.ms had passed: it must hold the same
// state, each key once and no tombstone.
//
// The final state of a key (its last record in the final read, absent
// after a tombstone) must be what one of its writes left: the last
// acknowledged one or a later one not known to have failed.
func CheckTable(ops []Op, clean map[int32][]Rec) *TableResult {
	r := &TableResult{Counts: map[string]int{}, Examples: map[string][]string{}}
	writes := map[string][]*tableWrite{}
	byValue := map[string]*tableWrite{}
	ackedParts := map[int32]bool{}
	for _, op := range ops {
		switch {
		case op.F == FTableSend && op.Type == Invoke:
			r.Writes++
			if op.Tomb {
				r.Deletes++
			}
			w := &tableWrite{n: seqOf(op.Key, op.Value), tomb: op.Tomb, status: Invoke}
			writes[op.Key] = append(writes[op.Key], w)
			byValue[op.Value] = w
		case op.F == FTableSend:
			w := byValue[op.Value]
			if w == nil || w.status != Invoke {
				r.add(TableInconsistent, "completion %s of %q without a single invocation", op.Type, op.Value)
				continue
			}
			w.status = op.Type
			switch op.Type {
			case OK:
				r.Acked++
				w.at = pos{op.Partition, op.Offset}
				ackedParts[op.Partition] = true
			case Fail:
				r.Failed++
			default:
				r.Indeterminate++
			}
		}
	}
	r.Indeterminate += r.Writes - r.Acked - r.Failed - r.Indeterminate

	finals := map[int32][]Rec{}
	for _, op := range ops {
		if op.F == FTableFinal && op.Type == OK {
			finals[op.Partition] = op.Recs
		}
	}
	for p := range ackedParts {
		if _, ok := finals[p]; !ok {
			r.add(TableIncomplete, "partition %d has acknowledged writes and no final read", p)
		}
	}
	state, _ := r.replay(finals, writes, "final read")
	r.Keys = len(state)
	for _, recs := range finals {
		r.Read += len(recs)
	}

	keys := make([]string, 0, len(writes))
	for k := range writes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		ws := writes[key]
		last := -1
		for i, w := range ws {
			if w.status == OK {
				last = i
			}
		}
		if last >= 0 {
			if _, ok := finals[ws[last].at.p]; !ok {
				continue // incomplete, reported above
			}
		}
		// What may have been stored last: the last acknowledged write, or
		// any later one not known to have failed (without an
		// acknowledged write, also nothing: the key may be absent).
		allowed := map[int]bool{}
		absentOK := last < 0
		for i := max(last, 0); i < len(ws); i++ {
			if ws[i].status == Fail {
				continue
			}
			if ws[i].tomb {
				absentOK = true
			} else {
				allowed[ws[i].n] = true
			}
		}
		v, present := state[key]
		switch {
		case !present && !absentOK:
			r.add(TableLost, "key %s is gone; its last acknowledged write is %s:%d (a value) at %v", key, key, ws[last].n, ws[last].at)
		case present && !allowed[seqOf(key, v)]:
			n := seqOf(key, v)
			switch {
			case last >= 0 && ws[last].tomb && n <= ws[last].n:
				r.add(TableResurrected, "key %s holds %q, but its last acknowledged write (%d, at %v) deleted it", key, v, ws[last].n, ws[last].at)
			case last >= 0 && n < ws[last].n:
				r.add(TableLost, "key %s holds %q, older than its last acknowledged write %s:%d at %v", key, v, key, ws[last].n, ws[last].at)
			default:
				r.add(TableInconsistent, "key %s holds %q, which no write that may have been stored gave it", key, v)
			}
		}
	}

	if clean != nil {
		again, _ := r.replay(clean, writes, "clean read")
		seen := map[string]bool{}
		for p, recs := range clean {
			for _, rec := range recs {
				switch {
				case rec.Tomb:
					r.add(TableUncompacted, "partition %d: a tombstone of %s at %d past delete.retention.ms", p, rec.Key, rec.Offset)
				case seen[rec.Key]:
					r.add(TableUncompacted, "partition %d: key %s held twice (again at %d)", p, rec.Key, rec.Offset)
				}
				seen[rec.Key] = true
			}
		}
		for _, key := range keys {
			if a, b := state[key], again[key]; a != b {
				r.add(TableInconsistent, "key %s: %q in the final read, %q once compacted", key, a, b)
			}
		}
	}
	r.Valid = true
	for _, n := range r.Counts {
		if n > 0 {
			r.Valid = false
		}
	}
	return r
}

// replay applies reads in offset order and returns each key's last value
// (absent after a tombstone) and its partition, checking offsets, values
// and their order on the way.
func (r *TableResult) replay(reads map[int32][]Rec, writes map[string][]*tableWrite, what string) (map[string]string, map[string]int32) {
	state := map[string]string{}
	partOf := map[string]int32{}
	for key := range writes {
		partOf[key] = -1
	}
	for p, recs := range reads {
		lastOff := int64(-1)
		lastN := map[string]int{}
		for _, rec := range recs {
			if rec.Offset <= lastOff {
				r.add(TableInconsistent, "%s of partition %d: offset %d after %d", what, p, rec.Offset, lastOff)
			}
			lastOff = rec.Offset
			if q, ok := partOf[rec.Key]; ok && q >= 0 && q != p {
				r.add(TableInconsistent, "%s: key %s in partitions %d and %d", what, rec.Key, q, p)
			}
			partOf[rec.Key] = p
			if rec.Tomb {
				delete(state, rec.Key)
				continue
			}
			n := seqOf(rec.Key, rec.Value)
			var w *tableWrite
			for _, c := range writes[rec.Key] {
				if c.n == n && !c.tomb {
					w = c
				}
			}
			switch {
			case w == nil:
				r.add(TableInconsistent, "%s: %q at %d/%d was never sent", what, rec.Value, p, rec.Offset)
			case w.status == Fail:
				r.add(TableInconsistent, "%s: %q at %d/%d failed definitely but is stored", what, rec.Value, p, rec.Offset)
			}
			if prev, ok := lastN[rec.Key]; ok && n <= prev {
				r.add(TableInconsistent, "%s: key %s's write %d at %d/%d after its write %d", what, rec.Key, n, p, rec.Offset, prev)
			}
			lastN[rec.Key] = n
			state[rec.Key] = rec.Value
		}
	}
	return state, partOf
}

//go:build chaos

package chaos

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// FCommit is a consumer-group member's acknowledged offset commit: ok with
// Partition and Offset (the next offset to read).
const FCommit = "commit"

// Anomaly kinds Check reports. Every one of them makes a history invalid.
const (
	// Lost: an acknowledged send that no read returned, though the final
	// read covered its partition.
	Lost = "lost"
	// Duplicated: one value stored at two or more offsets (producers are
	// idempotent and every value is sent once).
	Duplicated = "duplicated"
	// Reordered: two values of one key stored in the opposite order of
	// their sends (the final log, in offset order).
	Reordered = "reordered"
	// Inconsistent: one offset read with two values; a value read at
	// another offset than the one acknowledged; two acknowledgements of
	// one offset; a key in two partitions; a value nobody sent; a polled
	// record the final read does not hold (a read above the high
	// watermark that a failover then cut); a send that failed definitely
	// but is stored.
	Inconsistent = "inconsistent"
	// NonMonotonicSend: two acknowledged sends of one key whose offsets
	// are not in the order they were sent.
	NonMonotonicSend = "nonmonotonic-send"
	// NonMonotonicPoll: a consumer's successive records of one partition
	// going back or repeating an offset.
	NonMonotonicPoll = "nonmonotonic-poll"
	// PollSkip: a consumer's successive records of one partition jumping
	// over offsets the final log holds.
	PollSkip = "poll-skip"
	// GroupSkip: an offset below a partition's highest acknowledged group
	// commit that no member of the group processed.
	GroupSkip = "group-skip"
	// Incomplete: the history lacks the final read of a partition that
	// has acknowledged sends, so loss cannot be judged.
	Incomplete = "incomplete"
)

// AnomalyKinds lists the kinds in report order.
var AnomalyKinds = []string{Lost, Duplicated, Reordered, Inconsistent, NonMonotonicSend, NonMonotonicPoll, PollSkip, GroupSkip, Incomplete}

// maxExamples bounds the examples kept per anomaly kind.
const maxExamples = 20

// Result is what Check found.
type Result struct {
	Valid bool `json:"valid"`
	// Sends counts send invocations: Acked completed ok, Failed fail,
	// Indeterminate info or never completed.
	Sends         int `json:"sends"`
	Acked         int `json:"acked"`
	Failed        int `json:"failed"`
	Indeterminate int `json:"indeterminate"`
	// Polled counts records the consumers returned, Final the records of
	// the final read, GroupProcessed what group members processed.
	Polled         int `json:"polled"`
	Final          int `json:"final"`
	GroupProcessed int `json:"group_processed"`
	// Counts and Examples by anomaly kind.
	Counts   map[string]int      `json:"counts"`
	Examples map[string][]string `json:"examples"`
	// MaxAckGap is the longest time any partition went without an
	// acknowledged send, between its first and last ones.
	MaxAckGap time.Duration `json:"max_ack_gap"`
	// FaultGaps is, per fault (a nemesis invoke, ended by the ok with the
	// same value), the longest gap between acknowledgements of any
	// partition that overlaps the fault: the unavailability it caused,
	// which for a kill or pause of a leader is its failover time.
	FaultGaps []time.Duration `json:"fault_gaps"`
}

// Count returns the number of anomalies of kind.
func (r *Result) Count(kind string) int { return r.Counts[kind] }

func (r *Result) add(kind, format string, args ...any) {
	r.Counts[kind]++
	if len(r.Examples[kind]) < maxExamples {
		r.Examples[kind] = append(r.Examples[kind], fmt.Sprintf(format, args...))
	}
}

// Summary is one line: the counts of every kind found.
func (r *Result) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "valid=%v sends=%d acked=%d failed=%d info=%d polled=%d final=%d", r.Valid, r.Sends, r.Acked, r.Failed, r.Indeterminate, r.Polled, r.Final)
	for _, k := range AnomalyKinds {
		if n := r.Counts[k]; n > 0 {
			fmt.Fprintf(&b, " %s=%d", k, n)
		}
	}
	return b.String()
}

type pos struct {
	p int32
	o int64
}

func (p pos) String() string { return fmt.Sprintf("%d/%d", p.p, p.o) }

// Check analyses a history of sends, polls, a final read, group
// processing and commits, and nemesis events.
//
// Values must be unique per send and keys must be sent in order by one
// process each (a key's order is the order of its send invocations). A
// send that completed fail or info is not acknowledged: it may or may not
// be stored, but if stored it is held to every rule but loss.
func Check(ops []Op) *Result {
	r := &Result{Counts: map[string]int{}, Examples: map[string][]string{}}
	type sendInfo struct {
		key     string
		rank    int // position among the key's sends
		acked   bool
		failed  bool
		at      pos
		ackTime int64
	}
	sends := map[string]*sendInfo{} // by value
	keyRanks := map[string]int{}
	completed := map[string]bool{}
	ackedAt := map[pos]string{}
	var ackTimes = map[int32][]int64{}
	var faults [][2]int64 // start, end (-1: never ended)
	faultOf := map[string][]int{}
	for _, op := range ops {
		switch {
		case op.F == FSend && op.Type == Invoke:
			r.Sends++
			sends[op.Value] = &sendInfo{key: op.Key, rank: keyRanks[op.Key]}
			keyRanks[op.Key]++
		case op.F == FSend:
			s := sends[op.Value]
			if s == nil || completed[op.Value] {
				r.add(Inconsistent, "completion %s of value %q without a single invocation", op.Type, op.Value)
				continue
			}
			completed[op.Value] = true
			switch op.Type {
			case OK:
				r.Acked++
				s.acked, s.at, s.ackTime = true, pos{op.Partition, op.Offset}, op.Time
				if prev, dup := ackedAt[s.at]; dup {
					r.add(Inconsistent, "offset %v acknowledged for %q and %q", s.at, prev, op.Value)
				}
				ackedAt[s.at] = op.Value
				ackTimes[op.Partition] = append(ackTimes[op.Partition], op.Time)
			case Fail:
				r.Failed++
				s.failed = true
			default:
				r.Indeterminate++
			}
		case op.F == FNemesis && op.Type == Invoke:
			faults = append(faults, [2]int64{op.Time, -1})
			faultOf[op.Value] = append(faultOf[op.Value], len(faults)-1)
		case op.F == FNemesis:
			if l := faultOf[op.Value]; len(l) > 0 {
				faults[l[0]][1] = op.Time
				faultOf[op.Value] = l[1:]
			}
		}
	}
	r.Indeterminate += r.Sends - r.Acked - r.Failed - r.Indeterminate

	// Everything read: the value at each offset, the offsets of each value.
	valueAt := map[pos]string{}
	offsetsOf := map[string]map[pos]bool{}
	read := func(rec Rec, what string) {
		at := pos{rec.Partition, rec.Offset}
		if v, ok := valueAt[at]; ok && v != rec.Value {
			r.add(Inconsistent, "offset %v read as %q and as %q (%s)", at, v, rec.Value, what)
			return
		}
		valueAt[at] = rec.Value
		if offsetsOf[rec.Value] == nil {
			offsetsOf[rec.Value] = map[pos]bool{}
		}
		offsetsOf[rec.Value][at] = true
		if sends[rec.Value] == nil {
			r.add(Inconsistent, "value %q read at %v (%s) was never sent", rec.Value, at, what)
		}
	}
	finalEnd := map[int32]int64{}
	finalLog := map[int32][]Rec{}
	finalAt := map[pos]bool{}
	for _, op := range ops {
		if op.Type == OK && op.F == FFinal {
			finalEnd[op.Partition] = op.End
			for _, rec := range op.Recs {
				read(rec, "final")
				finalAt[pos{rec.Partition, rec.Offset}] = true
				finalLog[rec.Partition] = append(finalLog[rec.Partition], rec)
				r.Final++
			}
		}
	}
	type cursor struct {
		process int
		p       int32
	}
	last := map[cursor]int64{}
	groupSeen := map[pos]bool{}
	maxCommit := map[int32]int64{}
	for _, op := range ops {
		if op.Type != OK {
			continue
		}
		switch op.F {
		case FPoll:
			for _, rec := range op.Recs {
				r.Polled++
				read(rec, "poll")
				at := pos{rec.Partition, rec.Offset}
				if _, ok := finalEnd[rec.Partition]; ok && !finalAt[at] {
					r.add(Inconsistent, "process %d polled %q at %v, which the final read (end %d) does not hold", op.Process, rec.Value, at, finalEnd[rec.Partition])
				}
				c := cursor{op.Process, rec.Partition}
				prev, seen := last[c]
				last[c] = rec.Offset
				if !seen {
					continue
				}
				switch {
				case rec.Offset <= prev:
					r.add(NonMonotonicPoll, "process %d polled partition %d offset %d after %d", op.Process, rec.Partition, rec.Offset, prev)
				case rec.Offset > prev+1:
					for o := prev + 1; o < rec.Offset; o++ {
						if finalAt[pos{rec.Partition, o}] {
							r.add(PollSkip, "process %d polled partition %d offset %d after %d, skipping %d", op.Process, rec.Partition, rec.Offset, prev, o)
							break
						}
					}
				}
			}
		case FGroup:
			for _, rec := range op.Recs {
				r.GroupProcessed++
				read(rec, "group")
				groupSeen[pos{rec.Partition, rec.Offset}] = true
			}
		case FCommit:
			if op.Offset > maxCommit[op.Partition] {
				maxCommit[op.Partition] = op.Offset
			}
		}
	}

	// Loss, offsets, duplicates.
	for v, s := range sends {
		offs := offsetsOf[v]
		if len(offs) > 1 {
			var l []string
			for at := range offs {
				l = append(l, at.String())
			}
			sort.Strings(l)
			r.add(Duplicated, "value %q stored at %s", v, strings.Join(l, ", "))
		}
		if s.failed && len(offs) > 0 {
			r.add(Inconsistent, "value %q failed definitely but is stored", v)
		}
		if !s.acked {
			continue
		}
		if _, ok := finalEnd[s.at.p]; !ok {
			r.add(Incomplete, "no final read of partition %d, which acknowledged %q", s.at.p, v)
			continue
		}
		if len(offs) == 0 {
			r.add(Lost, "value %q acknowledged at %v (t=%v) was never read", v, s.at, time.Duration(s.ackTime).Round(time.Millisecond))
			continue
		}
		if !offs[s.at] {
			r.add(Inconsistent, "value %q acknowledged at %v but read elsewhere", v, s.at)
		}
	}

	// Per-key order in the final log, and keys that changed partition.
	keyPart := map[string]int32{}
	parts := make([]int32, 0, len(finalLog))
	for p := range finalLog {
		parts = append(parts, p)
	}
	sort.Slice(parts, func(i, j int) bool { return parts[i] < parts[j] })
	for _, p := range parts {
		recs := finalLog[p]
		sort.Slice(recs, func(i, j int) bool { return recs[i].Offset < recs[j].Offset })
		lastRank := map[string]int{}
		lastOff := map[string]int64{}
		for _, rec := range recs {
			s := sends[rec.Value]
			if s == nil {
				continue
			}
			if kp, ok := keyPart[s.key]; ok && kp != p {
				r.add(Inconsistent, "key %q stored in partitions %d and %d", s.key, kp, p)
			}
			keyPart[s.key] = p
			if lr, ok := lastRank[s.key]; ok && s.rank <= lr {
				r.add(Reordered, "key %q: send #%d at %d/%d after send #%d at %d/%d", s.key, s.rank, p, rec.Offset, lr, p, lastOff[s.key])
			}
			lastRank[s.key], lastOff[s.key] = s.rank, rec.Offset
		}
	}

	// Acknowledged sends of one key: offsets in send order.
	byKey := map[string][]*sendInfo{}
	for _, s := range sends {
		if s.acked {
			byKey[s.key] = append(byKey[s.key], s)
		}
	}
	for k, l := range byKey {
		sort.Slice(l, func(i, j int) bool { return l[i].rank < l[j].rank })
		for i := 1; i < len(l); i++ {
			a, b := l[i-1], l[i]
			if a.at.p == b.at.p && b.at.o <= a.at.o {
				r.add(NonMonotonicSend, "key %q: send #%d acknowledged at %v, later send #%d at %v", k, a.rank, a.at, b.rank, b.at)
			}
		}
	}

	// Group members processed everything below what they committed.
	for p, c := range maxCommit {
		for o := int64(0); o < c; o++ {
			at := pos{p, o}
			if finalAt[at] && !groupSeen[at] {
				r.add(GroupSkip, "partition %d offset %d (%q) below the committed offset %d was never processed by the group", p, o, valueAt[at], c)
			}
		}
	}

	// Availability.
	for p, ts := range ackTimes {
		sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
		for i := 1; i < len(ts); i++ {
			if g := time.Duration(ts[i] - ts[i-1]); g > r.MaxAckGap {
				r.MaxAckGap = g
			}
		}
		ackTimes[p] = ts
	}
	for _, f := range faults {
		start, end := f[0], f[1]
		if end < start {
			end = start
		}
		var worst time.Duration
		spanned := false
		for _, ts := range ackTimes {
			// The gaps between acknowledgements that overlap the fault.
			i := sort.Search(len(ts), func(i int) bool { return ts[i] >= start })
			if i == 0 || i == len(ts) {
				continue
			}
			spanned = true
			for ; i < len(ts) && ts[i-1] <= end; i++ {
				if g := time.Duration(ts[i] - ts[i-1]); g > worst {
					worst = g
				}
			}
		}
		if spanned {
			r.FaultGaps = append(r.FaultGaps, worst)
		}
	}

	r.Valid = true
	for _, k := range AnomalyKinds {
		if r.Counts[k] > 0 {
			r.Valid = false
		}
	}
	return r
}

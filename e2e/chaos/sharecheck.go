//go:build chaos

package chaos

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// The share-group scenario: member processes consume the workload's topic
// through one share group (KIP-932) and accept every record. Per poll a
// member reports what it was delivered and is about to accept (FShare
// invoke: Recs with their delivery counts and fetch times), then, once
// kgo.FlushAcks returned, which of those accepts the broker confirmed
// (FShare ok) and which it did not or may not have applied (FShare info).
// A member may be killed anywhere. After the drain the share group's
// start offsets (FShareOffsets) and the dead-letter topic (FShareDLQ) are
// recorded.

// Share-group op functions.
const (
	// FShare is one poll of a share consumer: invoke with the records
	// delivered (Rec.Count, Rec.Fetched) and Wall the time the poll
	// returned; ok with the records whose accept the broker confirmed,
	// info with those it refused or that no answer confirmed, Wall the
	// time kgo.FlushAcks returned.
	FShare = "share"
	// FShareOffsets is the share group's start offset of one partition
	// after the drain: ok with Partition, Offset (the start offset) and
	// End (the partition's end offset of the final read).
	FShareOffsets = "share-offsets"
	// FShareDLQ is the dead-letter topic read after the drain: ok with its
	// records (their values are the origin records').
	FShareDLQ = "share-dlq"
)

// Anomaly kinds CheckShare reports. Every one of them makes the scenario
// invalid.
const (
	// ShareLost: a record of the final read no member was ever
	// delivered and that is not in the dead-letter topic.
	ShareLost = "share-lost"
	// ShareRedelivered: a delivery of a record fetched after a member's
	// accept of it was confirmed: the broker handed out an acknowledged
	// record again.
	ShareRedelivered = "share-redelivered"
	// ShareDoubleAccept: two confirmed accepts of one record (after the
	// first the record is acknowledged, so the second must be refused).
	ShareDoubleAccept = "share-double-accept"
	// ShareOverLimit: a delivery count above share.delivery.count.limit.
	ShareOverLimit = "share-over-limit"
	// ShareInconsistent: a delivered or dead-lettered value the final read
	// lacks or holds at another offset; an outcome of a record the member
	// had not reported delivered.
	ShareInconsistent = "share-inconsistent"
	// ShareIncomplete: the history cannot show the drain finished: a
	// partition with deliveries but no final read, or with no recorded
	// share start offset, or one below its end offset.
	ShareIncomplete = "share-incomplete"
)

// ShareAnomalyKinds lists the kinds in report order.
var ShareAnomalyKinds = []string{ShareLost, ShareRedelivered, ShareDoubleAccept, ShareOverLimit, ShareInconsistent, ShareIncomplete}

// ShareResult is what CheckShare found.
type ShareResult struct {
	Valid bool `json:"valid"`
	// Produced counts acknowledged sends, Stored the final read's records.
	Produced int `json:"produced"`
	Stored   int `json:"stored"`
	// Deliveries counts every record a member was delivered, Delivered
	// the distinct records, Redeliveries the difference.
	Deliveries   int `json:"deliveries"`
	Delivered    int `json:"delivered"`
	Redeliveries int `json:"redeliveries"`
	// Accepted counts the records with a confirmed accept; AckUnknown
	// those delivered with no confirmed accept and not dead-lettered (an
	// accept whose answer was lost may have been applied); DLQ the
	// records in the dead-letter topic.
	Accepted   int `json:"accepted"`
	AckUnknown int `json:"ack_unknown"`
	DLQ        int `json:"dlq"`
	// Stale counts deliveries reported after a confirmed accept of their
	// record but fetched before it (a member held them in its buffer).
	Stale int `json:"stale"`
	// MaxDeliveryCount is the highest delivery count seen.
	MaxDeliveryCount int32 `json:"max_delivery_count"`
	// MaxAckGap is the longest time between two confirmed accepts, from
	// the first to the last.
	MaxAckGap time.Duration       `json:"max_ack_gap"`
	Counts    map[string]int      `json:"counts"`
	Examples  map[string][]string `json:"examples"`
}

func (r *ShareResult) add(kind, format string, args ...any) {
	r.Counts[kind]++
	if len(r.Examples[kind]) < maxExamples {
		r.Examples[kind] = append(r.Examples[kind], fmt.Sprintf(format, args...))
	}
}

// Summary is one line: the counts and every kind found.
func (r *ShareResult) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "valid=%v produced=%d stored=%d deliveries=%d delivered=%d redeliveries=%d accepted=%d ack_unknown=%d dlq=%d stale=%d max_delivery_count=%d max_ack_gap=%v",
		r.Valid, r.Produced, r.Stored, r.Deliveries, r.Delivered, r.Redeliveries, r.Accepted, r.AckUnknown, r.DLQ, r.Stale,
		r.MaxDeliveryCount, r.MaxAckGap.Round(10*time.Millisecond))
	for _, k := range ShareAnomalyKinds {
		if n := r.Counts[k]; n > 0 {
			fmt.Fprintf(&b, " %s=%d", k, n)
		}
	}
	return b.String()
}

// CheckShare checks a share-group run: ops holds the sends, the final
// read, the members' FShare operations, the share start offsets and the
// dead-letter read; limit is share.delivery.count.limit.
func CheckShare(ops []Op, limit int) *ShareResult {
	r := &ShareResult{Counts: map[string]int{}, Examples: map[string][]string{}}
	type delivery struct {
		proc    int
		count   int32
		fetched int64 // the member's client decoded the response
		polled  int64 // the poll returned it
		outcome string
	}
	type confirm struct {
		d    *delivery
		wall int64
	}
	stored := map[string]pos{}
	finals := map[int32]int64{} // partition -> end
	deliveries := map[string][]*delivery{}
	accepts := map[string][]confirm{}
	// last delivery of a value to a process, for its outcome
	type pv struct {
		proc  int
		value string
	}
	open := map[pv]*delivery{}
	dlq := map[string]bool{}
	starts := map[int32]int64{}
	var ackWalls []int64
	parts := map[int32]bool{} // partitions delivered from or stored
	for _, op := range ops {
		switch {
		case op.F == FSend && op.Type == OK:
			r.Produced++
		case op.F == FFinal && op.Type == OK:
			finals[op.Partition] = op.End
			for _, rec := range op.Recs {
				stored[rec.Value] = pos{rec.Partition, rec.Offset}
			}
		case op.F == FShare && op.Type == Invoke:
			for _, rec := range op.Recs {
				d := &delivery{proc: op.Process, count: rec.Count, fetched: rec.Fetched, polled: op.Wall}
				deliveries[rec.Value] = append(deliveries[rec.Value], d)
				open[pv{op.Process, rec.Value}] = d
				parts[rec.Partition] = true
				r.Deliveries++
				r.MaxDeliveryCount = max(r.MaxDeliveryCount, rec.Count)
				if limit > 0 && int(rec.Count) > limit {
					r.add(ShareOverLimit, "%s (%d/%d) delivered to process %d with delivery count %d, above the limit %d", rec.Value, rec.Partition, rec.Offset, op.Process, rec.Count, limit)
				}
			}
		case op.F == FShare:
			if op.Type == OK && len(op.Recs) > 0 {
				ackWalls = append(ackWalls, op.Wall)
			}
			for _, rec := range op.Recs {
				d := open[pv{op.Process, rec.Value}]
				if d == nil || d.outcome != "" {
					r.add(ShareInconsistent, "process %d: outcome %s of %s, which it was not delivered (or has an outcome)", op.Process, op.Type, rec.Value)
					continue
				}
				d.outcome = op.Type
				if op.Type == OK {
					accepts[rec.Value] = append(accepts[rec.Value], confirm{d, op.Wall})
				}
			}
		case op.F == FShareOffsets && op.Type == OK:
			starts[op.Partition] = op.Offset
			if op.Offset < op.End {
				r.add(ShareIncomplete, "partition %d: share start offset %d below the end offset %d after the drain", op.Partition, op.Offset, op.End)
			}
		case op.F == FShareDLQ && op.Type == OK:
			for _, rec := range op.Recs {
				dlq[rec.Value] = true
			}
		}
	}
	r.Stored = len(stored)
	r.Delivered = len(deliveries)
	r.Redeliveries = r.Deliveries - r.Delivered
	r.Accepted = len(accepts)

	values := make([]string, 0, len(deliveries))
	for v := range deliveries {
		values = append(values, v)
	}
	sort.Strings(values)
	for _, v := range values {
		at, ok := stored[v]
		ds := deliveries[v]
		if !ok {
			r.add(ShareInconsistent, "%s delivered %d times, not in the final read", v, len(ds))
			continue
		}
		acc := accepts[v]
		if len(acc) > 1 {
			r.add(ShareDoubleAccept, "%s (%v): accepted by process %d (delivery %d) and process %d (delivery %d), both confirmed", v, at, acc[0].d.proc, acc[0].d.count, acc[1].d.proc, acc[1].d.count)
		}
		if len(acc) == 0 {
			if !dlq[v] {
				r.AckUnknown++
			}
			continue
		}
		first := acc[0]
		for _, a := range acc[1:] {
			if a.wall < first.wall {
				first = a
			}
		}
		for _, d := range ds {
			if d == first.d {
				continue // the confirmed delivery itself
			}
			switch {
			case d.fetched > first.wall:
				r.add(ShareRedelivered, "%s (%v): delivered to process %d (delivery %d) %v after process %d's accept of delivery %d was confirmed",
					v, at, d.proc, d.count, time.Duration(d.fetched-first.wall).Round(time.Millisecond), first.d.proc, first.d.count)
			case d.polled > first.wall:
				r.Stale++
			}
		}
	}
	for v := range dlq {
		if _, ok := stored[v]; !ok {
			r.add(ShareInconsistent, "%s in the dead-letter topic, not in the final read", v)
		}
	}
	r.DLQ = len(dlq)
	lost := map[string]pos{}
	for v, at := range stored {
		if len(deliveries[v]) == 0 && !dlq[v] {
			lost[v] = at
		}
	}
	lostValues := make([]string, 0, len(lost))
	for v := range lost {
		lostValues = append(lostValues, v)
	}
	sort.Slice(lostValues, func(i, j int) bool {
		a, b := lost[lostValues[i]], lost[lostValues[j]]
		return a.p < b.p || a.p == b.p && a.o < b.o
	})
	for _, v := range lostValues {
		r.add(ShareLost, "%s (%v) in the final read, never delivered, not dead-lettered", v, lost[v])
	}
	for _, at := range stored {
		parts[at.p] = true
	}
	ps := make([]int32, 0, len(parts))
	for p := range parts {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	for _, p := range ps {
		if _, ok := finals[p]; !ok {
			r.add(ShareIncomplete, "partition %d: no final read", p)
		}
		if _, ok := starts[p]; !ok {
			r.add(ShareIncomplete, "partition %d: no share start offset recorded after the drain", p)
		}
	}
	sort.Slice(ackWalls, func(i, j int) bool { return ackWalls[i] < ackWalls[j] })
	for i := 1; i < len(ackWalls); i++ {
		r.MaxAckGap = max(r.MaxAckGap, time.Duration(ackWalls[i]-ackWalls[i-1]))
	}
	r.Valid = len(r.Counts) == 0
	return r
}

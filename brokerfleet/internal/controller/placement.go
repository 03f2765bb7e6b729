package controller

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/stratamq/strata/pkg/metastore"
)

// ErrNotEnoughBrokers is returned by PlaceReplicas when fewer brokers may
// take replicas than the replication factor asks for.
var ErrNotEnoughBrokers = errors.New("controller: not enough live brokers")

// PlaceReplicas assigns replicas to new partitions [from, to) over the
// brokers that may take them (live, not draining): racks interleaved so a
// partition's replicas span racks, and successive partitions start on
// successive brokers so leadership spreads. The first replica leads, at
// leader epoch 0.
func PlaceReplicas(brokers []metastore.Broker, draining map[int32]bool, from, to int32, rf int16) ([]metastore.PartitionState, error) {
	var live []metastore.Broker
	for _, br := range brokers {
		if br.Live && !draining[br.ID] {
			live = append(live, br)
		}
	}
	if int(rf) > len(live) {
		return nil, fmt.Errorf("%w: %d replicas but %d live brokers", ErrNotEnoughBrokers, rf, len(live))
	}
	order := interleaveRacks(live)
	out := make([]metastore.PartitionState, 0, to-from)
	for p := from; p < to; p++ {
		replicas := make([]int32, rf)
		for r := range replicas {
			replicas[r] = order[(int(p)+r)%len(order)].ID
		}
		out = append(out, metastore.PartitionState{Partition: p, Replicas: replicas, Leader: replicas[0], ISR: slices.Clone(replicas)})
	}
	return out, nil
}

// interleaveRacks orders brokers so that consecutive ones are in different
// racks where possible: rack A's first, rack B's first, ..., rack A's
// second.
func interleaveRacks(brokers []metastore.Broker) []metastore.Broker {
	byRack := map[string][]metastore.Broker{}
	var racks []string
	for _, br := range brokers {
		if _, ok := byRack[br.Rack]; !ok {
			racks = append(racks, br.Rack)
		}
		byRack[br.Rack] = append(byRack[br.Rack], br)
	}
	slices.Sort(racks)
	var out []metastore.Broker
	for i := 0; len(out) < len(brokers); i++ {
		for _, r := range racks {
			if i < len(byRack[r]) {
				out = append(out, byRack[r][i])
			}
		}
	}
	return out
}

// ReassignDead replaces the replicas of brokers dead for at least after
// with live brokers that have none, preferring racks the partition does not
// use yet, then the lowest id. The leader's replica is never replaced (an
// election moves leadership first), nor any of a partition whose
// reassignment is in progress (a dead newcomer never joins the ISR, so that
// one is for its requester to finish or cancel).
func ReassignDead(st metastore.PartitionState, v View, after time.Duration) (metastore.PartitionState, bool) {
	if st.Reassigning() {
		return st, false
	}
	next := st
	changed := false
	for _, r := range st.Replicas {
		dead, ok := v.DeadFor[r]
		if !ok || dead < after || r == next.Leader {
			continue
		}
		used := map[string]bool{}
		for _, o := range next.Replicas {
			if o != r {
				used[v.Racks[o]] = true
			}
		}
		best := int32(-1)
		for id := range v.Live {
			if slices.Contains(next.Replicas, id) {
				continue
			}
			if best < 0 || (!used[v.Racks[id]] && used[v.Racks[best]]) || (used[v.Racks[id]] == used[v.Racks[best]] && id < best) {
				best = id
			}
		}
		if best < 0 {
			continue // no spare broker: the partition runs with fewer replicas
		}
		next = next.ReplaceReplica(r, best)
		changed = true
	}
	return next, changed
}

// Part is a partition's state with its topic's name.
type Part struct {
	Name  string
	State metastore.PartitionState
}

// Move is a planned reassignment: the partition, and its target replicas.
type Move struct {
	Part   Part
	Target []int32
}

// Placement is the input of PlanPlacement.
type Placement struct {
	Parts    []Part           // every partition, reassigning ones included
	Racks    map[int32]string // of every registered broker
	Eligible map[int32]bool   // brokers that may take replicas: live, not restarted, not draining
	Draining map[int32]bool   // brokers everything moves off
	MaxMoves int              // reassignments in progress at once, at most
}

// PlanPlacement is the controller's placement pass: it moves replicas off
// draining brokers, then evens out replica counts between the eligible
// brokers (so a broker added to the fleet fills up), while the
// reassignments in progress stay under MaxMoves. A replaced replica keeps
// its position in the replica list, so the newcomer inherits its
// preference for leadership. With nothing else to move and nothing in
// flight, it evens out preferred leadership by reordering replica lists
// (moves among in-sync replicas, which complete at once and copy no data).
// settled reports that nothing needed moving and nothing is in flight;
// stuck lists replicas on draining brokers that no broker can take.
func PlanPlacement(in Placement) (moves []Move, settled bool, stuck []Part) {
	load := map[int32]int{} // replicas per eligible broker
	for id, ok := range in.Eligible {
		if ok {
			load[id] = 0
		}
	}
	if len(load) == 0 {
		return nil, false, nil
	}
	var parts []Part
	inflight := 0
	for _, p := range in.Parts {
		for _, r := range p.State.Replicas {
			if _, ok := load[r]; ok && !slices.Contains(p.State.RemovingReplicas, r) {
				load[r]++
			}
		}
		if p.State.Reassigning() {
			inflight++
			continue
		}
		parts = append(parts, p)
	}
	budget := in.MaxMoves - inflight
	if budget <= 0 {
		return nil, false, nil
	}
	// dest picks the broker to take a replica of st in place of from: one
	// that has none of it, preferring a rack the others do not use, then
	// the fewest replicas, then the lowest id.
	dest := func(st metastore.PartitionState, from int32) int32 {
		used := map[string]bool{}
		for _, r := range st.Replicas {
			if r != from {
				used[in.Racks[r]] = true
			}
		}
		best := int32(-1)
		for id, n := range load {
			if slices.Contains(st.Replicas, id) {
				continue
			}
			if best < 0 {
				best = id
				continue
			}
			bu, iu := used[in.Racks[best]], used[in.Racks[id]]
			if (bu && !iu) || (bu == iu && (n < load[best] || (n == load[best] && id < best))) {
				best = id
			}
		}
		return best
	}
	planned := map[int]bool{}
	replace := func(i int, from, to int32) {
		target := slices.Clone(parts[i].State.Replicas)
		target[slices.Index(target, from)] = to
		moves = append(moves, Move{parts[i], target})
		planned[i] = true
		load[to]++
		if _, ok := load[from]; ok {
			load[from]--
		}
		budget--
	}
	// Draining brokers first: everything moves off them.
	for i, p := range parts {
		if budget <= 0 {
			break
		}
		for _, r := range p.State.Replicas {
			if !in.Draining[r] {
				continue
			}
			if to := dest(p.State, r); to >= 0 {
				replace(i, r, to)
				break // one move per partition per pass
			}
			stuck = append(stuck, p)
		}
	}
	// Then even out: from the fullest broker to the emptiest while they
	// differ by more than one replica.
	for budget > 0 {
		most, least := extremes(load)
		if load[most]-load[least] <= 1 {
			break
		}
		found := -1
		for i, p := range parts {
			st := p.State
			if planned[i] || !slices.Contains(st.Replicas, most) || slices.Contains(st.Replicas, least) || !slices.Contains(st.ISR, most) {
				continue
			}
			// Keep rack spread: the move may not lower the number of racks
			// the partition's replicas span.
			target := slices.Clone(st.Replicas)
			target[slices.Index(target, most)] = least
			if rackCount(target, in.Racks) >= rackCount(st.Replicas, in.Racks) {
				found = i
				break
			}
		}
		if found < 0 {
			break
		}
		replace(found, most, least)
	}
	if len(moves) == 0 && inflight == 0 {
		for _, r := range preferredMoves(parts, load) {
			moves = append(moves, Move{parts[r.i], r.target})
		}
		return moves, len(moves) == 0, stuck
	}
	return moves, false, stuck
}

// extremes returns the brokers with the most and the fewest of n, the
// lowest id on ties.
func extremes(n map[int32]int) (most, least int32) {
	most, least = -1, -1
	for id, v := range n {
		if most < 0 || v > n[most] || (v == n[most] && id < most) {
			most = id
		}
		if least < 0 || v < n[least] || (v == n[least] && id < least) {
			least = id
		}
	}
	return most, least
}

type reorder struct {
	i      int
	target []int32
}

// preferredMoves plans replica reorderings that even out how many
// partitions each eligible broker is the preferred replica of, swapping
// the most preferred broker with the least preferred one where both are
// in sync, until they differ by at most one.
func preferredMoves(parts []Part, eligible map[int32]int) []reorder {
	pref := map[int32]int{}
	for id := range eligible {
		pref[id] = 0
	}
	order := make([][]int32, len(parts))
	for i, p := range parts {
		order[i] = slices.Clone(p.State.Replicas)
		if len(order[i]) > 0 {
			if _, ok := pref[order[i][0]]; ok {
				pref[order[i][0]]++
			}
		}
	}
	changed := map[int]bool{}
	for range len(parts) {
		most, least := extremes(pref)
		if most < 0 || pref[most]-pref[least] <= 1 {
			break
		}
		found := false
		for i, p := range parts {
			j := slices.Index(order[i], least)
			if len(order[i]) == 0 || order[i][0] != most || j < 0 || !slices.Contains(p.State.ISR, least) || !slices.Contains(p.State.ISR, most) {
				continue
			}
			order[i][0], order[i][j] = order[i][j], order[i][0]
			pref[most]--
			pref[least]++
			changed[i] = true
			found = true
			break
		}
		if !found {
			break
		}
	}
	var out []reorder
	for i := range parts {
		if changed[i] {
			out = append(out, reorder{i, order[i]})
		}
	}
	return out
}

// rackCount returns how many racks the replicas span.
func rackCount(replicas []int32, racks map[int32]string) int {
	seen := map[string]bool{}
	for _, r := range replicas {
		seen[racks[r]] = true
	}
	return len(seen)
}

// firstRemoved returns the first of from that is not in to, or -1.
func firstRemoved(from, to []int32) int32 {
	for _, id := range from {
		if !slices.Contains(to, id) {
			return id
		}
	}
	return -1
}

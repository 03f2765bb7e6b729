package broker

import (
	"context"
	"errors"
	"maps"
	"slices"

	"github.com/stratamq/strata/pkg/metastore"
)

// balanceReplicas is the controller's placement pass. It moves replicas off
// draining brokers, then evens out replica counts between the live brokers
// that may take replicas (so a broker added to the fleet fills up), by
// starting reassignments: at most MaxReassignments in progress at once,
// each throttled by the leaders (ReassignThrottle). A replaced replica
// keeps its position in the replica list, so the newcomer inherits its
// preference for leadership and leadership spreads with the replicas.
func (c *controller) balanceReplicas(ctx context.Context, live, restarted map[int32]bool) error {
	b := c.b
	// Nothing to do while no metadata changed (the change counter moves
	// with topics, partition states, broker configs and registrations
	// coming and going) since a pass that found nothing to move.
	version, err := b.meta.ChangeVersion(ctx)
	if err != nil {
		return err
	}
	if c.placementSettled && version == c.placementVersion && maps.Equal(live, c.placementLive) {
		return nil
	}
	c.placementSettled = false
	draining, err := b.draining(ctx)
	if err != nil {
		return err
	}
	brokers, err := b.meta.Brokers(ctx)
	if err != nil {
		return err
	}
	racks := map[int32]string{}
	registered := map[int32]bool{}
	load := map[int32]int{} // replicas per broker that may take more
	for _, br := range brokers {
		racks[br.ID] = br.Rack
		registered[br.ID] = true
		if live[br.ID] && !restarted[br.ID] && !draining[br.ID] {
			load[br.ID] = 0
		}
	}
	if len(load) == 0 {
		return nil
	}
	topics, err := b.meta.Topics(ctx)
	if err != nil {
		return err
	}
	var parts []part
	type plan struct {
		p      part
		target []int32
	}
	var plans []plan
	inflight := 0
	for _, t := range topics {
		states, err := b.meta.Partitions(ctx, t.ID)
		if err != nil {
			return err
		}
		for _, st := range states {
			for _, r := range st.Replicas {
				if _, ok := load[r]; ok && !slices.Contains(st.RemovingReplicas, r) {
					load[r]++
				}
			}
			if st.Reassigning() {
				inflight++
				continue
			}
			parts = append(parts, part{st, t.Name})
		}
	}
	budget := b.cfg.MaxReassignments - inflight
	b.log.Debug("placement pass", "load", load, "draining", draining, "inflight", inflight, "partitions", len(parts))
	if budget <= 0 {
		return nil
	}
	defer func() {
		if len(plans) == 0 && inflight == 0 {
			c.placementSettled, c.placementVersion, c.placementLive = true, version, live
		}
	}()
	// dest picks the broker to take a replica of st in place of from: one
	// that has none of it, preferring a rack the others do not use, then
	// the fewest replicas, then the lowest id.
	dest := func(st metastore.PartitionState, from int32) int32 {
		used := map[string]bool{}
		for _, r := range st.Replicas {
			if r != from {
				used[racks[r]] = true
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
			bu, iu := used[racks[best]], used[racks[id]]
			if (bu && !iu) || (bu == iu && (n < load[best] || (n == load[best] && id < best))) {
				best = id
			}
		}
		return best
	}
	planned := map[int]bool{}
	replace := func(i int, from, to int32) {
		target := slices.Clone(parts[i].st.Replicas)
		target[slices.Index(target, from)] = to
		plans = append(plans, plan{parts[i], target})
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
		for _, r := range p.st.Replicas {
			if !draining[r] {
				continue
			}
			to := dest(p.st, r)
			if to < 0 {
				b.log.Warn("cannot drain: no broker can take the replica", "broker", r, "topic", p.name, "partition", p.st.Partition, "replicas", p.st.Replicas)
				continue
			}
			replace(i, r, to)
			break // one move per partition per pass
		}
	}
	// Then even out: from the fullest broker to the emptiest while they
	// differ by more than one replica.
	for budget > 0 {
		var most, least int32 = -1, -1
		for id, n := range load {
			if most < 0 || n > load[most] || (n == load[most] && id < most) {
				most = id
			}
			if least < 0 || n < load[least] || (n == load[least] && id < least) {
				least = id
			}
		}
		if load[most]-load[least] <= 1 {
			break
		}
		found := -1
		for i, p := range parts {
			if planned[i] || !slices.Contains(p.st.Replicas, most) || slices.Contains(p.st.Replicas, least) || !slices.Contains(p.st.ISR, most) {
				continue
			}
			// Keep rack spread: the move may not lower the number of
			// racks the partition's replicas span.
			target := slices.Clone(p.st.Replicas)
			target[slices.Index(target, most)] = least
			if rackCount(target, racks) >= rackCount(p.st.Replicas, racks) {
				found = i
				break
			}
		}
		if found < 0 {
			break
		}
		replace(found, most, least)
	}
	// With the replicas where they belong, even out preferred leadership
	// (the first replica) by reordering replica lists: a reordering among
	// in-sync replicas completes at once and moves no data; the leader
	// rebalance then hands leadership over.
	if len(plans) == 0 && inflight == 0 {
		for _, pl := range c.preferredMoves(parts, load) {
			plans = append(plans, plan{parts[pl.i], pl.target})
		}
	}
	started := 0
	for _, pl := range plans {
		if _, ok := c.lease.Valid(); !ok {
			return nil
		}
		next, err := pl.p.st.StartReassignment(pl.target, func(id int32) bool { return registered[id] })
		if err != nil {
			b.log.Warn("plan reassignment", "topic", pl.p.name, "partition", pl.p.st.Partition, "err", err)
			continue
		}
		if _, err := b.meta.UpdatePartition(ctx, next); err != nil {
			if errors.Is(err, metastore.ErrConditionFailed) || errors.Is(err, metastore.ErrFenced) {
				continue // changed meanwhile: the next pass decides again
			}
			return err
		}
		started++
		b.log.Info("replica move started", "topic", pl.p.name, "partition", pl.p.st.Partition,
			"from", pl.p.st.Replicas, "to", pl.target, "draining", draining[firstRemoved(pl.p.st.Replicas, pl.target)])
	}
	if started > 0 {
		return b.reconcile(ctx)
	}
	return nil
}

type reorder struct {
	i      int
	target []int32
}

// preferredMoves plans replica reorderings that even out how many
// partitions each eligible broker is the preferred replica of, swapping
// the most preferred broker with the least preferred one where both are
// in sync, until they differ by at most one.
func (c *controller) preferredMoves(parts []part, eligible map[int32]int) []reorder {
	pref := map[int32]int{}
	for id := range eligible {
		pref[id] = 0
	}
	order := make([][]int32, len(parts))
	for i, p := range parts {
		order[i] = slices.Clone(p.st.Replicas)
		if len(order[i]) > 0 {
			if _, ok := pref[order[i][0]]; ok {
				pref[order[i][0]]++
			}
		}
	}
	changed := map[int]bool{}
	for range len(parts) {
		var most, least int32 = -1, -1
		for id, n := range pref {
			if most < 0 || n > pref[most] || (n == pref[most] && id < most) {
				most = id
			}
			if least < 0 || n < pref[least] || (n == pref[least] && id < least) {
				least = id
			}
		}
		if most < 0 || pref[most]-pref[least] <= 1 {
			break
		}
		found := false
		for i, p := range parts {
			j := slices.Index(order[i], least)
			if len(order[i]) == 0 || order[i][0] != most || j < 0 || !slices.Contains(p.st.ISR, least) || !slices.Contains(p.st.ISR, most) {
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

// part is a partition's state with its topic's name.
type part struct {
	st   metastore.PartitionState
	name string
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

package controller

import (
	"slices"

	"github.com/stratamq/strata/pkg/metastore"
)

// ShardMove assigns one coordinator shard to a broker.
type ShardMove struct {
	Shard metastore.CoordinatorShard // as stored (the write is conditioned on it)
	To    int32
}

// PlanShards gives every coordinator shard without a live owner to the
// live broker with the fewest, then evens out the counts until they differ
// by at most one (a shard that moves costs its groups one rebalance, so
// nothing else moves). stored may lack shards never assigned.
func PlanShards(stored []metastore.CoordinatorShard, live map[int32]bool) []ShardMove {
	var ids []int32
	for id, ok := range live {
		if ok {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	slices.Sort(ids)
	cur := make(map[int32]metastore.CoordinatorShard, metastore.GroupShards)
	for s := int32(0); s < metastore.GroupShards; s++ {
		cur[s] = metastore.CoordinatorShard{Shard: s, Broker: -1}
	}
	for _, s := range stored {
		cur[s.Shard] = s
	}
	load := map[int32][]int32{}
	var orphans []int32
	for s := int32(0); s < metastore.GroupShards; s++ {
		if br := cur[s].Broker; br >= 0 && live[br] {
			load[br] = append(load[br], s)
		} else {
			orphans = append(orphans, s)
		}
	}
	pick := func(better func(a, b int) bool) int32 {
		best := ids[0]
		for _, id := range ids[1:] {
			if better(len(load[id]), len(load[best])) {
				best = id
			}
		}
		return best
	}
	least := func() int32 { return pick(func(a, b int) bool { return a < b }) }
	most := func() int32 { return pick(func(a, b int) bool { return a > b }) }
	var moves []ShardMove
	for _, s := range orphans {
		to := least()
		moves = append(moves, ShardMove{cur[s], to})
		load[to] = append(load[to], s)
	}
	for {
		hi, lo := most(), least()
		if len(load[hi])-len(load[lo]) <= 1 {
			return moves
		}
		s := load[hi][len(load[hi])-1]
		load[hi] = load[hi][:len(load[hi])-1]
		moves = append(moves, ShardMove{cur[s], lo})
		load[lo] = append(load[lo], s)
	}
}

// PlanShardHandOver moves self's coordinator shards to the other live
// brokers, each to the one holding the fewest, before self stops, so its
// groups move at once instead of a lease later.
func PlanShardHandOver(shards map[int32]metastore.CoordinatorShard, self int32, live map[int32]bool) []ShardMove {
	load := map[int32]int{}
	for id, ok := range live {
		if ok && id != self {
			load[id] = 0
		}
	}
	if len(load) == 0 {
		return nil
	}
	var mine []metastore.CoordinatorShard
	for _, s := range shards {
		if _, ok := load[s.Broker]; ok {
			load[s.Broker]++
		}
		if s.Broker == self {
			mine = append(mine, s)
		}
	}
	slices.SortFunc(mine, func(a, b metastore.CoordinatorShard) int { return int(a.Shard - b.Shard) })
	var moves []ShardMove
	for _, s := range mine {
		_, to := extremes(load)
		moves = append(moves, ShardMove{s, to})
		load[to]++
	}
	return moves
}

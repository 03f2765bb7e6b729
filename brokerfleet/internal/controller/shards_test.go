package controller

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratamq/strata/pkg/metastore"
)

func apply(stored []metastore.CoordinatorShard, moves []ShardMove) map[int32]int32 {
	owner := map[int32]int32{}
	for s := int32(0); s < metastore.GroupShards; s++ {
		owner[s] = -1
	}
	for _, s := range stored {
		owner[s.Shard] = s.Broker
	}
	for _, m := range moves {
		owner[m.Shard.Shard] = m.To
	}
	return owner
}

func counts(owner map[int32]int32) map[int32]int {
	n := map[int32]int{}
	for _, b := range owner {
		n[b]++
	}
	return n
}

// Every shard gets a live owner and the counts even out; shards on live
// brokers move only to even out, never otherwise.
func TestPlanShards(t *testing.T) {
	live := map[int32]bool{0: true, 1: true, 2: true}
	t.Run("fresh cluster", func(t *testing.T) {
		moves := PlanShards(nil, live)
		require.Len(t, moves, metastore.GroupShards)
		n := counts(apply(nil, moves))
		require.Equal(t, map[int32]int{0: 6, 1: 5, 2: 5}, n)
	})
	t.Run("a broker dies: only its shards move", func(t *testing.T) {
		var stored []metastore.CoordinatorShard
		for s := int32(0); s < metastore.GroupShards; s++ {
			stored = append(stored, metastore.CoordinatorShard{Shard: s, Broker: s % 3, Epoch: 1})
		}
		moves := PlanShards(stored, map[int32]bool{0: true, 1: true})
		for _, m := range moves {
			require.Equal(t, int32(2), m.Shard.Broker, "shard %d moved off a live broker", m.Shard.Shard)
		}
		n := counts(apply(stored, moves))
		require.Equal(t, map[int32]int{0: 8, 1: 8}, n)
	})
	t.Run("balanced: nothing moves", func(t *testing.T) {
		var stored []metastore.CoordinatorShard
		for s := int32(0); s < metastore.GroupShards; s++ {
			stored = append(stored, metastore.CoordinatorShard{Shard: s, Broker: s % 3, Epoch: 1})
		}
		require.Empty(t, PlanShards(stored, live))
	})
	t.Run("a broker joins: the counts even out", func(t *testing.T) {
		var stored []metastore.CoordinatorShard
		for s := int32(0); s < metastore.GroupShards; s++ {
			stored = append(stored, metastore.CoordinatorShard{Shard: s, Broker: s % 2, Epoch: 1})
		}
		moves := PlanShards(stored, live)
		n := counts(apply(stored, moves))
		lo, hi := 100, 0
		for _, c := range n {
			lo, hi = min(lo, c), max(hi, c)
		}
		require.LessOrEqual(t, hi-lo, 1, "%v", n)
		require.Len(t, moves, 5, "as few moves as evening out needs")
	})
	t.Run("nobody live", func(t *testing.T) {
		require.Empty(t, PlanShards(nil, nil))
	})
}

// A stopping broker's shards go to the others, fewest first.
func TestPlanShardHandOver(t *testing.T) {
	shards := map[int32]metastore.CoordinatorShard{}
	for s := int32(0); s < 6; s++ {
		shards[s] = metastore.CoordinatorShard{Shard: s, Broker: []int32{0, 0, 0, 1, 2, 2}[s]}
	}
	moves := PlanShardHandOver(shards, 0, map[int32]bool{0: true, 1: true, 2: true})
	require.Len(t, moves, 3)
	to := map[int32]int{}
	for _, m := range moves {
		require.Equal(t, int32(0), m.Shard.Broker)
		to[m.To]++
	}
	require.Equal(t, map[int32]int{1: 2, 2: 1}, to, "1 had one shard and 2 two: 1 takes two, then 2 one")
	require.Empty(t, PlanShardHandOver(shards, 0, map[int32]bool{0: true}), "nobody to hand over to")
}

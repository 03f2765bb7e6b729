package controller

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratamq/strata/pkg/metastore"
)

// Leadership goes back to the preferred replica only for brokers leading
// under 90% of their preferred partitions, and only where the preferred
// replica is live, not restarted, not draining and in sync.
func TestPlanLeaderBalance(t *testing.T) {
	live := map[int32]bool{0: true, 1: true, 2: true}
	var parts []Part
	for p := int32(0); p < 10; p++ {
		parts = append(parts, part("t", p, 0, []int32{0, 1, 2}, []int32{0, 1, 2})) // broker 0 preferred and leading
	}
	for p := int32(10); p < 20; p++ {
		parts = append(parts, part("t", p, 0, []int32{1, 0, 2}, []int32{0, 1, 2})) // broker 1 preferred, 0 leads
	}
	moves := PlanLeaderBalance(parts, live, nil, nil)
	require.Len(t, moves, 10)
	for _, m := range moves {
		require.Equal(t, int32(1), m.State.Leader)
		require.Equal(t, int32(1), m.State.LeaderEpoch, "a new leader epoch")
	}
	for name, c := range map[string]struct {
		live, restarted, draining map[int32]bool
		isr                       []int32
	}{
		"preferred not live":    {map[int32]bool{0: true, 2: true}, nil, nil, []int32{0, 1, 2}},
		"preferred restarted":   {live, map[int32]bool{1: true}, nil, []int32{0, 1, 2}},
		"preferred draining":    {live, nil, map[int32]bool{1: true}, []int32{0, 1, 2}},
		"preferred not in sync": {live, nil, nil, []int32{0, 2}},
	} {
		ps := []Part{part("t", 0, 0, []int32{1, 0, 2}, c.isr)}
		require.Empty(t, PlanLeaderBalance(ps, c.live, c.restarted, c.draining), name)
	}
	// Within the 10% threshold: nothing moves.
	parts = parts[:0]
	for p := int32(0); p < 10; p++ {
		leader := int32(1)
		if p == 0 {
			leader = 0
		}
		parts = append(parts, part("t", p, leader, []int32{1, 0}, []int32{0, 1}))
	}
	require.Empty(t, PlanLeaderBalance(parts, live, nil, nil), "1 of 10 not led is within the threshold")
}

// A stopping broker hands leadership to another live in-sync replica
// under a new epoch; a partition with nobody else in sync keeps its leader.
func TestPlanHandOver(t *testing.T) {
	states := []metastore.PartitionState{
		{Partition: 0, Replicas: []int32{0, 1, 2}, Leader: 0, LeaderEpoch: 4, ISR: []int32{0, 2, 1}},
		{Partition: 1, Replicas: []int32{0, 1}, Leader: 0, LeaderEpoch: 1, ISR: []int32{0}},
		{Partition: 2, Replicas: []int32{1, 0}, Leader: 1, LeaderEpoch: 2, ISR: []int32{1, 0}},
	}
	got := PlanHandOver(states, 0, map[int32]bool{0: true, 1: true, 2: true})
	require.Len(t, got, 1)
	require.Equal(t, int32(0), got[0].Partition)
	require.Equal(t, int32(1), got[0].Leader, "first in-sync replica in replica order")
	require.Equal(t, []int32{2, 1}, got[0].ISR)
	require.Equal(t, int32(5), got[0].LeaderEpoch)
}

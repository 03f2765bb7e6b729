package controller

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratamq/strata/pkg/metastore"
)

func brokersIn(racks ...string) []metastore.Broker {
	var out []metastore.Broker
	for i, r := range racks {
		out = append(out, metastore.Broker{ID: int32(i), Rack: r, Live: true})
	}
	return out
}

// New partitions spread over racks and start on successive brokers, so
// both replicas and leadership spread; draining and dead brokers get none.
func TestPlaceReplicasAcrossRacks(t *testing.T) {
	for _, c := range []struct {
		name     string
		brokers  []metastore.Broker
		draining map[int32]bool
		rf       int16
		want     [][]int32
	}{
		{"two racks interleave", brokersIn("a", "a", "b", "b"), nil, 2,
			[][]int32{{0, 2}, {2, 1}, {1, 3}, {3, 0}}},
		{"three racks, rf 3: every partition spans all three", brokersIn("a", "b", "c"), nil, 3,
			[][]int32{{0, 1, 2}, {1, 2, 0}, {2, 0, 1}, {0, 1, 2}}},
		{"a draining broker gets nothing", brokersIn("a", "b", "c"), map[int32]bool{1: true}, 2,
			[][]int32{{0, 2}, {2, 0}, {0, 2}, {2, 0}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := PlaceReplicas(c.brokers, c.draining, 0, int32(len(c.want)), c.rf)
			require.NoError(t, err)
			for i, st := range got {
				require.Equal(t, int32(i), st.Partition)
				require.Equal(t, c.want[i], st.Replicas)
				require.Equal(t, st.Replicas[0], st.Leader, "the first replica leads")
				require.Equal(t, st.Replicas, st.ISR)
				require.Zero(t, st.LeaderEpoch)
			}
		})
	}
	dead := brokersIn("a", "b", "c")
	dead[2].Live = false
	_, err := PlaceReplicas(dead, nil, 0, 1, 3)
	require.ErrorIs(t, err, ErrNotEnoughBrokers)
	_, err = PlaceReplicas(brokersIn("a", "b", "c"), map[int32]bool{0: true}, 0, 1, 3)
	require.ErrorIs(t, err, ErrNotEnoughBrokers, "draining brokers do not count")
}

// A replica of a broker dead for ReassignAfter moves to a live broker
// without one, on a rack the partition lacks if there is one; never the
// leader's, never during a reassignment, never before the delay.
func TestReassignDeadReplicas(t *testing.T) {
	const after = 10 * time.Minute
	view := func(dead map[int32]time.Duration, live ...int32) View {
		v := View{Live: map[int32]bool{}, DeadFor: dead, Racks: map[int32]string{0: "a", 1: "b", 2: "c", 3: "a", 4: "c"}}
		for _, id := range live {
			v.Live[id] = true
		}
		return v
	}
	st := metastore.PartitionState{Replicas: []int32{0, 1, 2}, Leader: 0, LeaderEpoch: 3, ISR: []int32{0, 1}}
	for _, c := range []struct {
		name    string
		st      metastore.PartitionState
		v       View
		changed bool
		want    []int32
	}{
		{"not dead long enough", st, view(map[int32]time.Duration{2: after - time.Second}, 0, 1, 3, 4), false, []int32{0, 1, 2}},
		{"dead long enough: to the broker on the missing rack", st, view(map[int32]time.Duration{2: after}, 0, 1, 3, 4), true, []int32{0, 1, 4}},
		{"no broker on a new rack: the lowest id", st, view(map[int32]time.Duration{2: after}, 0, 1, 3), true, []int32{0, 1, 3}},
		{"no spare broker: fewer replicas for now", st, view(map[int32]time.Duration{2: after}, 0, 1), false, []int32{0, 1, 2}},
		{"never the leader's replica", st, view(map[int32]time.Duration{0: time.Hour}, 1, 2, 3), false, []int32{0, 1, 2}},
		{"never during a reassignment", metastore.PartitionState{Replicas: []int32{0, 1, 2}, Leader: 0, ISR: []int32{0}, AddingReplicas: []int32{2}},
			view(map[int32]time.Duration{2: time.Hour}, 0, 1, 3), false, []int32{0, 1, 2}},
	} {
		t.Run(c.name, func(t *testing.T) {
			next, changed := ReassignDead(c.st, c.v, after)
			require.Equal(t, c.changed, changed)
			require.Equal(t, c.want, next.Replicas)
			if changed {
				require.NotContains(t, next.ISR, int32(2), "the dead replica leaves the ISR")
				require.Equal(t, c.st.LeaderEpoch, next.LeaderEpoch)
			}
		})
	}
}

func part(name string, p int32, leader int32, replicas []int32, isr []int32) Part {
	return Part{Name: name, State: metastore.PartitionState{Partition: p, Replicas: replicas, Leader: leader, ISR: isr}}
}

// The placement pass drains first, then evens out replica counts without
// losing rack spread, within the reassignment budget; with nothing to move
// it evens out preferred leadership by reordering in-sync replicas.
func TestPlanPlacement(t *testing.T) {
	racks := map[int32]string{0: "a", 1: "b", 2: "c", 3: "a"}
	all := map[int32]bool{0: true, 1: true, 2: true, 3: true}
	t.Run("drain moves every replica off", func(t *testing.T) {
		parts := []Part{part("t", 0, 0, []int32{0, 1}, []int32{0, 1}), part("t", 1, 1, []int32{1, 2}, []int32{1, 2})}
		moves, settled, stuck := PlanPlacement(Placement{Parts: parts, Racks: racks, Eligible: map[int32]bool{0: true, 2: true, 3: true},
			Draining: map[int32]bool{1: true}, MaxMoves: 8})
		require.False(t, settled)
		require.Empty(t, stuck)
		require.Len(t, moves, 2)
		for _, m := range moves {
			require.NotContains(t, m.Target, int32(1))
			require.Len(t, m.Target, 2)
		}
		require.Equal(t, []int32{0, 2}, moves[0].Target, "a replaced replica keeps its position; rack c is free for partition 0")
	})
	t.Run("drain with nowhere to go is reported stuck", func(t *testing.T) {
		parts := []Part{part("t", 0, 0, []int32{0, 1}, []int32{0, 1})}
		moves, _, stuck := PlanPlacement(Placement{Parts: parts, Racks: racks, Eligible: map[int32]bool{0: true},
			Draining: map[int32]bool{1: true}, MaxMoves: 8})
		require.Empty(t, moves)
		require.Len(t, stuck, 1)
	})
	t.Run("a new broker fills up, keeping rack spread", func(t *testing.T) {
		var parts []Part
		for p := int32(0); p < 6; p++ {
			r := []int32{p % 3, (p + 1) % 3}
			parts = append(parts, part("t", p, r[0], r, r))
		}
		moves, _, _ := PlanPlacement(Placement{Parts: parts, Racks: racks, Eligible: all, MaxMoves: 8})
		load := map[int32]int{}
		for _, p := range parts {
			target := p.State.Replicas
			for _, m := range moves {
				if m.Part.State.Partition == p.State.Partition {
					target = m.Target
				}
			}
			for _, r := range target {
				load[r]++
			}
			require.GreaterOrEqual(t, rackCount(target, racks), rackCount(p.State.Replicas, racks), "partition %d lost rack spread", p.State.Partition)
		}
		require.Greater(t, load[3], 0, "the new broker takes replicas")
		lo, hi := 1<<30, 0
		for _, n := range load {
			lo, hi = min(lo, n), max(hi, n)
		}
		require.LessOrEqual(t, hi-lo, 1, "replica counts even out: %v", load)
	})
	t.Run("the budget bounds the moves in flight", func(t *testing.T) {
		parts := []Part{
			{Name: "t", State: metastore.PartitionState{Partition: 0, Replicas: []int32{0, 1}, ISR: []int32{0}, AddingReplicas: []int32{1}}},
			part("t", 1, 1, []int32{1, 2}, []int32{1, 2}), part("t", 2, 2, []int32{2, 1}, []int32{2, 1}),
		}
		moves, settled, _ := PlanPlacement(Placement{Parts: parts, Racks: racks, Eligible: map[int32]bool{0: true, 2: true},
			Draining: map[int32]bool{1: true}, MaxMoves: 2})
		require.Len(t, moves, 1, "one reassignment already in flight, budget 2")
		require.False(t, settled)
	})
	t.Run("balanced: preferred leadership evens out, then settled", func(t *testing.T) {
		parts := []Part{
			part("t", 0, 0, []int32{0, 1}, []int32{0, 1}), part("t", 1, 0, []int32{0, 1}, []int32{0, 1}),
			part("t", 2, 0, []int32{0, 1}, []int32{0, 1}), part("t", 3, 0, []int32{0, 1}, []int32{0, 1}),
		}
		two := map[int32]bool{0: true, 1: true}
		moves, settled, _ := PlanPlacement(Placement{Parts: parts, Racks: racks, Eligible: two, MaxMoves: 8})
		require.False(t, settled)
		require.Len(t, moves, 2, "two of four preferred on broker 0 move to broker 1")
		for _, m := range moves {
			require.Equal(t, []int32{1, 0}, m.Target)
		}
		for _, m := range moves {
			i := slices.IndexFunc(parts, func(p Part) bool { return p.State.Partition == m.Part.State.Partition })
			parts[i].State.Replicas = m.Target
		}
		moves, settled, _ = PlanPlacement(Placement{Parts: parts, Racks: racks, Eligible: two, MaxMoves: 8})
		require.Empty(t, moves)
		require.True(t, settled)
	})
}

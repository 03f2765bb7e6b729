package broker

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratamq/strata/pkg/metastore"
)

func TestElect(t *testing.T) {
	st := func(leader int32, isr ...int32) metastore.PartitionState {
		return metastore.PartitionState{Replicas: []int32{0, 1, 2}, Leader: leader, LeaderEpoch: 5, ISR: isr}
	}
	set := func(ids ...int32) map[int32]bool {
		m := map[int32]bool{}
		for _, id := range ids {
			m[id] = true
		}
		return m
	}
	for _, c := range []struct {
		name            string
		in              metastore.PartitionState
		live, restarted map[int32]bool
		changed         bool
		leader          int32
		isr             []int32
	}{
		{"leader fine", st(0, 0, 1, 2), set(0, 1, 2), nil, false, 0, []int32{0, 1, 2}},
		{"follower restarted: it leaves the ISR, leader kept", st(0, 0, 1, 2), set(0, 1, 2), set(2), true, 0, []int32{0, 1}},
		{"leader dead: next ISR member in replica order", st(0, 0, 2, 1), set(1, 2), nil, true, 1, []int32{2, 1}},
		{"leader restarted: it leaves the ISR", st(0, 0, 1, 2), set(0, 1, 2), set(0), true, 1, []int32{1, 2}},
		{"dead follower leaves the ISR with the leader", st(0, 0, 1, 2), set(2), nil, true, 2, []int32{2}},
		{"last ISR member dead: offline, ISR kept", st(1, 1), set(0, 2), nil, true, -1, []int32{1}},
		{"last ISR member back after restart: leads again", st(-1, 1), set(0, 1, 2), set(1), true, 1, []int32{1}},
		{"all restarted: first live member leads, ISR kept", st(0, 0, 1, 2), set(0, 1, 2), set(0, 1, 2), true, 0, []int32{0, 1, 2}},
		{"nobody in the ISR live: offline", st(0, 0, 1), set(2), nil, true, -1, []int32{0, 1}},
		{"already offline and still nobody: no change", st(-1, 0, 1), set(2), nil, false, -1, []int32{0, 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			next, changed := elect(c.in, c.live, c.restarted, false)
			require.Equal(t, c.changed, changed)
			require.Equal(t, c.leader, next.Leader)
			require.Equal(t, c.isr, next.ISR)
			if changed && next.Leader != c.in.Leader {
				require.Equal(t, c.in.LeaderEpoch+1, next.LeaderEpoch, "every election bumps the epoch")
			}
		})
	}
}

func TestUncleanElection(t *testing.T) {
	st := metastore.PartitionState{Replicas: []int32{0, 1, 2}, Leader: 0, LeaderEpoch: 1, ISR: []int32{0}}
	clean, changed := elect(st, map[int32]bool{2: true}, nil, false)
	require.True(t, changed)
	require.Equal(t, int32(-1), clean.Leader, "clean: offline rather than lose acknowledged records")
	unclean, changed := elect(st, map[int32]bool{2: true}, nil, true)
	require.True(t, changed)
	require.Equal(t, int32(2), unclean.Leader)
	require.Equal(t, []int32{2}, unclean.ISR)
	require.Equal(t, int32(2), unclean.LeaderEpoch)
}

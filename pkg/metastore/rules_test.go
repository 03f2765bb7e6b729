package metastore

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func ids(v ...int32) map[int32]bool {
	m := map[int32]bool{}
	for _, id := range v {
		m[id] = true
	}
	return m
}

func TestElect(t *testing.T) {
	st := func(leader int32, isr ...int32) PartitionState {
		return PartitionState{Replicas: []int32{0, 1, 2}, Leader: leader, LeaderEpoch: 5, ISR: isr}
	}
	for _, c := range []struct {
		name            string
		in              PartitionState
		live, restarted map[int32]bool
		unclean         bool
		changed         bool
		leader          int32
		isr             []int32
		epoch           int32
	}{
		{"leader fine", st(0, 0, 1, 2), ids(0, 1, 2), nil, false, false, 0, []int32{0, 1, 2}, 5},
		{"follower restarted: it leaves the ISR, leader and epoch kept", st(0, 0, 1, 2), ids(0, 1, 2), ids(2), false, true, 0, []int32{0, 1}, 5},
		{"leader dead: next ISR member in replica order", st(0, 0, 2, 1), ids(1, 2), nil, false, true, 1, []int32{2, 1}, 6},
		{"leader restarted: it leaves the ISR", st(0, 0, 1, 2), ids(0, 1, 2), ids(0), false, true, 1, []int32{1, 2}, 6},
		{"dead follower leaves the ISR with the leader", st(0, 0, 1, 2), ids(2), nil, false, true, 2, []int32{2}, 6},
		{"last ISR member dead: offline, ISR kept", st(1, 1), ids(0, 2), nil, false, true, -1, []int32{1}, 6},
		{"last ISR member back after restart: leads again", st(-1, 1), ids(0, 1, 2), ids(1), false, true, 1, []int32{1}, 6},
		{"all restarted: first live member leads, ISR kept, new epoch", st(0, 0, 1, 2), ids(0, 1, 2), ids(0, 1, 2), false, true, 0, []int32{0, 1, 2}, 6},
		{"nobody in the ISR live: offline", st(0, 0, 1), ids(2), nil, false, true, -1, []int32{0, 1}, 6},
		{"already offline and still nobody: no change", st(-1, 0, 1), ids(2), nil, false, false, -1, []int32{0, 1}, 5},
		{"unclean: a live replica outside the ISR leads alone", st(0, 0), ids(2), nil, true, true, 2, []int32{2}, 6},
		{"clean: offline rather than lose acknowledged records", st(0, 0), ids(2), nil, false, true, -1, []int32{0}, 6},
		{"unclean but nobody live: offline", st(0, 0), nil, nil, true, true, -1, []int32{0}, 6},
	} {
		t.Run(c.name, func(t *testing.T) {
			in := c.in
			inISR := append([]int32(nil), in.ISR...)
			next, changed := c.in.Elect(c.live, c.restarted, c.unclean)
			require.Equal(t, c.changed, changed)
			require.Equal(t, c.leader, next.Leader)
			require.Equal(t, c.isr, next.ISR)
			require.Equal(t, c.epoch, next.LeaderEpoch)
			require.Equal(t, inISR, in.ISR, "the input state is not modified")
		})
	}
}

func TestChangeISR(t *testing.T) {
	st := PartitionState{Replicas: []int32{0, 1, 2}, Leader: 0, LeaderEpoch: 2, ISR: []int32{0, 1}}
	for _, c := range []struct {
		name              string
		in                PartitionState
		lagging, caughtUp []int32
		changed           bool
		isr               []int32
	}{
		{"nothing to do", st, nil, nil, false, []int32{0, 1}},
		{"a lagging member leaves", st, []int32{1}, nil, true, []int32{0}},
		{"a caught-up replica joins in replica order", PartitionState{Replicas: []int32{2, 0, 1}, Leader: 0, ISR: []int32{0, 1}}, nil, []int32{2}, true, []int32{0, 1, 2}},
		{"the leader never leaves its own ISR", st, []int32{0}, nil, false, []int32{0, 1}},
		{"leave and join at once", st, []int32{1}, []int32{2}, true, []int32{0, 2}},
		{"a member already in sync is not added twice", st, nil, []int32{1}, false, []int32{0, 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			next, changed := c.in.ChangeISR(c.lagging, c.caughtUp)
			require.Equal(t, c.changed, changed)
			require.Equal(t, c.isr, next.ISR)
			require.Equal(t, c.in.Leader, next.Leader)
			require.Equal(t, c.in.LeaderEpoch, next.LeaderEpoch, "an ISR change keeps the leader epoch")
		})
	}
	// The write that brings the whole target in sync completes the
	// reassignment; the leaving leader hands over under a new epoch.
	moving, err := PartitionState{Replicas: []int32{0, 1, 2}, Leader: 0, LeaderEpoch: 3, ISR: []int32{0, 1, 2}}.StartReassignment([]int32{3, 1, 2}, func(int32) bool { return true })
	require.NoError(t, err)
	done, changed := moving.ChangeISR(nil, []int32{3})
	require.True(t, changed)
	require.False(t, done.Reassigning())
	require.Equal(t, []int32{3, 1, 2}, done.Replicas)
	require.Equal(t, []int32{3, 1, 2}, done.ISR)
	require.Equal(t, int32(3), done.Leader)
	require.Equal(t, int32(4), done.LeaderEpoch)
}

func TestLeaveISR(t *testing.T) {
	st := PartitionState{Replicas: []int32{0, 1, 2}, Leader: 0, LeaderEpoch: 2, ISR: []int32{0, 1, 2}}
	next, ok := st.LeaveISR(2)
	require.True(t, ok)
	require.Equal(t, []int32{0, 1}, next.ISR)
	require.Equal(t, int32(2), next.LeaderEpoch)
	for name, c := range map[string]struct {
		st PartitionState
		id int32
	}{
		"the leader":         {st, 0},
		"not in the ISR":     {PartitionState{Leader: 0, ISR: []int32{0, 1}}, 2},
		"the only member":    {PartitionState{Leader: 1, ISR: []int32{1}}, 1},
		"no leader: keep it": {PartitionState{Leader: -1, ISR: []int32{1, 2}}, 2},
	} {
		_, ok := c.st.LeaveISR(c.id)
		require.False(t, ok, name)
	}
}

func TestRequestedElections(t *testing.T) {
	live := func(m map[int32]bool) func(int32) bool { return func(id int32) bool { return m[id] } }
	st := PartitionState{Replicas: []int32{0, 1, 2}, Leader: 1, LeaderEpoch: 4, ISR: []int32{0, 1, 2}}

	next, err := st.PreferredElection(live(ids(0, 1, 2)))
	require.NoError(t, err)
	require.Equal(t, int32(0), next.Leader)
	require.Equal(t, int32(5), next.LeaderEpoch)

	_, err = next.PreferredElection(live(ids(0, 1, 2)))
	require.ErrorIs(t, err, ErrElectionNotNeeded)
	_, err = st.PreferredElection(live(ids(1, 2)))
	require.ErrorIs(t, err, ErrPreferredLeaderNotAvailable)
	outOfSync := st
	outOfSync.ISR = []int32{1, 2}
	_, err = outOfSync.PreferredElection(live(ids(0, 1, 2)))
	require.ErrorIs(t, err, ErrPreferredLeaderNotAvailable)

	_, err = st.UncleanElection(live(ids(1)))
	require.ErrorIs(t, err, ErrElectionNotNeeded)
	offline := PartitionState{Replicas: []int32{0, 1, 2}, Leader: -1, LeaderEpoch: 4, ISR: []int32{0}}
	un, err := offline.UncleanElection(live(ids(2)))
	require.NoError(t, err)
	require.Equal(t, int32(2), un.Leader)
	require.Equal(t, []int32{2}, un.ISR, "an out-of-sync leader leads alone")
	require.Equal(t, int32(5), un.LeaderEpoch)
	clean, err := offline.UncleanElection(live(ids(0, 2)))
	require.NoError(t, err)
	require.Equal(t, int32(0), clean.Leader)
	require.Equal(t, []int32{0}, clean.ISR)
	_, err = offline.UncleanElection(live(nil))
	require.ErrorIs(t, err, ErrEligibleLeadersNotAvailable)
}

func TestReplaceReplicaAndMoveLeader(t *testing.T) {
	st := PartitionState{Replicas: []int32{0, 1, 2}, Leader: 0, LeaderEpoch: 1, ISR: []int32{0, 1, 2}}
	next := st.ReplaceReplica(2, 5)
	require.Equal(t, []int32{0, 1, 5}, next.Replicas, "the newcomer takes the replaced one's position")
	require.Equal(t, []int32{0, 1}, next.ISR, "it joins the ISR once caught up")
	require.Equal(t, []int32{0, 1, 2}, st.Replicas, "the input state is not modified")
	moved := st.MoveLeader(1)
	require.Equal(t, int32(1), moved.Leader)
	require.Equal(t, int32(2), moved.LeaderEpoch)
}

func TestStartReassignment(t *testing.T) {
	known := func(id int32) bool { return id >= 0 && id < 6 }
	st := PartitionState{Replicas: []int32{0, 1, 2}, Leader: 0, LeaderEpoch: 3, ISR: []int32{0, 1, 2}}

	// Move 0 -> 3: the target first, then the original leaving.
	next, err := st.StartReassignment([]int32{3, 1, 2}, known)
	require.NoError(t, err)
	require.Equal(t, []int32{3, 1, 2, 0}, next.Replicas)
	require.Equal(t, []int32{3}, next.AddingReplicas)
	require.Equal(t, []int32{0}, next.RemovingReplicas)
	require.Equal(t, int32(0), next.Leader, "the leader stays until the newcomer is in sync")
	require.Equal(t, int32(3), next.LeaderEpoch)
	require.ElementsMatch(t, []int32{0, 1, 2}, next.OriginalReplicas())

	// Not complete while 3 is out of sync; complete once it joins: the
	// leaving leader hands over to the first target replica.
	_, ok := next.CompleteReassignment()
	require.False(t, ok)
	next.ISR = append(next.ISR, 3)
	done, ok := next.CompleteReassignment()
	require.True(t, ok)
	require.Equal(t, []int32{3, 1, 2}, done.Replicas)
	require.Equal(t, []int32{3, 1, 2}, done.ISR)
	require.Empty(t, done.AddingReplicas)
	require.Empty(t, done.RemovingReplicas)
	require.Equal(t, int32(3), done.Leader)
	require.Equal(t, int32(4), done.LeaderEpoch)

	// A reorder among in-sync replicas completes at once, leader kept.
	re, err := st.StartReassignment([]int32{2, 0, 1}, known)
	require.NoError(t, err)
	require.False(t, re.Reassigning())
	require.Equal(t, []int32{2, 0, 1}, re.Replicas)
	require.Equal(t, int32(0), re.Leader)
	require.Equal(t, int32(3), re.LeaderEpoch)

	// Shrinking to in-sync replicas completes at once; the leader leaves.
	shrunk, err := st.StartReassignment([]int32{1, 2}, known)
	require.NoError(t, err)
	require.Equal(t, []int32{1, 2}, shrunk.Replicas)
	require.Equal(t, int32(1), shrunk.Leader)
	require.Equal(t, int32(4), shrunk.LeaderEpoch)

	// A new reassignment replaces one in progress, from the originals.
	again, err := next.StartReassignment([]int32{4, 1, 2}, known)
	require.NoError(t, err)
	require.Equal(t, []int32{4, 1, 2, 0}, again.Replicas)
	require.Equal(t, []int32{4}, again.AddingReplicas)
	require.Equal(t, []int32{0}, again.RemovingReplicas)
	require.NotContains(t, again.ISR, int32(3))

	for name, target := range map[string][]int32{
		"empty":     {},
		"duplicate": {1, 1, 2},
		"unknown":   {1, 2, 9},
	} {
		_, err := st.StartReassignment(target, known)
		require.ErrorIs(t, err, ErrInvalidReassignment, name)
	}
	// The originals stay in the ISR until the newcomers join.
	lone := PartitionState{Replicas: []int32{0, 1}, Leader: 0, ISR: []int32{0}}
	_, err = lone.StartReassignment([]int32{4, 5}, known)
	require.NoError(t, err)
}

func TestCancelReassignment(t *testing.T) {
	known := func(int32) bool { return true }
	st := PartitionState{Replicas: []int32{0, 1, 2}, Leader: 0, LeaderEpoch: 1, ISR: []int32{0, 1, 2}}
	_, err := st.CancelReassignment()
	require.True(t, errors.Is(err, ErrNoReassignment))

	next, err := st.StartReassignment([]int32{3, 4, 2}, known)
	require.NoError(t, err)
	next.ISR = append(next.ISR, 3) // 3 caught up, 4 not yet
	back, err := next.CancelReassignment()
	require.NoError(t, err)
	require.ElementsMatch(t, []int32{0, 1, 2}, back.Replicas)
	require.ElementsMatch(t, []int32{0, 1, 2}, back.ISR)
	require.False(t, back.Reassigning())
	require.Equal(t, int32(0), back.Leader)

	// Cancelling when only newcomers are in sync would leave no ISR.
	stranded := next
	stranded.ISR = []int32{3}
	_, err = stranded.CancelReassignment()
	require.ErrorIs(t, err, ErrInvalidReassignment)
}

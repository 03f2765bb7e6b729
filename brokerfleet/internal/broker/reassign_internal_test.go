package broker

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/stratamq/strata/pkg/metastore"
)

func TestStartReassignment(t *testing.T) {
	known := func(id int32) bool { return id >= 0 && id < 6 }
	st := metastore.PartitionState{Replicas: []int32{0, 1, 2}, Leader: 0, LeaderEpoch: 3, ISR: []int32{0, 1, 2}}

	// Move 0 -> 3: the target first, then the original leaving.
	next, err := startReassignment(st, []int32{3, 1, 2}, known)
	require.NoError(t, err)
	require.Equal(t, []int32{3, 1, 2, 0}, next.Replicas)
	require.Equal(t, []int32{3}, next.AddingReplicas)
	require.Equal(t, []int32{0}, next.RemovingReplicas)
	require.Equal(t, int32(0), next.Leader, "the leader stays until the newcomer is in sync")
	require.Equal(t, int32(3), next.LeaderEpoch)

	// Not complete while 3 is out of sync; complete once it joins: the
	// leaving leader hands over to the first target replica.
	_, ok := completeReassignment(next)
	require.False(t, ok)
	next.ISR = append(next.ISR, 3)
	done, ok := completeReassignment(next)
	require.True(t, ok)
	require.Equal(t, []int32{3, 1, 2}, done.Replicas)
	require.Equal(t, []int32{3, 1, 2}, done.ISR)
	require.Empty(t, done.AddingReplicas)
	require.Empty(t, done.RemovingReplicas)
	require.Equal(t, int32(3), done.Leader)
	require.Equal(t, int32(4), done.LeaderEpoch)

	// A reorder among in-sync replicas completes at once, leader kept.
	re, err := startReassignment(st, []int32{2, 0, 1}, known)
	require.NoError(t, err)
	require.False(t, re.Reassigning())
	require.Equal(t, []int32{2, 0, 1}, re.Replicas)
	require.Equal(t, int32(0), re.Leader)
	require.Equal(t, int32(3), re.LeaderEpoch)

	// Shrinking to in-sync replicas completes at once; the leader leaves.
	shrunk, err := startReassignment(st, []int32{1, 2}, known)
	require.NoError(t, err)
	require.Equal(t, []int32{1, 2}, shrunk.Replicas)
	require.Equal(t, int32(1), shrunk.Leader)
	require.Equal(t, int32(4), shrunk.LeaderEpoch)

	// A new reassignment replaces one in progress, from the originals.
	again, err := startReassignment(next, []int32{4, 1, 2}, known)
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
		_, err := startReassignment(st, target, known)
		require.Error(t, err, name)
		require.Equal(t, kerr.InvalidReplicaAssignment.Code, errCodeOf(err), name)
	}
	// A target with no in-sync replica cannot start: it would leave no ISR.
	lone := metastore.PartitionState{Replicas: []int32{0, 1}, Leader: 0, ISR: []int32{0}}
	_, err = startReassignment(lone, []int32{4, 5}, known)
	require.NoError(t, err, "the originals stay in the ISR until the newcomers join")
}

func TestCancelReassignment(t *testing.T) {
	known := func(int32) bool { return true }
	st := metastore.PartitionState{Replicas: []int32{0, 1, 2}, Leader: 0, LeaderEpoch: 1, ISR: []int32{0, 1, 2}}
	_, err := cancelReassignment(st)
	require.Equal(t, kerr.NoReassignmentInProgress.Code, errCodeOf(err))

	next, err := startReassignment(st, []int32{3, 4, 2}, known)
	require.NoError(t, err)
	next.ISR = append(next.ISR, 3) // 3 caught up, 4 not yet
	back, err := cancelReassignment(next)
	require.NoError(t, err)
	require.ElementsMatch(t, []int32{0, 1, 2}, back.Replicas)
	require.ElementsMatch(t, []int32{0, 1, 2}, back.ISR)
	require.False(t, back.Reassigning())
	require.Equal(t, int32(0), back.Leader)
}

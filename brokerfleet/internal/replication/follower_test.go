package replication

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGainedPartitions: a follower fetch loop is interrupted when it gains
// a partition or a partition's epoch moves, not when one goes away.
func TestGainedPartitions(t *testing.T) {
	f := func(topic string, idx, epoch int32) followed { return followed{topic: topic, index: idx, epoch: epoch} }
	prev := []followed{f("a", 0, 1), f("a", 1, 1)}
	require.False(t, gained(prev, prev))
	require.False(t, gained(prev, prev[:1]), "a partition removed")
	require.True(t, gained(prev, append(prev[:2:2], f("b", 0, 1))), "a partition added")
	require.True(t, gained(prev, []followed{f("a", 0, 2), f("a", 1, 1)}), "an epoch moved")
}

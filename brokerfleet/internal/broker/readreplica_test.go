package broker

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSelectReadReplica: the rack-aware choice of the replica a consumer
// reads from (KIP-392).
func TestSelectReadReplica(t *testing.T) {
	b1 := readReplica{id: 1, rack: "b", logStart: 0, logEnd: 100}
	b2 := readReplica{id: 2, rack: "b", logStart: 0, logEnd: 120}
	b3 := readReplica{id: 3, rack: "b", logStart: 0, logEnd: 120}
	c4 := readReplica{id: 4, rack: "c", logStart: 50, logEnd: 200}
	unknownStart := readReplica{id: 5, rack: "c", logStart: -1, logEnd: 200}
	for _, tc := range []struct {
		name               string
		client, leaderRack string
		offset             int64
		cands              []readReplica
		want               int32
	}{
		{"no client rack", "", "a", 0, []readReplica{b1}, -1},
		{"leader in the client's rack", "b", "b", 0, []readReplica{b1}, -1},
		{"none in the client's rack", "d", "a", 0, []readReplica{b1, c4}, -1},
		{"the one in the client's rack", "b", "a", 0, []readReplica{b1, c4}, 1},
		{"the most caught up, lowest id on a tie", "b", "a", 0, []readReplica{b1, b3, b2}, 2},
		{"only one that holds the offset", "b", "a", 110, []readReplica{b1, b2}, 2},
		{"none holds the offset", "b", "a", 130, []readReplica{b1, b2}, -1},
		{"below its log start", "c", "a", 10, []readReplica{c4}, -1},
		{"log start unknown", "c", "a", 10, []readReplica{unknownStart}, 5},
	} {
		require.Equal(t, tc.want, selectReadReplica(tc.client, tc.leaderRack, tc.offset, tc.cands), tc.name)
	}
}

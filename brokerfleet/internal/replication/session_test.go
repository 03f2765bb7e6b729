package replication

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/partition"
	"github.com/stratamq/strata/brokerfleet/internal/topic"
	"github.com/stratamq/strata/pkg/segment"
)

// followedPart is an empty follower replica of t-idx at leader epoch 1.
func followedPart(t *testing.T, idx int32) followed {
	t.Helper()
	lg, err := segment.Open(segment.Options{FS: segment.NewMemFS(), Dir: fmt.Sprintf("p%d", idx)})
	require.NoError(t, err)
	d, err := topic.NewDefaults(nil)
	require.NoError(t, err)
	cfg, err := d.Resolve(nil)
	require.NoError(t, err)
	p, err := partition.New(partition.Options{Topic: "t", Index: idx, Log: lg, Config: cfg})
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	p.SetLeaderEpoch(1)
	p.SetReplication(2, false, []int32{1, 2}, []int32{1, 2})
	return followed{topic: "t", index: idx, epoch: 1, p: p}
}

// listed returns the partitions and forgotten partitions of req.
func listed(req *kmsg.FetchRequest) (parts, forgotten []int32) {
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			parts = append(parts, rp.Partition)
		}
	}
	for _, ft := range req.ForgottenTopics {
		forgotten = append(forgotten, ft.Partitions...)
	}
	return parts, forgotten
}

func ok(id int32) *kmsg.FetchResponse {
	resp := kmsg.NewPtrFetchResponse()
	resp.SessionID = id
	return resp
}

func TestFollowerSession(t *testing.T) {
	r := &Follower{opts: Options{NodeID: 2, ReplicaLagMax: 10e9}}
	all := []followed{followedPart(t, 0), followedPart(t, 1), followedPart(t, 2)}
	var s fetchSession

	// The first fetch is full and asks for a session.
	req := r.fetchRequest(all, &s, time.Second, nil)
	require.Equal(t, int32(0), req.SessionID)
	require.Equal(t, int32(0), req.SessionEpoch)
	parts, forgotten := listed(req)
	require.Equal(t, []int32{0, 1, 2}, parts)
	require.Empty(t, forgotten)
	require.True(t, s.answered(ok(42)))

	// Idle: an incremental fetch listing nothing.
	req = r.fetchRequest(all, &s, time.Second, nil)
	require.Equal(t, int32(42), req.SessionID)
	require.Equal(t, int32(1), req.SessionEpoch)
	parts, forgotten = listed(req)
	require.Empty(t, parts)
	require.Empty(t, forgotten)
	require.True(t, s.answered(ok(42)))

	// A partition's log end moved, one is no longer followed.
	require.NoError(t, all[1].p.ResetTo(1, false, 100))
	req = r.fetchRequest(all[:2], &s, time.Second, nil)
	require.Equal(t, int32(2), req.SessionEpoch)
	parts, forgotten = listed(req)
	require.Equal(t, []int32{1}, parts)
	require.EqualValues(t, 100, req.Topics[0].Partitions[0].FetchOffset)
	require.EqualValues(t, 100, req.Topics[0].Partitions[0].LogStartOffset)
	require.Equal(t, []int32{2}, forgotten)
	require.True(t, s.answered(ok(42)))
	req = r.fetchRequest(all, &s, time.Second, nil)
	parts, forgotten = listed(req)
	require.Equal(t, []int32{2}, parts, "followed again: added back")
	require.Empty(t, forgotten)
	require.True(t, s.answered(ok(42)))

	// One partition swapped for another in the same fetch: as many
	// followed as held, yet one of them is forgotten.
	swapped := []followed{all[0], all[1], followedPart(t, 3)}
	req = r.fetchRequest(swapped, &s, time.Second, nil)
	parts, forgotten = listed(req)
	require.Equal(t, []int32{3}, parts)
	require.Equal(t, []int32{2}, forgotten)
	require.True(t, s.answered(ok(42)))
	req = r.fetchRequest(swapped, &s, time.Second, nil)
	parts, forgotten = listed(req)
	require.Empty(t, parts, "the session holds the swap")
	require.Empty(t, forgotten)

	// With a hint, an incremental fetch looks only at the positions it
	// names; without one, at every partition.
	require.True(t, s.answered(ok(42)))
	require.NoError(t, swapped[0].p.ResetTo(1, false, 50))
	req = r.fetchRequest(swapped, &s, time.Second, []int{1, 2})
	parts, _ = listed(req)
	require.Empty(t, parts, "partition 0 moved, but the hint does not name it")
	require.True(t, s.answered(ok(42)))
	req = r.fetchRequest(swapped, &s, time.Second, []int{0, 0, 1})
	parts, _ = listed(req)
	require.Equal(t, []int32{0}, parts, "named (twice): told once")
	require.EqualValues(t, 50, req.Topics[0].Partitions[0].FetchOffset)
	require.True(t, s.answered(ok(42)))
	require.NoError(t, swapped[2].p.ResetTo(1, false, 70))
	req = r.fetchRequest(swapped, &s, time.Second, []int{})
	parts, _ = listed(req)
	require.Empty(t, parts, "an empty hint names nothing")
	require.True(t, s.answered(ok(42)))
	req = r.fetchRequest(swapped, &s, time.Second, nil)
	parts, _ = listed(req)
	require.Equal(t, []int32{3}, parts, "no hint: a full look finds it")
	require.True(t, s.answered(ok(42)))

	// A lost answer: the leader may have moved on, so start over, closing
	// the old session.
	s.reset()
	req = r.fetchRequest(all, &s, time.Second, nil)
	require.Equal(t, int32(42), req.SessionID)
	require.Equal(t, int32(0), req.SessionEpoch)
	parts, _ = listed(req)
	require.Len(t, parts, 3)
	require.True(t, s.answered(ok(43)))

	// Session errors make the next fetch full.
	r.fetchRequest(all, &s, time.Second, nil)
	bad := ok(0)
	bad.ErrorCode = kerr.InvalidFetchSessionEpoch.Code
	require.False(t, s.answered(bad))
	req = r.fetchRequest(all, &s, time.Second, nil)
	require.Equal(t, int32(43), req.SessionID, "naming the session closes it")
	require.Equal(t, int32(0), req.SessionEpoch)
	bad.ErrorCode = kerr.FetchSessionIDNotFound.Code
	require.False(t, s.answered(bad))
	req = r.fetchRequest(all, &s, time.Second, nil)
	require.Equal(t, int32(0), req.SessionID)
	require.Equal(t, int32(0), req.SessionEpoch)

	// A leader without room answers session 0: fetches stay full.
	require.True(t, s.answered(ok(0)))
	req = r.fetchRequest(all, &s, time.Second, nil)
	require.Equal(t, int32(0), req.SessionEpoch)
	parts, _ = listed(req)
	require.Len(t, parts, 3)
}

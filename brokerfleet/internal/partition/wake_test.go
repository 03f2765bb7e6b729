package partition

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratamq/strata/brokerfleet/internal/topic"
	"github.com/stratamq/strata/pkg/segment"
)

// TestWakeReplicasAfterEveryMove: the broker skips a follower's quiet
// partitions until WakeReplicas names them, so every change of the log
// end, high watermark or local log start must call it after the new
// value is stored: appends, commits, DeleteRecords, retention and a
// follower's truncation. The hook records what it sees when called.
func TestWakeReplicasAfterEveryMove(t *testing.T) {
	type seen struct{ leo, hwm, start int64 }
	var mu sync.Mutex
	var last seen
	calls := 0
	cfg := testConfig(topic.DurabilityReplicated)
	cfg.SegmentBytes = topic.MinSegmentBytes
	l := openLog(t, segment.NewMemFS())
	var p *Partition
	p, err := New(Options{Topic: "t", Index: 0, Log: l, Config: cfg, Now: time.Now,
		WakeReplicas: func(q *Partition, replicas []int32) {
			require.Same(t, p, q)
			mu.Lock()
			last, calls = seen{q.LogEndOffset(), q.HighWatermark(), q.LocalLogStartOffset()}, calls+1
			mu.Unlock()
		}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Close() })
	// check requires a call since the last check that saw the values now.
	check := func(what string) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		require.Positive(t, calls, "%s: no wake", what)
		require.Equal(t, seen{p.LogEndOffset(), p.HighWatermark(), p.LocalLogStartOffset()}, last,
			"%s: the wake came before the values it announces", what)
		calls = 0
	}

	p.SetReplication(1, true, []int32{1, 2}, []int32{1, 2})
	for range 20 {
		mustAppend(t, p, spec{ts: []int64{time.Now().UnixMilli()}, valueLen: 200})
	}
	check("appends")
	require.EqualValues(t, 0, p.HighWatermark())
	p.ReplicaFetched(2, 20, 0)
	require.EqualValues(t, 20, p.HighWatermark())
	check("a commit")

	_, err = p.DeleteRecords(3)
	require.NoError(t, err)
	require.EqualValues(t, 3, p.LocalLogStartOffset())
	check("DeleteRecords")

	cfg.RetentionBytes = 0
	p.SetConfig(cfg)
	require.NoError(t, p.Maintain())
	require.Greater(t, p.LocalLogStartOffset(), int64(3))
	check("retention")
	require.NoError(t, p.Maintain())
	mu.Lock()
	require.Zero(t, calls, "retention that moved nothing wakes nobody")
	mu.Unlock()

	// As a follower of a new leader it truncates.
	epoch := p.LeaderEpoch() + 1
	p.SetLeaderEpoch(epoch)
	p.SetReplication(1, false, []int32{1, 2}, []int32{1, 2})
	check("the role change")
	require.NoError(t, p.TruncateTo(epoch, 18))
	require.EqualValues(t, 18, p.LogEndOffset())
	check("a truncation")
}

package partition

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratamq/strata/pkg/segment"
)

// TestStagesTimeTheNewestAppend: each replication stage is observed once
// per append, when it first passes the append's end, with the time since
// the append on the partition's clock.
func TestStagesTimeTheNewestAppend(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	got := map[Stage][]time.Duration{}
	lg := openLog(t, segment.NewMemFS())
	p, err := New(Options{Topic: "t", Index: 0, Log: lg, Config: testConfig("replicated"), Now: clock,
		Observe: func(s Stage, d time.Duration) { got[s] = append(got[s], d) }})
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	p.SetReplication(1, true, []int32{1, 2, 3}, []int32{1, 2, 3})
	p.ReplicaFetched(2, 0, 0)
	p.ReplicaFetched(3, 0, 0)

	mustAppend(t, p, plain(1, 2)) // offsets 0-1
	advance(100 * time.Microsecond)
	p.ReplicaAnswered(2, 0)
	p.ReplicaAnswered(2, 0) // the same batch again: not a new answer
	advance(50 * time.Microsecond)
	p.ReplicaAnswered(3, 0)
	advance(200 * time.Microsecond)
	p.ReplicaFetched(2, 2, 0)
	require.Empty(t, got[StageCommitted], "replica 3 does not hold it yet")
	advance(100 * time.Microsecond)
	p.ReplicaFetched(3, 1, 0) // part of it: not acked
	p.ReplicaFetched(3, 2, 0)
	p.ReplicaFetched(3, 2, 0) // again: nothing new
	require.EqualValues(t, 2, p.HighWatermark())

	us := time.Microsecond
	require.Equal(t, []time.Duration{100 * us, 150 * us}, got[StageAnswered])
	require.Equal(t, []time.Duration{350 * us, 450 * us}, got[StageFollowerAcked])
	require.Equal(t, []time.Duration{450 * us}, got[StageCommitted])

	advance(30 * us)
	d, ok := p.CommittedSince(2)
	require.True(t, ok)
	require.Equal(t, 30*us, d, "a produce waiting for offset 2 woke 30 µs after it committed")

	// The next append starts over.
	mustAppend(t, p, plain(3)) // offset 2
	advance(10 * us)
	p.ReplicaAnswered(3, 2)
	require.Equal(t, 10*us, got[StageAnswered][2])
	_, ok = p.CommittedSince(3)
	require.False(t, ok, "not committed yet")
	_, ok = p.CommittedSince(2)
	require.False(t, ok, "no longer the newest append")
}

package partition

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratamq/strata/pkg/segment"
)

// TestLeaderHighWatermarkIsLowestISREnd: a leader's high watermark is the
// lowest log end among the ISR; a follower outside the ISR does not hold
// it back, and rejoins once it reaches it.
func TestLeaderHighWatermarkIsLowestISREnd(t *testing.T) {
	p, _ := newPartition(t, segment.NewMemFS(), testConfig("replicated"), time.Now)
	p.SetReplication(1, true, []int32{1, 2, 3}, []int32{1, 2, 3})
	for i := 0; i < 5; i++ {
		mustAppend(t, p, plain(1, 2)) // 10 records
	}
	require.EqualValues(t, 10, p.LogEndOffset())
	require.EqualValues(t, 0, p.HighWatermark(), "no follower has fetched yet")

	p.ReplicaFetched(2, 10, 0)
	require.EqualValues(t, 0, p.HighWatermark(), "replica 3 has nothing yet")
	p.ReplicaFetched(3, 4, 0)
	require.EqualValues(t, 4, p.HighWatermark())
	p.ReplicaFetched(3, 10, 0)
	require.EqualValues(t, 10, p.HighWatermark())

	// Replica 3 falls behind and leaves the ISR; the rest carries on.
	mustAppend(t, p, plain(3, 4))
	p.ReplicaFetched(2, 12, 0)
	require.EqualValues(t, 10, p.HighWatermark())
	p.SetReplication(1, true, []int32{1, 2, 3}, []int32{1, 2})
	require.EqualValues(t, 12, p.HighWatermark())
	require.Empty(t, p.CaughtUpOutOfSync(), "replica 3 is behind the high watermark")
	p.ReplicaFetched(3, 12, 0)
	require.Equal(t, []int32{3}, p.CaughtUpOutOfSync())

	// The high watermark never moves back.
	p.SetReplication(1, true, []int32{1, 2, 3}, []int32{1, 2, 3})
	require.EqualValues(t, 12, p.HighWatermark())
}

func TestLaggingISRAfterMaxLag(t *testing.T) {
	p, _ := newPartition(t, segment.NewMemFS(), testConfig("replicated"), time.Now)
	p.SetReplication(1, true, []int32{1, 2}, []int32{1, 2})
	require.Empty(t, p.LaggingISR(50*time.Millisecond), "a new follower gets a full window")
	mustAppend(t, p, plain(1))
	time.Sleep(80 * time.Millisecond)
	require.Equal(t, []int32{2}, p.LaggingISR(50*time.Millisecond))
	p.ReplicaFetched(2, 1, 0) // caught up
	require.Empty(t, p.LaggingISR(50*time.Millisecond))
}

func TestFollowerAppendsVerbatim(t *testing.T) {
	leader, _ := newPartition(t, segment.NewMemFS(), testConfig("replicated"), time.Now)
	follower, _ := newPartition(t, segment.NewMemFS(), testConfig("replicated"), time.Now)
	follower.SetReplication(2, false, []int32{1, 2}, []int32{1, 2})
	for i := 0; i < 3; i++ {
		mustAppend(t, leader, spec{ts: []int64{5, 6}, pid: 9, epoch: 1, seq: int32(2 * i)})
	}
	data, err := leader.ReadUncommitted(nil, 0, 1<<20)
	require.NoError(t, err)
	require.NoError(t, follower.AppendReplica(0, data, 4))
	require.EqualValues(t, 6, follower.LogEndOffset())
	require.EqualValues(t, 4, follower.HighWatermark(), "the leader's high watermark, capped by the log end")
	got, err := follower.ReadUncommitted(nil, 0, 1<<20)
	require.NoError(t, err)
	require.Equal(t, data, got, "byte-identical")
	// The follower knows the producer: a duplicate is recognised after
	// it becomes leader.
	follower.SetReplication(2, true, []int32{1, 2}, []int32{2})
	res := mustAppend(t, follower, spec{ts: []int64{5, 6}, pid: 9, epoch: 1, seq: 4})
	require.True(t, res.Duplicate)
	require.EqualValues(t, 4, res.BaseOffset)
}

// TestPromotedFollowerAdvancesHighWatermark: a follower that becomes
// leader counts its whole log as its own end, so followers' fetches move
// the high watermark without a new append.
func TestPromotedFollowerAdvancesHighWatermark(t *testing.T) {
	leader, _ := newPartition(t, segment.NewMemFS(), testConfig("replicated"), time.Now)
	follower, _ := newPartition(t, segment.NewMemFS(), testConfig("replicated"), time.Now)
	follower.SetReplication(2, false, []int32{1, 2, 3}, []int32{1, 2, 3})
	for i := 0; i < 3; i++ {
		mustAppend(t, leader, plain(7, 8))
	}
	data, err := leader.ReadUncommitted(nil, 0, 1<<20)
	require.NoError(t, err)
	require.NoError(t, follower.AppendReplica(0, data, 4)) // it learned HWM 4 of 6
	follower.SetReplication(2, true, []int32{1, 2, 3}, []int32{2, 3})
	require.EqualValues(t, 4, follower.HighWatermark())
	follower.ReplicaFetched(3, 6, 0)
	require.EqualValues(t, 6, follower.HighWatermark())
}

// TestStaleFetchIsDropped: a follower whose partition moved to a new
// leader epoch (and was truncated to the new leader's log) drops an answer
// to a fetch it sent the previous leader, and a truncation or reset worked
// out under the old epoch; under the current epoch all three apply.
func TestStaleFetchIsDropped(t *testing.T) {
	leader, _ := newPartition(t, segment.NewMemFS(), testConfig("replicated"), time.Now)
	follower, _ := newPartition(t, segment.NewMemFS(), testConfig("replicated"), time.Now)
	follower.SetLeaderEpoch(3)
	follower.SetReplication(2, false, []int32{1, 2}, []int32{1, 2})
	for i := 0; i < 3; i++ {
		mustAppend(t, leader, plain(7, 8))
	}
	data, err := leader.ReadUncommitted(nil, 0, 1<<20)
	require.NoError(t, err)

	follower.SetLeaderEpoch(4) // a new leader
	require.ErrorIs(t, follower.AppendReplica(3, data, 6), ErrStaleEpoch)
	require.EqualValues(t, 0, follower.LogEndOffset(), "an answer from the previous leader was appended")

	require.NoError(t, follower.AppendReplica(4, data, 6))
	require.EqualValues(t, 6, follower.LogEndOffset())
	require.ErrorIs(t, follower.TruncateTo(3, 2), ErrStaleEpoch)
	require.ErrorIs(t, follower.ResetTo(3, false, 100), ErrStaleEpoch)
	require.ErrorIs(t, follower.ResetTo(4, true, 100), ErrStaleEpoch, "a follower reset as if it led")
	require.EqualValues(t, 6, follower.LogEndOffset())
	require.NoError(t, follower.TruncateTo(4, 2))
	require.EqualValues(t, 2, follower.LogEndOffset())
}

// TestFollowerSyncsFsyncTopics: with strata.durability=fsync, what a
// follower appended survives a crash once SyncReplica returned; before it,
// a crash may lose it (the fetch loop syncs before it fetches again).
func TestFollowerSyncsFsyncTopics(t *testing.T) {
	leader, _ := newPartition(t, segment.NewMemFS(), testConfig("replicated"), time.Now)
	for i := 0; i < 3; i++ {
		mustAppend(t, leader, plain(7, 8))
	}
	data, err := leader.ReadUncommitted(nil, 0, 1<<20)
	require.NoError(t, err)

	fs := segment.NewMemFS()
	follower, _ := newPartition(t, fs, testConfig("fsync"), time.Now)
	follower.SetReplication(2, false, []int32{1, 2}, []int32{1, 2})
	require.True(t, follower.Fsync())
	require.NoError(t, follower.AppendReplica(0, data, 6))
	lost := openLog(t, fs.Crash(0))
	require.EqualValues(t, 0, lost.NextOffset(), "appended data was synced before SyncReplica")
	lost.Close()

	require.NoError(t, follower.SyncReplica())
	kept := openLog(t, fs.Crash(0))
	defer kept.Close()
	require.EqualValues(t, 6, kept.NextOffset(), "SyncReplica returned before the data was durable")
}

// TestReplicaRange: what a leader knows of a follower's log, from its
// fetches since the leadership began.
func TestReplicaRange(t *testing.T) {
	p, _ := newPartition(t, segment.NewMemFS(), testConfig("replicated"), time.Now)
	p.SetReplication(1, true, []int32{1, 2}, []int32{1, 2})
	_, _, ok := p.ReplicaRange(2)
	require.False(t, ok, "not fetched yet")
	for range 4 {
		mustAppend(t, p, plain(1, 2))
	}
	require.NoError(t, p.ReplicaFetched(2, 7, 3))
	start, end, ok := p.ReplicaRange(2)
	require.True(t, ok)
	require.EqualValues(t, 3, start)
	require.EqualValues(t, 7, end)
	_, _, ok = p.ReplicaRange(3)
	require.False(t, ok, "not a replica")
}

// TestReplicaFetchedRefusesWhatNoFollowerHolds: a fetch offset past the
// leader's log end, or a broker that is not a follower of the partition,
// records nothing, so a fake follower cannot raise the high watermark
// past what the followers hold.
func TestReplicaFetchedRefusesWhatNoFollowerHolds(t *testing.T) {
	p, _ := newPartition(t, segment.NewMemFS(), testConfig("replicated"), time.Now)
	p.SetReplication(1, true, []int32{1, 2, 3}, []int32{1, 2, 3})
	for range 5 {
		mustAppend(t, p, plain(1, 2))
	}
	require.NoError(t, p.ReplicaFetched(2, 4, 0))
	require.NoError(t, p.ReplicaFetched(3, 4, 0))
	require.EqualValues(t, 4, p.HighWatermark())

	require.ErrorIs(t, p.ReplicaFetched(2, 1<<62, 0), segment.ErrOffsetOutOfRange)
	require.ErrorIs(t, p.ReplicaFetched(3, 11, 0), segment.ErrOffsetOutOfRange)
	require.ErrorIs(t, p.ReplicaFetched(3, -5, 0), segment.ErrOffsetOutOfRange)
	require.ErrorIs(t, p.ReplicaFetched(4, 10, 0), ErrNotReplica)
	require.ErrorIs(t, p.ReplicaFetched(1, 10, 0), ErrNotReplica, "the leader itself")
	require.EqualValues(t, 4, p.HighWatermark(), "nothing moved")
	_, end, _ := p.ReplicaRange(2)
	require.EqualValues(t, 4, end)
	_, _, ok := p.ReplicaRange(4)
	require.False(t, ok)

	require.NoError(t, p.ReplicaFetched(2, 10, 0), "the log end itself")
	require.NoError(t, p.ReplicaFetched(3, 10, 0))
	require.EqualValues(t, 10, p.HighWatermark())
}

// TestReplicaQuietKeepsAnIdleFollowerInSync: a follower asking again from
// the log end, as before, is quiet and recorded as caught up (it never
// looks lagging however long the partition idles); any move is not quiet
// and goes through ReplicaFetched.
func TestReplicaQuietKeepsAnIdleFollowerInSync(t *testing.T) {
	p, _ := newPartition(t, segment.NewMemFS(), testConfig("replicated"), time.Now)
	p.SetReplication(1, true, []int32{1, 2}, []int32{1, 2})
	mustAppend(t, p, plain(1, 2))
	require.False(t, p.ReplicaQuiet(2, 2, 0, nil), "it has never fetched")
	require.NoError(t, p.ReplicaFetched(2, 2, 0))
	require.EqualValues(t, 2, p.HighWatermark())
	for range 4 {
		time.Sleep(20 * time.Millisecond)
		require.True(t, p.ReplicaQuiet(2, 2, 0, nil))
	}
	require.Empty(t, p.LaggingISR(50*time.Millisecond), "quiet fetches prove it caught up")
	require.False(t, p.ReplicaQuiet(2, 2, 1, nil), "its log start moved")
	require.False(t, p.ReplicaQuiet(2, 1, 0, nil), "it asks from elsewhere")
	mustAppend(t, p, plain(3))
	require.False(t, p.ReplicaQuiet(2, 2, 0, nil), "behind the log end")
	time.Sleep(80 * time.Millisecond)
	require.Equal(t, []int32{2}, p.LaggingISR(50*time.Millisecond), "behind for longer than the lag")
	p.SetReplication(1, false, []int32{1, 2}, []int32{1, 2})
	require.False(t, p.ReplicaQuiet(2, 3, 0, nil), "not the leader")
}

// TestQuietSessionClockVouches: once a quiet fetch names its session's
// clock, later fetches of that session only move the clock, and the
// follower stays in sync while its log end is ours; it does not once the
// session stops (its clock stands still), once the session forgets the
// partition, or once the leader's log moves past it.
func TestQuietSessionClockVouches(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Unix(1000, 0).UnixNano())
	clk := func() time.Time { return time.Unix(0, now.Load()) }
	p, _ := newPartition(t, segment.NewMemFS(), testConfig("replicated"), clk)
	p.SetReplication(1, true, []int32{1, 2}, []int32{1, 2})
	mustAppend(t, p, plain(1, 2))
	require.NoError(t, p.ReplicaFetched(2, 2, 0))
	var session atomic.Int64
	session.Store(now.Load())
	require.True(t, p.ReplicaQuiet(2, 2, 0, &session))
	const lag = 10 * time.Second
	tick := func(d time.Duration, fetch bool) {
		now.Add(int64(d))
		if fetch {
			session.Store(now.Load()) // the broker, at each fetch of the session
		}
	}
	for range 5 {
		tick(5*time.Second, true)
	}
	require.Empty(t, p.LaggingISR(lag), "each fetch of the session vouches")
	tick(11*time.Second, false)
	require.Equal(t, []int32{2}, p.LaggingISR(lag), "a session that stopped fetching does not")

	tick(0, true)
	require.Empty(t, p.LaggingISR(lag))
	p.ReplicaForgot(2)
	tick(11*time.Second, true)
	require.Equal(t, []int32{2}, p.LaggingISR(lag), "a session without the partition does not")

	require.NoError(t, p.ReplicaFetched(2, 2, 0))
	require.True(t, p.ReplicaQuiet(2, 2, 0, &session))
	mustAppend(t, p, plain(3))
	tick(11*time.Second, true)
	require.Equal(t, []int32{2}, p.LaggingISR(lag), "behind the log end: the session's fetches prove nothing")
}

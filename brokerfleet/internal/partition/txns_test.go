package partition

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratamq/strata/brokerfleet/internal/topic"
	"github.com/stratamq/strata/pkg/segment"
)

func txnSpec(pid int64, epoch int16, seq int32, n int) spec {
	s := idem(pid, epoch, seq, n)
	s.txn = true
	return s
}

// appendTxn verifies and appends a transactional batch, as the broker does
// for a producer's first batch in a transaction.
func appendTxn(t *testing.T, p *Partition, s spec) (AppendResult, error) {
	t.Helper()
	b := buildBatch(s)
	h, err := segment.ParseHeader(b)
	require.NoError(t, err)
	var g *TxnGuard
	if !p.TxnVerified(h.ProducerID, h.ProducerEpoch) {
		g = p.GuardTxn(h.ProducerID, h.ProducerEpoch)
	}
	return p.AppendTxn(b, h, g)
}

func mustTxn(t *testing.T, p *Partition, s spec) AppendResult {
	t.Helper()
	res, err := appendTxn(t, p, s)
	require.NoError(t, err)
	return res
}

func mustMarker(t *testing.T, p *Partition, m segment.Marker) int64 {
	t.Helper()
	res, err := p.AppendMarker(m)
	require.NoError(t, err)
	return res.BaseOffset
}

func TestTransactionsLSOAndAbortedList(t *testing.T) {
	p, _ := newPartition(t, segment.NewMemFS(), testConfig(topic.DurabilityReplicated), fixedClock(1000))
	mustAppend(t, p, plain(1, 2))      // 0-1
	mustTxn(t, p, txnSpec(7, 0, 0, 2)) // 2-3: producer 7 opens at 2
	mustAppend(t, p, plain(3))         // 4
	mustTxn(t, p, txnSpec(8, 0, 0, 1)) // 5: producer 8 opens at 5
	mustTxn(t, p, txnSpec(7, 0, 2, 1)) // 6
	require.EqualValues(t, 7, p.HighWatermark())
	require.EqualValues(t, 2, p.LastStableOffset(), "the oldest open transaction holds the LSO")

	// read_committed reads stop below the LSO.
	b, err := p.ReadCommitted(nil, 0, 1<<20, true)
	require.NoError(t, err)
	require.Equal(t, []int64{0}, bases(split(t, b)))

	abort := mustMarker(t, p, segment.Marker{ProducerID: 7, ProducerEpoch: 0, CoordinatorEpoch: 3})
	require.EqualValues(t, 7, abort)
	require.EqualValues(t, 5, p.LastStableOffset(), "producer 8 still holds it")
	commit := mustMarker(t, p, segment.Marker{ProducerID: 8, ProducerEpoch: 0, Commit: true, CoordinatorEpoch: 3})
	require.EqualValues(t, 8, commit)
	require.EqualValues(t, 9, p.LastStableOffset())
	require.Empty(t, p.OpenTxns())

	require.Equal(t, []AbortedTxn{{ProducerID: 7, FirstOffset: 2, LastOffset: 7}}, p.AbortedTxns(0, 9))
	require.Equal(t, []AbortedTxn{{ProducerID: 7, FirstOffset: 2, LastOffset: 7}}, p.AbortedTxns(7, 8))
	require.Empty(t, p.AbortedTxns(8, 9), "the abort ended before")
	require.Empty(t, p.AbortedTxns(0, 2), "the abort starts after")
	require.EqualValues(t, 3, p.CoordinatorEpoch(7))

	// Markers are control batches in the log, read like any batch.
	all := readAll(t, p)
	last := all[len(all)-1]
	require.True(t, last.h.IsControl())
	m, err := segment.ParseControlBatch(last.data)
	require.NoError(t, err)
	require.True(t, m.Commit)

	// The same state comes back from the log after a restart.
	require.NoError(t, p.Close())
}

func TestTransactionsRebuiltOnOpen(t *testing.T) {
	fs := segment.NewMemFS()
	cfg := testConfig(topic.DurabilityReplicated)
	p, _ := newPartition(t, fs, cfg, fixedClock(1000))
	mustTxn(t, p, txnSpec(7, 0, 0, 2))                                                 // 0-1
	mustTxn(t, p, txnSpec(8, 2, 0, 1))                                                 // 2
	mustMarker(t, p, segment.Marker{ProducerID: 7, CoordinatorEpoch: 4})               // 3: abort
	mustTxn(t, p, txnSpec(9, 0, 0, 1))                                                 // 4
	mustMarker(t, p, segment.Marker{ProducerID: 9, Commit: true, CoordinatorEpoch: 5}) // 5
	mustTxn(t, p, txnSpec(7, 0, 2, 1))                                                 // 6: 7's next transaction
	require.NoError(t, p.Close())

	p2, _ := newPartition(t, fs, cfg, fixedClock(2000))
	require.EqualValues(t, 2, p2.LastStableOffset())
	require.Equal(t, []OpenTxn{{ProducerID: 8, Epoch: 2, FirstOffset: 2}, {ProducerID: 7, Epoch: 0, FirstOffset: 6}}, p2.OpenTxns())
	require.Equal(t, []AbortedTxn{{ProducerID: 7, FirstOffset: 0, LastOffset: 3}}, p2.AbortedTxns(0, 10))
	require.EqualValues(t, 4, p2.CoordinatorEpoch(7))
	require.EqualValues(t, 5, p2.CoordinatorEpoch(9))
	require.EqualValues(t, -1, p2.CoordinatorEpoch(8))
	require.True(t, p2.TxnVerified(8, 2), "an open transaction needs no new verification")
	// A stale coordinator's marker is refused.
	_, err := p2.AppendMarker(segment.Marker{ProducerID: 7, CoordinatorEpoch: 3})
	require.ErrorIs(t, err, ErrCoordinatorFenced)
	mustMarker(t, p2, segment.Marker{ProducerID: 8, ProducerEpoch: 2, Commit: true})
	mustMarker(t, p2, segment.Marker{ProducerID: 7, CoordinatorEpoch: 4, Commit: true})
	require.Equal(t, p2.HighWatermark(), p2.LastStableOffset())
}

func TestTransactionalBatchNeedsVerification(t *testing.T) {
	p, _ := newPartition(t, segment.NewMemFS(), testConfig(topic.DurabilityReplicated), fixedClock(1000))
	b := buildBatch(txnSpec(7, 0, 0, 1))
	h := mustHeader(b)
	_, err := p.Append(b, h)
	require.ErrorIs(t, err, ErrInvalidTxnState, "no guard: the coordinator was not asked")

	// A marker written while the coordinator was asked voids the guard:
	// the transaction it verified is over.
	g := p.GuardTxn(7, 0)
	mustMarker(t, p, segment.Marker{ProducerID: 7, ProducerEpoch: 0})
	_, err = p.AppendTxn(b, h, g)
	require.ErrorIs(t, err, ErrInvalidTxnState)

	g = p.GuardTxn(7, 0)
	_, err = p.AppendTxn(b, h, p.GuardTxn(7, 0))
	require.NoError(t, err, "the latest guard holds")
	_, err = p.AppendTxn(buildBatch(txnSpec(7, 0, 1, 1)), mustHeader(buildBatch(txnSpec(7, 0, 1, 1))), g)
	require.NoError(t, err, "an open transaction needs no guard")

	// A non-transactional batch of a producer inside its transaction.
	_, err = appendSpec(t, p, idem(7, 0, 2, 1))
	require.ErrorIs(t, err, ErrInvalidTxnState)
}

func TestMarkerFencesOlderEpoch(t *testing.T) {
	p, _ := newPartition(t, segment.NewMemFS(), testConfig(topic.DurabilityReplicated), fixedClock(1000))
	mustTxn(t, p, txnSpec(7, 0, 0, 1))
	// The coordinator fences the producer (a timeout or a new instance):
	// the abort marker carries the bumped epoch.
	mustMarker(t, p, segment.Marker{ProducerID: 7, ProducerEpoch: 1})
	_, err := appendTxn(t, p, txnSpec(7, 0, 1, 1))
	require.ErrorIs(t, err, ErrInvalidProducerEpoch, "the zombie's next batch")
	_, err = p.AppendMarker(segment.Marker{ProducerID: 7, ProducerEpoch: 0})
	require.ErrorIs(t, err, ErrInvalidProducerEpoch)
	// The new instance starts at sequence 0 of a newer epoch.
	mustTxn(t, p, txnSpec(7, 2, 0, 1))
	require.Equal(t, []AbortedTxn{{ProducerID: 7, FirstOffset: 0, LastOffset: 1}}, p.AbortedTxns(0, 10))
}

func TestLSOWaitsForTheMarkerToCommit(t *testing.T) {
	p, _ := newPartition(t, segment.NewMemFS(), testConfig(topic.DurabilityReplicated), fixedClock(1000))
	p.SetReplication(1, true, []int32{1, 2}, []int32{1, 2})
	mustAppend(t, p, plain(1))                                    // 0
	mustTxn(t, p, txnSpec(7, 0, 0, 2))                            // 1-2
	mustMarker(t, p, segment.Marker{ProducerID: 7, Commit: true}) // 3
	mustAppend(t, p, plain(1))                                    // 4
	require.NoError(t, p.ReplicaFetched(2, 2, 0))
	require.EqualValues(t, 2, p.HighWatermark())
	require.EqualValues(t, 1, p.LastStableOffset(), "half the transaction is committed, its marker is not")
	require.NoError(t, p.ReplicaFetched(2, 3, 0))
	require.EqualValues(t, 1, p.LastStableOffset())
	require.NoError(t, p.ReplicaFetched(2, 4, 0))
	require.EqualValues(t, 4, p.LastStableOffset(), "the marker is committed")
}

func TestFollowerTracksTransactions(t *testing.T) {
	leader, _ := newPartition(t, segment.NewMemFS(), testConfig(topic.DurabilityReplicated), fixedClock(1000))
	mustTxn(t, leader, txnSpec(7, 0, 0, 2))              // 0-1
	mustMarker(t, leader, segment.Marker{ProducerID: 7}) // 2: abort
	mustTxn(t, leader, txnSpec(8, 0, 0, 1))              // 3
	data, err := leader.ReadUncommitted(nil, 0, 1<<20)
	require.NoError(t, err)

	f, _ := newPartition(t, segment.NewMemFS(), testConfig(topic.DurabilityReplicated), fixedClock(1000))
	f.SetReplication(2, false, []int32{1, 2}, []int32{1, 2})
	require.NoError(t, f.AppendReplica(0, data, 4))
	require.Equal(t, []AbortedTxn{{ProducerID: 7, FirstOffset: 0, LastOffset: 2}}, f.AbortedTxns(0, 4))
	require.Equal(t, []OpenTxn{{ProducerID: 8, Epoch: 0, FirstOffset: 3}}, f.OpenTxns())
	require.EqualValues(t, 3, f.LastStableOffset())

	// Cutting the marker off reopens the transaction it ended.
	require.NoError(t, f.TruncateTo(0, 2))
	require.Empty(t, f.AbortedTxns(0, 4))
	require.Equal(t, []OpenTxn{{ProducerID: 7, Epoch: 0, FirstOffset: 0}}, f.OpenTxns())
	require.EqualValues(t, 0, f.LastStableOffset())
}

func TestRetentionDropsAbortedBelowStart(t *testing.T) {
	p, _ := newPartition(t, segment.NewMemFS(), testConfig(topic.DurabilityReplicated), fixedClock(1000))
	mustTxn(t, p, txnSpec(7, 0, 0, 2))
	mustMarker(t, p, segment.Marker{ProducerID: 7})
	mustAppend(t, p, plain(1))
	_, err := p.DeleteRecords(3)
	require.NoError(t, err)
	require.Empty(t, p.AbortedTxns(0, 10))
}

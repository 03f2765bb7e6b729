package partition

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratamq/strata/brokerfleet/internal/topic"
	"github.com/stratamq/strata/pkg/segment"
)

// stateOf is a partition's header-derived state as comparable text: what
// a snapshot must bring back. Transactions decided below the high
// watermark are left out of done (a walk of the whole log lists them all
// until the high watermark passes them; the live state has let go).
func stateOf(t *testing.T, p *Partition) savedState {
	t.Helper()
	p.mu.Lock()
	p.txnMu.Lock()
	p.txns.lso(p.hwm.Load())
	p.txnMu.Unlock()
	b := p.encodeStateLocked()
	p.mu.Unlock()
	s, err := decodeState(b)
	require.NoError(t, err)
	return s
}

// snapshotFiles lists the snapshot files of the test log.
func snapshotFiles(t *testing.T, fs *segment.MemFS) []string {
	t.Helper()
	names, err := fs.ReadDir(logDir)
	require.NoError(t, err)
	var out []string
	for _, n := range names {
		if strings.HasSuffix(n, ".snapshot") {
			out = append(out, n)
		}
	}
	return out
}

func removeSnapshots(t *testing.T, fs *segment.MemFS) {
	t.Helper()
	for _, n := range snapshotFiles(t, fs) {
		require.NoError(t, fs.Remove(logDir+"/"+n))
	}
}

// snapshotWorkload appends n rounds of idempotent, plain and
// transactional batches (commits and aborts), with leader epoch changes,
// to p whose segments are small, so the log rolls many times. Producers
// 1-3 (after pids) are transactional, leaving transactions open at the end.
// Producer ids are pids+1 to pids+6.
func snapshotWorkload(t *testing.T, p *Partition, rng *rand.Rand, pids int64, n int) {
	t.Helper()
	seq := map[int64]int32{}
	epochs := map[int64]int16{}
	inTxn := map[int64]bool{}
	leader := p.LeaderEpoch()
	for range n {
		pid := pids + int64(1+rng.IntN(6))
		switch r := rng.IntN(10); {
		case r == 0:
			leader++
			p.SetLeaderEpoch(leader)
		case r == 1 && !inTxn[pid]:
			// The producer restarts with a new epoch.
			epochs[pid]++
			seq[pid] = 0
		case r < 4 && pid <= pids+3:
			// Producers 1-3 are transactional.
			if inTxn[pid] && rng.IntN(2) == 0 {
				mustMarker(t, p, segment.Marker{ProducerID: pid, ProducerEpoch: epochs[pid], Commit: rng.IntN(3) > 0, CoordinatorEpoch: 1})
				inTxn[pid] = false
				continue
			}
			k := 1 + rng.IntN(3)
			mustTxn(t, p, txnSpec(pid, epochs[pid], seq[pid], k))
			seq[pid] += int32(k)
			inTxn[pid] = true
		case r < 7 && pid > pids+3:
			k := 1 + rng.IntN(3)
			mustAppend(t, p, idem(pid, epochs[pid], seq[pid], k))
			seq[pid] += int32(k)
		default:
			mustAppend(t, p, plain(int64(1000+rng.IntN(1000))))
		}
	}
}

func smallSegments() topic.Config {
	cfg := testConfig(topic.DurabilityReplicated)
	cfg.SegmentBytes = 600
	return cfg
}

// TestSnapshotRestoresTheStateAWalkFinds: after many rolls, a partition
// reopened from its newest snapshot has the state of the live partition
// and of one reopened by walking every header.
func TestSnapshotRestoresTheStateAWalkFinds(t *testing.T) {
	for seed := range uint64(5) {
		fs := segment.NewMemFS()
		cfg := smallSegments()
		p, l := newPartition(t, fs, cfg, fixedClock(1000))
		snapshotWorkload(t, p, rand.New(rand.NewPCG(seed, 1)), 0, 400)
		require.Greater(t, len(l.Segments()), 10, "the log rolled")
		require.NoError(t, p.SnapshotError())
		live := stateOf(t, p)
		end := p.LogEndOffset()
		require.NoError(t, p.Close())
		require.Len(t, snapshotFiles(t, fs), 2, "the newest two snapshots are kept")

		fromSnap, _ := newPartition(t, fs, cfg, fixedClock(2000))
		require.Equal(t, end, fromSnap.LogEndOffset())
		require.Equal(t, live, stateOf(t, fromSnap), "seed %d: reopened from the snapshot", seed)
		require.NoError(t, fromSnap.Close())

		removeSnapshots(t, fs)
		walked, _ := newPartition(t, fs, cfg, fixedClock(3000))
		require.Equal(t, live, stateOf(t, walked), "seed %d: reopened by walking the log", seed)
		require.NoError(t, walked.Close())
	}
}

// TestOpenReadsTheSnapshot: the state comes from the snapshot, not from
// the headers below it (a doctored snapshot shows through).
func TestOpenReadsTheSnapshot(t *testing.T) {
	fs := segment.NewMemFS()
	cfg := smallSegments()
	p, l := newPartition(t, fs, cfg, fixedClock(1000))
	for i := range 30 {
		mustAppend(t, p, idem(5, 0, int32(i), 1))
	}
	end := p.LogEndOffset()
	p.mu.Lock()
	p.producers[5].epoch = 9 // what only the snapshot will say
	data := p.encodeStateLocked()
	p.mu.Unlock()
	require.NoError(t, l.WriteSnapshot(end, data))
	require.NoError(t, p.Close())

	p2, _ := newPartition(t, fs, cfg, fixedClock(2000))
	require.EqualValues(t, 9, p2.Producers()[0].Epoch)
	_, err := appendSpec(t, p2, idem(5, 0, 30, 1))
	require.ErrorIs(t, err, ErrInvalidProducerEpoch, "the snapshot's epoch fences the old one")
}

// TestTruncationDropsSnapshotsPastTheCut: a follower cut back below its
// newest snapshots and given other batches reopens with the state of the
// batches it now holds.
func TestTruncationDropsSnapshotsPastTheCut(t *testing.T) {
	fs := segment.NewMemFS()
	cfg := smallSegments()
	p, l := newPartition(t, fs, cfg, fixedClock(1000))
	rng := rand.New(rand.NewPCG(7, 7))
	snapshotWorkload(t, p, rng, 0, 150)
	mid := p.LogEndOffset()
	snapshotWorkload(t, p, rng, 10, 150)
	require.NotEmpty(t, snapshotFiles(t, fs))

	// As a follower of a new leader, it cuts its log back to mid; then
	// it leads again.
	epoch := p.LeaderEpoch() + 1
	p.SetLeaderEpoch(epoch)
	p.SetReplication(1, false, []int32{0, 1}, []int32{0, 1})
	require.NoError(t, p.TruncateTo(epoch, mid))
	epoch++
	p.SetLeaderEpoch(epoch)
	p.SetReplication(1, true, []int32{1}, []int32{1})
	off, _, ok, err := l.LatestSnapshot(1 << 62)
	require.NoError(t, err)
	if ok {
		require.LessOrEqual(t, off, p.LogEndOffset(), "no snapshot past the cut")
	}
	// Other batches where the cut ones were: a producer never seen, and
	// more of the old ones.
	for i := range 40 {
		mustAppend(t, p, idem(42, 3, int32(i), 1))
	}
	snapshotWorkload(t, p, rng, 20, 60)
	live := stateOf(t, p)
	require.NoError(t, p.Close())

	reopened, _ := newPartition(t, fs, cfg, fixedClock(2000))
	require.Equal(t, live, stateOf(t, reopened))
	require.NoError(t, reopened.Close())
	removeSnapshots(t, fs)
	walked, _ := newPartition(t, fs, cfg, fixedClock(3000))
	require.Equal(t, live, stateOf(t, walked))
}

// TestResetDropsSnapshots: a log restarted elsewhere (ResetTo) reopens
// with no producers, whatever its snapshots said.
func TestResetDropsSnapshots(t *testing.T) {
	fs := segment.NewMemFS()
	cfg := smallSegments()
	p, _ := newPartition(t, fs, cfg, fixedClock(1000))
	for i := range 40 {
		mustAppend(t, p, idem(5, 0, int32(i), 1))
	}
	require.NotEmpty(t, snapshotFiles(t, fs))
	require.NoError(t, p.ResetTo(p.LeaderEpoch(), true, 1000))
	require.Empty(t, snapshotFiles(t, fs))
	require.NoError(t, p.Close())
	p2, _ := newPartition(t, fs, cfg, fixedClock(2000))
	require.Empty(t, p2.Producers())
	require.EqualValues(t, 1000, p2.LogEndOffset())
}

func TestDecodeStateRejectsBadInput(t *testing.T) {
	fs := segment.NewMemFS()
	p, _ := newPartition(t, fs, smallSegments(), fixedClock(1000))
	snapshotWorkload(t, p, rand.New(rand.NewPCG(3, 3)), 0, 100)
	p.mu.Lock()
	good := p.encodeStateLocked()
	p.mu.Unlock()
	_, err := decodeState(good)
	require.NoError(t, err)
	for i := range len(good) {
		_, err := decodeState(good[:i])
		require.Error(t, err, "truncated to %d bytes", i)
	}
	_, err = decodeState(append(append([]byte(nil), good...), 0))
	require.Error(t, err, "trailing bytes")
	huge := []byte{stateVersion, 0xff, 0xff, 0xff, 0xff, 0x0f}
	_, err = decodeState(huge)
	require.Error(t, err, "a count larger than the input")
}

// TestAStaleSnapshotIsNeverRead: rolls placed by hand leave snapshots at
// 11 and 21; a cut to 15 must remove the one at 21, or a reopen after the
// log grew past 21 again would take producer 5's batches 15-20 and none
// of producer 42's first ones from it.
func TestAStaleSnapshotIsNeverRead(t *testing.T) {
	fs := segment.NewMemFS()
	cfg := testConfig(topic.DurabilityReplicated) // no roll by size
	p, _ := newPartition(t, fs, cfg, fixedClock(1000))
	for i := range 30 {
		if i == 10 || i == 20 {
			require.NoError(t, p.Roll())
		}
		mustAppend(t, p, idem(5, 0, int32(i), 1))
	}
	require.Equal(t, []string{"00000000000000000011.snapshot", "00000000000000000021.snapshot"}, snapshotFiles(t, fs))

	epoch := p.LeaderEpoch() + 1
	p.SetLeaderEpoch(epoch)
	p.SetReplication(1, false, []int32{0, 1}, []int32{0, 1})
	require.NoError(t, p.TruncateTo(epoch, 15))
	require.Equal(t, []string{"00000000000000000011.snapshot"}, snapshotFiles(t, fs))
	p.SetLeaderEpoch(epoch + 1)
	p.SetReplication(1, true, []int32{1}, []int32{1})
	for i := range 10 {
		mustAppend(t, p, idem(42, 0, int32(i), 1))
	}
	live := stateOf(t, p)
	require.EqualValues(t, 14, p.Producers()[0].LastSequence)
	require.NoError(t, p.Close())

	reopened, _ := newPartition(t, fs, cfg, fixedClock(2000))
	require.Equal(t, live, stateOf(t, reopened))
}

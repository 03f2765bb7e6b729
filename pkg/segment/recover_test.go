package segment

import (
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func concat(bs []testBatch) []byte { return modelBytes(bs, math.MinInt64) }

func TestCrashLosesOnlyUnflushed(t *testing.T) {
	rng := rand.New(rand.NewPCG(20, 21))
	m := NewMemFS()
	o := memOptions(m)
	l := openLog(t, o)
	bs := genBatches(rng, 0, 60, 0)
	appendAll(t, l, rng, bs[:40])
	require.NoError(t, l.Flush(bs[39].last+1))
	require.Equal(t, bs[39].last+1, l.FlushedOffset())
	appendAll(t, l, rng, bs[40:])
	flushed := l.FlushedOffset()
	require.GreaterOrEqual(t, flushed, bs[39].last+1)

	o.FS = m.Crash(0)
	l2 := openLog(t, o)
	// Rolls sync whole segments, so the log may keep more than what Flush
	// covered, but exactly a prefix of whole batches up to a segment end.
	next := l2.NextOffset()
	require.Equal(t, flushed, next, "exactly the flushed batches")
	require.Equal(t, next, l2.FlushedOffset())
	i := containing(bs, next-1)
	require.Equal(t, concat(bs[:i+1]), readAll(t, l2))

	// Appends continue at the right offset.
	more := genBatches(rng, next, 5, 0)
	appendAll(t, l2, rng, more)
	require.NoError(t, l2.Close())
	l3 := openLog(t, o)
	require.Equal(t, append(concat(bs[:i+1]), concat(more)...), readAll(t, l3))
}

func TestCrashTornWrite(t *testing.T) {
	rng := rand.New(rand.NewPCG(22, 23))
	for _, torn := range []int{1, 60, 61, 100, 250, 1000, 5000} {
		m := NewMemFS()
		o := Options{FS: m, Dir: "d", IndexIntervalBytes: 100}
		l := openLog(t, o)
		bs := genBatches(rng, 0, 30, 0)
		appendAll(t, l, rng, bs[:10])
		require.NoError(t, l.Flush(math.MaxInt64))
		appendAll(t, l, rng, bs[10:])

		o.FS = m.Crash(torn)
		l2 := openLog(t, o)
		// The surviving bytes are the flushed ones plus torn bytes: whole
		// batches among those are kept, a partial one is cut.
		keep, size := 10, len(concat(bs[:10]))
		for keep < len(bs) && size+len(bs[keep].data) <= size0(bs, 10)+torn {
			size += len(bs[keep].data)
			keep++
		}
		require.Equal(t, bs[keep-1].last+1, l2.NextOffset(), "torn %d", torn)
		require.Equal(t, concat(bs[:keep]), readAll(t, l2), "torn %d", torn)
		require.Equal(t, int64(size), l2.Size())
		more := genBatches(rng, l2.NextOffset(), 3, 0)
		appendAll(t, l2, rng, more)
		require.NoError(t, l2.Close())
		l3 := openLog(t, o)
		require.Equal(t, append(concat(bs[:keep]), concat(more)...), readAll(t, l3))
		require.NoError(t, l3.Close())
	}
}

func size0(bs []testBatch, n int) int { return len(concat(bs[:n])) }

func TestCrashCorruptBatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(24, 25))
	tests := []struct {
		name   string
		damage func(b []byte) // applied to the bytes of batch 15 in the file
	}{
		{"flipped record byte", func(b []byte) { b[len(b)/2+HeaderSize/2] ^= 0x01 }},
		{"flipped crc", func(b []byte) { b[offCRC] ^= 0x80 }},
		{"bad magic", func(b []byte) { b[offMagic] = 1 }},
		{"wrong base offset", func(b []byte) { SetBaseOffset(b, 12345) }},
		{"length past end", func(b []byte) { b[offLength] = 0x7f }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMemFS()
			o := Options{FS: m, Dir: "d", IndexIntervalBytes: 100}
			l := openLog(t, o)
			bs := genBatches(rng, 0, 30, 0)
			appendAll(t, l, rng, bs[:10])
			require.NoError(t, l.Flush(math.MaxInt64))
			appendAll(t, l, rng, bs[10:])

			crashed := m.Crash(1 << 20) // every byte made it
			n := crashed.node(t, "d/00000000000000000000.log")
			at := size0(bs, 15)
			tt.damage(n.data[at : at+len(bs[15].data)])
			n.synced = append(n.synced[:0], n.data...)
			o.FS = crashed
			l2 := openLog(t, o)
			require.Equal(t, bs[14].last+1, l2.NextOffset())
			require.Equal(t, concat(bs[:15]), readAll(t, l2))
			require.Len(t, crashed.node(t, "d/00000000000000000000.log").data, at, "file cut at the damaged batch")
		})
	}
}

// TestCrashDeletesLaterSegments damages a rolled segment above the recovery
// point: it is cut and the later segments go.
func TestCrashDeletesLaterSegments(t *testing.T) {
	rng := rand.New(rand.NewPCG(26, 27))
	m := NewMemFS()
	o := Options{FS: m, Dir: "d", SegmentBytes: 1000, IndexIntervalBytes: 100}
	l := openLog(t, o)
	bs := genBatches(rng, 0, 60, 0)
	appendAll(t, l, rng, bs)
	require.NoError(t, l.Flush(math.MaxInt64))
	segs := l.Segments()
	require.Greater(t, len(segs), 4)
	require.NoError(t, l.Close())

	// A missing checkpoint means everything is scanned.
	require.NoError(t, m.Remove("d/checkpoint"))
	victim := segs[2]
	n := m.node(t, filepath.Join("d", segmentName(victim.BaseOffset, logSuffix)))
	n.data[len(n.data)-5] ^= 0xff
	l = openLog(t, o)
	got := l.Segments()
	require.Len(t, got, 3)
	i := containing(bs, victim.NextOffset-1)
	require.Equal(t, bs[i].base, l.NextOffset(), "last batch of segment 2 cut")
	require.Equal(t, concat(bs[:i]), readAll(t, l))
	names, err := m.ReadDir("d")
	require.NoError(t, err)
	for _, s := range segs[3:] {
		require.NotContains(t, names, segmentName(s.BaseOffset, logSuffix))
		require.NotContains(t, names, segmentName(s.BaseOffset, indexSuffix))
	}
	require.NotContains(t, names, segmentName(victim.BaseOffset, indexSuffix), "active segments have no index files")
	require.NoError(t, l.Close())
}

func TestRecoverGapAndOrphans(t *testing.T) {
	rng := rand.New(rand.NewPCG(28, 29))
	m := NewMemFS()
	o := Options{FS: m, Dir: "d", SegmentBytes: 1000}
	l := openLog(t, o)
	bs := genBatches(rng, 0, 40, 0)
	appendAll(t, l, rng, bs)
	segs := l.Segments()
	require.Greater(t, len(segs), 3)
	require.NoError(t, l.Close())

	// Remove a middle segment: everything from it on is dropped.
	require.NoError(t, m.Remove(filepath.Join("d", segmentName(segs[2].BaseOffset, logSuffix))))
	for _, name := range []string{"junk.tmp", "checkpoint.tmp", segmentName(999999, indexSuffix), "unrelated"} {
		f, err := m.OpenFile(filepath.Join("d", name), os.O_CREATE|os.O_RDWR, 0o644)
		require.NoError(t, err)
		require.NoError(t, f.Close())
	}
	l = openLog(t, o)
	require.Equal(t, segs[1].NextOffset, l.NextOffset())
	require.Len(t, l.Segments(), 2)
	names, err := m.ReadDir("d")
	require.NoError(t, err)
	require.Equal(t, []string{
		segmentName(segs[0].BaseOffset, indexSuffix), segmentName(segs[0].BaseOffset, logSuffix),
		segmentName(segs[0].BaseOffset, timeIndexSuffix), segmentName(segs[1].BaseOffset, logSuffix),
		"checkpoint", "unrelated",
	}, names)
	require.NoError(t, l.Close())
}

func TestCorruptCheckpoint(t *testing.T) {
	rng := rand.New(rand.NewPCG(30, 31))
	m := NewMemFS()
	o := Options{FS: m, Dir: "d", SegmentBytes: 1000}
	l := openLog(t, o)
	bs := genBatches(rng, 0, 40, 0)
	appendAll(t, l, rng, bs)
	require.NoError(t, l.DeleteTo(bs[20].base))
	require.NoError(t, l.Close())
	n := m.node(t, "d/checkpoint")
	n.data[8] ^= 1
	l = openLog(t, o)
	// Treated as missing: a full scan; the start offset falls back to the
	// first segment.
	require.Equal(t, bs[39].last+1, l.NextOffset())
	require.Equal(t, l.Segments()[0].BaseOffset, l.StartOffset())
	require.Equal(t, modelBytes(bs, l.StartOffset()), readAll(t, l))
}

func TestStartBeyondRecoveredEnd(t *testing.T) {
	m := NewMemFS()
	o := Options{FS: m, Dir: "d"}
	l := openLog(t, o)
	require.NoError(t, l.Append(makeBatch(0, 5, 0, 0, 10)))
	require.NoError(t, l.DeleteTo(3)) // persisted, but the data is not flushed
	o.FS = m.Crash(0)
	l = openLog(t, o)
	require.Equal(t, int64(3), l.StartOffset())
	require.Equal(t, int64(3), l.NextOffset())
	require.Equal(t, []SegmentInfo{{BaseOffset: 3, NextOffset: 3, MaxTimestamp: -1, Active: true}}, l.Segments())
	require.NoError(t, l.Append(makeBatch(3, 1, 0, 0, 0)))
}

// TestCrashAtEveryStep snapshots the filesystem as a crash would leave it
// before every mutating filesystem operation of a random workload, and
// checks that each snapshot opens to a prefix of the log holding at least
// the batches flushed at that point.
func TestCrashAtEveryStep(t *testing.T) {
	rng := rand.New(rand.NewPCG(32, 33))
	clock := newFakeClock()
	m := NewMemFS()
	w := &wrapFS{FS: m}
	o := Options{FS: w, Dir: "d", SegmentBytes: 1200, IndexIntervalBytes: 150, SegmentMs: time.Minute, Now: clock.Now}
	bs := genBatches(rng, 0, 150, 0)

	type snap struct {
		fs      *MemFS
		flushed int64 // at least this must survive
		start   int64 // the start offset may not be below this
		op      string
	}
	var snaps []snap
	var l *Log
	var durableStart, closedAt int64
	w.onMutate = func(op string) {
		flushed := closedAt // while reopening
		if l != nil {
			flushed = l.flush.get()
		}
		snaps = append(snaps, snap{fs: m.Crash(rng.IntN(300)), flushed: flushed, start: durableStart, op: op})
	}
	l = openLog(t, o)
	for i := 0; i < len(bs); {
		k := min(1+rng.IntN(3), len(bs)-i)
		appendAll(t, l, rng, bs[i:i+k])
		i += k
		switch rng.IntN(10) {
		case 0:
			require.NoError(t, l.Flush(l.NextOffset()))
		case 1:
			clock.Advance(2 * time.Minute)
			require.NoError(t, l.MaybeRoll())
		case 2:
			if i > 20 {
				off := bs[i-20].base + 1
				require.NoError(t, l.DeleteTo(off))
				durableStart = max(durableStart, off)
			}
		case 3:
			_, err := l.ApplyRetention(0, 3000)
			require.NoError(t, err)
			durableStart = max(durableStart, l.StartOffset())
		case 4:
			require.NoError(t, l.Close())
			closedAt, l = l.NextOffset(), nil
			l = openLog(t, o)
		}
	}
	require.NoError(t, l.Close())
	require.Greater(t, len(snaps), 200)

	for _, s := range snaps {
		rl, err := Open(Options{FS: s.fs, Dir: "d", SegmentBytes: 1200, IndexIntervalBytes: 150})
		require.NoError(t, err, "crash before %s", s.op)
		next := rl.NextOffset()
		require.GreaterOrEqual(t, next, s.flushed, "crash before %s: flushed data lost", s.op)
		segs := rl.Segments()
		require.True(t, len(segs) == 1 || segs[0].NextOffset > rl.StartOffset(), "crash before %s: segment below start kept", s.op)
		require.GreaterOrEqual(t, rl.StartOffset(), s.start, "crash before %s: start offset went back", s.op)
		if next > rl.StartOffset() {
			i := containing(bs, next-1)
			require.Equal(t, next, bs[i].last+1)
			require.Equal(t, concat(bs[containing(bs, rl.StartOffset()):i+1]), readAll(t, rl), "crash before %s", s.op)
		}
		require.NoError(t, rl.Append(makeBatch(next, 1, 0, 0, 5)), "crash before %s", s.op)
		require.NoError(t, rl.Close())
	}
}

func TestWriteFailureIsUndone(t *testing.T) {
	rng := rand.New(rand.NewPCG(34, 35))
	m := NewMemFS()
	w := &wrapFS{FS: m}
	o := Options{FS: w, Dir: "d"}
	l := openLog(t, o)
	bs := genBatches(rng, 0, 10, 0)
	appendAll(t, l, rng, bs[:5])
	size := l.Size()

	w.failWrite.Store(true)
	require.ErrorIs(t, l.Append(bs[5].data), errInjected)
	require.Equal(t, bs[4].last+1, l.NextOffset())
	require.Equal(t, size, l.Size())
	appendAll(t, l, rng, bs[5:])
	require.Equal(t, concat(bs), readAll(t, l))
	require.NoError(t, l.Close())
	l = openLog(t, o)
	require.Equal(t, concat(bs), readAll(t, l))

	// If the partial write cannot be cut, the log refuses writes.
	w.failWrite.Store(true)
	w.failTrunc.Store(true)
	more := genBatches(rng, l.NextOffset(), 2, 0)
	require.ErrorIs(t, l.Append(more[0].data), errInjected)
	err := l.Append(more[0].data)
	require.ErrorIs(t, err, errInjected, "sticky failure")
	require.NoError(t, l.Flush(math.MaxInt64), "everything appended is already durable")
	require.Equal(t, concat(bs), readAll(t, l), "reads still work")
	require.NoError(t, l.Close())
	w.failTrunc.Store(false)
	l = openLog(t, o)
	require.Equal(t, concat(bs), readAll(t, l), "recovery cuts the partial batch")
	require.NoError(t, l.Close())
}

func TestSyncFailureIsSticky(t *testing.T) {
	m := NewMemFS()
	w := &wrapFS{FS: m}
	l := openLog(t, Options{FS: w, Dir: "d"})
	require.NoError(t, l.Append(makeBatch(0, 1, 0, 0, 0)))
	w.failSync.Store(true)
	require.ErrorIs(t, l.Flush(1), errInjected)
	require.Equal(t, int64(0), l.FlushedOffset())
	w.failSync.Store(false)
	err := l.Flush(1)
	require.ErrorIs(t, err, errInjected, "a later fsync may succeed without the lost data")
	require.ErrorIs(t, l.Append(makeBatch(1, 1, 0, 0, 0)), errInjected)
	require.NoError(t, l.Close(), "close without clean flag")
	l = openLog(t, Options{FS: w, Dir: "d"})
	require.Equal(t, int64(1), l.NextOffset())
}

// TestOSFiles runs a log on the real filesystem: clean reopen, reopen
// without Close, and a torn tail.
func TestOSFiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(36, 37))
	dir := filepath.Join(t.TempDir(), "topic-0")
	o := Options{FS: OS(), Dir: dir, SegmentBytes: 2000, IndexIntervalBytes: 200}
	l := openLog(t, o)
	bs := genBatches(rng, 0, 80, 0)
	appendAll(t, l, rng, bs[:50])
	require.NoError(t, l.Flush(math.MaxInt64))
	require.NoError(t, l.Close())

	l = openLog(t, o)
	require.Equal(t, concat(bs[:50]), readAll(t, l))
	appendAll(t, l, rng, bs[50:])
	segs := l.Segments()
	// Simulate a process crash: the files stay as written, no Close.
	require.NoError(t, l.closeFiles())
	active := filepath.Join(dir, segmentName(segs[len(segs)-1].BaseOffset, logSuffix))
	f, err := os.OpenFile(active, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.Write(bs[0].data[:HeaderSize+3]) // a torn batch
	require.NoError(t, err)
	require.NoError(t, f.Close())

	l2 := openLog(t, o)
	require.Equal(t, concat(bs), readAll(t, l2))
	fi, err := os.Stat(active)
	require.NoError(t, err)
	require.Equal(t, segs[len(segs)-1].Size, fi.Size(), "torn tail cut")
	require.NoError(t, l2.Close())

	l = openLog(t, o)
	require.NoError(t, l.Remove())
	_, err = os.Stat(dir)
	require.True(t, errors.Is(err, os.ErrNotExist))
}

package segment

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// timedLog builds segments [0,3) [3,6) [6,9) (active) with max timestamps
// 1000, 2000, 3000 and 100 bytes per batch.
func timedLog(t *testing.T, m *MemFS, clock *fakeClock) *Log {
	l := openLog(t, Options{FS: m, Dir: "d", SegmentBytes: 300, Now: clock.Now})
	for i := range 9 {
		ts := int64(i/3+1) * 1000
		require.NoError(t, l.Append(makeBatch(int64(i), 1, ts-int64(2-i%3), ts-int64(2-i%3), 32)))
	}
	require.Len(t, l.Segments(), 3)
	return l
}

func TestApplyRetentionByTime(t *testing.T) {
	clock := newFakeClock()
	clock.t = time.UnixMilli(10_000)
	l := timedLog(t, NewMemFS(), clock)

	n, err := l.ApplyRetention(8500*time.Millisecond, -1) // cutoff 1500
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, int64(3), l.StartOffset())
	_, err = l.Read(nil, 2, 100, 100)
	require.ErrorIs(t, err, ErrOffsetOutOfRange)

	n, err = l.ApplyRetention(0, -1)
	require.NoError(t, err)
	require.Zero(t, n, "unlimited")

	n, err = l.ApplyRetention(7000*time.Millisecond, -1) // cutoff 3000: active expired only with max < cutoff
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Len(t, l.Segments(), 1)
	require.Equal(t, int64(6), l.StartOffset())

	n, err = l.ApplyRetention(6999*time.Millisecond, -1) // cutoff 3001: the active segment is expired
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, []SegmentInfo{{BaseOffset: 9, NextOffset: 9, MaxTimestamp: -1, Active: true}}, l.Segments())
	require.Equal(t, int64(9), l.StartOffset())
	require.Equal(t, int64(9), l.NextOffset())
	require.NoError(t, l.Append(makeBatch(9, 1, 0, 0, 0)))

	n, err = l.ApplyRetention(time.Millisecond, -1)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, int64(10), l.StartOffset())
}

func TestApplyRetentionBySize(t *testing.T) {
	clock := newFakeClock()
	m := NewMemFS()
	l := timedLog(t, m, clock)
	tests := []struct {
		bytes       int64
		removed     int
		startOffset int64
	}{
		{-1, 0, 0},
		{900, 0, 0},
		{601, 0, 0},
		{600, 1, 3},
		{0, 1, 6}, // never the active segment
		{0, 0, 6},
	}
	for _, tt := range tests {
		n, err := l.ApplyRetention(0, tt.bytes)
		require.NoError(t, err)
		require.Equal(t, tt.removed, n, "retention bytes %d", tt.bytes)
		require.Equal(t, tt.startOffset, l.StartOffset(), "retention bytes %d", tt.bytes)
	}
	require.Equal(t, int64(300), l.Size())
	require.NoError(t, l.Close())
	names, err := m.ReadDir("d")
	require.NoError(t, err)
	require.Equal(t, []string{"00000000000000000006.index", "00000000000000000006.log", "00000000000000000006.timeindex", "checkpoint"}, names)
	l = openLog(t, Options{FS: m, Dir: "d"})
	require.Equal(t, int64(6), l.StartOffset())
	require.Equal(t, int64(9), l.NextOffset())
}

func TestDeleteTo(t *testing.T) {
	clock := newFakeClock()
	m := NewMemFS()
	l := timedLog(t, m, clock)

	require.NoError(t, l.DeleteTo(4)) // inside segment [3,6)
	require.Equal(t, int64(4), l.StartOffset())
	require.Len(t, l.Segments(), 2)
	_, err := l.Read(nil, 3, 100, 100)
	require.ErrorIs(t, err, ErrOffsetOutOfRange)
	got, err := l.Read(nil, 4, 1, 100)
	require.NoError(t, err)
	h, err := ParseHeader(got)
	require.NoError(t, err)
	require.Equal(t, int64(4), h.BaseOffset)

	require.NoError(t, l.DeleteTo(2), "lower is a no-op")
	require.Equal(t, int64(4), l.StartOffset())
	require.ErrorIs(t, l.DeleteTo(10), ErrOffsetOutOfRange)

	// Survives a crash right after (checkpoint persisted before return).
	crashed := m.Crash(0)
	l2 := openLog(t, Options{FS: crashed, Dir: "d"})
	require.Equal(t, int64(4), l2.StartOffset())
	require.Equal(t, int64(6), l2.NextOffset(), "the unflushed active segment is lost")
	require.NoError(t, l2.Close())

	require.NoError(t, l.DeleteTo(9)) // NextOffset: rolls and removes everything
	require.Equal(t, []SegmentInfo{{BaseOffset: 9, NextOffset: 9, MaxTimestamp: -1, Active: true}}, l.Segments())
	require.Equal(t, int64(9), l.StartOffset())
	require.NoError(t, l.Close())
	l = openLog(t, Options{FS: m, Dir: "d"})
	require.Equal(t, int64(9), l.StartOffset())
	require.Equal(t, int64(9), l.NextOffset())
	got, err = l.Read(nil, 9, 100, 100)
	require.NoError(t, err)
	require.Empty(t, got)
}

func TestTruncateTo(t *testing.T) {
	for _, crash := range []bool{false, true} {
		t.Run(fmt.Sprintf("crash=%v", crash), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(7, 8))
			m := NewMemFS()
			o := Options{FS: m, Dir: "d", SegmentBytes: 2000, IndexIntervalBytes: 300}
			l := openLog(t, o)
			bs := genBatches(rng, 0, 200, 0)
			appendAll(t, l, rng, bs)
			require.NoError(t, l.Flush(math.MaxInt64))
			require.Greater(t, len(l.Segments()), 5)

			require.ErrorIs(t, l.TruncateTo(bs[200-1].last+2), ErrOffsetOutOfRange)
			if bs[50].last > bs[50].base {
				require.ErrorIs(t, l.TruncateTo(bs[50].base+1), ErrOffsetOutOfRange, "not a boundary")
			}
			require.Equal(t, bs[199].last+1, l.NextOffset(), "failed truncations change nothing")
			require.NoError(t, l.TruncateTo(l.NextOffset()), "no-op")

			cut := 120
			require.NoError(t, l.TruncateTo(bs[cut].base))
			require.Equal(t, bs[cut].base, l.NextOffset())
			require.LessOrEqual(t, l.FlushedOffset(), bs[cut].base)
			segs := l.Segments()
			last := segs[len(segs)-1]
			require.True(t, last.Active)
			require.Equal(t, bs[cut].base, last.NextOffset)
			wantMax := int64(math.MinInt64)
			for _, b := range bs[:cut] {
				if b.base >= last.BaseOffset {
					wantMax = max(wantMax, b.maxTs)
				}
			}
			if last.Size > 0 {
				require.Equal(t, wantMax, last.MaxTimestamp)
			}
			require.Equal(t, modelBytes(bs[:cut], 0), readAll(t, l))

			more := genBatches(rng, bs[cut].base, 50, 5000)
			bs = append(bs[:cut], more...)
			appendAll(t, l, rng, more)
			require.NoError(t, l.Flush(math.MaxInt64))
			require.Equal(t, modelBytes(bs, 0), readAll(t, l))
			if crash {
				l = openLog(t, Options{FS: m.Crash(0), Dir: "d", SegmentBytes: 2000, IndexIntervalBytes: 300})
			} else {
				require.NoError(t, l.Close())
				l = openLog(t, o)
			}
			require.Equal(t, modelBytes(bs, 0), readAll(t, l))
			for ts := int64(0); ts < 6000; ts += 13 {
				want := -1
				for i, b := range bs {
					if b.maxTs >= ts {
						want = i
						break
					}
				}
				got, ok, err := l.FindTimestamp(ts)
				require.NoError(t, err)
				require.Equal(t, want >= 0, ok)
				if ok {
					require.Equal(t, bs[want].data, got, "ts %d", ts)
				}
			}

			// Truncate to the very start.
			require.NoError(t, l.TruncateTo(0))
			require.Equal(t, []SegmentInfo{{MaxTimestamp: -1, Active: true}}, l.Segments())
			require.NoError(t, l.Append(makeBatch(0, 1, 0, 0, 0)))
			require.NoError(t, l.Close())
		})
	}
}

func TestResetTo(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	m := NewMemFS()
	o := Options{FS: m, Dir: "d", SegmentBytes: 2000, IndexIntervalBytes: 300}
	l := openLog(t, o)
	bs := genBatches(rng, 0, 60, 0)
	appendAll(t, l, rng, bs)
	require.NoError(t, l.Flush(math.MaxInt64))
	require.Greater(t, len(l.Segments()), 2)
	require.ErrorIs(t, l.ResetTo(-1), ErrOffsetOutOfRange)

	// Past the end, as after a wiped disk meets a tier that holds more.
	at := bs[59].last + 1000
	require.NoError(t, l.ResetTo(at))
	require.Equal(t, at, l.StartOffset())
	require.Equal(t, at, l.NextOffset())
	require.Len(t, l.Segments(), 1)
	more := genBatches(rng, at, 20, 100)
	appendAll(t, l, rng, more)
	require.NoError(t, l.Flush(math.MaxInt64))
	require.Equal(t, modelBytes(more, 0), readAll(t, l))
	_, err := l.Read(nil, bs[10].base, 1<<20, math.MaxInt64)
	require.ErrorIs(t, err, ErrOffsetOutOfRange, "the old batches are gone")

	// The reset survives a reopen and a crash.
	require.NoError(t, l.Close())
	l = openLog(t, o)
	require.Equal(t, at, l.StartOffset())
	require.Equal(t, modelBytes(more, 0), readAll(t, l))
	l = openLog(t, Options{FS: m.Crash(0), Dir: "d", SegmentBytes: 2000, IndexIntervalBytes: 300})
	require.Equal(t, at, l.StartOffset())
	require.Equal(t, modelBytes(more, 0), readAll(t, l))

	// Below the start too (a leader whose log was deleted further back).
	require.NoError(t, l.ResetTo(5))
	require.Equal(t, int64(5), l.NextOffset())
	require.NoError(t, l.ResetTo(5), "resetting an empty log to its start is a no-op")
	require.NoError(t, l.Close())
}

func TestApplyRetentionBelowKeepsWhatIsNotUploaded(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	l := openLog(t, Options{FS: NewMemFS(), Dir: "d", SegmentBytes: 2000, IndexIntervalBytes: 300})
	bs := genBatches(rng, 0, 80, 0)
	appendAll(t, l, rng, bs)
	segs := l.Segments()
	require.Greater(t, len(segs), 4)
	limit := segs[2].NextOffset // "uploaded" up to the end of the third segment
	removed, err := l.ApplyRetentionBelow(time.Nanosecond, -1, limit)
	require.NoError(t, err)
	require.Equal(t, 3, removed, "everything is expired, but only uploaded segments go")
	require.Equal(t, limit, l.StartOffset())
	removed, err = l.ApplyRetentionBelow(-1, 0, limit)
	require.NoError(t, err)
	require.Zero(t, removed, "size retention respects the limit too")
	left := len(l.Segments())
	removed, err = l.ApplyRetentionBelow(-1, 0, math.MaxInt64)
	require.NoError(t, err)
	require.Equal(t, left-1, removed, "without a limit, all but the active segment")
}

// TestApplyRetentionBelowRollsOnlyWhatLiesBelow: an expired active
// segment is rolled (and so the log emptied) only when the whole log is
// below the limit, a high watermark at the log end; a limit below it (an
// uncommitted tail, an upload end) keeps the active segment and what
// lies above the limit.
func TestApplyRetentionBelowRollsOnlyWhatLiesBelow(t *testing.T) {
	clock := newFakeClock()
	clock.t = time.UnixMilli(10_000)
	l := timedLog(t, NewMemFS(), clock) // segments [0,3) [3,6) [6,9), all expired at cutoff 9,999
	n, err := l.ApplyRetentionBelow(time.Millisecond, -1, 8)
	require.NoError(t, err)
	require.Equal(t, 2, n, "the closed segments below 8")
	require.Equal(t, int64(6), l.StartOffset())
	require.Len(t, l.Segments(), 1, "an active segment reaching past the limit is not rolled")
	n, err = l.ApplyRetentionBelow(time.Millisecond, -1, 9)
	require.NoError(t, err)
	require.Equal(t, 1, n, "committed to the log end: rolled and deleted")
	require.Equal(t, int64(9), l.StartOffset())
	require.Equal(t, int64(9), l.NextOffset())
}

func TestOpenSegmentOutlivesDeletion(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 14))
	for _, fs := range []FS{NewMemFS(), OS()} {
		dir := "d"
		if _, ok := fs.(osFS); ok {
			dir = t.TempDir()
		}
		l := openLog(t, Options{FS: fs, Dir: dir, SegmentBytes: 2000, IndexIntervalBytes: 300})
		bs := genBatches(rng, 0, 40, 0)
		appendAll(t, l, rng, bs)
		segs := l.Segments()
		require.Greater(t, len(segs), 2)
		f, size, err := l.OpenSegment(segs[0].BaseOffset)
		require.NoError(t, err)
		require.Equal(t, segs[0].Size, size)
		_, _, err = l.OpenSegment(segs[len(segs)-1].BaseOffset)
		require.Error(t, err, "the active segment is not opened")
		_, _, err = l.OpenSegment(segs[0].BaseOffset + 1)
		require.ErrorIs(t, err, ErrOffsetOutOfRange)
		require.NoError(t, l.DeleteTo(segs[1].BaseOffset)) // deletes the first segment
		buf := make([]byte, size)
		_, err = f.ReadAt(buf, 0)
		require.NoError(t, err)
		var want []byte
		for _, b := range bs {
			if b.base < segs[0].NextOffset {
				want = append(want, b.data...)
			}
		}
		require.Equal(t, want, buf)
		require.NoError(t, f.Close())
		require.NoError(t, l.Close())
	}
}

// TestRetentionRemoveFailureKeepsLog fails the deletion of the oldest
// segment file during retention: the segments that retention deletes after
// it must not leave a gap, which would make Open drop the rest of the log.
func TestRetentionRemoveFailureKeepsLog(t *testing.T) {
	m := NewMemFS()
	sw := NewSwitch(Fail(Once(And(OnOps(OpRemove), PathMatch("*.log")))))
	o := Options{FS: Wrap(m, sw), Dir: "d", SegmentBytes: 300}
	l := openLog(t, o)
	bs := threeSegments(t, l)

	sw.Arm()
	_, err := l.ApplyRetention(0, 250) // deletes [0,3) and [3,6)
	require.ErrorIs(t, err, ErrInjected)
	sw.Disarm()
	require.Equal(t, int64(6), l.StartOffset(), "persisted before the deletion")
	require.Equal(t, concat(bs[6:]), readAll(t, l))
	require.NoError(t, l.Close())

	l = openLog(t, o)
	require.Equal(t, int64(6), l.StartOffset())
	require.Equal(t, int64(9), l.NextOffset())
	require.Equal(t, concat(bs[6:]), readAll(t, l))
	require.Len(t, l.Segments(), 1, "Open deleted the segment left below the start offset")
	require.NoError(t, l.Close())
}

// threeSegments appends batches 0-8 of 32-byte values over a log with
// 300-byte segments: [0,3) [3,6) [6,9), the last one active.
func threeSegments(t *testing.T, l *Log) []testBatch {
	t.Helper()
	var bs []testBatch
	for i := range 9 {
		b := makeBatch(int64(i), 1, 0, 0, 32)
		bs = append(bs, testBatch{base: int64(i), last: int64(i), data: b})
		require.NoError(t, l.Append(b))
	}
	require.Len(t, l.Segments(), 3)
	return bs
}

// TestTruncateToFailureLowersFlushed fails TruncateTo while it deletes the
// later segments: NextOffset drops, and a Flush of what is appended there
// must sync it rather than trust the old flushed offset.
func TestTruncateToFailureLowersFlushed(t *testing.T) {
	m := NewMemFS()
	sw := NewSwitch(Fail(Once(And(OnOps(OpRemove), PathMatch("*.log")))))
	o := Options{FS: Wrap(m, sw), Dir: "d", SegmentBytes: 300}
	l := openLog(t, o)
	bs := threeSegments(t, l)
	require.NoError(t, l.Flush(9))

	sw.Arm()
	require.ErrorIs(t, l.TruncateTo(1), ErrInjected) // fails deleting [6,9)
	sw.Disarm()
	require.Equal(t, int64(3), l.NextOffset(), "[3,6) and [6,9) are gone from memory")
	require.LessOrEqual(t, l.FlushedOffset(), l.NextOffset())

	b := makeBatch(3, 1, 0, 0, 5)
	require.NoError(t, l.Append(b))
	require.NoError(t, l.Flush(4))
	l2 := openLog(t, Options{FS: m.Crash(0), Dir: "d", SegmentBytes: 300})
	require.Equal(t, int64(4), l2.NextOffset(), "a flushed batch was lost")
	require.Equal(t, append(concat(bs[:3]), b...), readAll(t, l2))
	require.NoError(t, l2.Close())
}

// TestTruncateToSyncFailureKeepsReads fails the fsync after TruncateTo cut
// the file: the log refuses writes, but reads must match the cut file.
func TestTruncateToSyncFailureKeepsReads(t *testing.T) {
	for _, inj := range []Injector{
		Fail(Once(And(OnOps(OpSync), PathMatch("*.log")))),
		FailApplied(Once(And(OnOps(OpTruncate), PathMatch("*.log")))),
	} {
		m := NewMemFS()
		sw := NewSwitch(inj)
		o := Options{FS: Wrap(m, sw), Dir: "d", SegmentBytes: 300}
		l := openLog(t, o)
		bs := threeSegments(t, l)

		sw.Arm()
		require.ErrorIs(t, l.TruncateTo(4), ErrInjected)
		sw.Disarm()
		require.Equal(t, int64(4), l.NextOffset())
		require.Equal(t, concat(bs[:4]), readAll(t, l))
		require.ErrorIs(t, l.Append(makeBatch(4, 1, 0, 0, 0)), ErrInjected, "refuses writes")
		require.NoError(t, l.Close())

		l = openLog(t, o)
		require.Equal(t, concat(bs[:4]), readAll(t, l))
		require.NoError(t, l.Close())
	}
}

// TestResetToFailureKeepsReads fails ResetTo while it deletes the old
// segments and while it creates the new one: the log must refuse writes
// but keep serving reads (it used to panic with no segment left), and
// reopen to a consistent log that ResetTo can then reset.
func TestResetToFailureKeepsReads(t *testing.T) {
	tests := []struct {
		name string
		inj  Injector
		want func(bs []testBatch) []byte // after reopening
	}{
		{"remove", Fail(Once(And(OnOps(OpRemove), PathMatch("*.log")))), concat},
		{"create", Fail(And(OnOps(OpCreate), PathMatch("*.log"))), func([]testBatch) []byte { return nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMemFS()
			sw := NewSwitch(tt.inj)
			o := Options{FS: Wrap(m, sw), Dir: "d", SegmentBytes: 300}
			l := openLog(t, o)
			bs := threeSegments(t, l)

			sw.Arm()
			require.ErrorIs(t, l.ResetTo(20), ErrInjected)
			sw.Disarm()
			require.Equal(t, int64(9), l.NextOffset())
			require.Equal(t, concat(bs), readAll(t, l))
			require.Len(t, l.Segments(), 3)
			require.ErrorIs(t, l.Append(makeBatch(9, 1, 0, 0, 0)), ErrInjected, "refuses writes")
			require.ErrorIs(t, l.ResetTo(20), ErrInjected, "refuses to reset")
			// What it reports flushed survives a crash.
			crashed := openLog(t, Options{FS: m.Crash(0), Dir: "d", SegmentBytes: 300})
			require.GreaterOrEqual(t, crashed.NextOffset(), l.FlushedOffset())
			require.NoError(t, crashed.Close())
			require.NoError(t, l.Close())

			l = openLog(t, o)
			require.Equal(t, tt.want(bs), readAll(t, l))
			require.NoError(t, l.ResetTo(20))
			require.Equal(t, int64(20), l.NextOffset())
			require.NoError(t, l.Close())
		})
	}
}

// TestTruncateToLeftoverSegmentFile fails the deletion of a later segment
// file in TruncateTo, which leaves that file where the next roll creates
// its segment: the roll must replace it, and its batches must not return.
func TestTruncateToLeftoverSegmentFile(t *testing.T) {
	m := NewMemFS()
	sw := NewSwitch(Fail(And(OnOps(OpRemove), PathMatch("00000000000000000003.log"))))
	o := Options{FS: Wrap(m, sw), Dir: "d", SegmentBytes: 300}
	l := openLog(t, o)
	bs := threeSegments(t, l)

	sw.Arm()
	require.ErrorIs(t, l.TruncateTo(1), ErrInjected) // deletes [6,9), fails on [3,6)
	sw.Disarm()
	require.Equal(t, int64(3), l.NextOffset())
	b := makeBatch(3, 1, 0, 0, 50) // rolls: [0,3) is full
	require.NoError(t, l.Append(b))
	require.Len(t, l.Segments(), 2)
	require.NoError(t, l.Flush(4))
	want := append(concat(bs[:3]), b...)
	require.Equal(t, want, readAll(t, l))

	l2 := openLog(t, Options{FS: m.Crash(0), Dir: "d", SegmentBytes: 300})
	require.Equal(t, want, readAll(t, l2))
	require.NoError(t, l2.Close())
	require.NoError(t, l.Close())
	l = openLog(t, o)
	require.Equal(t, want, readAll(t, l))
	require.NoError(t, l.Close())
}

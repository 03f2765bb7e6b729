package segment

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestOpenEmpty(t *testing.T) {
	m := NewMemFS()
	l := openLog(t, memOptions(m))
	require.Equal(t, int64(0), l.StartOffset())
	require.Equal(t, int64(0), l.NextOffset())
	require.Equal(t, []SegmentInfo{{BaseOffset: 0, NextOffset: 0, MaxTimestamp: -1, Active: true}}, l.Segments())
	names, err := m.ReadDir("/data/topic-0")
	require.NoError(t, err)
	require.Equal(t, []string{"00000000000000000000.log", "checkpoint"}, names)
	out, err := l.Read([]byte("x"), 0, 100, math.MaxInt64)
	require.NoError(t, err)
	require.Equal(t, []byte("x"), out)
	require.NoError(t, l.Close())
}

func TestOptionsValidation(t *testing.T) {
	m := NewMemFS()
	for _, o := range []Options{
		{Dir: "/d"},
		{FS: m},
		{FS: m, Dir: "/d", SegmentBytes: -1},
		{FS: m, Dir: "/d", IndexIntervalBytes: -1},
	} {
		_, err := Open(o)
		require.Error(t, err, "%+v", o)
	}
}

func TestAppendValidation(t *testing.T) {
	l := openLog(t, memOptions(NewMemFS()))
	require.NoError(t, l.Append(nil))
	require.ErrorIs(t, l.Append(makeBatch(1, 1, 0, 0, 0)), ErrNotContiguous)
	two := append(makeBatch(0, 2, 0, 0, 0), makeBatch(3, 1, 0, 0, 0)...)
	require.ErrorIs(t, l.Append(two), ErrNotContiguous, "gap between batches")
	require.ErrorIs(t, l.Append(makeBatch(0, 1, 0, 0, 0)[:60]), ErrCorrupt)
	require.ErrorIs(t, l.Append(makeBatch(0, 1, 0, 0, 10)[:70]), ErrCorrupt)
	require.Equal(t, int64(0), l.NextOffset(), "nothing appended")
	require.Equal(t, int64(0), l.Size())
	require.NoError(t, l.Append(makeBatch(0, 2, 0, 0, 0)))
	require.Equal(t, int64(2), l.NextOffset())
}

// TestAppendReadAcrossSegments reads at every offset of a log of many small
// segments with various limits and compares with the model.
func TestAppendReadAcrossSegments(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	l := openLog(t, memOptions(NewMemFS()))
	bs := genBatches(rng, 0, 400, 1000)
	appendAll(t, l, rng, bs)
	next := bs[len(bs)-1].last + 1
	require.Equal(t, next, l.NextOffset())
	require.Greater(t, len(l.Segments()), 10)

	var total int64
	for _, s := range l.Segments() {
		total += s.Size
	}
	require.Equal(t, total, l.Size())

	for off := int64(0); off < next; off++ {
		want := bs[containing(bs, off)].data
		got, err := l.Read(nil, off, 1, math.MaxInt64)
		require.NoError(t, err)
		require.Equal(t, want, got, "offset %d, maxBytes 1: the containing batch whole", off)

		got, err = l.Read(nil, off, math.MaxInt32, math.MaxInt64)
		require.NoError(t, err)
		require.Equal(t, modelBytes(bs, off), got, "offset %d: everything", off)

		maxBytes, maxOffset := rng.IntN(3000), off+int64(rng.IntN(40))
		got, err = l.Read([]byte("prefix"), off, maxBytes, maxOffset)
		require.NoError(t, err)
		require.Equal(t, append([]byte("prefix"), expectedRead(bs, off, maxBytes, maxOffset)...), got,
			"offset %d, maxBytes %d, maxOffset %d", off, maxBytes, maxOffset)
	}
}

func TestReadLimits(t *testing.T) {
	l := openLog(t, Options{FS: NewMemFS(), Dir: "d", IndexIntervalBytes: 1, SegmentBytes: 300})
	var bs []testBatch
	for i := range 6 { // 3 records per batch, offsets 0-17
		b := makeBatch(int64(3*i), 3, 0, 0, 10)
		bs = append(bs, testBatch{base: int64(3 * i), last: int64(3*i + 2), data: b})
		require.NoError(t, l.Append(b))
	}
	size := len(bs[0].data)
	cat := func(i, j int) []byte {
		var out []byte
		for _, b := range bs[i:j] {
			out = append(out, b.data...)
		}
		return out
	}
	tests := []struct {
		name      string
		offset    int64
		maxBytes  int
		maxOffset int64
		want      []byte
		err       error
	}{
		{"zero maxBytes still returns first batch", 4, 0, 100, cat(1, 2), nil},
		{"negative maxBytes still returns first batch", 4, -5, 100, cat(1, 2), nil},
		{"exactly two batches", 0, 2 * size, 100, cat(0, 2), nil},
		{"one byte short of two", 0, 2*size - 1, 100, cat(0, 1), nil},
		{"mid-batch offset", 7, 3 * size, 100, cat(2, 5), nil},
		{"maxOffset cuts batch containing it", 0, 1 << 20, 10, cat(0, 3), nil},
		{"maxOffset at batch end", 0, 1 << 20, 9, cat(0, 3), nil},
		{"maxOffset below offset", 5, 1 << 20, 5, nil, nil},
		{"first batch beyond maxOffset", 5, 1 << 20, 4, nil, nil},
		{"at NextOffset", 18, 1 << 20, 100, nil, nil},
		{"beyond NextOffset", 19, 1 << 20, 100, nil, ErrOffsetOutOfRange},
		{"negative", -1, 1 << 20, 100, nil, ErrOffsetOutOfRange},
		{"all", 0, 1 << 20, 100, cat(0, 6), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := l.Read([]byte{1, 2}, tt.offset, tt.maxBytes, tt.maxOffset)
			require.ErrorIs(t, err, tt.err)
			require.Equal(t, append([]byte{1, 2}, tt.want...), got)
		})
	}
}

// TestIndexLargeLog checks random reads of a 10k-batch log, after a clean
// reopen, and after the index files were deleted or damaged.
func TestIndexLargeLog(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	m := NewMemFS()
	w := &wrapFS{FS: m}
	o := Options{FS: w, Dir: "/p", SegmentBytes: 256 << 10}
	l := openLog(t, o)
	bs := genBatches(rng, 0, 10_000, 0)
	appendAll(t, l, rng, bs)
	next := l.NextOffset()

	check := func(l *Log, what string) {
		t.Helper()
		for range 1500 {
			off := rng.Int64N(next)
			maxBytes := rng.IntN(2000)
			w.readBytes.Store(0)
			got, err := l.Read(nil, off, maxBytes, next)
			require.NoError(t, err)
			require.Equal(t, expectedRead(bs, off, maxBytes, next), got, "%s: offset %d", what, off)
			// One window: at most an index interval (plus one batch) and
			// maxBytes (plus one batch) more than returned.
			require.LessOrEqual(t, w.readBytes.Load(), int64(len(got)+DefaultIndexIntervalBytes+maxBytes+2*1000), "%s: bytes read", what)
		}
	}
	check(l, "fresh")
	// Timestamp lookups skip segments and read about one index interval.
	for range 500 {
		ts := rng.Int64N(int64(len(bs)) * 10)
		w.readBytes.Store(0)
		got, ok, err := l.FindTimestamp(ts)
		require.NoError(t, err)
		require.True(t, ok)
		i := 0
		for bs[i].maxTs < ts {
			i++
		}
		require.Equal(t, bs[i].data, got, "ts %d", ts)
		require.LessOrEqual(t, w.readBytes.Load(), int64(3*headerChunk), "bytes read for ts %d", ts)
	}
	segs := l.Segments()
	require.Greater(t, len(segs), 3)
	require.NoError(t, l.Close())

	l = openLog(t, o)
	require.Equal(t, segs, l.Segments())
	check(l, "clean reopen")
	require.NoError(t, l.Close())

	dir := "/p"
	require.NoError(t, m.Remove(filepath.Join(dir, segmentName(segs[1].BaseOffset, indexSuffix))))
	require.NoError(t, m.Remove(filepath.Join(dir, segmentName(segs[2].BaseOffset, timeIndexSuffix))))
	m.node(t, filepath.Join(dir, segmentName(segs[0].BaseOffset, indexSuffix))).data[5] ^= 0xff
	n := m.node(t, filepath.Join(dir, segmentName(segs[3].BaseOffset, indexSuffix)))
	n.data = n.data[:len(n.data)-3]
	l = openLog(t, o)
	require.Equal(t, segs, l.Segments())
	check(l, "rebuilt")
	for _, s := range segs[:4] {
		for _, suffix := range []string{indexSuffix, timeIndexSuffix} {
			_, err := m.OpenFile(filepath.Join(dir, segmentName(s.BaseOffset, suffix)), os.O_RDONLY, 0)
			require.NoError(t, err, "index file rewritten")
		}
	}
	require.NoError(t, l.Close())

	// A crash (no clean flag) scans only from the recovery point.
	l = openLog(t, o)
	crashed := m.Crash(0)
	require.NoError(t, l.Close())
	l = openLog(t, Options{FS: crashed, Dir: "/p", SegmentBytes: 256 << 10})
	require.Equal(t, segs, l.Segments())
	check2 := readAll(t, l)
	require.Equal(t, modelBytes(bs, 0), check2)
}

func TestFindTimestamp(t *testing.T) {
	clock := newFakeClock()
	m := NewMemFS()
	o := Options{FS: m, Dir: "/p", SegmentBytes: 3000, IndexIntervalBytes: 700, Now: clock.Now}
	l := openLog(t, o)
	rng := rand.New(rand.NewPCG(5, 6))
	bs := genBatches(rng, 0, 300, 10_000)
	// Some bigger jumps backwards and a long flat stretch.
	for i := range bs {
		switch {
		case i%37 == 0:
			bs[i].maxTs -= 500
		case i >= 100 && i < 140:
			bs[i].maxTs = 11_000
		}
		n := int(bs[i].last - bs[i].base + 1)
		bs[i].data = makeBatch(bs[i].base, n, bs[i].maxTs-5, bs[i].maxTs, rng.IntN(100))
	}
	appendAll(t, l, rng, bs)
	require.Greater(t, len(l.Segments()), 5)

	check := func(l *Log, start int64, what string) {
		t.Helper()
		for ts := int64(9_000); ts <= 13_100; ts += 7 {
			want := -1
			for i, b := range bs {
				if b.last >= start && b.maxTs >= ts {
					want = i
					break
				}
			}
			got, ok, err := l.FindTimestamp(ts)
			require.NoError(t, err)
			if want < 0 {
				require.False(t, ok, "%s: ts %d", what, ts)
				continue
			}
			require.True(t, ok, "%s: ts %d", what, ts)
			require.Equal(t, bs[want].data, got, "%s: ts %d", what, ts)
		}
	}
	check(l, 0, "fresh")
	var mid int64
	for _, i := range []int{150, 152, 155, 160} {
		mid = bs[i].last
		require.NoError(t, l.DeleteTo(mid))
		check(l, mid, fmt.Sprintf("after DeleteTo(%d)", mid))
	}
	require.NoError(t, l.Close())
	l = openLog(t, o)
	check(l, mid, "reopened")
	require.NoError(t, l.Close())
}

func TestRollBySegmentBytes(t *testing.T) {
	b := func(base int64) []byte { return makeBatch(base, 1, 0, 0, 32) } // 100 bytes
	require.Len(t, b(0), 100)
	big := makeBatch(5, 1, 0, 0, 500)
	l := openLog(t, Options{FS: NewMemFS(), Dir: "d", SegmentBytes: 250})
	for i := range 5 {
		require.NoError(t, l.Append(b(int64(i))))
	}
	// Big batch into a non-empty segment rolls; into an empty one fits.
	require.NoError(t, l.Append(big))
	require.NoError(t, l.Append(b(6)))
	var got [][3]int64
	for _, s := range l.Segments() {
		got = append(got, [3]int64{s.BaseOffset, s.NextOffset, s.Size})
	}
	require.Equal(t, [][3]int64{{0, 2, 200}, {2, 4, 200}, {4, 5, 100}, {5, 6, int64(len(big))}, {6, 7, 100}}, got)

	l.SetSegmentConfig(1000, 0)
	for i := 7; i < 15; i++ {
		require.NoError(t, l.Append(b(int64(i))))
	}
	segs := l.Segments()
	require.Len(t, segs, 5)
	require.Equal(t, SegmentInfo{BaseOffset: 6, NextOffset: 15, Size: 900, MaxTimestamp: 0, Active: true}, segs[4])
}

func TestRollBySegmentMs(t *testing.T) {
	clock := newFakeClock()
	l := openLog(t, Options{FS: NewMemFS(), Dir: "d", SegmentMs: time.Hour, Now: clock.Now})
	b := func(base int64) []byte { return makeBatch(base, 1, 0, 0, 10) }

	clock.Advance(2 * time.Hour)
	require.NoError(t, l.MaybeRoll())
	require.Len(t, l.Segments(), 1, "empty segment does not roll")

	require.NoError(t, l.Append(b(0)))
	clock.Advance(time.Hour)
	require.NoError(t, l.MaybeRoll())
	require.Len(t, l.Segments(), 1, "exactly segment.ms old: not yet")
	require.NoError(t, l.Append(b(1)))
	clock.Advance(time.Millisecond)
	require.NoError(t, l.MaybeRoll())
	require.Len(t, l.Segments(), 2)

	require.NoError(t, l.Append(b(2)))
	clock.Advance(61 * time.Minute)
	require.NoError(t, l.Append(b(3)), "append rolls an old segment first")
	segs := l.Segments()
	require.Len(t, segs, 3)
	require.Equal(t, int64(3), segs[2].BaseOffset)

	l.SetSegmentConfig(0, -1) // time-based rolling off
	clock.Advance(100 * time.Hour)
	require.NoError(t, l.MaybeRoll())
	require.Len(t, l.Segments(), 3)
	l.SetSegmentConfig(0, time.Minute)
	require.NoError(t, l.MaybeRoll())
	require.Len(t, l.Segments(), 4)
}

func TestScanHeaders(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	l := openLog(t, memOptions(NewMemFS()))
	bs := genBatches(rng, 0, 150, 0)
	appendAll(t, l, rng, bs)
	require.NoError(t, l.DeleteTo(bs[40].base))
	next := l.NextOffset()
	for from := int64(-1); from <= next; from++ {
		var got []int64
		require.NoError(t, l.ScanHeaders(from, func(h Header) bool {
			got = append(got, h.BaseOffset)
			return true
		}))
		var want []int64
		for _, b := range bs {
			if b.last >= from && b.base >= l.Segments()[0].BaseOffset {
				want = append(want, b.base)
			}
		}
		require.Equal(t, want, got, "from %d", from)
	}
	calls := 0
	require.NoError(t, l.ScanHeaders(0, func(Header) bool { calls++; return calls < 3 }))
	require.Equal(t, 3, calls)
}

func TestCloseAndRemove(t *testing.T) {
	m := NewMemFS()
	l := openLog(t, memOptions(m))
	require.NoError(t, l.Append(makeBatch(0, 1, 0, 0, 0)))
	require.NoError(t, l.Close())
	require.NoError(t, l.Close(), "idempotent")
	require.ErrorIs(t, l.Append(makeBatch(1, 1, 0, 0, 0)), ErrClosed)
	_, err := l.Read(nil, 0, 1, 1)
	require.ErrorIs(t, err, ErrClosed)
	_, _, err = l.FindTimestamp(0)
	require.ErrorIs(t, err, ErrClosed)
	require.ErrorIs(t, l.ScanHeaders(0, func(Header) bool { return true }), ErrClosed)
	require.NoError(t, l.Flush(1), "already durable")
	require.ErrorIs(t, l.DeleteTo(1), ErrClosed)
	require.ErrorIs(t, l.TruncateTo(0), ErrClosed)
	require.ErrorIs(t, l.MaybeRoll(), ErrClosed)
	_, err = l.ApplyRetention(time.Hour, 0)
	require.ErrorIs(t, err, ErrClosed)

	l = openLog(t, memOptions(m))
	require.Equal(t, int64(1), l.NextOffset())
	require.NoError(t, l.Remove())
	_, err = m.ReadDir("/data/topic-0")
	require.ErrorIs(t, err, os.ErrNotExist)
	names, err := m.ReadDir("/data")
	require.NoError(t, err)
	require.Empty(t, names)
}

// TestConcurrentReadWrite runs readers against appends, rolls, retention
// and flushes; run with -race.
func TestConcurrentReadWrite(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	l := openLog(t, Options{FS: NewMemFS(), Dir: "d", SegmentBytes: 3000, IndexIntervalBytes: 200})
	bs := genBatches(rng, 0, 1500, 0)
	all := modelBytes(bs, 0)
	posOf := make(map[int64]int) // batch base -> position in all
	p := 0
	for _, b := range bs {
		posOf[b.base] = p
		p += len(b.data)
	}

	done := make(chan struct{})
	var wg sync.WaitGroup
	for r := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(r), 99))
			var buf []byte
			for {
				select {
				case <-done:
					return
				default:
				}
				start, next := l.StartOffset(), l.NextOffset()
				if next <= start {
					continue
				}
				off := start + rng.Int64N(next-start)
				var err error
				buf, err = l.Read(buf[:0], off, rng.IntN(5000), math.MaxInt64)
				if errors.Is(err, ErrOffsetOutOfRange) {
					continue // retention moved the start
				}
				if err != nil {
					t.Errorf("read at %d: %v", off, err)
					return
				}
				i := containing(bs, off)
				at := posOf[bs[i].base]
				if at+len(buf) > len(all) || !bytes.Equal(buf, all[at:at+len(buf)]) {
					t.Errorf("read at %d: wrong bytes", off)
					return
				}
				if _, _, err := l.FindTimestamp(int64(rng.IntN(15000))); err != nil {
					t.Errorf("find timestamp: %v", err)
					return
				}
			}
		}()
	}
	for i := 0; i < len(bs); i += 10 {
		appendAll(t, l, rng, bs[i:i+10])
		if i%100 == 0 {
			_, err := l.ApplyRetention(0, 20_000)
			require.NoError(t, err)
			require.NoError(t, l.Flush(l.NextOffset()))
		}
	}
	close(done)
	wg.Wait()
	require.NoError(t, l.Close())
}

// TestRollCreateFailure fails the creation of the new segment file during
// a roll after the file was made (as OS does when the fsync of the
// directory fails). The file must not stay: later rolls must work, and a
// segment file between two others would make Open drop the segments after
// it.
func TestRollCreateFailure(t *testing.T) {
	m := NewMemFS()
	sw := NewSwitch(FailApplied(Once(And(OnOps(OpCreate), PathMatch("*.log")))))
	o := Options{FS: Wrap(m, sw), Dir: "d"}
	l := openLog(t, o)
	var want []byte
	appendOne := func() {
		b := makeBatch(l.NextOffset(), 1, 0, 0, 10)
		require.NoError(t, l.Append(b))
		want = append(want, b...)
	}
	appendOne()

	sw.Arm()
	require.ErrorIs(t, l.Roll(), ErrInjected)
	sw.Disarm()
	require.Len(t, l.Segments(), 1)
	appendOne() // into the same segment, past the failed segment's base
	require.NoError(t, l.Roll())
	require.Len(t, l.Segments(), 2)
	appendOne()
	require.NoError(t, l.Flush(l.NextOffset()))
	require.NoError(t, l.Close())

	for _, fsys := range []FS{m, m.Crash(0)} {
		l = openLog(t, Options{FS: fsys, Dir: "d"})
		require.Equal(t, want, readAll(t, l))
		require.NoError(t, l.Close())
	}
}

package segment

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// spanLog opens a log on the real filesystem with batches of 1-4 records
// of up to 3,000 bytes each, over several segments.
func spanLog(t *testing.T, rng *rand.Rand) (*Log, []testBatch) {
	t.Helper()
	l := openLog(t, Options{FS: OS(), Dir: t.TempDir(), IndexIntervalBytes: 1 << 10, SegmentBytes: 48 << 10})
	t.Cleanup(func() { _ = l.Close() })
	var bs []testBatch
	off := int64(0)
	for range 300 {
		n := 1 + rng.IntN(4)
		data := makeBatch(off, n, 0, 0, rng.IntN(3000))
		bs = append(bs, testBatch{base: off, last: off + int64(n) - 1, data: data})
		off += int64(n)
	}
	appendAll(t, l, rng, bs)
	return l, bs
}

// TestReadSpanMatchesRead: whatever ReadSpan leaves in the file is the
// start of what Read returns, whole batches with the records and last
// offset it reports, and ends only where Read's answer or its segment
// ends; when it leaves nothing in the file it returns exactly what Read
// does.
func TestReadSpanMatchesRead(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 9))
	l, bs := spanLog(t, rng)
	next := bs[len(bs)-1].last + 1
	spans := 0
	for range 3000 {
		offset := rng.Int64N(next + 1)
		maxBytes := rng.IntN(200 << 10)
		maxOffset := offset + rng.Int64N(next-offset+50)
		minSpan := []int{1, 512, 8 << 10, 40 << 10, 1 << 20}[rng.IntN(5)]
		want, err := l.Read([]byte{9}, offset, maxBytes, maxOffset)
		require.NoError(t, err)
		got, sp, err := l.ReadSpan([]byte{9}, offset, maxBytes, maxOffset, minSpan)
		require.NoError(t, err)
		if sp == nil {
			require.Equal(t, want, got, "offset %d maxBytes %d maxOffset %d minSpan %d", offset, maxBytes, maxOffset, minSpan)
			continue
		}
		spans++
		require.Equal(t, []byte{9}, got, "a span leaves dst as it was")
		require.GreaterOrEqual(t, sp.Len, int64(minSpan))
		b, err := sp.Bytes(nil)
		require.NoError(t, err)
		require.Equal(t, want[1:1+len(b)], b, "the span is the start of Read's answer")
		records, last := 0, int64(-1)
		require.NoError(t, Split(b, func(h Header, _ []byte) error {
			records += int(h.NumRecords)
			last = h.LastOffset()
			return nil
		}))
		require.Equal(t, records, sp.Records)
		require.Equal(t, last, sp.LastOffset)
		if len(b) < len(want)-1 {
			fi, err := sp.file.Stat()
			require.NoError(t, err)
			require.Equal(t, fi.Size(), sp.Pos+sp.Len, "a span shorter than Read's answer ends with its segment")
		}
		require.NoError(t, sp.Close())
	}
	require.Greater(t, spans, 300, "the queries must exercise spans")
}

// TestSpanOutlivesItsSegment: a span taken before retention removed its
// segment and the log closed still reads the batches.
func TestSpanOutlivesItsSegment(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 1))
	l, bs := spanLog(t, rng)
	want, err := l.Read(nil, 0, 1<<20, 1<<40)
	require.NoError(t, err)
	_, sp, err := l.ReadSpan(nil, 0, 1<<20, 1<<40, 1)
	require.NoError(t, err)
	require.NotNil(t, sp)
	require.NoError(t, l.DeleteTo(bs[len(bs)-1].base)) // removes the first segments
	require.NoError(t, l.Close())
	b, err := sp.Bytes(nil)
	require.NoError(t, err)
	require.Equal(t, want[:len(b)], b)
	require.NoError(t, sp.Close())
}

// TestReadSpanMemFS: a file without a descriptor is read as by Read.
func TestReadSpanMemFS(t *testing.T) {
	l := openLog(t, memOptions(NewMemFS()))
	rng := rand.New(rand.NewPCG(1, 1))
	bs := genBatches(rng, 0, 100, 0)
	appendAll(t, l, rng, bs)
	want, err := l.Read(nil, 0, 1<<20, 1<<40)
	require.NoError(t, err)
	got, sp, err := l.ReadSpan(nil, 0, 1<<20, 1<<40, 1)
	require.NoError(t, err)
	require.Nil(t, sp)
	require.Equal(t, want, got)
}

// TestWalkTailMatchesHeaders: a walk that takes batches from the
// segment's tail finds exactly the span that reading the headers from the
// file does, as appends (one to many batches at a time, some larger than
// walk's header buffer), truncations and rolls go on; and the active
// segment's tail does cover reads at the log end.
func TestWalkTailMatchesHeaders(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 4))
	l := openLog(t, Options{FS: OS(), Dir: t.TempDir(), IndexIntervalBytes: 1 << 10, SegmentBytes: 256 << 10})
	t.Cleanup(func() { _ = l.Close() })
	var bs []testBatch
	off := int64(0)
	fromTail := 0
	for round := range 400 {
		if round%50 == 49 && len(bs) > 10 {
			// A follower cutting its log back: the tail is unknown again.
			k := len(bs) - 1 - rng.IntN(8)
			require.NoError(t, l.TruncateTo(bs[k].base))
			bs, off = bs[:k], bs[k].base
		}
		var add []testBatch
		for range 1 + rng.IntN(3) {
			n := 1 + rng.IntN(4)
			size := rng.IntN(3000)
			if rng.IntN(10) == 0 {
				size = 5000 + rng.IntN(20000) // larger than walk's buffer
			}
			add = append(add, testBatch{base: off, last: off + int64(n) - 1, data: makeBatch(off, n, 0, 0, size)})
			off += int64(n)
		}
		var set []byte
		for _, b := range add {
			set = append(set, b.data...)
		}
		require.NoError(t, l.Append(set))
		bs = append(bs, add...)

		for range 8 {
			// Mostly reads near the end, as followers do.
			offset := off - rng.Int64N(min(off, 40)+1)
			if rng.IntN(4) == 0 {
				offset = rng.Int64N(off + 1)
			}
			maxBytes := rng.IntN(100 << 10)
			maxOffset := offset + rng.Int64N(off-offset+5)
			l.mu.RLock()
			i := l.find(offset)
			s := l.segs[i]
			var got, want *Span
			var gotCont, wantCont bool
			var gotErr, wantErr error
			var gotLim, wantLim readLimits
			if offset < s.next && offset < maxOffset {
				lim := readLimits{budget: int64(maxBytes), maxOffset: maxOffset, first: true, minSpan: 1}
				winStart, end, winEnd, ok := s.window(offset, &lim)
				if ok {
					if len(s.tail) > 0 && int64(s.tail[0].pos) <= winStart {
						fromTail++
					}
					gotLim, wantLim = lim, lim
					got, gotCont, gotErr = s.walk(offset, winStart, end, winEnd, &gotLim)
					tail := s.tail
					s.tail = nil
					want, wantCont, wantErr = s.walk(offset, winStart, end, winEnd, &wantLim)
					s.tail = tail
				}
			}
			l.mu.RUnlock() // before any require: a failed test closes the log
			require.Equal(t, wantLim, gotLim, "offset %d", offset)
			require.NoError(t, gotErr)
			require.NoError(t, wantErr)
			require.Equal(t, want, got, "offset %d maxBytes %d maxOffset %d", offset, maxBytes, maxOffset)
			require.Equal(t, wantCont, gotCont, "offset %d", offset)
		}
	}
	require.Greater(t, len(l.segs), 3, "the appends must roll segments")
	require.Greater(t, fromTail, 1500, "most reads near the end must come from the tail")
}

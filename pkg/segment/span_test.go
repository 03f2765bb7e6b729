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

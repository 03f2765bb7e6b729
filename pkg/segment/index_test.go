package segment

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSegIndexAdd(t *testing.T) {
	x := newSegIndex()
	// (rel, pos, maxTs) of batches of 100 bytes with interval 250.
	x.add(0, 0, 50, 250)    // first batch: both entries
	x.add(2, 100, 70, 250)  // too close
	x.add(5, 200, 60, 250)  // too close
	x.add(6, 300, 40, 250)  // index point; max 70 grew since 50
	x.add(9, 400, 65, 250)  // too close
	x.add(10, 500, 20, 250) // too close
	x.add(12, 600, 30, 250) // index point; max still 70: offset entry only
	x.add(13, 700, 90, 250) // too close
	require.Equal(t, []offsetEntry{{0, 0}, {6, 300}, {12, 600}}, x.offsets)
	require.Equal(t, []timeEntry{{50, 0}, {70, 6}}, x.times)
	require.Equal(t, int64(90), x.maxTs)
	x.finalize()
	require.Equal(t, []timeEntry{{50, 0}, {70, 6}, {90, 13}}, x.times)
	x.finalize()
	require.Len(t, x.times, 3, "finalize is idempotent")

	pos, next := x.floor(7, 800)
	require.Equal(t, int64(300), pos)
	require.Equal(t, int64(600), next)
	pos, next = x.floor(12, 800)
	require.Equal(t, int64(600), pos)
	require.Equal(t, int64(800), next)
	require.Equal(t, int64(300), x.ceil(3, 800))
	require.Equal(t, int64(800), x.ceil(13, 800))

	x.truncate(12)
	require.Equal(t, []offsetEntry{{0, 0}, {6, 300}}, x.offsets)
	require.Equal(t, []timeEntry{{50, 0}, {70, 6}}, x.times)
}

// TestTimeStart checks the invariant timeStart relies on: scanning from
// its position finds the same batch as scanning everything, for random
// timestamps and intervals, with and without finalize.
func TestTimeStart(t *testing.T) {
	rng := rand.New(rand.NewPCG(40, 41))
	for range 300 {
		type batch struct {
			pos, maxTs int64
		}
		var bs []batch
		x := newSegIndex()
		interval := 1 + rng.IntN(500)
		pos := int64(0)
		n := 1 + rng.IntN(60)
		for i := range n {
			ts := int64(rng.IntN(1000))
			if rng.IntN(3) == 0 {
				ts = int64(i * 20)
			}
			bs = append(bs, batch{pos, ts})
			x.add(uint32(i*2), uint32(pos), ts, interval)
			pos += int64(61 + rng.IntN(200))
		}
		if rng.IntN(2) == 0 {
			x.finalize()
		}
		for ts := int64(-1); ts <= 1001; ts++ {
			want := -1
			for i, b := range bs {
				if b.maxTs >= ts {
					want = i
					break
				}
			}
			start := x.timeStart(ts)
			got := -1
			for i, b := range bs {
				if b.pos >= start && b.maxTs >= ts {
					got = i
					break
				}
			}
			require.Equal(t, want, got, "ts %d, interval %d", ts, interval)
		}
	}
}

func TestIndexCodec(t *testing.T) {
	offs := []offsetEntry{{0, 0}, {5, 4096}, {9, 8200}}
	b := encodeOffsetIndex(offs)
	require.Len(t, b, 24)
	got, err := decodeOffsetIndex(b)
	require.NoError(t, err)
	require.Equal(t, offs, got)

	times := []timeEntry{{-1, 0}, {100, 5}, {1 << 40, 9}}
	tb := encodeTimeIndex(times)
	require.Len(t, tb, 36)
	gotTimes, err := decodeTimeIndex(tb)
	require.NoError(t, err)
	require.Equal(t, times, gotTimes)

	empty, err := decodeOffsetIndex(nil)
	require.NoError(t, err)
	require.Empty(t, empty)

	be := binary.BigEndian
	badOffsets := map[string][]byte{
		"partial entry":     b[:20],
		"first pos not 0":   encodeOffsetIndex([]offsetEntry{{0, 3}}),
		"offset not rising": encodeOffsetIndex([]offsetEntry{{0, 0}, {5, 10}, {5, 20}}),
		"pos not rising":    encodeOffsetIndex([]offsetEntry{{0, 0}, {5, 10}, {6, 10}}),
	}
	for name, b := range badOffsets {
		_, err := decodeOffsetIndex(b)
		require.ErrorIs(t, err, errBadIndex, name)
	}
	wrapped := encodeTimeIndex(times)
	be.PutUint64(wrapped[12:], 1<<62)
	badTimes := map[string][]byte{
		"partial entry":  tb[:30],
		"ts not rising":  wrapped,
		"rel not rising": encodeTimeIndex([]timeEntry{{1, 0}, {2, 0}}),
	}
	for name, b := range badTimes {
		_, err := decodeTimeIndex(b)
		require.ErrorIs(t, err, errBadIndex, name)
	}
}

func TestCheckpointCodec(t *testing.T) {
	c := checkpoint{start: 42, recoveryPoint: 1 << 33, clean: true}
	b := encodeCheckpoint(c)
	require.Len(t, b, checkpointSize)
	got, err := decodeCheckpoint(b)
	require.NoError(t, err)
	require.Equal(t, c, got)
	for i := range b {
		bad := append([]byte(nil), b...)
		bad[i] ^= 0x10
		_, err := decodeCheckpoint(bad)
		require.Error(t, err, "flipped byte %d", i)
	}
	_, err = decodeCheckpoint(b[:len(b)-1])
	require.Error(t, err)
}

func TestSegmentName(t *testing.T) {
	require.Equal(t, "00000000000000001234.log", segmentName(1234, logSuffix))
	base, ok := parseSegmentName("00000000000000001234.log", logSuffix)
	require.True(t, ok)
	require.Equal(t, int64(1234), base)
	for _, name := range []string{"1234.log", "0000000000000000123x.log", "00000000000000001234.index", "99999999999999999999.log", "-0000000000000001234.log"} {
		_, ok := parseSegmentName(name, logSuffix)
		require.False(t, ok, name)
	}
}

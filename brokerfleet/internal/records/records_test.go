package records

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/pierrec/lz4/v4"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratamq/strata/pkg/segment"
)

// record encodes one record.
func record(tsDelta int64, offDelta int32, key, value []byte, headers ...[2][]byte) []byte {
	var body []byte
	body = append(body, 0)
	body = binary.AppendVarint(body, tsDelta)
	body = binary.AppendVarint(body, int64(offDelta))
	field := func(b []byte) {
		if b == nil {
			body = binary.AppendVarint(body, -1)
			return
		}
		body = binary.AppendVarint(body, int64(len(b)))
		body = append(body, b...)
	}
	field(key)
	field(value)
	body = binary.AppendVarint(body, int64(len(headers)))
	for _, h := range headers {
		field(h[0])
		field(h[1])
	}
	return append(binary.AppendVarint(nil, int64(len(body))), body...)
}

// batch wraps body (records, compressed with codec) in a batch header.
func batch(codec int8, n int32, body []byte) ([]byte, segment.Header) {
	b := make([]byte, segment.HeaderSize, segment.HeaderSize+len(body))
	be := binary.BigEndian
	be.PutUint32(b[8:], uint32(segment.HeaderSize-12+len(body)))
	b[16] = 2
	be.PutUint16(b[21:], uint16(codec))
	be.PutUint32(b[23:], uint32(max(n-1, 0)))
	be.PutUint64(b[27:], 1000)
	be.PutUint64(b[35:], 2000)
	be.PutUint64(b[43:], ^uint64(0))
	be.PutUint16(b[51:], ^uint16(0))
	be.PutUint32(b[53:], ^uint32(0))
	be.PutUint32(b[57:], uint32(n))
	b = append(b, body...)
	be.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	h, err := segment.ParseHeader(b)
	if err != nil {
		panic(err)
	}
	return b, h
}

var codecs = map[string]kgo.CompressionCodec{
	"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
	"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
}

func compress(t testing.TB, c kgo.CompressionCodec, raw []byte) ([]byte, int8) {
	if c == kgo.NoCompression() {
		return raw, 0
	}
	comp, err := kgo.DefaultCompressor(c)
	require.NoError(t, err)
	out, typ := comp.Compress(new(bytes.Buffer), raw)
	return bytes.Clone(out), int8(typ)
}

func TestEachReadsEveryCodec(t *testing.T) {
	var raw []byte
	for i := range 200 {
		raw = append(raw, record(int64(i), int32(i), []byte("k"), append([]byte{0, 0, 0, 0, byte(i)}, bytes.Repeat([]byte("v"), 500)...), [2][]byte{[]byte("h"), nil})...)
	}
	for name, c := range codecs {
		t.Run(name, func(t *testing.T) {
			body, codec := compress(t, c, raw)
			b, h := batch(codec, 200, body)
			var got []Record
			err := Each(b, h, Bound(1<<20, len(b)), Values, func(r *Record) bool {
				r.Value = bytes.Clone(r.Value)
				got = append(got, *r)
				return true
			})
			require.NoError(t, err)
			require.Len(t, got, 200)
			for i, r := range got {
				require.EqualValues(t, i, r.OffsetDelta)
				require.EqualValues(t, i, r.TimestampDelta)
				require.EqualValues(t, 505, r.ValueLen)
				require.Equal(t, []byte{0, 0, 0, 0, byte(i), 'v', 'v', 'v'}, r.Value)
			}
			n := 0
			require.NoError(t, Each(b, h, Bound(1<<20, len(b)), Offsets, func(*Record) bool { n++; return n < 3 }))
			require.Equal(t, 3, n, "stops when fn returns false")
		})
	}
}

func TestEachMalformed(t *testing.T) {
	good := record(1, 0, nil, []byte("value"))
	for _, tt := range []struct {
		name   string
		body   []byte
		n      int32
		fields Fields
	}{
		{"no records", nil, 1, Offsets},
		{"bad length varint", []byte{0x80}, 1, Offsets},
		{"length past the end", binary.AppendVarint(nil, 50), 1, Offsets},
		{"negative length", binary.AppendVarint(nil, -3), 1, Offsets},
		{"empty record", binary.AppendVarint(nil, 0), 1, Offsets},
		{"no timestamp delta", append(binary.AppendVarint(nil, 1), 0), 1, Offsets},
		{"no offset delta", append(binary.AppendVarint(nil, 2), 0, 2), 1, Offsets},
		{"fewer records than the count", good, 2, Values},
		{"bytes after the last record", append(bytes.Clone(good), 0), 1, Values},
		{"value past the record", append(binary.AppendVarint(nil, 5), 0, 0, 0, 0, 40), 1, Values},
		{"negative header count", append(binary.AppendVarint(nil, 6), 0, 0, 0, 0, 0, 1), 1, Values},
		{"record longer than its fields", append(binary.AppendVarint(nil, 7), 0, 0, 0, 0, 0, 0, 0), 1, Values},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b, h := batch(0, tt.n, tt.body)
			err := Each(b, h, 1<<20, tt.fields, func(*Record) bool { return true })
			require.ErrorIs(t, err, ErrMalformed)
		})
	}
	t.Run("a codec stream that does not decode", func(t *testing.T) {
		for _, codec := range []int8{1, 2, 3, 4} {
			b, h := batch(codec, 1, good)
			err := Each(b, h, 1<<20, Values, func(*Record) bool { return true })
			require.ErrorIs(t, err, ErrMalformed, "codec %d", codec)
		}
		b, h := batch(7, 1, good)
		require.ErrorIs(t, Each(b, h, 1<<20, Values, func(*Record) bool { return true }), ErrMalformed)
	})
}

// zstdBomb is about size bytes of zstd: one frame with a 128 KiB window, a
// raw block holding prefix, then RLE blocks of zeros, each inflating to
// 128 KiB (32 GiB per MiB of input).
func zstdBomb(prefix []byte, size int) []byte {
	b := binary.LittleEndian.AppendUint32(nil, 0xFD2FB528)
	b = append(b, 0x00, 7<<3) // no content size, not single segment; window 2^(10+7)
	block := func(typ, size uint32, last bool) {
		h := size<<3 | typ<<1
		if last {
			h |= 1
		}
		b = append(b, byte(h), byte(h>>8), byte(h>>16))
	}
	block(0, uint32(len(prefix)), false)
	b = append(b, prefix...)
	for len(b) < size {
		block(1, 128<<10, len(b)+8 >= size)
		b = append(b, 0)
	}
	return b
}

// bombPrefix is a record that claims a value of about 1 GiB.
func bombPrefix() []byte {
	var body []byte
	body = append(body, 0, 0, 0)
	body = binary.AppendVarint(body, -1)
	body = binary.AppendVarint(body, 1<<30)
	return append(binary.AppendVarint(nil, 1<<30+16), body...)
}

// allocated returns the bytes fn allocates.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestBombsStopAtTheBound(t *testing.T) {
	const limit = 16 << 20
	zeros := make([]byte, 1<<20)
	stream := func(w io.WriteCloser, total int) {
		_, err := w.Write(bombPrefix())
		require.NoError(t, err)
		for n := 0; n < total; n += len(zeros) {
			_, err := w.Write(zeros)
			require.NoError(t, err)
		}
		require.NoError(t, w.Close())
	}
	bombs := map[string]func() (int8, []byte){
		"zstd": func() (int8, []byte) { return 4, zstdBomb(bombPrefix(), 1<<20) },
		"gzip": func() (int8, []byte) {
			var buf bytes.Buffer
			w, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
			stream(w, 64<<20)
			return 1, buf.Bytes()
		},
		"lz4": func() (int8, []byte) {
			var buf bytes.Buffer
			stream(lz4.NewWriter(&buf), 64<<20)
			return 3, buf.Bytes()
		},
		"snappy raw block": func() (int8, []byte) {
			return 2, s2.EncodeSnappy(nil, append(bombPrefix(), make([]byte, 20<<20)...))
		},
		"snappy xerial chunks": func() (int8, []byte) {
			b := append(bytes.Clone(xerialHeader), 0, 0, 0, 1, 0, 0, 0, 1)
			chunk := s2.EncodeSnappy(nil, make([]byte, 1<<20))
			first := s2.EncodeSnappy(nil, bombPrefix())
			b = binary.BigEndian.AppendUint32(b, uint32(len(first)))
			b = append(b, first...)
			for range 20 {
				b = binary.BigEndian.AppendUint32(b, uint32(len(chunk)))
				b = append(b, chunk...)
			}
			return 2, b
		},
	}
	for name, make := range bombs {
		t.Run(name, func(t *testing.T) {
			codec, body := make()
			b, h := batch(codec, 1, body)
			var err error
			alloc := allocated(func() {
				err = Each(b, h, limit, Values, func(*Record) bool { return true })
			})
			require.ErrorIs(t, err, ErrTooLarge)
			t.Logf("%d-byte batch: %v; %d KiB allocated", len(b), err, alloc>>10)
			// Codec state only: a zstd window of 128 KiB, lz4 blocks of
			// 4 MiB, snappy blocks of 1 MiB (the raw block: up to the
			// limit, which it declares past).
			require.Less(t, alloc, uint64(10<<20), "allocated %d bytes", alloc)
		})
	}
}

func TestZstdWindowAndContentSize(t *testing.T) {
	// A frame declaring a 1 GiB window is refused before its window is
	// allocated; one declaring a content size past the limit too.
	wide := binary.LittleEndian.AppendUint32(nil, 0xFD2FB528)
	wide = append(wide, 0x00, 20<<3, 1, 0, 0, 0) // window 2^30, then an empty last raw block
	b, h := batch(4, 1, wide)
	alloc := allocated(func() {
		require.ErrorIs(t, Each(b, h, 16<<20, Offsets, func(*Record) bool { return true }), ErrTooLarge)
	})
	require.Less(t, alloc, uint64(2<<20))

	single := binary.LittleEndian.AppendUint32(nil, 0xFD2FB528)
	single = append(single, 0xE0)                            // single segment, 8-byte content size
	single = binary.LittleEndian.AppendUint64(single, 1<<30) // 1 GiB
	single = append(single, 1, 0, 0)                         // an empty last raw block
	b, h = batch(4, 1, single)
	alloc = allocated(func() {
		require.ErrorIs(t, Each(b, h, 16<<20, Offsets, func(*Record) bool { return true }), ErrTooLarge)
	})
	require.Less(t, alloc, uint64(2<<20))
}

func TestBound(t *testing.T) {
	require.EqualValues(t, Factor*1048588, Bound(1048588, 100))
	require.EqualValues(t, Factor*5000, Bound(100, 5000), "a batch stored under a larger limit")
	require.Positive(t, Bound(0, 0))
}

func TestErrorsAreDistinct(t *testing.T) {
	require.False(t, errors.Is(ErrTooLarge, ErrMalformed))
}

func FuzzEach(f *testing.F) {
	raw := append(record(1, 0, []byte("k"), []byte("v")), record(2, 1, nil, nil, [2][]byte{[]byte("h"), []byte("x")})...)
	for _, c := range codecs {
		body, codec := compress(f, c, raw)
		f.Add(codec, body)
	}
	f.Add(int8(4), zstdBomb(bombPrefix(), 4<<10))
	f.Fuzz(func(t *testing.T, codec int8, body []byte) {
		b, h := batch(codec&7, 2, body)
		for _, fields := range []Fields{Offsets, Values} {
			err := Each(b, h, 1<<20, fields, func(*Record) bool { return true })
			if err != nil && !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooLarge) {
				t.Fatalf("unclassified error: %v", err)
			}
		}
	})
}

// zstdRecordsBomb is n records of a 1 MiB value each, as zstd of about
// 50 bytes per record: each record's fields in a raw block, then RLE
// blocks of zeros for its value and (the last zero) its header count.
func zstdRecordsBomb(n int) []byte {
	z := binary.LittleEndian.AppendUint32(nil, 0xFD2FB528)
	z = append(z, 0x00, 7<<3)
	block := func(typ, size uint32, last bool) {
		h := size<<3 | typ<<1
		if last {
			h |= 1
		}
		z = append(z, byte(h), byte(h>>8), byte(h>>16))
	}
	const value = 1<<20 - 1
	for i := range n {
		var fields []byte
		fields = append(fields, 0, 0) // attributes, timestamp delta
		fields = binary.AppendVarint(fields, int64(i))
		fields = binary.AppendVarint(fields, -1) // null key
		fields = binary.AppendVarint(fields, value)
		rec := append(binary.AppendVarint(nil, int64(len(fields)+value+1)), fields...)
		block(0, uint32(len(rec)), false)
		z = append(z, rec...)
		for j := range 8 {
			block(1, 128<<10, i == n-1 && j == 7)
			z = append(z, 0)
		}
	}
	return z
}

// TestManyRecordsBomb: records each within the limit, 1,000 of them (1 GiB
// from 50 KB): the stream stops once their sum passes the limit; a record
// longer than the whole limit is refused before it is inflated.
func TestManyRecordsBomb(t *testing.T) {
	body := zstdRecordsBomb(1000)
	b, h := batch(4, 1000, body)
	n := 0
	var err error
	alloc := allocated(func() {
		err = Each(b, h, 16<<20, Values, func(*Record) bool { n++; return true })
	})
	require.ErrorIs(t, err, ErrTooLarge)
	require.Equal(t, 15, n, "16 MiB hold 15 whole records of 1 MiB")
	require.Less(t, alloc, uint64(2<<20))
	t.Logf("%d-byte batch of 1,000 records of 1 MiB: %d records read, %d KiB allocated", len(b), n, alloc>>10)

	b, h = batch(4, 1, zstdBomb(bombPrefix(), 1<<20))
	start := time.Now()
	require.ErrorIs(t, Each(b, h, 16<<20, Offsets, func(*Record) bool { return true }), ErrTooLarge)
	require.Less(t, time.Since(start), time.Second, "the 1 GiB record is refused by its length")
}

package records

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/pkg/segment"
)

type kv struct {
	key, value []byte // nil value: a tombstone
	ts         int64
}

// makeBatch encodes a batch at base with the records, compressed by codec,
// with producer fields set, as a client would.
func makeBatch(t testing.TB, base int64, recs []kv, codec kgo.CompressionCodec) []byte {
	t.Helper()
	var body []byte
	first := recs[0].ts
	maxTs := first
	for i, r := range recs {
		rec := kmsg.Record{TimestampDelta64: r.ts - first, OffsetDelta: int32(i), Key: r.key, Value: r.value}
		rec.Length = int32(len(rec.AppendTo(nil)) - 1) // AppendTo writes the length varint first
		body = rec.AppendTo(body)
		maxTs = max(maxTs, r.ts)
	}
	var attrs int16
	if codec != kgo.NoCompression() {
		c, err := kgo.DefaultCompressor(codec)
		require.NoError(t, err)
		var buf bytes.Buffer
		out, used := c.Compress(&buf, body)
		require.NotEqual(t, kgo.CodecError, used)
		body = append([]byte(nil), out...)
		attrs = int16(used)
	}
	b := kmsg.RecordBatch{
		FirstOffset: base, Magic: 2, Attributes: attrs, LastOffsetDelta: int32(len(recs) - 1),
		FirstTimestamp: first, MaxTimestamp: maxTs, ProducerID: 77, ProducerEpoch: 3, FirstSequence: 10,
		NumRecords: int32(len(recs)), Records: body, PartitionLeaderEpoch: 5,
	}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], castagnoli))
	return raw
}

func parse(t testing.TB, batch []byte) (segment.Header, []Entry) {
	t.Helper()
	h, err := segment.ParseHeader(batch)
	require.NoError(t, err)
	require.True(t, segment.CheckCRC(batch))
	body, err := Body(batch, h, 1<<20)
	require.NoError(t, err)
	var out []Entry
	require.NoError(t, Entries(body, h, func(r Entry) error { out = append(out, r); return nil }))
	return h, out
}

// clientRecords decodes batch the way franz-go's consumer does.
func clientRecords(t testing.TB, batch []byte) []kmsg.Record {
	t.Helper()
	var b kmsg.RecordBatch
	require.NoError(t, b.ReadFrom(batch))
	body, err := kgo.DefaultDecompressor().Decompress(b.Records, kgo.CompressionCodecType(b.Attributes&7))
	require.NoError(t, err)
	var out []kmsg.Record
	for range b.NumRecords {
		length, n := binary.Varint(body)
		var r kmsg.Record
		require.NoError(t, r.ReadFrom(body[:n+int(length)]))
		body = body[n+int(length):]
		out = append(out, r)
	}
	require.Empty(t, body)
	return out
}

func TestRebuildKeepsHeaderAndRecords(t *testing.T) {
	recs := []kv{
		{[]byte("a"), []byte("1"), 1000}, {[]byte("b"), nil, 1003}, {[]byte("a"), []byte("2"), 1001},
		{nil, []byte("keyless"), 1010}, {[]byte("c"), []byte("3"), 1007},
	}
	for name, codec := range codecs {
		t.Run(name, func(t *testing.T) {
			batch := makeBatch(t, 100, recs, codec)
			h, got := parse(t, batch)
			require.Len(t, got, len(recs))
			for i, r := range got {
				require.Equal(t, int64(100+i), r.Offset)
				require.Equal(t, recs[i].ts, r.Timestamp)
				require.Equal(t, recs[i].key, r.Key)
				require.Equal(t, recs[i].value == nil, r.Null)
			}

			// Keep records 1 and 4.
			var bld Builder
			bld.Add(got[1])
			bld.Add(got[4])
			out, err := bld.Build(nil, batch, h, -1)
			require.NoError(t, err)
			nh, kept := parse(t, out)
			require.Equal(t, h.BaseOffset, nh.BaseOffset)
			require.Equal(t, h.LastOffsetDelta, nh.LastOffsetDelta, "the last offset stays")
			require.Equal(t, h.ProducerID, nh.ProducerID)
			require.Equal(t, h.ProducerEpoch, nh.ProducerEpoch)
			require.Equal(t, h.BaseSequence, nh.BaseSequence)
			require.Equal(t, h.FirstTimestamp, nh.FirstTimestamp)
			require.Equal(t, h.MaxTimestamp, nh.MaxTimestamp)
			require.Equal(t, h.PartitionLeaderEpoch, nh.PartitionLeaderEpoch)
			require.Equal(t, h.Compression(), nh.Compression())
			require.EqualValues(t, 2, nh.NumRecords)
			require.Equal(t, []int64{101, 104}, []int64{kept[0].Offset, kept[1].Offset})
			require.Equal(t, []int64{1003, 1007}, []int64{kept[0].Timestamp, kept[1].Timestamp})
			cr := clientRecords(t, out)
			require.Equal(t, "c", string(cr[1].Key))
			require.EqualValues(t, 4, cr[1].OffsetDelta)

			// A delete horizon: record timestamps survive the new base.
			bld.Reset()
			bld.AddRebased(got[1], 99999)
			bld.AddRebased(got[4], 99999)
			out, err = bld.Build(nil, batch, h, 99999)
			require.NoError(t, err)
			nh, kept = parse(t, out)
			hz, ok := DeleteHorizon(nh)
			require.True(t, ok)
			require.EqualValues(t, 99999, hz)
			require.Equal(t, []int64{1003, 1007}, []int64{kept[0].Timestamp, kept[1].Timestamp})
			require.Equal(t, h.MaxTimestamp, nh.MaxTimestamp)
			_, ok = DeleteHorizon(h)
			require.False(t, ok)

			// No records: Kafka's empty batch.
			bld.Reset()
			out, err = bld.Build(nil, batch, h, -1)
			require.NoError(t, err)
			nh, kept = parse(t, out)
			require.Empty(t, kept)
			require.Equal(t, segment.HeaderSize, len(out))
			require.EqualValues(t, 0, nh.Compression())
			require.Equal(t, h.LastOffset(), nh.LastOffset())
			require.Equal(t, h.BaseSequence, nh.BaseSequence)
		})
	}
}

func TestCheckKeys(t *testing.T) {
	for name, codec := range codecs {
		ok := makeBatch(t, 0, []kv{{[]byte("k"), []byte("v"), 1}, {[]byte(""), nil, 2}}, codec)
		h, _ := segment.ParseHeader(ok)
		require.NoError(t, CheckKeys(ok, h, 1<<20), name)
		bad := makeBatch(t, 0, []kv{{[]byte("k"), []byte("v"), 1}, {nil, []byte("v"), 2}}, codec)
		h, _ = segment.ParseHeader(bad)
		require.ErrorContains(t, CheckKeys(bad, h, 1<<20), "record 1 has no key", name)
		// Keys are checked as a stream, under the same bound as Each.
		bomb := makeBatch(t, 0, []kv{{[]byte("k"), make([]byte, 4<<20), 1}}, codec)
		h, _ = segment.ParseHeader(bomb)
		if name != "none" {
			require.ErrorIs(t, CheckKeys(bomb, h, 1<<20), ErrTooLarge, name)
		}
		require.NoError(t, CheckKeys(bomb, h, 8<<20), name)
	}
}

// A batch that decompresses past the limit fails without allocating it.
func TestDecompressionLimit(t *testing.T) {
	big := make([]byte, 8<<20) // compresses to almost nothing
	for name, codec := range codecs {
		if name == "none" {
			continue
		}
		batch := makeBatch(t, 0, []kv{{[]byte("k"), big, 1}}, codec)
		require.Less(t, len(batch), 1<<20, name)
		h, _ := segment.ParseHeader(batch)
		_, err := Body(batch, h, 1<<20)
		require.ErrorIs(t, err, ErrTooLarge, name)
		body, err := Body(batch, h, 16<<20)
		require.NoError(t, err, name)
		require.Greater(t, len(body), 8<<20, name)
	}
}

func TestMalformed(t *testing.T) {
	batch := makeBatch(t, 0, []kv{{[]byte("k"), []byte("v"), 1}, {[]byte("k2"), []byte("v2"), 2}}, kgo.NoCompression())
	h, _ := segment.ParseHeader(batch)
	body, _ := Body(batch, h, 1<<20)
	for cut := range len(body) {
		err := Entries(body[:cut], h, func(Entry) error { return nil })
		require.ErrorIs(t, err, ErrMalformed, "cut at %d", cut)
	}
	h.NumRecords = 1
	require.ErrorIs(t, Entries(body, h, func(Entry) error { return nil }), ErrMalformed, "bytes left over")
	h.NumRecords, h.LastOffsetDelta = 2, 0
	require.ErrorIs(t, Entries(body, h, func(Entry) error { return nil }), ErrMalformed, "offset delta past the batch")
}

func FuzzRebuild(f *testing.F) {
	for name, codec := range codecs {
		f.Add(makeBatch(f, 0, []kv{{[]byte(name), []byte("v"), 1}, {nil, nil, 2}}, codec))
	}
	f.Fuzz(func(t *testing.T, batch []byte) {
		h, err := segment.ParseHeader(batch)
		if err != nil || h.Size() > len(batch) {
			return
		}
		body, err := Body(batch, h, 1<<20)
		if err != nil {
			return
		}
		var b Builder
		_ = Entries(body, h, func(r Entry) error {
			b.Add(r)
			return nil
		})
		if _, err := b.Build(nil, batch, h, -1); err != nil && b.Len() > 0 {
			t.Logf("%v", fmt.Sprint(err))
		}
	})
}

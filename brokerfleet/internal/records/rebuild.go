package records

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratamq/strata/pkg/segment"
)

// Rebuilding batches, for the log cleaner of compacted topics: Body
// inflates a batch's records whole (bounded like Each: the cleaner needs
// them in memory to copy the ones it keeps), Entries walks them with their
// keys, and a Builder writes a batch holding a subset of them with the
// original header fields (base and last offset, leader epoch, producer id,
// epoch and base sequence, timestamps, flags), recompressed with the
// original codec.

// Attribute bits and field positions of the batch header (Kafka's
// DefaultRecordBatch).
const (
	attrCompression   = 0x07
	attrDeleteHorizon = 0x40 // KIP-534: FirstTimestamp holds the delete horizon
	offAttributes     = 21
	offFirstTimestamp = 27
	offLength         = 8
	offNumRecords     = 57
	offCRC            = 17
	lengthPrefix      = 12
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Body returns the records section of batch (whose header is h),
// decompressed, failing with ErrTooLarge past limit bytes (see Bound) and
// ErrMalformed when the codec's stream does not decode. An uncompressed
// batch's body is a subslice of batch.
func Body(batch []byte, h segment.Header, limit int64) ([]byte, error) {
	if h.Size() > len(batch) || h.Size() < segment.HeaderSize {
		return nil, fmt.Errorf("batch at %d: %d bytes of %d: %w", h.BaseOffset, len(batch), h.Size(), ErrMalformed)
	}
	raw := batch[segment.HeaderSize:h.Size()]
	if h.Compression() == codecNone {
		return raw, nil
	}
	in, release, err := inflate(raw, h.Compression(), limit)
	if err != nil {
		return nil, fmt.Errorf("batch at %d: %w", h.BaseOffset, err)
	}
	defer release()
	var out bytes.Buffer
	if _, err := out.ReadFrom(in); err != nil {
		return nil, fmt.Errorf("batch at %d: %w", h.BaseOffset, readErr(err))
	}
	return out.Bytes(), nil
}

// Entry is one record of a batch, as Entries yields it.
type Entry struct {
	Offset    int64
	Timestamp int64
	Key       []byte // nil: a null key
	Null      bool   // the value is null: a tombstone
	Raw       []byte // the whole record, its length prefix included
	// tail is Raw from the offset delta on (for re-encoding timestamps).
	tail []byte
	attr byte
}

// Entries calls fn for every record of body (a batch's decompressed
// records section; h its header) in order. Entry slices point into body.
// It checks that there are exactly h.NumRecords records, each inside the
// batch's offsets, and stops at the first error fn returns.
func Entries(body []byte, h segment.Header, fn func(r Entry) error) error {
	base := h.FirstTimestamp // with a delete horizon too: deltas follow the field
	for i := int32(0); i < h.NumRecords; i++ {
		length, n := binary.Varint(body)
		if n <= 0 || length < 1 || length > int64(len(body)-n) {
			return fmt.Errorf("record %d length: %w", i, ErrMalformed)
		}
		rec := body[n : n+int(length)]
		raw := body[:n+int(length)]
		body = body[n+int(length):]
		r := Entry{Raw: raw, attr: rec[0]}
		p := rec[1:]
		tsDelta, k := binary.Varint(p)
		if k <= 0 {
			return fmt.Errorf("record %d timestamp: %w", i, ErrMalformed)
		}
		p = p[k:]
		r.tail = p
		offDelta, k := binary.Varint(p)
		if k <= 0 || offDelta < 0 || offDelta > int64(h.LastOffsetDelta) {
			return fmt.Errorf("record %d offset delta: %w", i, ErrMalformed)
		}
		p = p[k:]
		keyLen, k := binary.Varint(p)
		if k <= 0 || keyLen < -1 || keyLen > int64(len(p)-k) {
			return fmt.Errorf("record %d key: %w", i, ErrMalformed)
		}
		p = p[k:]
		if keyLen >= 0 {
			r.Key = p[:keyLen:keyLen]
			p = p[keyLen:]
		}
		valLen, k := binary.Varint(p)
		if k <= 0 || valLen < -1 || valLen > int64(len(p)-k) {
			return fmt.Errorf("record %d value: %w", i, ErrMalformed)
		}
		r.Null = valLen < 0
		r.Offset = h.BaseOffset + offDelta
		r.Timestamp = base + tsDelta
		if err := fn(r); err != nil {
			return err
		}
	}
	if len(body) != 0 {
		return fmt.Errorf("%d bytes after the last record: %w", len(body), ErrMalformed)
	}
	return nil
}

// DeleteHorizon returns the delete horizon a cleaner stamped into the
// batch (KIP-534), if any.
func DeleteHorizon(h segment.Header) (int64, bool) {
	if h.Attributes&attrDeleteHorizon == 0 {
		return 0, false
	}
	return h.FirstTimestamp, true
}

// Builder rebuilds one batch from a subset of its records.
type Builder struct {
	body      []byte
	n         int32
	comp      kgo.Compressor
	compCodec kgo.CompressionCodecType
	cbuf      bytes.Buffer
}

// compressors by codec, made on first use.
var compressors = map[kgo.CompressionCodecType]func() kgo.CompressionCodec{
	kgo.CodecGzip:   kgo.GzipCompression,
	kgo.CodecSnappy: kgo.SnappyCompression,
	kgo.CodecLz4:    kgo.Lz4Compression,
	kgo.CodecZstd:   kgo.ZstdCompression,
}

// Reset starts a new batch.
func (b *Builder) Reset() { b.body, b.n = b.body[:0], 0 }

// Add keeps a record (as Entries yielded it) in the batch being built.
func (b *Builder) Add(r Entry) {
	b.body = append(b.body, r.Raw...)
	b.n++
}

// AddRebased keeps a record whose timestamp delta must now be relative to
// firstTs (the batch's FirstTimestamp changed: a delete horizon).
func (b *Builder) AddRebased(r Entry, firstTs int64) {
	var rec []byte
	rec = append(rec, r.attr)
	rec = binary.AppendVarint(rec, r.Timestamp-firstTs)
	rec = append(rec, r.tail...)
	b.body = binary.AppendVarint(b.body, int64(len(rec)))
	b.body = append(b.body, rec...)
	b.n++
}

// Len returns the number of records added since Reset.
func (b *Builder) Len() int32 { return b.n }

// Build appends to dst the batch h with the records added: the header's
// offsets, leader epoch, producer fields, timestamps and flags as in h
// (FirstTimestamp replaced by horizon, with the delete horizon flag, when
// horizon >= 0), compressed with h's codec, with a new length, record
// count and CRC. With no records added it is Kafka's empty batch: header
// only, uncompressed, FirstTimestamp = MaxTimestamp (or the horizon).
func (b *Builder) Build(dst []byte, hdr []byte, h segment.Header, horizon int64) ([]byte, error) {
	start := len(dst)
	dst = append(dst, hdr[:segment.HeaderSize]...)
	out := dst[start:]
	attrs := uint16(h.Attributes)
	body := b.body
	if b.n == 0 {
		attrs &^= attrCompression | attrDeleteHorizon
		binary.BigEndian.PutUint64(out[offFirstTimestamp:], uint64(h.MaxTimestamp))
		body = nil
	} else if codec := kgo.CompressionCodecType(h.Compression()); codec != kgo.CodecNone {
		mk, ok := compressors[codec]
		if !ok {
			return dst[:start], fmt.Errorf("compression codec %d: %w", codec, ErrMalformed)
		}
		if b.comp == nil || b.compCodec != codec {
			c, err := kgo.DefaultCompressor(mk())
			if err != nil {
				return dst[:start], err
			}
			b.comp, b.compCodec = c, codec
		}
		b.cbuf.Reset()
		c, used := b.comp.Compress(&b.cbuf, body)
		if used != codec {
			return dst[:start], fmt.Errorf("records: compress with codec %d failed", codec)
		}
		body = c
	}
	if horizon >= 0 {
		attrs |= attrDeleteHorizon
		binary.BigEndian.PutUint64(out[offFirstTimestamp:], uint64(horizon))
	}
	binary.BigEndian.PutUint16(out[offAttributes:], attrs)
	binary.BigEndian.PutUint32(out[offNumRecords:], uint32(b.n))
	dst = append(dst, body...)
	out = dst[start:]
	binary.BigEndian.PutUint32(out[offLength:], uint32(len(out)-lengthPrefix))
	binary.BigEndian.PutUint32(out[offCRC:], crc32.Checksum(out[offAttributes:], castagnoli))
	return dst, nil
}

// CheckKeys returns an error naming the first record of batch (header h)
// without a key: a compacted topic refuses them (INVALID_RECORD in Kafka
// 4). The batch is read as a stream like Each (limit: see Bound); an
// error of Each wraps ErrTooLarge or ErrMalformed.
func CheckKeys(batch []byte, h segment.Header, limit int64) error {
	var bad error
	err := Each(batch, h, limit, Values, func(r *Record) bool {
		if r.KeyLen < 0 {
			bad = fmt.Errorf("record %d has no key", r.Index)
		}
		return bad == nil
	})
	if err != nil {
		return err
	}
	return bad
}

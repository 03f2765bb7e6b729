// Package records reads and writes the records inside a Kafka RecordBatch
// v2: decompression bounded by a byte limit (so a small hostile batch
// cannot make the broker allocate gigabytes), a parser of the record
// framing that yields offsets, timestamps, keys and whether a value is
// null, and batches rebuilt from a subset of a batch's records with the
// original header fields (producer id, epoch, base sequence, base and
// last offset, timestamps), recompressed with the original codec. The log
// cleaner rewrites batches with it; the produce path checks keys with it.
package records

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratamq/strata/pkg/segment"
)

// ErrTooLarge is returned when a batch's records would decompress to more
// than the limit given.
var ErrTooLarge = errors.New("records: decompressed batch exceeds the limit")

// ErrMalformed is returned when the records of a batch do not parse.
var ErrMalformed = errors.New("records: malformed record")

// Attribute bits of the batch header (Kafka's DefaultRecordBatch).
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
// decompressed, failing with ErrTooLarge past limit bytes. An uncompressed
// batch's body is a subslice of batch.
func Body(batch []byte, h segment.Header, limit int) ([]byte, error) {
	raw := batch[segment.HeaderSize:h.Size()]
	codec := h.Compression()
	if codec == 0 {
		return raw, nil
	}
	var r io.Reader
	switch kgo.CompressionCodecType(codec) {
	case kgo.CodecGzip:
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("%w: gzip: %v", ErrMalformed, err)
		}
		r = zr
	case kgo.CodecSnappy:
		return snappyBody(raw, limit)
	case kgo.CodecLz4:
		r = lz4.NewReader(bytes.NewReader(raw))
	case kgo.CodecZstd:
		zr, _ := zstdPool.Get().(*zstd.Decoder)
		if zr == nil {
			var err error
			// The output is bounded below; the window the decoder may
			// allocate is bounded here.
			if zr, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
				zstd.WithDecoderMaxWindow(64<<20)); err != nil {
				return nil, fmt.Errorf("%w: zstd: %v", ErrMalformed, err)
			}
		}
		if err := zr.Reset(bytes.NewReader(raw)); err != nil {
			return nil, fmt.Errorf("%w: zstd: %v", ErrMalformed, err)
		}
		defer func() {
			_ = zr.Reset(nil)
			zstdPool.Put(zr)
		}()
		r = zr
	default:
		return nil, fmt.Errorf("%w: unknown compression codec %d", ErrMalformed, codec)
	}
	var out bytes.Buffer
	n, err := out.ReadFrom(io.LimitReader(r, int64(limit)+1))
	if n > int64(limit) {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, limit)
	}
	if err != nil {
		if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) {
			return nil, fmt.Errorf("%w: %v", ErrTooLarge, err)
		}
		return nil, fmt.Errorf("%w: decompress: %v", ErrMalformed, err)
	}
	return out.Bytes(), nil
}

// zstdPool holds stream decoders (costly to make) between batches.
var zstdPool sync.Pool

// xerialHeader starts snappy data in the Java client's framed format.
var xerialHeader = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// snappyBody decodes raw snappy or xerial-framed snappy, checking each
// block's declared length before decoding it.
func snappyBody(raw []byte, limit int) ([]byte, error) {
	decode := func(dst, block []byte) ([]byte, error) {
		n, err := s2.DecodedLen(block)
		if err != nil {
			return nil, fmt.Errorf("%w: snappy: %v", ErrMalformed, err)
		}
		if len(dst)+n > limit {
			return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, limit)
		}
		out, err := s2.Decode(nil, block)
		if err != nil {
			return nil, fmt.Errorf("%w: snappy: %v", ErrMalformed, err)
		}
		return append(dst, out...), nil
	}
	if !bytes.HasPrefix(raw, xerialHeader) {
		return decode(nil, raw)
	}
	if len(raw) < 16 {
		return nil, fmt.Errorf("%w: xerial snappy header", ErrMalformed)
	}
	var out []byte
	for rest := raw[16:]; len(rest) > 0; {
		if len(rest) < 4 {
			return nil, fmt.Errorf("%w: xerial snappy block length", ErrMalformed)
		}
		n := int(binary.BigEndian.Uint32(rest))
		if n < 0 || n > len(rest)-4 {
			return nil, fmt.Errorf("%w: xerial snappy block of %d bytes", ErrMalformed, n)
		}
		var err error
		if out, err = decode(out, rest[4:4+n]); err != nil {
			return nil, err
		}
		rest = rest[4+n:]
	}
	return out, nil
}

// Record is one record of a batch, as Each yields it.
type Record struct {
	Offset    int64
	Timestamp int64
	Key       []byte // nil: a null key
	Null      bool   // the value is null: a tombstone
	Raw       []byte // the whole record, its length prefix included
	// tail is Raw from the offset delta on (for re-encoding timestamps).
	tail []byte
	attr byte
}

// Each calls fn for every record of body (a batch's decompressed records
// section; h its header) in order. Record slices point into body. It checks
// that there are exactly h.NumRecords records, each inside the batch's
// offsets, and stops at the first error fn returns.
func Each(body []byte, h segment.Header, fn func(r Record) error) error {
	base := h.FirstTimestamp // with a delete horizon too: deltas follow the field
	for i := int32(0); i < h.NumRecords; i++ {
		length, n := binary.Varint(body)
		if n <= 0 || length < 1 || length > int64(len(body)-n) {
			return fmt.Errorf("%w: record %d length", ErrMalformed, i)
		}
		rec := body[n : n+int(length)]
		raw := body[:n+int(length)]
		body = body[n+int(length):]
		r := Record{Raw: raw, attr: rec[0]}
		p := rec[1:]
		tsDelta, k := binary.Varint(p)
		if k <= 0 {
			return fmt.Errorf("%w: record %d timestamp", ErrMalformed, i)
		}
		p = p[k:]
		r.tail = p
		offDelta, k := binary.Varint(p)
		if k <= 0 || offDelta < 0 || offDelta > int64(h.LastOffsetDelta) {
			return fmt.Errorf("%w: record %d offset delta", ErrMalformed, i)
		}
		p = p[k:]
		keyLen, k := binary.Varint(p)
		if k <= 0 || keyLen < -1 || keyLen > int64(len(p)-k) {
			return fmt.Errorf("%w: record %d key", ErrMalformed, i)
		}
		p = p[k:]
		if keyLen >= 0 {
			r.Key = p[:keyLen:keyLen]
			p = p[keyLen:]
		}
		valLen, k := binary.Varint(p)
		if k <= 0 || valLen < -1 || valLen > int64(len(p)-k) {
			return fmt.Errorf("%w: record %d value", ErrMalformed, i)
		}
		r.Null = valLen < 0
		r.Offset = h.BaseOffset + offDelta
		r.Timestamp = base + tsDelta
		if err := fn(r); err != nil {
			return err
		}
	}
	if len(body) != 0 {
		return fmt.Errorf("%w: %d bytes after the last record", ErrMalformed, len(body))
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

// Add keeps a record (as Each yielded it) in the batch being built.
func (b *Builder) Add(r Record) {
	b.body = append(b.body, r.Raw...)
	b.n++
}

// AddRebased keeps a record whose timestamp delta must now be relative to
// firstTs (the batch's FirstTimestamp changed: a delete horizon).
func (b *Builder) AddRebased(r Record, firstTs int64) {
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
			return dst[:start], fmt.Errorf("%w: unknown compression codec %d", ErrMalformed, codec)
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
// 4). limit bounds the decompressed size.
func CheckKeys(batch []byte, h segment.Header, limit int) error {
	body, err := Body(batch, h, limit)
	if err != nil {
		return err
	}
	i := 0
	return Each(body, h, func(r Record) error {
		if r.Key == nil {
			return fmt.Errorf("record %d has no key", i)
		}
		i++
		return nil
	})
}

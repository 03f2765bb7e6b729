// Package records reads the records inside a RecordBatch v2 for the few
// places the broker must look into a batch (schema validation and the key
// check of compacted topics on produce, ListOffsets by timestamp), and
// rebuilds batches from a subset of their records for the log cleaner of
// compacted topics (rebuild.go). A compressed batch is inflated as a stream and
// parsed record by record, so what a batch costs in memory is the codec's
// state (a zstd window, an lz4 block, a snappy chunk), never the inflated
// size; and the stream is cut once it has produced more than a limit
// (Bound: a multiple of max.message.bytes), so a small batch that inflates
// to gigabytes (a "zip bomb") costs at most the limit in CPU. At most
// GOMAXPROCS batches are inflated at once, so many concurrent requests
// cannot multiply the codec state either.
//
// Errors are ErrTooLarge (the batch inflates past the limit) and
// ErrMalformed (the codec's stream does not decode, or the records do not
// parse, or their count or lengths disagree with the batch); Kafka answers
// both INVALID_RECORD.
package records

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/stratamq/strata/pkg/segment"
)

// Factor is the multiple of max.message.bytes a batch may inflate to.
// Kafka itself has no such bound; 16 leaves room for text that compresses
// well (producers limit batches by their uncompressed size, except the Java
// producer, which estimates the compressed size) and caps a bomb's CPU at
// about 10-50 ms per MiB of max.message.bytes.
const Factor = 16

// Bound returns how many bytes a batch of batchLen bytes, stored or
// produced under max.message.bytes = maxMessageBytes, may inflate to:
// Factor times the larger of the two (a batch stored before the topic's
// limit was lowered keeps the bound it was accepted under).
func Bound(maxMessageBytes int32, batchLen int) int64 {
	return Factor * max(int64(maxMessageBytes), int64(batchLen), 1)
}

// Errors of Each.
var (
	// ErrTooLarge is returned when a batch inflates to more than the limit.
	ErrTooLarge = errors.New("record batch inflates past its bound")
	// ErrMalformed is returned when a batch's records cannot be read.
	ErrMalformed = errors.New("malformed records")
)

// ValuePrefix is how many leading bytes of a record's value Each keeps.
const ValuePrefix = 8

// Record is what Each reports of one record.
type Record struct {
	Index          int32 // position in the batch, from 0
	OffsetDelta    int32
	TimestampDelta int64
	// With Values: the key's length (-1 for null), the value's length
	// (-1 for null) and its first bytes (up to ValuePrefix; valid only
	// until fn returns).
	KeyLen   int32
	ValueLen int32
	Value    []byte
}

// Fields says how much of each record Each parses.
type Fields int

const (
	// Offsets parses the attributes, timestamp delta and offset delta and
	// skips the rest by the record's length.
	Offsets Fields = iota
	// Values also parses the key, the value and the headers, checks that
	// they fill the record exactly, and that nothing follows the last
	// record.
	Values
)

// Each calls fn for each record of batch (h is its parsed header) in order
// until fn returns false. limit bounds the bytes a compressed batch may
// inflate to (see Bound); an uncompressed batch is read in place.
func Each(batch []byte, h segment.Header, limit int64, fields Fields, fn func(*Record) bool) error {
	if h.Size() > len(batch) || h.Size() < segment.HeaderSize {
		return fmt.Errorf("batch at %d: %d bytes of %d: %w", h.BaseOffset, len(batch), h.Size(), ErrMalformed)
	}
	body := batch[segment.HeaderSize:h.Size()]
	in, release, err := inflate(body, h.Compression(), limit)
	if err != nil {
		return fmt.Errorf("batch at %d: %w", h.BaseOffset, err)
	}
	defer release()
	if err := each(in, h.NumRecords, limit, fields, fn); err != nil {
		return fmt.Errorf("batch at %d: %w", h.BaseOffset, err)
	}
	return nil
}

// each parses count records from in; none may be longer than limit.
func each(in *bufio.Reader, count int32, limit int64, fields Fields, fn func(*Record) bool) error {
	var rec Record
	var prefix [ValuePrefix]byte
	for i := int32(0); i < count; i++ {
		rec = Record{Index: i}
		length, err := binary.ReadVarint(in)
		if err != nil {
			return malformed(i, "length", err)
		}
		if length <= 0 || length > 1<<31-1 {
			return malformed(i, fmt.Sprintf("length %d", length), nil)
		}
		if length > limit {
			// It cannot fit: refused before it is inflated.
			return fmt.Errorf("record %d: length %d: %w", i, length, ErrTooLarge)
		}
		r := &recordReader{in: in, left: length}
		if _, err := r.byte(); err != nil { // attributes
			return malformed(i, "attributes", err)
		}
		if rec.TimestampDelta, err = r.varint(); err != nil {
			return malformed(i, "timestamp delta", err)
		}
		od, err := r.varint()
		if err != nil || od < 0 || od > 1<<31-1 {
			return malformed(i, "offset delta", err)
		}
		rec.OffsetDelta = int32(od)
		if fields == Values {
			if rec.KeyLen, err = r.bytes(nil); err != nil {
				return malformed(i, "key", err)
			}
			n, err := r.bytes(prefix[:])
			if err != nil {
				return malformed(i, "value", err)
			}
			rec.ValueLen, rec.Value = n, prefix[:max(min(n, ValuePrefix), 0)]
			headers, err := r.varint()
			if err != nil || headers < 0 || headers > r.left {
				return malformed(i, "header count", err)
			}
			for j := int64(0); j < headers; j++ {
				if _, err := r.bytes(nil); err != nil {
					return malformed(i, "header key", err)
				}
				if _, err := r.bytes(nil); err != nil {
					return malformed(i, "header value", err)
				}
			}
			if r.left != 0 {
				return malformed(i, fmt.Sprintf("%d bytes past its fields", r.left), nil)
			}
			if !fn(&rec) {
				return nil
			}
			continue
		}
		// Offsets: answer before the body is inflated past.
		if !fn(&rec) {
			return nil
		}
		if err := r.skip(r.left); err != nil {
			return malformed(i, "body", err)
		}
	}
	if fields == Values {
		if _, err := in.ReadByte(); err == nil {
			return fmt.Errorf("bytes follow the last of %d records: %w", count, ErrMalformed)
		} else if !errors.Is(err, io.EOF) {
			return readErr(err)
		}
	}
	return nil
}

// recordReader reads the fields of one record, never past its length.
type recordReader struct {
	in   *bufio.Reader
	left int64
}

var errShort = errors.New("field runs past the record")

func (r *recordReader) byte() (byte, error) {
	if r.left < 1 {
		return 0, errShort
	}
	r.left--
	return r.in.ReadByte()
}

func (r *recordReader) varint() (int64, error) {
	var u uint64
	for shift := uint(0); shift < 64; shift += 7 {
		c, err := r.byte()
		if err != nil {
			return 0, err
		}
		u |= uint64(c&0x7f) << shift
		if c < 0x80 {
			return int64(u>>1) ^ -int64(u&1), nil
		}
	}
	return 0, errors.New("varint overflows 64 bits")
}

// bytes reads a length-prefixed field, copying its first bytes into keep,
// and returns its length (-1: null).
func (r *recordReader) bytes(keep []byte) (int32, error) {
	n, err := r.varint()
	switch {
	case err != nil:
		return 0, err
	case n == -1:
		return -1, nil
	case n < 0 || n > r.left:
		return 0, errShort
	}
	k := min(int64(len(keep)), n)
	if _, err := io.ReadFull(r.in, keep[:k]); err != nil {
		return 0, err
	}
	r.left -= k
	return int32(n), r.skip(n - k)
}

func (r *recordReader) skip(n int64) error {
	if n > r.left {
		return errShort
	}
	for n > 0 {
		step := int(min(n, 1<<20))
		d, err := r.in.Discard(step)
		n -= int64(d)
		r.left -= int64(d)
		if err != nil {
			return err
		}
	}
	return nil
}

// malformed describes a record that does not parse; a read error that is
// not the stream ending early (the bound, a codec failure) keeps its kind.
func malformed(i int32, what string, err error) error {
	switch {
	case err == nil, errors.Is(err, errShort):
		return fmt.Errorf("record %d: %s: %w", i, what, ErrMalformed)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("record %d: %s: the batch ends early: %w", i, what, ErrMalformed)
	}
	return fmt.Errorf("record %d: %s: %w", i, what, readErr(err))
}

// readErr keeps ErrTooLarge and makes any other stream failure malformed.
func readErr(err error) error {
	if errors.Is(err, ErrTooLarge) || errors.Is(err, ErrMalformed) {
		return err
	}
	return fmt.Errorf("%w: %v", ErrMalformed, err)
}

package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// HeaderSize is the number of bytes of a RecordBatch v2 header, from
// baseOffset up to and including recordCount.
const HeaderSize = 61

// Byte offsets of the RecordBatch v2 header fields (big endian).
const (
	offBaseOffset      = 0
	offLength          = 8
	offLeaderEpoch     = 12
	offMagic           = 16
	offCRC             = 17
	offAttributes      = 21
	offLastOffsetDelta = 23
	offFirstTimestamp  = 27
	offMaxTimestamp    = 35
	offProducerID      = 43
	offProducerEpoch   = 51
	offBaseSequence    = 53
	offNumRecords      = 57

	// lengthPrefix is the number of bytes before the part counted by the
	// batchLength field (baseOffset and batchLength themselves).
	lengthPrefix = offLeaderEpoch
	// minLength is the smallest valid batchLength: a header without records.
	minLength = HeaderSize - lengthPrefix
)

// Attribute bits.
const (
	attrCompression   = 0x07
	attrLogAppendTime = 0x08
	attrTransactional = 0x10
	attrControl       = 0x20
)

// ErrCorrupt is returned when bytes are not a valid RecordBatch v2: too short
// for their batchLength, a batchLength below the header size, magic other
// than 2, negative lastOffsetDelta or recordCount, or a CRC mismatch.
var ErrCorrupt = errors.New("segment: corrupt record batch")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Header is the fixed-size header of a RecordBatch v2.
type Header struct {
	BaseOffset           int64
	Length               int32 // batchLength field: bytes after offset 12
	PartitionLeaderEpoch int32
	Magic                int8
	CRC                  uint32
	Attributes           int16
	LastOffsetDelta      int32
	FirstTimestamp       int64
	MaxTimestamp         int64
	ProducerID           int64
	ProducerEpoch        int16
	BaseSequence         int32
	NumRecords           int32
}

// LastOffset returns the offset of the last record of the batch.
func (h Header) LastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// Size returns the total number of bytes of the batch, header included.
func (h Header) Size() int { return lengthPrefix + int(h.Length) }

// Compression returns the compression codec (0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd).
func (h Header) Compression() int8 { return int8(h.Attributes & attrCompression) }

// IsTransactional reports whether the batch belongs to a transaction.
func (h Header) IsTransactional() bool { return h.Attributes&attrTransactional != 0 }

// IsControl reports whether the batch is a control batch (transaction marker).
func (h Header) IsControl() bool { return h.Attributes&attrControl != 0 }

// LogAppendTime reports whether the batch timestamps are broker append times.
func (h Header) LogAppendTime() bool { return h.Attributes&attrLogAppendTime != 0 }

// ParseHeader parses the batch header at the start of b. It checks that
// magic is 2, that batchLength is at least 49 (a header without records),
// and that lastOffsetDelta and recordCount are not negative. It neither
// requires the whole batch to be in b nor checks the CRC. It returns
// io.ErrUnexpectedEOF if b is shorter than HeaderSize and an error wrapping
// ErrCorrupt if a check fails.
func ParseHeader(b []byte) (Header, error) {
	if len(b) < HeaderSize {
		return Header{}, io.ErrUnexpectedEOF
	}
	be := binary.BigEndian
	h := Header{
		BaseOffset:           int64(be.Uint64(b[offBaseOffset:])),
		Length:               int32(be.Uint32(b[offLength:])),
		PartitionLeaderEpoch: int32(be.Uint32(b[offLeaderEpoch:])),
		Magic:                int8(b[offMagic]),
		CRC:                  be.Uint32(b[offCRC:]),
		Attributes:           int16(be.Uint16(b[offAttributes:])),
		LastOffsetDelta:      int32(be.Uint32(b[offLastOffsetDelta:])),
		FirstTimestamp:       int64(be.Uint64(b[offFirstTimestamp:])),
		MaxTimestamp:         int64(be.Uint64(b[offMaxTimestamp:])),
		ProducerID:           int64(be.Uint64(b[offProducerID:])),
		ProducerEpoch:        int16(be.Uint16(b[offProducerEpoch:])),
		BaseSequence:         int32(be.Uint32(b[offBaseSequence:])),
		NumRecords:           int32(be.Uint32(b[offNumRecords:])),
	}
	switch {
	case h.Magic != 2:
		return Header{}, fmt.Errorf("parse batch header: magic %d: %w", h.Magic, ErrCorrupt)
	case h.Length < minLength:
		return Header{}, fmt.Errorf("parse batch header: batch length %d below %d: %w", h.Length, minLength, ErrCorrupt)
	case h.LastOffsetDelta < 0:
		return Header{}, fmt.Errorf("parse batch header: last offset delta %d: %w", h.LastOffsetDelta, ErrCorrupt)
	case h.NumRecords < 0:
		return Header{}, fmt.Errorf("parse batch header: record count %d: %w", h.NumRecords, ErrCorrupt)
	}
	return h, nil
}

// batchEnd returns the end of the batch at the start of b according to its
// batchLength field, clamped to len(b).
func batchEnd(b []byte) int {
	n := lengthPrefix + int(int32(binary.BigEndian.Uint32(b[offLength:])))
	if n < HeaderSize || n > len(b) {
		return len(b)
	}
	return n
}

// CheckCRC reports whether the CRC-32C stored in the header of the batch b
// matches its bytes from the attributes field to the end of the batch. b
// must hold one whole batch; a b shorter than its batchLength says fails.
func CheckCRC(b []byte) bool {
	if len(b) < HeaderSize {
		return false
	}
	n := lengthPrefix + int(int32(binary.BigEndian.Uint32(b[offLength:])))
	if n < HeaderSize || n > len(b) {
		return false
	}
	return crc32.Checksum(b[offAttributes:n], castagnoli) == binary.BigEndian.Uint32(b[offCRC:])
}

// SetBaseOffset writes off as the base offset of the batch b in place. The
// field is not covered by the CRC.
func SetBaseOffset(b []byte, off int64) {
	binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(off))
}

// SetPartitionLeaderEpoch writes epoch as the partition leader epoch of the
// batch b in place. The field is not covered by the CRC.
func SetPartitionLeaderEpoch(b []byte, epoch int32) {
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], uint32(epoch))
}

// SetLogAppendTime marks the batch b as using log append time, as a broker
// does for topics with message.timestamp.type=LogAppendTime: it sets
// attribute bit 3, sets MaxTimestamp to ts and recomputes the CRC. b must
// hold one whole batch.
func SetLogAppendTime(b []byte, ts int64) {
	be := binary.BigEndian
	be.PutUint16(b[offAttributes:], be.Uint16(b[offAttributes:])|attrLogAppendTime)
	be.PutUint64(b[offMaxTimestamp:], uint64(ts))
	be.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:batchEnd(b)], castagnoli))
}

// Split walks b, a concatenation of whole batches, and calls fn with the
// header and the bytes of each batch in order. It returns an error wrapping
// ErrCorrupt if a header is invalid or b does not end exactly at a batch
// boundary, and stops at the first error fn returns, returning it as is.
// CRCs are not checked.
func Split(b []byte, fn func(h Header, batch []byte) error) error {
	for pos := 0; pos < len(b); {
		rest := b[pos:]
		if len(rest) < HeaderSize {
			return fmt.Errorf("split batches: %d trailing bytes at %d: %w", len(rest), pos, ErrCorrupt)
		}
		h, err := ParseHeader(rest)
		if err != nil {
			return fmt.Errorf("split batches: at %d: %w", pos, err)
		}
		size := h.Size()
		if size > len(rest) {
			return fmt.Errorf("split batches: batch at %d needs %d bytes, have %d: %w", pos, size, len(rest), ErrCorrupt)
		}
		if err := fn(h, rest[:size:size]); err != nil {
			return err
		}
		pos += size
	}
	return nil
}

package partition

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratamq/strata/pkg/segment"
)

var decompressor = kgo.DefaultDecompressor()

// OffsetForTimestamp returns the first committed offset whose record
// timestamp is at or after ts, with that record's timestamp. ok is false
// when no such record exists.
func (p *Partition) OffsetForTimestamp(ts int64) (offset, recordTS int64, ok bool, err error) {
	hwm := p.hwm.Load()
	batch, found, err := p.log.FindTimestamp(ts)
	if err != nil || !found {
		return 0, 0, false, err
	}
	start := p.logStart.Load()
	// The first batch whose maximum timestamp reaches ts holds the answer,
	// unless the log start cuts into it before the matching record; then
	// the answer is in a later batch, found by walking forward.
	for {
		h, err := segment.ParseHeader(batch)
		if err != nil {
			return 0, 0, false, err
		}
		if h.LastOffset() >= hwm {
			return 0, 0, false, nil
		}
		if h.MaxTimestamp >= ts {
			offset = -1
			err = eachRecordTimestamp(batch, h, func(off, rts int64) bool {
				if off >= start && rts >= ts {
					offset, recordTS = off, rts
					return false
				}
				return true
			})
			if err != nil || offset >= 0 {
				return offset, recordTS, err == nil, err
			}
		}
		next, err := p.log.Read(nil, h.LastOffset()+1, 1, hwm)
		if err != nil || len(next) == 0 {
			return 0, 0, false, err
		}
		batch = next
	}
}

// FirstRecordAt returns the first record of batch at or after minOffset
// whose timestamp is at least ts (for batches read from the object tier).
func FirstRecordAt(batch []byte, ts, minOffset int64) (offset, recordTS int64, ok bool, err error) {
	h, err := segment.ParseHeader(batch)
	if err != nil {
		return 0, 0, false, err
	}
	offset = -1
	err = eachRecordTimestamp(batch, h, func(off, rts int64) bool {
		if off >= minOffset && rts >= ts {
			offset, recordTS = off, rts
			return false
		}
		return true
	})
	return offset, recordTS, err == nil && offset >= 0, err
}

// MaxTimestamp returns the offset and timestamp of the committed record with
// the largest timestamp (ListOffsets timestamp -3); ok is false for an empty
// log.
func (p *Partition) MaxTimestamp() (offset, ts int64, ok bool, err error) {
	max := int64(-1)
	for _, s := range p.log.Segments() {
		if s.MaxTimestamp > max {
			max = s.MaxTimestamp
		}
	}
	if max < 0 {
		return 0, 0, false, nil
	}
	return p.OffsetForTimestamp(max)
}

// eachRecordTimestamp calls fn with the offset and timestamp of each record
// in batch until fn returns false.
func eachRecordTimestamp(batch []byte, h segment.Header, fn func(off, ts int64) bool) error {
	if h.LogAppendTime() && int64(h.NumRecords) == int64(h.LastOffsetDelta)+1 {
		// Every record carries the batch's append time (and every offset
		// has a record: the cleaner removed none).
		for i := int64(0); i <= int64(h.LastOffsetDelta); i++ {
			if !fn(h.BaseOffset+i, h.MaxTimestamp) {
				return nil
			}
		}
		return nil
	}
	body := batch[segment.HeaderSize:h.Size()]
	codec := kgo.CompressionCodecType(h.Compression())
	if codec != kgo.CodecNone {
		var err error
		if body, err = decompressor.Decompress(body, codec); err != nil {
			return fmt.Errorf("decompress batch at %d: %w", h.BaseOffset, err)
		}
	}
	for i := int32(0); i < h.NumRecords; i++ {
		length, n := binary.Varint(body)
		if n <= 0 || length < 0 || int64(len(body)-n) < length {
			return errBadRecord(h.BaseOffset)
		}
		rec := body[n : n+int(length)]
		body = body[n+int(length):]
		if len(rec) < 1 {
			return errBadRecord(h.BaseOffset)
		}
		tsDelta, n1 := binary.Varint(rec[1:])
		if n1 <= 0 {
			return errBadRecord(h.BaseOffset)
		}
		offDelta, n2 := binary.Varint(rec[1+n1:])
		if n2 <= 0 {
			return errBadRecord(h.BaseOffset)
		}
		ts := h.FirstTimestamp + tsDelta
		if h.LogAppendTime() {
			ts = h.MaxTimestamp
		}
		if !fn(h.BaseOffset+offDelta, ts) {
			return nil
		}
	}
	return nil
}

var errRecords = errors.New("malformed records")

func errBadRecord(base int64) error { return fmt.Errorf("batch at %d: %w", base, errRecords) }

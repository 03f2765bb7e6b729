package partition

import (
	"github.com/stratamq/strata/brokerfleet/internal/records"
	"github.com/stratamq/strata/pkg/segment"
)

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
			err = eachRecordTimestamp(batch, h, p.cfg.Load().MaxMessageBytes, func(off, rts int64) bool {
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
func (p *Partition) FirstRecordAt(batch []byte, ts, minOffset int64) (offset, recordTS int64, ok bool, err error) {
	h, err := segment.ParseHeader(batch)
	if err != nil {
		return 0, 0, false, err
	}
	offset = -1
	err = eachRecordTimestamp(batch, h, p.cfg.Load().MaxMessageBytes, func(off, rts int64) bool {
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
// in batch until fn returns false. A compressed batch is inflated as a
// stream, at most records.Bound of max.message.bytes.
func eachRecordTimestamp(batch []byte, h segment.Header, maxMessageBytes int32, fn func(off, ts int64) bool) error {
	if h.LogAppendTime() && int64(h.NumRecords) == int64(h.LastOffsetDelta)+1 {
		// Every record carries the batch's append time, and every offset
		// has a record (the cleaner removed none).
		for i := int64(0); i <= int64(h.LastOffsetDelta); i++ {
			if !fn(h.BaseOffset+i, h.MaxTimestamp) {
				return nil
			}
		}
		return nil
	}
	return records.Each(batch, h, records.Bound(maxMessageBytes, len(batch)), records.Offsets, func(r *records.Record) bool {
		ts := h.FirstTimestamp + r.TimestampDelta
		if h.LogAppendTime() {
			ts = h.MaxTimestamp
		}
		return fn(h.BaseOffset+int64(r.OffsetDelta), ts)
	})
}

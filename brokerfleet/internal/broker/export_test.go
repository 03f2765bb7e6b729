package broker

import (
	"encoding/binary"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/records"
	"github.com/stratamq/strata/pkg/segment"
)

// Test-only views of a broker's state, for the external tests.

// LocalLog returns the log end, high watermark and ISR of this broker's
// replica of a partition (ok is false when it hosts none).
func LocalLog(b *Broker, topic string, idx int32) (leo, hwm int64, isr []int32, ok bool) {
	t := b.cat.Snapshot().Topic(topic)
	if t == nil {
		return 0, 0, nil, false
	}
	_, p, found := t.Partition(idx)
	if !found || p == nil {
		return 0, 0, nil, false
	}
	return p.LogEndOffset(), p.HighWatermark(), p.ISR(), true
}

// HeldRequestBytes is what the broker's queued.max.request.bytes budget
// holds now.
func HeldRequestBytes(b *Broker) int64 { return b.budget.held() }

// LocalRecord is one record of a replica's local log.
type LocalRecord struct {
	Offset     int64
	Key, Value string
	Tombstone  bool
}

// LocalRecords returns the records of this broker's replica of a
// partition, from its log start to its high watermark, in offset order
// (ok is false when it hosts none).
func LocalRecords(b *Broker, topic string, idx int32) (recs []LocalRecord, ok bool, err error) {
	t := b.cat.Snapshot().Topic(topic)
	if t == nil {
		return nil, false, nil
	}
	_, p, found := t.Partition(idx)
	if !found || p == nil {
		return nil, false, nil
	}
	start := p.LocalLogStartOffset() // below it only the tier holds records
	for off, hwm, tries := start, p.HighWatermark(), 0; off < hwm; {
		batches, err := p.Read(nil, off, 1<<20, true)
		if errors.Is(err, segment.ErrOffsetOutOfRange) && len(recs) == 0 && tries < 50 {
			// Retention removed the start meanwhile: the partition
			// publishes its new log start just after the log moved it.
			time.Sleep(10 * time.Millisecond)
			start, tries = p.LocalLogStartOffset(), tries+1
			off = start
			continue
		}
		if err != nil || len(batches) == 0 {
			return recs, true, err
		}
		err = segment.Split(batches, func(h segment.Header, batch []byte) error {
			off = h.LastOffset() + 1
			if h.IsControl() {
				return nil // a transaction marker: no data
			}
			body, err := records.Body(batch, h, 64<<20)
			if err != nil {
				return err
			}
			return records.Entries(body, h, func(r records.Entry) error {
				if r.Offset < start {
					return nil // below the log start, in its first batch
				}
				lr := LocalRecord{Offset: r.Offset, Key: string(r.Key), Tombstone: r.Null}
				if !r.Null {
					lr.Value = string(recordValue(r.Raw))
				}
				recs = append(recs, lr)
				return nil
			})
		})
		if err != nil {
			return recs, true, err
		}
	}
	return recs, true, nil
}

// recordValue decodes a record's value (raw: the record as stored).
func recordValue(raw []byte) []byte {
	var r kmsg.Record
	_, n := binary.Varint(raw)
	if err := r.ReadFrom(raw); err != nil || n <= 0 {
		return nil
	}
	return r.Value
}

// CleanerState returns the cleaned offset of this broker's replica of a
// partition and how many of its segments are marked rewritten and not
// yet copied to the tier (ok is false when it hosts none).
func CleanerState(b *Broker, topic string, idx int32) (cleaned int64, rewritten int, ok bool) {
	t := b.cat.Snapshot().Topic(topic)
	if t == nil {
		return 0, 0, false
	}
	_, p, found := t.Partition(idx)
	if !found || p == nil {
		return 0, 0, false
	}
	return p.CleanedOffset(), len(p.RewrittenSegments()), true
}

// PoisonFetchBuffers makes every pooled fetch buffer given back be
// overwritten, so a fetch answer sent from a released buffer shows.
func PoisonFetchBuffers(on bool) { poisonFetchBufs.Store(on) }

// ReusedProduceFrames is how many produce frames were read into a pooled
// buffer given back by an earlier one (framepool.go), in this process.
func ReusedProduceFrames() int64 { return reusedFrames.Load() }

// SetQuietFullLook sets how often a follower session's read looks at
// every partition it noted quiet (quietskip.go): long, only the change
// log brings a noted partition's news.
func SetQuietFullLook(c *Config, d time.Duration) { c.quietFullLook = d }

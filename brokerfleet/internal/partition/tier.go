package partition

import (
	"fmt"
	"math"

	"github.com/stratamq/strata/pkg/segment"
)

// The object tier (S3) holds a partition's older segments. The partition
// only learns two offsets from it: where the tier starts (the log start
// clients see) and how far segments were uploaded (local retention never
// deletes above it). Reading tiered data is the broker's business.

// SetTier records the tier's start offset (-1: the tier holds nothing) and
// the offset below which every segment is uploaded (-1: none, and local
// retention deletes nothing; math.MaxInt64: the partition is not tiered).
func (p *Partition) SetTier(start, uploadedTo int64) {
	p.tierStart.Store(start)
	p.uploadedTo.Store(uploadedTo)
}

// Tiered reports whether SetTier put the partition under a tier.
func (p *Partition) Tiered() bool { return p.uploadedTo.Load() != math.MaxInt64 }

// UploadedTo returns the offset below which every segment is uploaded.
func (p *Partition) UploadedTo() int64 { return p.uploadedTo.Load() }

// LocalLogStartOffset is the first offset on local disk (replicas fetch
// from here; below it a consumer reads from the tier).
func (p *Partition) LocalLogStartOffset() int64 { return p.logStart.Load() }

// ResetTo empties the local log and restarts it at offset (a replica whose
// disk was wiped, or whose log lies wholly below the leader's start):
// producer state and epoch history go with the log. It does so only while
// the partition is at leader epoch epoch, in the role given (ErrStaleEpoch
// otherwise): see checkEpochLocked.
func (p *Partition) ResetTo(epoch int32, asLeader bool, offset int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.checkEpochLocked(epoch, asLeader); err != nil {
		return err
	}
	return p.resetLocked(offset)
}

func (p *Partition) resetLocked(offset int64) error {
	if p.closed {
		return ErrClosed
	}
	if err := p.log.ResetTo(offset); err != nil {
		return fmt.Errorf("partition %s-%d: reset to %d: %w", p.topic, p.index, offset, err)
	}
	p.epochs = nil
	p.producers = producers{}
	p.txnMu.Lock()
	p.txns = newTxnState()
	p.txnMu.Unlock()
	p.hwm.Store(offset)
	p.logStart.Store(offset)
	p.repMu.Lock()
	p.rep.durable = offset
	p.repMu.Unlock()
	p.notify()
	return nil
}

// ClosedSegments returns the closed segments lying wholly below the last
// stable offset (committed, so identical on every replica, and with every
// transaction in them decided): what may be uploaded.
func (p *Partition) ClosedSegments() []segment.SegmentInfo {
	hwm := p.LastStableOffset()
	var out []segment.SegmentInfo
	for _, s := range p.log.Segments() {
		if s.Active || s.Size == 0 || s.NextOffset > hwm {
			break
		}
		out = append(out, s)
	}
	return out
}

// OpenSegment opens a read-only handle on a closed segment's batches
// (readable even if retention deletes the segment meanwhile); the caller
// closes it.
func (p *Partition) OpenSegment(s segment.SegmentInfo) (segment.File, error) {
	f, size, err := p.log.OpenSegment(s.BaseOffset)
	if err != nil {
		return nil, err
	}
	if size != s.Size {
		f.Close()
		return nil, &SegmentChangedError{Topic: p.topic, Partition: p.index, Base: s.BaseOffset, Size: size, Want: s.Size}
	}
	return f, nil
}

// SegmentChangedError is returned by OpenSegment when the segment is no
// longer the size its SegmentInfo says (the cleaner rewrote it).
type SegmentChangedError struct {
	Topic            string
	Partition        int32
	Base, Size, Want int64
}

func (e *SegmentChangedError) Error() string {
	return fmt.Sprintf("partition %s-%d: segment %d is %d bytes, expected %d", e.Topic, e.Partition, e.Base, e.Size, e.Want)
}

// SetObjectDurable records that every batch below end is in the object
// tier: for "object" durability the leader's own durable end, which the
// high watermark (and so acks=all) waits for.
func (p *Partition) SetObjectDurable(end int64) { p.setDurable(end) }

// Roll closes the active segment if it holds anything.
func (p *Partition) Roll() error { return p.log.Roll() }

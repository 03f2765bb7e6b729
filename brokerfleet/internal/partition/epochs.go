package partition

import (
	"fmt"

	"github.com/stratamq/strata/pkg/segment"
)

// epochStart is where a leader epoch's batches begin in the log.
type epochStart struct {
	epoch int32
	start int64
}

// epochCache is the leader-epoch history of the log (KIP-101): every
// epoch that wrote batches, with the offset of its first batch, in order.
// Guarded by Partition.mu.
type epochCache []epochStart

// note records a batch of epoch e at offset base.
func (c *epochCache) note(e int32, base int64) {
	if n := len(*c); n == 0 || e > (*c)[n-1].epoch {
		*c = append(*c, epochStart{epoch: e, start: base})
	}
}

// endFor returns the largest epoch at most e and the offset where it ends
// (the next epoch's start, or leo for the latest). With no such epoch it
// returns -1 and the start of the earliest epoch (or leo if none).
func (c epochCache) endFor(e int32, leo int64) (int32, int64) {
	for i := len(c) - 1; i >= 0; i-- {
		if c[i].epoch <= e {
			if i == len(c)-1 {
				return c[i].epoch, leo
			}
			return c[i].epoch, c[i+1].start
		}
	}
	if len(c) > 0 {
		return -1, c[0].start
	}
	return -1, leo
}

// LastEpoch returns the epoch of the last batch in the log (-1 if empty).
func (p *Partition) LastEpoch() int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.epochs) == 0 {
		return -1
	}
	return p.epochs[len(p.epochs)-1].epoch
}

// EndOffsetForEpoch answers OffsetForLeaderEpoch: the largest epoch at
// most e that this log has, and the offset where it ends.
func (p *Partition) EndOffsetForEpoch(e int32) (int32, int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.epochs.endFor(e, p.log.NextOffset())
}

// TruncateTo removes every batch at and after offset (a follower cutting
// a tail that diverged from its new leader's log). Producer state and the
// epoch history lose what was cut; the high watermark never exceeds the
// new end. epoch is the leader epoch the cut was worked out under: if the
// partition has moved on, nothing is cut (ErrStaleEpoch).
func (p *Partition) TruncateTo(epoch int32, offset int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	if err := p.checkEpochLocked(epoch, false); err != nil {
		return err
	}
	if offset >= p.log.NextOffset() {
		return nil
	}
	if err := p.log.TruncateTo(offset); err != nil {
		return fmt.Errorf("partition %s-%d: truncate to %d: %w", p.topic, p.index, offset, err)
	}
	// Into a gap the cleaner left, the log ends below offset.
	offset = p.log.NextOffset()
	// The producers' windows and markers cut off come back from what is
	// left: the newest snapshot the cut kept (the log removed those past
	// it) and the headers after it.
	if err := p.restoreLocked(offset); err != nil {
		return err
	}
	for {
		cur := p.hwm.Load()
		if cur <= offset || p.hwm.CompareAndSwap(cur, offset) {
			break
		}
	}
	p.repMu.Lock()
	p.rep.durable = min(p.rep.durable, offset)
	p.repMu.Unlock()
	p.wakeReplicas() // a follower's log end moved back (Options.WakeReplicas)
	return nil
}

// noteBatches records the epochs of appended batches.
func (p *Partition) noteBatches(batches []byte) {
	_ = segment.Split(batches, func(h segment.Header, _ []byte) error {
		p.epochs.note(h.PartitionLeaderEpoch, h.BaseOffset)
		return nil
	})
}

package partition

import (
	"github.com/stratamq/strata/brokerfleet/internal/topic"
	"github.com/stratamq/strata/pkg/segment"
)

// What the log cleaner of a compacted topic (package cleaner) needs of a
// replica. The cleaner works on closed segments wholly below the high
// watermark (ClosedSegments), which every replica holds alike, and swaps
// rewritten segments in through the log (segment.Rewrite), so appends,
// reads and replication go on while it runs.

// BeginRewrite starts replacing the consecutive closed segments with base
// offsets bases by one holding a subset of their batches.
func (p *Partition) BeginRewrite(bases []int64) (*segment.Rewrite, error) {
	return p.log.BeginRewrite(bases)
}

// CleanedOffset is the cleaner's first dirty offset: the log is compacted
// below it.
func (p *Partition) CleanedOffset() int64 { return p.log.CleanedOffset() }

// SetCleanedOffset records, durably, that the log is compacted below off.
func (p *Partition) SetCleanedOffset(off int64) error { return p.log.SetCleanedOffset(off) }

// RewrittenSegments returns the segments the cleaner rewrote since the
// tier last copied them (base offset -> generation; see
// segment.Log.Rewritten).
func (p *Partition) RewrittenSegments() map[int64]uint64 { return p.log.Rewritten() }

// AckRewritten records that the tier holds the segment at base as
// rewritten in generation gen.
func (p *Partition) AckRewritten(base int64, gen uint64) error { return p.log.AckRewritten(base, gen) }

// ProducerLastOffsets returns, for every idempotent producer the
// partition knows, the last offset of its latest batch: the cleaner keeps
// that batch (empty if need be) so that the producer's sequence survives
// a restart, which rebuilds the window from batch headers.
func (p *Partition) ProducerLastOffsets() map[int64]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[int64]int64, len(p.producers))
	for id, st := range p.producers {
		if n := len(st.batches); n > 0 {
			out[id] = st.batches[n-1].lastOffset
		}
	}
	return out
}

// segmentAge is how long the active segment may take new batches: for a
// compacted topic at most max.compaction.lag.ms, since the cleaner never
// touches the active segment.
func segmentAge(c topic.Config) int64 {
	age := c.SegmentAge
	if c.Compact && c.MaxCompactionLag > 0 && c.MaxCompactionLag < age {
		age = c.MaxCompactionLag
	}
	return int64(age)
}

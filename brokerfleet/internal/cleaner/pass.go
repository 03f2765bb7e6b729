package cleaner

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/stratamq/strata/brokerfleet/internal/partition"
	"github.com/stratamq/strata/brokerfleet/internal/records"
	"github.com/stratamq/strata/brokerfleet/internal/topic"
	"github.com/stratamq/strata/pkg/segment"
)

// errGone ends a pass whose segments changed under it (retention,
// DeleteRecords, truncation, a reset, the partition closed): not a
// failure; the partition is assessed again later.
var errGone = errors.New("cleaner: the segments changed during the pass")

// errChanged ends a dry run that found a change.
var errChanged = errors.New("cleaner: the segment changes")

// errMapFull stops the map build at a segment the offset map cannot hold.
var errMapFull = errors.New("cleaner: offset map full")

// assessment is what a partition's log offers the cleaner now.
type assessment struct {
	segs       []segment.SegmentInfo // the cleanable segments, oldest first
	firstDirty int64
	dirtyBytes int64 // of segs at or after firstDirty
	cleanBytes int64 // of segs below firstDirty
	ratio      float64
	forced     bool // the first dirty segment is older than max.compaction.lag.ms
}

// assess reads which of p's segments may be cleaned at now. Only a
// leader waits for its uploads: a follower's view of them is whatever it
// was when it last led (if ever), and its segments reach the tier only if
// it leads, uploaded in offset order with the records that superseded
// what it dropped.
func assess(p *partition.Partition, now time.Time) assessment {
	return plan(p.ClosedSegments(), p.CleanedOffset(), p.UploadedTo(), p.Tiered() && p.IsLeader(), p.Config(), now)
}

// plan decides, from the closed segments wholly below the high watermark,
// which are cleanable: a prefix of them, each with its newest record
// older than min.compaction.lag.ms and, when the partition is tiered,
// already uploaded (below uploadedTo), so that the tier always holds
// every record the cleaner relied on to drop another.
func plan(closed []segment.SegmentInfo, firstDirty, uploadedTo int64, tiered bool, cfg topic.Config, now time.Time) assessment {
	a := assessment{firstDirty: firstDirty}
	lagCut := now.Add(-cfg.MinCompactionLag).UnixMilli()
	for _, s := range closed {
		if (tiered && s.NextOffset > uploadedTo) || (cfg.MinCompactionLag > 0 && s.MaxTimestamp > lagCut) {
			break
		}
		a.segs = append(a.segs, s)
		if s.NextOffset <= firstDirty {
			a.cleanBytes += s.Size
			continue
		}
		if a.dirtyBytes == 0 && cfg.MaxCompactionLag < topic.MaxDuration {
			a.forced = s.MaxTimestamp <= now.Add(-cfg.MaxCompactionLag).UnixMilli()
		}
		a.dirtyBytes += s.Size
	}
	if total := a.dirtyBytes + a.cleanBytes; total > 0 {
		a.ratio = float64(a.dirtyBytes) / float64(total)
	}
	return a
}

// passResult describes a completed pass.
type passResult struct {
	cleanedTo int64
	// dirtyBytes is the size of the dirty segments the pass mapped and
	// cleaned.
	dirtyBytes int64
	// horizon is the earliest delete horizon among the tombstones kept
	// (zero: none).
	horizon time.Time
}

// clean runs one pass over p.
func (c *Cleaner) clean(ctx context.Context, p *partition.Partition) (passResult, error) {
	now := c.o.Clock.Now()
	a := assess(p, now)
	res := passResult{cleanedTo: a.firstDirty}
	if len(a.segs) == 0 {
		return res, nil
	}
	m := newOffsetMap(c.o.DedupeBytes / int64(c.o.Threads))
	mapEnd, err := c.buildMap(ctx, p, a, m)
	if err != nil {
		return res, err
	}
	if a.dirtyBytes > 0 && mapEnd <= a.firstDirty {
		return res, fmt.Errorf("cleaner: the offset map (%d bytes) cannot hold the keys of one segment; raise the dedupe buffer (-cleaner-dedupe-buffer-size)", m.bytes())
	}
	var groups [][]segment.SegmentInfo
	var cur []segment.SegmentInfo
	var curBytes int64
	limit := min(p.Config().SegmentBytes, math.MaxInt32)
	for _, s := range a.segs {
		if s.NextOffset > max(mapEnd, a.firstDirty) {
			break
		}
		if len(cur) > 0 && (curBytes+s.Size > limit || s.NextOffset-cur[0].BaseOffset > math.MaxInt32) {
			groups, cur, curBytes = append(groups, cur), nil, 0
		}
		cur, curBytes = append(cur, s), curBytes+s.Size
	}
	if len(cur) > 0 {
		groups = append(groups, cur)
	}
	f := &filter{
		c: c, m: m, now: now, cfg: p.Config(), prevEpoch: math.MinInt32,
		producers:      p.ProducerLastOffsets(),
		dropTombstones: c.mayDropTombstones(p),
	}
	for _, g := range groups {
		if err := c.rewrite(ctx, p, g, f); err != nil {
			return res, err
		}
	}
	if !f.horizon.IsZero() {
		res.horizon = f.horizon
	}
	if mapEnd > a.firstDirty {
		if err := p.SetCleanedOffset(mapEnd); err != nil {
			return res, c.gone(p, err)
		}
		res.cleanedTo = mapEnd
		for _, s := range a.segs {
			if s.BaseOffset >= a.firstDirty && s.NextOffset <= mapEnd {
				res.dirtyBytes += s.Size
			}
		}
	}
	return res, nil
}

// mayDropTombstones reports whether p's local log holds the start of its
// table: a log that lacks it (a leader whose disk was replaced serves it
// from the tier, a follower reset to such a leader's start) must keep its
// tombstones, which hide values only the tier holds. Without a tier
// nothing lies below a log's start. With one, a leader knows the tier's
// start; a follower does not, so it drops tombstones only from a log that
// starts at offset 0.
func (c *Cleaner) mayDropTombstones(p *partition.Partition) bool {
	switch {
	case !c.o.Tier:
		return true
	case p.IsLeader() && p.Tiered():
		return p.LogStartOffset() >= p.LocalLogStartOffset()
	}
	return p.LocalLogStartOffset() == 0
}

// buildMap puts the keys of the dirty segments into m and returns where
// the mapped range ends (a segment boundary: a segment that does not fit
// whole is left out).
func (c *Cleaner) buildMap(ctx context.Context, p *partition.Partition, a assessment, m *offsetMap) (int64, error) {
	end := a.firstDirty
	for _, s := range a.segs {
		if s.NextOffset <= a.firstDirty {
			continue
		}
		err := c.eachBatch(ctx, p, s, func(h segment.Header, batch []byte) error {
			if keepWhole(h) {
				return nil
			}
			body, err := records.Body(batch, h, c.batchLimit())
			if err != nil {
				return err
			}
			return records.Entries(body, h, func(r records.Entry) error {
				if r.Offset < a.firstDirty || r.Key == nil {
					return nil
				}
				if !m.put(r.Key, r.Offset) {
					return errMapFull
				}
				return nil
			})
		})
		if errors.Is(err, errMapFull) {
			break
		}
		if err != nil {
			return 0, err
		}
		end = s.NextOffset
	}
	return end, nil
}

// batchLimit is how far a batch may inflate: Options.MaxBatchBytes (the
// cleaner holds a batch's records in memory to rebuild it). A stored batch
// was accepted already, maybe before its topic was compacted, so the
// records.Bound of max.message.bytes that produce applies would make
// partitions with well-compressed batches uncleanable.
func (c *Cleaner) batchLimit() int64 { return int64(c.o.MaxBatchBytes) }

// keepWhole reports whether a batch is kept as it is, whatever the map
// says.
//
// Control batches (commit and abort markers) and transactional batches
// are kept whole, at their offsets, and their keys stay out of the map, so
// the aborted-transaction ranges (partition.AbortedTxns, the tier's
// aborted lists) stay true for rewritten segments. The cleanable segments
// end at the last stable offset (partition.ClosedSegments), so no open
// transaction is ever cleaned.
//
// TODO(transactions): as Kafka does, drop the records of aborted
// transactions, compact committed transactional batches like any other,
// keep a transaction's marker while any of its data batches remain and
// remove markers past their delete horizon. Until then a topic written
// only by transactional producers (Kafka Streams with exactly-once) is
// not compacted at all.
func keepWhole(h segment.Header) bool { return h.IsControl() || h.IsTransactional() }

// eachBatch calls fn with every batch of the closed segment s of p,
// throttled, counting the bytes read.
func (c *Cleaner) eachBatch(ctx context.Context, p *partition.Partition, s segment.SegmentInfo, fn func(h segment.Header, batch []byte) error) error {
	f, err := p.OpenSegment(s)
	if err != nil {
		return c.gone(p, err)
	}
	defer f.Close()
	return segment.ReadBatches(f, s.Size, func(h segment.Header, batch []byte) error {
		c.read.Add(int64(len(batch)))
		if err := c.throttle.wait(ctx, len(batch)); err != nil {
			return err
		}
		return fn(h, batch)
	})
}

// gone returns errGone when err came from segments changing under the
// pass (or the partition closing), else err.
func (c *Cleaner) gone(p *partition.Partition, err error) error {
	if errors.Is(err, segment.ErrRewriteConflict) || errors.Is(err, segment.ErrClosed) ||
		errors.Is(err, segment.ErrOffsetOutOfRange) || errors.Is(err, partition.ErrClosed) {
		return fmt.Errorf("%w: %v", errGone, err)
	}
	var sized *partition.SegmentChangedError
	if errors.As(err, &sized) {
		return fmt.Errorf("%w: %v", errGone, err)
	}
	return err
}

// rewrite replaces the segments of g by one holding what f keeps.
func (c *Cleaner) rewrite(ctx context.Context, p *partition.Partition, g []segment.SegmentInfo, f *filter) error {
	bases := make([]int64, len(g))
	for i, s := range g {
		bases[i] = s.BaseOffset
	}
	// A dry run first: a single segment the filter would leave as it is
	// is not rewritten (most of the clean part of a table, most passes).
	saved := f.save()
	f.end = g[len(g)-1].NextOffset
	changed := len(g) > 1
	for _, s := range g {
		if changed {
			break
		}
		err := c.eachBatch(ctx, p, s, func(h segment.Header, batch []byte) error {
			out, keep, err := f.apply(h, batch)
			if err == nil && (!keep || len(out) != len(batch) || &out[0] != &batch[0]) {
				changed = true
				return errChanged
			}
			return err
		})
		if err != nil && !errors.Is(err, errChanged) {
			return err
		}
	}
	if !changed {
		return nil
	}
	f.restore(saved)
	w, err := p.BeginRewrite(bases)
	if err != nil {
		return c.gone(p, err)
	}
	for _, s := range g {
		err := c.eachBatch(ctx, p, s, func(h segment.Header, batch []byte) error {
			out, keep, err := f.apply(h, batch)
			if err != nil || !keep {
				return err
			}
			if err := w.Add(out); err != nil {
				return err
			}
			c.written.Add(int64(len(out)))
			return c.throttle.wait(ctx, len(out))
		})
		if err != nil {
			w.Abort()
			return err
		}
	}
	if err := w.Commit(); err != nil {
		return c.gone(p, err)
	}
	return nil
}

// filter decides, batch by batch in offset order over the whole rewritten
// range, what a pass keeps.
type filter struct {
	c              *Cleaner
	m              *offsetMap
	now            time.Time
	cfg            topic.Config
	producers      map[int64]int64 // producer id -> last offset of its latest batch
	dropTombstones bool
	prevEpoch      int32
	end            int64     // end of the segment being written
	horizon        time.Time // earliest delete horizon of a tombstone kept

	bld records.Builder
	buf []byte
}

type filterState struct {
	prevEpoch int32
	horizon   time.Time
}

func (f *filter) save() filterState { return filterState{f.prevEpoch, f.horizon} }

func (f *filter) restore(s filterState) { f.prevEpoch, f.horizon = s.prevEpoch, s.horizon }

// apply returns the batch to write in place of batch, and whether to
// write one. The bytes returned are valid until the next call.
func (f *filter) apply(h segment.Header, batch []byte) ([]byte, bool, error) {
	firstOfEpoch := h.PartitionLeaderEpoch != f.prevEpoch
	f.prevEpoch = h.PartitionLeaderEpoch
	last, isLast := f.producers[h.ProducerID]
	mustKeep := firstOfEpoch || h.LastOffset() == f.end-1 || (h.ProducerID >= 0 && isLast && last == h.LastOffset())
	if keepWhole(h) {
		return batch, true, nil
	}
	body, err := records.Body(batch, h, f.c.batchLimit())
	if err != nil {
		return nil, false, err
	}
	hz, hasHz := records.DeleteHorizon(h)
	var kept []records.Entry
	dropped, tombs := 0, false
	err = records.Entries(body, h, func(r records.Entry) error {
		switch latest, ok := f.m.get(r.Key); {
		case r.Key == nil: // a compacted topic holds no keyless records
		case ok && latest > r.Offset: // superseded
		case r.Null && f.dropTombstones && hasHz && !f.now.Before(time.UnixMilli(hz)): // past its horizon
		default:
			kept = append(kept, r)
			tombs = tombs || r.Null
			return nil
		}
		dropped++
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("batch at %d: %w", h.BaseOffset, err)
	}
	stamp := tombs && !hasHz // the first pass to keep its tombstones
	if tombs {
		t := time.UnixMilli(hz)
		if stamp {
			t = f.now.Add(f.cfg.DeleteRetention)
		}
		if f.horizon.IsZero() || t.Before(f.horizon) {
			f.horizon = t
		}
	}
	if dropped == 0 && !stamp {
		return batch, true, nil
	}
	if len(kept) == 0 && !mustKeep {
		return nil, false, nil
	}
	f.bld.Reset()
	horizon := int64(-1)
	if stamp {
		horizon = f.now.Add(f.cfg.DeleteRetention).UnixMilli()
	}
	for _, r := range kept {
		if stamp {
			f.bld.AddRebased(r, horizon)
		} else {
			f.bld.Add(r)
		}
	}
	f.buf, err = f.bld.Build(f.buf[:0], batch, h, horizon)
	if err != nil {
		return nil, false, fmt.Errorf("batch at %d: %w", h.BaseOffset, err)
	}
	return f.buf, true, nil
}

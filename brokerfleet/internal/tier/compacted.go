package tier

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"path"
	"strconv"
	"strings"

	"github.com/stratamq/strata/pkg/metastore"
	"github.com/stratamq/strata/pkg/objstore"
	"github.com/stratamq/strata/pkg/segment"
)

// recompact replaces, in offset order, the tier's copies of the segments
// the leader's cleaner rewrote, and clears their marks. It stops at the
// first segment it cannot replace (a reference straddles the end of every
// run of closed segments from it; a later pass that merges segments may
// resolve that), and does nothing while the log is cleaned less far than
// the tier's copy.
func (tg *Manager) recompact(ctx context.Context, lp ledPartition, st *tierState) error {
	p := lp.p
	marks := p.RewrittenSegments()
	if len(marks) == 0 {
		return nil
	}
	if man, fenced := tg.snapshot(st); fenced || p.CleanedOffset() < CleanedOf(man) {
		return nil
	}
	closed := p.ClosedSegments()
	for i := 0; i < len(closed); i++ {
		man, fenced := tg.snapshot(st)
		end := SegmentEnd(man)
		if fenced || closed[i].NextOffset > end {
			return nil
		}
		if _, ok := marks[closed[i].BaseOffset]; !ok {
			continue
		}
		j := i
		for j < len(closed) && closed[j].NextOffset <= end && straddles(man, closed[i].BaseOffset, closed[j].NextOffset) {
			j++
		}
		if j == len(closed) || closed[j].NextOffset > end {
			return nil
		}
		if !tg.cat.LeaseValid() || p.LeaderEpoch() != lp.epoch {
			return nil
		}
		group := closed[i : j+1]
		next, err := tg.replaceGroup(ctx, lp, man, group)
		switch {
		case errors.Is(err, ErrFenced):
			tg.setManifest(lp.key, st, next, true)
			return nil
		case errors.Is(err, errStraddle):
			return nil // the manifest changed meanwhile; the next round decides again
		case err != nil:
			return err
		}
		tg.setManifest(lp.key, st, next, false)
		p.SetTier(Start(next), max(SegmentEnd(next), p.UploadedTo()))
		for _, s := range group {
			if g, ok := marks[s.BaseOffset]; ok {
				if err := p.AckRewritten(s.BaseOffset, g); err != nil {
					return err // uploaded again next round: harmless
				}
			}
		}
		i = j
	}
	return nil
}

// replaceGroup uploads the consecutive closed segments of group as one
// object replacing the references they cover.
func (tg *Manager) replaceGroup(ctx context.Context, lp ledPartition, man metastore.Manifest, group []segment.SegmentInfo) (metastore.Manifest, error) {
	cr := &concatReader{}
	info := segment.SegmentInfo{BaseOffset: group[0].BaseOffset, NextOffset: group[len(group)-1].NextOffset, MaxTimestamp: -1}
	for _, s := range group {
		f, err := lp.p.OpenSegment(s)
		if err != nil {
			return man, fmt.Errorf("replace segment %d in the tier: %w", s.BaseOffset, errStraddle) // rewritten or deleted meanwhile
		}
		defer f.Close()
		cr.parts, cr.sizes = append(cr.parts, f), append(cr.sizes, s.Size)
		info.Size += s.Size
		info.MaxTimestamp = max(info.MaxTimestamp, s.MaxTimestamp)
	}
	// Read after the opens: the bytes are cleaned at most this far.
	key := CompactedKey(lp.key.id, lp.key.partition, info.BaseOffset, lp.epoch, lp.p.CleanedOffset())
	return tg.t.Replace(ctx, key, lp.key.id, lp.key.partition, lp.epoch, man, info, cr, lp.p.AbortedTxns(info.BaseOffset, info.NextOffset))
}

// Compacted topics in the tier.
//
// Segments of a compacted topic are uploaded like any other (the leader's
// cleaner works only on segments already uploaded, so the tier holds every
// record it relied on to drop another), and the tier copy is
// compacted too: after the leader's cleaner rewrote a segment (its log
// marks it, segment.Log.Rewritten), the leader uploads the cleaned
// segment and, in one manifest write, replaces the references it covers
// (Replace). The replaced objects are collected after the orphan grace,
// so a reader that still holds the old manifest finishes its read. A
// broker on an empty disk therefore serves the compacted table from S3.
//
// Two rules keep the tier copy a valid compaction while leaders change
// and replicas clean at different paces (each replica compacts its own
// log):
//
//   - Replacements go in offset order, and stop at the first that cannot
//     be made. A tombstone is only removed (after delete.retention.ms) by
//     a pass that, or an earlier one of which, also removed the values it
//     deletes from every earlier segment; replacing in order never puts a
//     segment without the tombstone before the earlier ones are replaced.
//   - Every object of a compacted topic is named with the cleaned offset
//     of the uploader's log at upload time (CompactedKey), and a leader
//     replaces nothing while its own cleaned offset is below the highest
//     in the manifest (CleanedOf): a leader whose cleaner is behind could
//     otherwise put back a value whose tombstone a faster replica's upload
//     already removed.

// CompactedKey names an object of a compacted topic's segment: the base
// offset and leader epoch as Key does, the cleaned offset of the log it
// was read from, and a random part (a segment may be uploaded again with
// other contents under the same epoch and cleaned offset).
func CompactedKey(id metastore.TopicID, partition int32, base int64, epoch int32, cleaned int64) string {
	return fmt.Sprintf("%s%020d-%d-c%d-%016x.log", Prefix(id, partition), base, epoch, cleaned, rand.Uint64())
}

// cleanedOfKey returns the cleaned offset a CompactedKey carries (0 for
// other keys: a segment uploaded before its topic was compacted).
func cleanedOfKey(key string) int64 {
	parts := strings.Split(strings.TrimSuffix(path.Base(key), ".log"), "-")
	if len(parts) != 4 || !strings.HasPrefix(parts[2], "c") {
		return 0
	}
	n, err := strconv.ParseInt(parts[2][1:], 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// CleanedOf returns the highest cleaned offset among the manifest's
// objects: no leader whose log is cleaned less far may replace segments.
func CleanedOf(man metastore.Manifest) int64 {
	var c int64
	for _, s := range man.Segments {
		if !IsWAL(s) {
			c = max(c, cleanedOfKey(s.Object))
		}
	}
	return c
}

// straddles reports whether a reference of man starts inside (base, next)
// and ends past next: replacing [base, next) would leave it the reference
// that reads hit (the one with the highest base) for offsets below next.
func straddles(man metastore.Manifest, base, next int64) bool {
	for _, s := range man.Segments {
		if s.BaseOffset > base && s.BaseOffset < next && s.NextOffset > next {
			return true
		}
	}
	return false
}

// Replace stores the cleaned segments [info.BaseOffset, info.NextOffset)
// (info.Size bytes of src) under key, with the aborted transactions that
// overlap them (as UploadAs does: the cleaner keeps transactional batches
// and markers whole, at their offsets, so the list is the old one's), and,
// in one manifest write under leaderEpoch, replaces every reference lying
// wholly inside that range by it. It fails, writing nothing, when a
// reference straddles the range's end (see straddles). The replaced
// objects are left for Collect.
func (t *Tier) Replace(ctx context.Context, key string, id metastore.TopicID, partition, leaderEpoch int32, man metastore.Manifest, info segment.SegmentInfo, src io.ReaderAt, aborted []AbortedTxn) (metastore.Manifest, error) {
	if man.LeaderEpoch > leaderEpoch {
		return man, fmt.Errorf("tier: replace %s/%d@%d: manifest has epoch %d: %w", id, partition, info.BaseOffset, man.LeaderEpoch, ErrFenced)
	}
	if straddles(man, info.BaseOffset, info.NextOffset) {
		return man, fmt.Errorf("tier: replace %s/%d [%d, %d): %w", id, partition, info.BaseOffset, info.NextOffset, errStraddle)
	}
	var abortedKey string
	if len(aborted) > 0 {
		abortedKey = AbortedKey(key)
		if err := objstore.PutIfAbsentIdempotent(ctx, t.opts.Store, abortedKey, encodeAborted(aborted)); err != nil {
			return man, fmt.Errorf("tier: replace %s: %w", abortedKey, err)
		}
	}
	ref, err := t.storeSegment(ctx, key, id, partition, leaderEpoch, info, src)
	if err != nil {
		return man, err
	}
	ref.Aborted = abortedKey
	for attempt := 0; ; attempt++ {
		next := man
		next.LeaderEpoch = leaderEpoch
		next.Segments = replaced(man.Segments, ref)
		stored, err := t.opts.Meta.PutManifest(ctx, id, partition, next)
		if err == nil {
			return stored, nil
		}
		if !errors.Is(err, metastore.ErrConditionFailed) || attempt >= 2 {
			return man, fmt.Errorf("tier: record %s in the manifest: %w", key, err)
		}
		// The WAL flusher or DeleteRecords wrote meanwhile: decide again.
		if man, err = t.opts.Meta.Manifest(ctx, id, partition); err != nil {
			return man, err
		}
		if man.LeaderEpoch > leaderEpoch {
			return man, fmt.Errorf("tier: replace %s: manifest has epoch %d: %w", key, man.LeaderEpoch, ErrFenced)
		}
		if straddles(man, info.BaseOffset, info.NextOffset) {
			return man, fmt.Errorf("tier: replace %s: %w", key, errStraddle)
		}
	}
}

// errStraddle ends a replacement that would not take effect for every
// offset of its range.
var errStraddle = errors.New("a reference straddles the end of the range")

// replaced returns segs with the references wholly inside ref's range
// dropped and ref in the place of the first of them (or after the last
// reference below it), so the list stays in offset order.
func replaced(segs []metastore.SegmentRef, ref metastore.SegmentRef) []metastore.SegmentRef {
	out := make([]metastore.SegmentRef, 0, len(segs)+1)
	placed := false
	for _, s := range segs {
		if s.BaseOffset >= ref.BaseOffset && s.NextOffset <= ref.NextOffset {
			if !placed {
				out, placed = append(out, ref), true
			}
			continue
		}
		if !placed && s.BaseOffset >= ref.BaseOffset {
			out, placed = append(out, ref), true
		}
		out = append(out, s)
	}
	if !placed {
		out = append(out, ref)
	}
	return out
}

// concatReader reads consecutive segment files as one.
type concatReader struct {
	parts []io.ReaderAt
	sizes []int64
}

func (c *concatReader) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	for i, part := range c.parts {
		if len(p) == 0 {
			break
		}
		if off >= c.sizes[i] {
			off -= c.sizes[i]
			continue
		}
		want := min(int64(len(p)), c.sizes[i]-off)
		m, err := part.ReadAt(p[:want], off)
		n += m
		if err != nil && !(errors.Is(err, io.EOF) && int64(m) == want) {
			return n, err
		}
		p, off = p[m:], 0
	}
	if len(p) > 0 {
		return n, io.EOF
	}
	return n, nil
}

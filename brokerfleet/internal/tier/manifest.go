package tier

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/stratamq/strata/pkg/metastore"
)

// Prefix is where a partition's objects live.
func Prefix(id metastore.TopicID, partition int32) string {
	return id.String() + "/" + strconv.Itoa(int(partition)) + "/"
}

// Key names a segment object.
func Key(id metastore.TopicID, partition int32, base int64, epoch int32) string {
	return fmt.Sprintf("%s%020d-%d.log", Prefix(id, partition), base, epoch)
}

// walPrefix starts the keys of objects shared by the partitions of one
// broker's flush ("object" durability).
const walPrefix = "wal/"

// IsWAL reports whether a manifest entry points into a shared WAL object
// rather than a segment object.
func IsWAL(s metastore.SegmentRef) bool { return strings.HasPrefix(s.Object, walPrefix) }

// WALKey names a shared object written by a broker incarnation.
func WALKey(node int32, incarnation string, seq int64) string {
	return fmt.Sprintf("%s%d/%s/%020d.wal", walPrefix, node, incarnation, seq)
}

// SegmentEnd returns the offset after the last segment object (WAL
// entries not counted): where segment uploads resume.
func SegmentEnd(man metastore.Manifest) int64 {
	var end int64
	for _, s := range man.Segments {
		if !IsWAL(s) {
			end = max(end, s.NextOffset)
		}
	}
	return end
}

// WALObjects returns the shared objects a manifest references.
func WALObjects(man metastore.Manifest) map[string]bool {
	out := map[string]bool{}
	for _, s := range man.Segments {
		if IsWAL(s) {
			out[s.Object] = true
		}
	}
	return out
}

// End returns the offset after the manifest's last segment (0 if empty).
func End(man metastore.Manifest) int64 {
	var end int64
	for _, s := range man.Segments {
		end = max(end, s.NextOffset)
	}
	return end
}

// Start returns the manifest's first readable offset (its first segment's,
// or the start DeleteRecords set), or -1 if it holds nothing readable.
func Start(man metastore.Manifest) int64 {
	if len(man.Segments) == 0 {
		return -1
	}
	start := man.Segments[0].BaseOffset
	for _, s := range man.Segments {
		start = min(start, s.BaseOffset)
	}
	start = max(start, man.StartOffset)
	if start >= End(man) {
		return -1
	}
	return start
}

// Expire drops from the manifest the segments past retention (by time:
// newest record older than retention; by size: the oldest while the rest
// still hold retentionBytes), then deletes their objects. It returns the
// new manifest. The segments left keep their order, so the manifest's
// pages that hold none of the expired ones are kept as they are.
func (t *Tier) Expire(ctx context.Context, id metastore.TopicID, partition, leaderEpoch int32, man metastore.Manifest, retention time.Duration, retentionBytes int64) (metastore.Manifest, error) {
	segs := man.Segments
	order := make([]int, len(segs)) // by base offset
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(i, j int) bool { return segs[order[i]].BaseOffset < segs[order[j]].BaseOffset })
	n := 0
	for n < len(order) && segs[order[n]].NextOffset <= man.StartOffset {
		n++ // below the start DeleteRecords set
	}
	if retention >= 0 {
		cutoff := t.opts.Now().Add(-retention).UnixMilli()
		for n < len(order) && segs[order[n]].MaxTimestamp < cutoff {
			n++
		}
	}
	if retentionBytes >= 0 {
		var left int64
		for _, i := range order[n:] {
			left += segs[i].Size
		}
		for n < len(order) && left-segs[order[n]].Size >= retentionBytes {
			left -= segs[order[n]].Size
			n++
		}
	}
	if n == 0 {
		return man, nil
	}
	expired := make(map[int]bool, n)
	for _, i := range order[:n] {
		expired[i] = true
	}
	next := man
	next.LeaderEpoch = max(man.LeaderEpoch, leaderEpoch)
	next.Segments = make([]metastore.SegmentRef, 0, len(segs)-n)
	for i, s := range segs {
		if !expired[i] {
			next.Segments = append(next.Segments, s)
		}
	}
	stored, err := t.opts.Meta.PutManifest(ctx, id, partition, next)
	if err != nil {
		return man, fmt.Errorf("tier: expire %s/%d: %w", id, partition, err)
	}
	for _, i := range order[:n] {
		if s := segs[i]; !IsWAL(s) { // a shared WAL object is deleted when no manifest needs it (the writer's job)
			if err := t.opts.Store.Delete(ctx, s.Object); err != nil {
				t.opts.Logger.Warn("delete expired segment object", "object", s.Object, "err", err)
			}
			if s.Aborted != "" {
				if err := t.opts.Store.Delete(ctx, s.Aborted); err != nil {
					t.opts.Logger.Warn("delete expired aborted-transaction object", "object", s.Aborted, "err", err)
				}
			}
		}
	}
	return stored, nil
}

// DeleteRecords raises the manifest's start offset to offset (Kafka's
// DeleteRecords over the tier): reads below it fail at once, and the
// segments wholly below it go with the next Expire.
func (t *Tier) DeleteRecords(ctx context.Context, id metastore.TopicID, partition, leaderEpoch int32, man metastore.Manifest, offset int64) (metastore.Manifest, error) {
	for attempt := 0; ; attempt++ {
		if man.StartOffset >= offset {
			return man, nil
		}
		if man.LeaderEpoch > leaderEpoch {
			return man, fmt.Errorf("tier: delete records of %x/%d: manifest has epoch %d: %w", id, partition, man.LeaderEpoch, ErrFenced)
		}
		next := man
		next.LeaderEpoch, next.StartOffset = leaderEpoch, offset
		stored, err := t.opts.Meta.PutManifest(ctx, id, partition, next)
		if err == nil {
			return stored, nil
		}
		if !errors.Is(err, metastore.ErrConditionFailed) || attempt >= 2 {
			return man, fmt.Errorf("tier: delete records of %x/%d: %w", id, partition, err)
		}
		if man, err = t.opts.Meta.Manifest(ctx, id, partition); err != nil {
			return man, err
		}
	}
}

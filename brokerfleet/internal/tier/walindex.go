package tier

// The WAL index: one metastore item per node lists the shares of its WAL
// objects that partition manifests have not absorbed yet, so a flush
// writes one item whatever the number of partitions in it
// (metastore.WALIndex). Manifests absorb the shares lazily: a new leader
// writes those it finds into the manifest before it takes writes (under
// its epoch, which fences the shares of every earlier one), and the
// leader's own uploads and expiries write its manifest with its pending
// shares (tierState.view). An index entry leaves the index once its
// manifest has moved past it (superseded).

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync/atomic"
	"time"

	"github.com/stratamq/strata/pkg/metastore"
)

// walIndexBudget bounds the encoded WAL index (DynamoDB items are limited
// to 400 KB; metastore.MaxItemBytes is 390 KiB). A flush that would pass
// it first writes the manifests of the partitions with the most entries
// (absorbing them), so those flushes cost more than one write.
const walIndexBudget = 256 << 10

// walPruneInterval is how often the tier round checks the entries of this
// node's index whose partitions it does not lead (another leader absorbs
// or supersedes them) against their manifests.
const walPruneInterval = 30 * time.Second

type walEntryID struct {
	key   tierKey
	epoch int32
	base  int64
	obj   string
}

func entryID(e metastore.WALEntry) walEntryID {
	return walEntryID{tierKey{e.Topic, e.Partition}, e.LeaderEpoch, e.BaseOffset, e.Object}
}

type walIndexState struct {
	loaded bool
	idx    metastore.WALIndex
}

type walStats struct {
	flushes, metaWrites, indexBytes, paced atomic.Int64
}

// WALStats counts object-durability flushes and the metastore writes they
// made (WAL index writes and the manifest writes of absorptions forced by
// the index's size), since the Manager started, and the bytes of the WAL
// index items written (DynamoDB bills a write per KB of the item). Paced
// counts the flushes that waited for FlushInterval (they gathered what
// arrived during the previous flush).
type WALStats struct {
	Flushes, MetaWrites, IndexBytes, Paced int64
}

// WALStats returns the flush counters.
func (tg *Manager) WALStats() WALStats {
	if tg == nil {
		return WALStats{}
	}
	return tg.stats.snapshot()
}

func (s *walStats) snapshot() WALStats {
	return WALStats{Flushes: s.flushes.Load(), MetaWrites: s.metaWrites.Load(), IndexBytes: s.indexBytes.Load(), Paced: s.paced.Load()}
}

// flushed counts a flush that wrote a WAL object, given the counters
// before it.
func (tg *Manager) flushed(before WALStats) {
	tg.stats.flushes.Add(1)
	if tg.paced {
		tg.stats.paced.Add(1)
	}
	if tg.opts.Flushed != nil {
		tg.opts.Flushed(tg.stats.metaWrites.Load()-before.MetaWrites, tg.paced)
	}
}

// superseded reports whether no absorber would ever take e given man (a
// manifest only moves forward): it ends at or below the manifest's end, or
// a later leader epoch than its own wrote the manifest.
func superseded(man metastore.Manifest, e metastore.WALEntry) bool {
	return e.NextOffset <= End(man) || e.LeaderEpoch < man.LeaderEpoch
}

// absorbChain returns the index entries of one partition that continue
// its manifest, as manifest references, for a leader of epoch: from the
// manifest's end, repeatedly the entry that covers it (highest epoch
// first, then the longest), with epochs never decreasing along the chain
// and never above epoch. Entries of epochs below the manifest's are a
// deposed leader's, written after the next leader fenced them: never
// taken.
func absorbChain(man metastore.Manifest, epoch int32, entries []metastore.WALEntry) []metastore.SegmentRef {
	cands := make([]metastore.WALEntry, 0, len(entries))
	for _, e := range entries {
		if e.LeaderEpoch >= man.LeaderEpoch && e.LeaderEpoch <= epoch && e.NextOffset > e.BaseOffset {
			cands = append(cands, e)
		}
	}
	sort.Slice(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if a.LeaderEpoch != b.LeaderEpoch {
			return a.LeaderEpoch > b.LeaderEpoch
		}
		return a.NextOffset > b.NextOffset
	})
	end, floor := End(man), man.LeaderEpoch
	var chain []metastore.SegmentRef
	for {
		i := slices.IndexFunc(cands, func(e metastore.WALEntry) bool {
			return e.LeaderEpoch >= floor && e.BaseOffset <= end && e.NextOffset > end
		})
		if i < 0 {
			return chain
		}
		e := cands[i]
		chain = append(chain, e.Ref())
		end, floor = e.NextOffset, e.LeaderEpoch
	}
}

// partitionEntries returns the entries of every index for one partition.
func partitionEntries(indexes []metastore.WALIndex, k tierKey) []metastore.WALEntry {
	var out []metastore.WALEntry
	for _, idx := range indexes {
		for _, e := range idx.Entries {
			if e.Topic == k.id && e.Partition == k.partition {
				out = append(out, e)
			}
		}
	}
	return out
}

// loadManifest reads a newly led partition's manifest and, when the WAL
// indexes hold shares that continue it or the topic has "object"
// durability and an earlier epoch wrote it, writes it under epoch with
// those shares: so every share a previous leader could have acknowledged
// is in the manifest before this one takes writes, and shares a deposed
// leader writes later are never counted. A manifest of a later epoch is
// returned as read (the caller sees it is fenced).
func (tg *Manager) loadManifest(ctx context.Context, lp ledPartition, epoch int32) (metastore.Manifest, error) {
	man, err := tg.meta.Manifest(ctx, lp.key.id, lp.key.partition)
	if err != nil || man.LeaderEpoch > epoch {
		return man, err
	}
	if tg.indexes == nil {
		if tg.indexes, err = tg.meta.WALIndexes(ctx); err != nil {
			return man, err
		}
	}
	chain := absorbChain(man, epoch, partitionEntries(tg.indexes, lp.key))
	if len(chain) == 0 && (!lp.cfg.object || man.LeaderEpoch == epoch) {
		return man, nil
	}
	next := man
	next.LeaderEpoch = epoch
	next.Segments = append(man.Segments[:len(man.Segments):len(man.Segments)], chain...)
	stored, err := tg.meta.PutManifest(ctx, lp.key.id, lp.key.partition, next)
	if errors.Is(err, metastore.ErrFenced) {
		return tg.meta.Manifest(ctx, lp.key.id, lp.key.partition)
	}
	if err != nil {
		return man, fmt.Errorf("tier: absorb %d WAL shares of %s/%d: %w", len(chain), lp.name, lp.key.partition, err)
	}
	if len(chain) > 0 {
		tg.log.Info("absorbed WAL index shares", "topic", lp.name, "partition", lp.key.partition, "shares", len(chain), "end", End(stored), "leaderEpoch", epoch)
	}
	return stored, nil
}

// writeWALIndex writes this node's WAL index with added, without the
// entries no absorber needs any more. Runs on the WAL loop.
func (tg *Manager) writeWALIndex(ctx context.Context, added []metastore.WALEntry) error {
	if !tg.walIdx.loaded {
		idx, err := tg.meta.WALIndex(ctx, tg.opts.NodeID)
		if err != nil {
			return err
		}
		tg.walIdx = walIndexState{loaded: true, idx: idx}
	}
	for attempt := 0; ; attempt++ {
		next := tg.walIdx.idx
		next.Owner = tg.opts.Incarnation
		next.Entries = append(tg.liveEntries(next.Entries), added...)
		for size := len(metastore.EncodeWALIndex(next)); size > tg.walBudget; size = len(metastore.EncodeWALIndex(next)) {
			// Down to half the budget, so absorptions come in bursts
			// every few flushes rather than at every one.
			excess := len(next.Entries) - len(next.Entries)*(tg.walBudget/2)/size
			ok, err := tg.absorbLargest(ctx, next.Entries, max(excess, 1))
			if err != nil {
				return err
			}
			if !ok {
				// Nothing led here can absorb the rest (entries of
				// partitions whose new leaders have not loaded yet): write
				// past the budget, up to the item limit (over it the write
				// fails with ErrTooLarge, and the acks wait).
				tg.log.Warn("WAL index over its budget with nothing to absorb", "entries", len(next.Entries), "bytes", size, "budget", tg.walBudget)
				break
			}
			next.Entries = tg.liveEntries(next.Entries)
		}
		stored, err := tg.meta.PutWALIndex(ctx, next)
		tg.stats.metaWrites.Add(1)
		tg.stats.indexBytes.Add(int64(len(metastore.EncodeWALIndex(next))))
		if err == nil {
			tg.walIdx.idx = stored
			return nil
		}
		if !errors.Is(err, metastore.ErrConditionFailed) || attempt >= 2 {
			return err
		}
		// Written meanwhile: by an earlier incarnation of this node still
		// running, or this write whose answer was lost. Merge with what is
		// stored (nothing it holds is dropped unless superseded).
		cur, rerr := tg.meta.WALIndex(ctx, tg.opts.NodeID)
		if rerr != nil {
			return rerr
		}
		tg.walIdx.idx = cur
		if slices.ContainsFunc(cur.Entries, func(e metastore.WALEntry) bool { return e.Object == added[0].Object }) {
			return nil
		}
	}
}

// liveEntries returns the entries some absorber may still need: not
// superseded by the manifest of a partition led here, nor found
// superseded by pruneWAL.
func (tg *Manager) liveEntries(entries []metastore.WALEntry) []metastore.WALEntry {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	out := make([]metastore.WALEntry, 0, len(entries))
	for _, e := range entries {
		if st := tg.parts[tierKey{e.Topic, e.Partition}]; st != nil && superseded(st.man, e) {
			continue
		}
		if tg.walDrop[entryID(e)] {
			continue
		}
		out = append(out, e)
	}
	return out
}

// absorbLargest writes the manifests of the led partitions with the most
// entries in entries, with their pending shares, until about want entries
// leave the index; ok is false when no led partition has any.
func (tg *Manager) absorbLargest(ctx context.Context, entries []metastore.WALEntry, want int) (ok bool, err error) {
	count := map[tierKey]int{}
	for _, e := range entries {
		count[tierKey{e.Topic, e.Partition}]++
	}
	keys := make([]tierKey, 0, len(count))
	for k := range count {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return count[keys[i]] > count[keys[j]] })
	removed := 0
	for _, k := range keys {
		if removed >= want {
			break
		}
		tg.mu.Lock()
		st := tg.parts[k]
		absorbable := st != nil && !st.fenced && len(st.pending) > 0
		var man metastore.Manifest
		if absorbable {
			man = st.view()
		}
		tg.mu.Unlock()
		if !absorbable {
			continue // not led here, fenced, or nothing pending
		}
		man.LeaderEpoch = max(man.LeaderEpoch, st.epoch)
		stored, err := tg.meta.PutManifest(ctx, k.id, k.partition, man)
		tg.stats.metaWrites.Add(1)
		if err != nil {
			if errors.Is(err, metastore.ErrFenced) {
				tg.mu.Lock()
				st.fenced = true
				tg.mu.Unlock()
			}
			return ok, fmt.Errorf("tier: absorb the WAL shares of %x/%d: %w", k.id, k.partition, err)
		}
		tg.setManifest(k, st, stored, false)
		removed += count[k]
		ok = true
	}
	return ok, nil
}

// compactWALIndex rewrites this node's WAL index without the entries no
// absorber needs, when pruneWAL found some: a broker that stopped flushing
// (it leads no "object" partition any more) still empties its index.
// Runs on the WAL loop.
func (tg *Manager) compactWALIndex(ctx context.Context) error {
	if !tg.walCompact.Swap(false) {
		return nil
	}
	if !tg.walIdx.loaded {
		idx, err := tg.meta.WALIndex(ctx, tg.opts.NodeID)
		if err != nil {
			return err
		}
		tg.walIdx = walIndexState{loaded: true, idx: idx}
	}
	cur := tg.walIdx.idx
	live := tg.liveEntries(cur.Entries)
	if len(live) == len(cur.Entries) || cur.Version == 0 {
		return nil
	}
	next := cur
	next.Owner, next.Entries = tg.opts.Incarnation, live
	stored, err := tg.meta.PutWALIndex(ctx, next)
	if err != nil {
		if errors.Is(err, metastore.ErrConditionFailed) {
			tg.walIdx.loaded = false // read it again next time
		}
		return err
	}
	tg.walIdx.idx = stored
	return nil
}

// pruneWAL finds the entries of this node's WAL index that no absorber
// needs any more: for the partitions it leads, against their manifests in
// memory; for the others, against their manifests read (one per
// partition), or because their topic is gone. The next flush leaves them
// out; if there are any, the WAL loop is asked to rewrite the index even
// with nothing to flush.
func (tg *Manager) pruneWAL(ctx context.Context) error {
	if !tg.cat.LeaseValid() {
		return nil
	}
	idx, err := tg.meta.WALIndex(ctx, tg.opts.NodeID)
	if err != nil {
		return err
	}
	snap := tg.cat.Snapshot()
	mans := map[tierKey]metastore.Manifest{}
	drop := map[walEntryID]bool{}
	stale := false
	for _, e := range idx.Entries {
		k := tierKey{e.Topic, e.Partition}
		tg.mu.Lock()
		st := tg.parts[k]
		covered := st != nil && superseded(st.man, e)
		tg.mu.Unlock()
		if st != nil {
			if covered {
				stale = true
			}
			continue // liveEntries checks led partitions itself
		}
		man, ok := mans[k]
		if !ok {
			if man, err = tg.meta.Manifest(ctx, k.id, k.partition); err != nil {
				return err
			}
			mans[k] = man
		}
		gone := snap.TopicByID(k.id) == nil && man.Version == 0
		if gone || superseded(man, e) {
			drop[entryID(e)] = true
		}
	}
	tg.mu.Lock()
	tg.walDrop = drop
	tg.mu.Unlock()
	if stale || len(drop) > 0 {
		tg.walCompact.Store(true)
		tg.KickWAL()
	}
	return nil
}

// Recoverable returns where a partition's log ends in the tier as a new
// leader would find it (its manifest, continued by the WAL index entries it
// would absorb) and the WAL objects that holds: for tests and tools.
func Recoverable(ctx context.Context, meta *metastore.Meta, id metastore.TopicID, partition int32) (int64, map[string]bool, error) {
	man, err := meta.Manifest(ctx, id, partition)
	if err != nil {
		return 0, nil, err
	}
	indexes, err := meta.WALIndexes(ctx)
	if err != nil {
		return 0, nil, err
	}
	man.Segments = append(man.Segments[:len(man.Segments):len(man.Segments)], absorbChain(man, 1<<31-1, partitionEntries(indexes, tierKey{id, partition}))...)
	return End(man), WALObjects(man), nil
}

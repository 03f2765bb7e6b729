package tier

// Object durability: the WAL flusher of "object" topics, and the sweep of
// WAL objects nothing references.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stratamq/strata/brokerfleet/internal/topic"
	"github.com/stratamq/strata/pkg/clock"
	"github.com/stratamq/strata/pkg/metastore"
	"github.com/stratamq/strata/pkg/objstore"
	"github.com/stratamq/strata/pkg/segment"
)

// maxWALEntries bounds the WAL entries of a manifest: at this many, the
// partition's active segment is rolled so an upload replaces them.
const maxWALEntries = 64

func walEntries(man metastore.Manifest) int {
	n := 0
	for _, s := range man.Segments {
		if IsWAL(s) {
			n++
		}
	}
	return n
}

// walMaxBytes bounds one partition's share of a WAL object.
const walMaxBytes = 8 << 20

// KickWAL asks for a flush of "object" durability partitions; call it
// after appending.
func (tg *Manager) KickWAL() {
	tg.walArrivals.Add(1)
	select {
	case tg.walKick <- struct{}{}:
	default:
	}
}

// runWAL makes the batches of "object" durability partitions durable in
// S3: it writes what they appended since the last flush into one shared
// object, references each share, and only then lets their high watermark
// (and acks=all) pass it.
//
// Flushes are group commits. At most one is in flight. A batch that
// arrives while none is starts one at once, so a lone producer waits one
// PUT and one metastore write. Batches that arrive while one is in flight
// are gathered into the next, which starts when the previous one has
// finished and, when two or more arrived (arrivedSince), at least
// FlushInterval after the previous one started: under load (something
// always waiting) flushes, and so PUTs, are at most one per FlushInterval.
// A producer can only outpace the interval on its own by waiting for each
// ack before sending again, so its PUT rate is bounded by its own round
// trip through S3 (two such producers, whose batches arrive one per flush,
// by about twice that).
func (tg *Manager) runWAL() {
	defer tg.wg.Done()
	t := tg.clock.NewTicker(tg.opts.FlushInterval) // a safety net: appends kick
	defer t.Stop()
	var last time.Time
	gathered := false // batches arrived while the previous flush was writing (arrivedSince)
	for {
		if !gathered {
			select {
			case <-tg.ctx.Done():
				return
			case <-t.C():
			case <-tg.walKick:
			}
		} else if wait := tg.opts.FlushInterval - clock.Since(tg.clock, last); wait > 0 {
			tg.paced = true
			if !clock.Sleep(tg.ctx, tg.clock, wait) {
				return
			}
		}
		last = tg.clock.Now()
		var err error
		gathered, err = tg.flush()
		tg.paced = false
		if err != nil && tg.ctx.Err() == nil {
			tg.log.Warn("object durability flush", "err", err)
		}
	}
}

// arrivedSince reports whether the flush that began when the arrivals
// count was start gathered load: two batches or more appended (KickWAL)
// while it wrote. A kick alone does not tell: a flush may already hold the
// batch that sent it (a tick's flush, say). Nor does one arrival: a
// producer with one batch in flight sends its next only after its ack,
// so a lone arrival is a batch that raced a flush the ticker started (in
// it or not), and pacing the next flush for it made that producer wait
// most of FlushInterval (the p99.9 of one-in-flight object acks). Under
// load many batches arrive during every flush, so PUTs stay paced.
func (tg *Manager) arrivedSince(start int64) bool { return tg.walArrivals.Load()-start >= 2 }

// flushWAL is one flush (flush without its report).
func (tg *Manager) flushWAL() error {
	_, err := tg.flush()
	return err
}

// flush writes what the "object" partitions appended since the last flush
// into one WAL object and the WAL index, then acknowledges it. gathered
// reports whether a batch arrived while it was writing, before it
// acknowledged (the next flush is then paced by FlushInterval): a batch
// sent after an acknowledgement, or after a flush that found nothing to
// write, is a lone producer's, and its kick starts the next flush at once.
func (tg *Manager) flush() (gathered bool, err error) {
	// Before anything is read: a batch counted after this may be missing
	// from the flush (then the next one is paced, at worst needlessly).
	start := tg.walArrivals.Load()
	if !tg.cat.LeaseValid() {
		return false, nil
	}
	type pending struct {
		lp ledPartition
		st *tierState
	}
	var parts []WALPart
	var owners []pending
	for _, lp := range tg.led(true) { // 20 times a second: only object-durability topics
		if !lp.cfg.object {
			continue
		}
		st, man, ok := tg.current(lp.key, lp.p)
		if !ok {
			continue
		}
		tg.mu.Lock()
		fenced := st.fenced
		tg.mu.Unlock()
		if fenced {
			continue
		}
		from := End(man)
		if lp.p.LogEndOffset() <= from {
			continue
		}
		data, err := lp.p.ReadUncommitted(nil, from, walMaxBytes)
		if err != nil || len(data) == 0 {
			continue
		}
		part := WALPart{ID: lp.key.id, Partition: lp.key.partition, LeaderEpoch: st.epoch, Man: man, Batches: data, Base: from, MaxTS: -1}
		_ = segment.Split(data, func(h segment.Header, _ []byte) error {
			part.Next = h.LastOffset() + 1
			part.MaxTS = max(part.MaxTS, h.MaxTimestamp)
			return nil
		})
		parts = append(parts, part)
		owners = append(owners, pending{lp, st})
	}
	if len(parts) == 0 {
		ctx, cancel := context.WithTimeout(tg.ctx, time.Minute)
		defer cancel()
		return false, tg.compactWALIndex(ctx)
	}
	tg.walCompact.Store(false) // this flush's index write drops what is stale
	before := tg.stats.snapshot()
	tg.mu.Lock()
	tg.walSeq++
	key := WALKey(tg.opts.NodeID, tg.opts.Incarnation, tg.walSeq)
	tg.mu.Unlock()
	ctx, cancel := context.WithTimeout(tg.ctx, time.Minute)
	defer cancel()
	if tg.opts.NoWALIndex {
		return tg.flushToManifests(ctx, key, parts, func(i int) (ledPartition, *tierState) { return owners[i].lp, owners[i].st }, start, before)
	}
	var body []byte
	entries := make([]metastore.WALEntry, len(parts))
	for i, p := range parts {
		entries[i] = metastore.WALEntry{Topic: p.ID, Partition: p.Partition, LeaderEpoch: p.LeaderEpoch, BaseOffset: p.Base, NextOffset: p.Next,
			MaxTimestamp: p.MaxTS, Object: key, Pos: int64(len(body)), Len: int64(len(p.Batches))}
		body = append(body, p.Batches...)
	}
	if err := objstore.PutIfAbsentIdempotent(ctx, tg.opts.Objects, key, body); err != nil {
		return tg.arrivedSince(start), fmt.Errorf("tier: put %s: %w", key, err)
	}
	// One conditional write references every share: the WAL index.
	if err := tg.writeWALIndex(ctx, entries); err != nil {
		return tg.arrivedSince(start), err
	}
	gathered = tg.arrivedSince(start)
	tg.flushed(before)
	// A lease lost meanwhile, or a partition whose leadership moved, acks
	// nothing more here: its share stays in the index, where the next
	// leader takes it only if its manifest has not moved past it.
	leased := tg.cat.LeaseValid()
	var durable []int
	tg.mu.Lock()
	for i, o := range owners {
		st := o.st
		if !leased || st.fenced || st.epoch != parts[i].LeaderEpoch || o.lp.p.LeaderEpoch() != st.epoch || tg.parts[o.lp.key] != st {
			continue
		}
		if End(st.view()) != parts[i].Base {
			continue // cannot happen with one flusher; never ack across a gap
		}
		st.pending = append(st.pending, entries[i].Ref())
		tg.walRefs[key]++
		durable = append(durable, i)
	}
	tg.mu.Unlock()
	for _, i := range durable {
		owners[i].lp.p.SetObjectDurable(parts[i].Next)
	}
	return gathered, nil
}

// flushToManifests is a flush as builds without the WAL index made it
// (ManagerOptions.NoWALIndex): the object, then one manifest write per
// partition in it.
func (tg *Manager) flushToManifests(ctx context.Context, key string, parts []WALPart, owner func(int) (ledPartition, *tierState), start int64, before WALStats) (gathered bool, err error) {
	mans, errs, err := tg.t.PutWAL(ctx, key, parts)
	gathered = tg.arrivedSince(start)
	if err != nil {
		return gathered, err
	}
	tg.stats.metaWrites.Add(int64(len(parts)))
	tg.flushed(before)
	tg.mu.Lock()
	for i := range parts {
		if errs[i] == nil {
			tg.walRefs[key]++
		}
	}
	tg.mu.Unlock()
	var failed []error
	for i := range parts {
		lp, st := owner(i)
		if errs[i] != nil {
			tg.setManifest(lp.key, st, mans[i], errors.Is(errs[i], ErrFenced))
			failed = append(failed, errs[i])
			continue
		}
		tg.setManifest(lp.key, st, mans[i], false)
		lp.p.SetObjectDurable(parts[i].Next)
	}
	return gathered, errors.Join(failed...)
}

// sweepWAL deletes the WAL objects under prefix that no manifest of an
// "object" durability topic references and that are older than the orphan
// grace (the in-memory reference counts of the broker that wrote them
// delete most of them sooner). It reads the topics and their manifests
// only when some object is that old.
func (tg *Manager) sweepWAL(ctx context.Context, prefix string, listTopics func(context.Context) ([]metastore.Topic, error)) error {
	objs, err := tg.opts.Objects.List(ctx, prefix)
	if err != nil {
		return fmt.Errorf("list %s: %w", prefix, err)
	}
	// A WAL object is referenced right after it is written or never (a
	// failed reference is not retried under the same key, and the flush
	// gives up within a minute), so one older than the grace period that no
	// manifest references is garbage: left by an earlier incarnation or a
	// node that is gone, or by partitions whose leadership moved.
	cutoff := tg.clock.Now().Add(-tg.opts.OrphanGrace)
	var old []objstore.ObjectInfo
	for _, o := range objs {
		if o.LastModified.Before(cutoff) {
			old = append(old, o)
		}
	}
	if len(old) == 0 {
		return nil
	}
	// The WAL indexes first: a share absorbed into its manifest between
	// the two reads is then in the manifest read after (the other order
	// could miss it in both).
	indexes, err := tg.meta.WALIndexes(ctx)
	if err != nil {
		return err
	}
	topics, err := listTopics(ctx)
	if err != nil {
		return err
	}
	referenced := map[string]bool{}
	mans := map[tierKey]metastore.Manifest{}
	exists := map[metastore.TopicID]bool{}
	for _, t := range topics {
		exists[t.ID] = true
		cfg, err := tg.opts.Defaults.Resolve(t.Configs)
		if err != nil || cfg.Durability != topic.DurabilityObject {
			continue
		}
		for p := int32(0); p < t.Partitions; p++ {
			man, err := tg.meta.Manifest(ctx, t.ID, p)
			if err != nil {
				return err
			}
			mans[tierKey{t.ID, p}] = man
			for obj := range WALObjects(man) {
				referenced[obj] = true
			}
		}
	}
	// The WAL indexes reference objects too, until their entries are
	// superseded (then nothing will ever read them).
	for _, idx := range indexes {
		for _, e := range idx.Entries {
			k := tierKey{e.Topic, e.Partition}
			if !exists[k.id] || referenced[e.Object] {
				continue
			}
			man, ok := mans[k]
			if !ok {
				if man, err = tg.meta.Manifest(ctx, k.id, k.partition); err != nil {
					return err
				}
				mans[k] = man
			}
			if !superseded(man, e) {
				referenced[e.Object] = true
			}
		}
	}
	for _, o := range old {
		if referenced[o.Key] {
			continue
		}
		if err := tg.opts.Objects.Delete(ctx, o.Key); err != nil {
			return err
		}
		tg.log.Info("collected unreferenced WAL object", "object", o.Key)
	}
	return nil
}

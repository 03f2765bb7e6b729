package broker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/stratamq/strata/brokerfleet/internal/partition"
	"github.com/stratamq/strata/brokerfleet/internal/tier"
	"github.com/stratamq/strata/brokerfleet/internal/topic"
	"github.com/stratamq/strata/pkg/metastore"
	"github.com/stratamq/strata/pkg/objstore"
	"github.com/stratamq/strata/pkg/segment"
)

// The S3 tier, broker side. For each partition it leads, the broker keeps
// the manifest it last read or wrote, uploads closed committed segments,
// expires tiered segments by retention.* and collects orphans. A partition
// accepts writes only after its leader has read the manifest under its
// current leader epoch: a leader whose local log ends below the tier (a
// wiped disk) first restarts its log at the tier's end, so offsets are
// never assigned twice.

type tierKey struct {
	id        metastore.TopicID
	partition int32
}

type tierState struct {
	epoch    int32 // leader epoch the manifest was read under
	man      metastore.Manifest
	lastGC   time.Time
	fenced   bool      // a newer epoch owns the manifest: stop uploading
	failures int       // consecutive failed rounds
	retryAt  time.Time // no new attempt before (backoff after failures)
}

type tiering struct {
	b    *Broker
	t    *tier.Tier
	kick chan struct{}

	mu        sync.Mutex
	loaded    chan struct{} // closed (and replaced) whenever a manifest is loaded into parts
	parts     map[tierKey]*tierState
	walRefs   map[string]int // WAL object -> manifests of led partitions referencing it
	walSeq    int64
	walKick   chan struct{}
	lastSweep time.Time
}

func newTiering(b *Broker) *tiering {
	if b.cfg.Objects == nil {
		return nil
	}
	return &tiering{
		b: b, kick: make(chan struct{}, 1), parts: map[tierKey]*tierState{}, walRefs: map[string]int{},
		walKick: make(chan struct{}, 1),
		t: tier.New(tier.Options{
			Store: b.cfg.Objects, Meta: b.meta, Logger: b.log, Now: b.now,
			OrphanGrace: b.cfg.TierOrphanGrace,
		}),
	}
}

// readyWait bounds how long a write to a new leader waits for its
// manifest to be loaded before it is refused with NOT_LEADER. Refusing at
// once cost clients up to 5 s on every new topic (franz-go refreshes
// metadata at most every 5 s), while loading takes milliseconds.
const readyWait = 3 * time.Second

// ready reports whether a led partition may take writes: its manifest was
// read under its current leader epoch. Otherwise it kicks the tier loop
// and waits up to readyWait for it.
func (tg *tiering) ready(name string, idx int32, p *partition.Partition) bool {
	if tg == nil {
		return true // no tier: nothing to read first
	}
	ts := tg.b.lookup(name)
	if ts == nil {
		return true // deleted meanwhile: the append fails on its own
	}
	var timeout <-chan time.Time
	for {
		ch := tg.loadedSignal() // taken first, so a load in between is not missed
		if _, _, ok := tg.current(tierKey{ts.meta.ID, idx}, p); ok {
			return true
		}
		if timeout == nil {
			t := time.NewTimer(readyWait)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-ch:
		case <-timeout:
			return false
		case <-tg.b.ctx.Done():
			return false
		}
	}
}

// loadedSignal returns a channel closed at the next manifest load.
func (tg *tiering) loadedSignal() <-chan struct{} {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	if tg.loaded == nil {
		tg.loaded = make(chan struct{})
	}
	return tg.loaded
}

// current returns a partition's tier state and manifest if they were read
// under its current leader epoch; otherwise it kicks the tier loop.
func (tg *tiering) current(key tierKey, p *partition.Partition) (*tierState, metastore.Manifest, bool) {
	tg.mu.Lock()
	st := tg.parts[key]
	ok := st != nil && st.epoch == p.LeaderEpoch()
	var man metastore.Manifest
	if ok {
		man = st.man
	}
	tg.mu.Unlock()
	if !ok {
		tg.poke()
	}
	return st, man, ok
}

func (tg *tiering) poke() {
	select {
	case tg.kick <- struct{}{}:
	default:
	}
}

// manifest returns the cached manifest of a partition led here.
func (tg *tiering) manifest(id metastore.TopicID, idx int32) (metastore.Manifest, bool) {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	st := tg.parts[tierKey{id, idx}]
	if st == nil {
		return metastore.Manifest{}, false
	}
	return st.man, true
}

// run uploads, expires and collects every TierInterval, and at once when
// a partition waits to become writable.
func (tg *tiering) run() {
	b := tg.b
	defer b.wg.Done()
	t := time.NewTicker(b.cfg.TierInterval)
	defer t.Stop()
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-t.C:
		case <-tg.kick:
		}
		tg.round()
	}
}

type ledPartition struct {
	key   tierKey
	name  string
	p     *partition.Partition
	epoch int32 // the leader epoch of the state that made this broker leader
	cfg   partitionCfg
}

type partitionCfg struct {
	retention      time.Duration
	retentionBytes int64
	object         bool // strata.durability=object
}

func (tg *tiering) led(objectOnly bool) []ledPartition {
	b := tg.b
	b.mu.RLock()
	defer b.mu.RUnlock()
	var out []ledPartition
	for _, ts := range b.topics {
		if objectOnly && ts.cfg.Durability != topic.DurabilityObject {
			continue
		}
		for i, st := range ts.states {
			if st.Leader == b.cfg.NodeID && ts.parts[i] != nil {
				out = append(out, ledPartition{key: tierKey{ts.meta.ID, int32(i)}, name: ts.meta.Name, p: ts.parts[i], epoch: st.LeaderEpoch,
					cfg: partitionCfg{retention: ts.cfg.Retention, retentionBytes: ts.cfg.RetentionBytes,
						object: ts.cfg.Durability == topic.DurabilityObject}})
			}
		}
	}
	return out
}

func (tg *tiering) round() {
	b := tg.b
	if !b.leaseValid() {
		return
	}
	led := tg.led(false)
	keep := map[tierKey]bool{}
	now := time.Now()
	for _, lp := range led {
		keep[lp.key] = true
		tg.mu.Lock()
		st := tg.parts[lp.key]
		wait := st != nil && st.epoch == lp.p.LeaderEpoch() && now.Before(st.retryAt)
		tg.mu.Unlock()
		if wait {
			continue
		}
		ctx, cancel := context.WithTimeout(b.ctx, 2*time.Minute)
		err := tg.partitionRound(ctx, lp)
		cancel()
		tg.mu.Lock()
		if st := tg.parts[lp.key]; st != nil {
			if err == nil {
				st.failures, st.retryAt = 0, time.Time{}
			} else {
				// Back off: S3 or the metastore is failing; local retention
				// keeps what is not uploaded meanwhile.
				st.failures++
				st.retryAt = now.Add(min(b.cfg.TierInterval<<min(st.failures, 10), time.Minute))
			}
		}
		tg.mu.Unlock()
		if err != nil && b.ctx.Err() == nil {
			b.log.Warn("tier", "topic", lp.name, "partition", lp.key.partition, "err", err)
		}
	}
	tg.mu.Lock()
	for k := range tg.parts {
		if !keep[k] {
			delete(tg.parts, k) // no longer led here
		}
	}
	tg.mu.Unlock()
	if time.Since(tg.lastSweep) >= b.cfg.TierOrphanGrace/2 {
		tg.lastSweep = time.Now()
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Minute)
		if err := tg.sweepWAL(ctx); err != nil && b.ctx.Err() == nil {
			b.log.Warn("sweep WAL objects", "err", err)
		}
		cancel()
	}
}

// sweepWAL deletes this broker's WAL objects that no manifest of an
// "object" durability topic references and that are older than the orphan
// grace (the in-memory reference counts delete most of them sooner).
func (tg *tiering) sweepWAL(ctx context.Context) error {
	b := tg.b
	objs, err := b.cfg.Objects.List(ctx, fmt.Sprintf("wal/%d/", b.cfg.NodeID))
	if err != nil {
		return err
	}
	// A WAL object is referenced right after it is written or never (a
	// failed reference is not retried under the same key), so one older
	// than the grace period that no manifest references is garbage: left
	// by an earlier incarnation, or by partitions whose leadership moved.
	cutoff := time.Now().Add(-b.cfg.TierOrphanGrace)
	var old []objstore.ObjectInfo
	for _, o := range objs {
		if o.LastModified.Before(cutoff) {
			old = append(old, o)
		}
	}
	if len(old) == 0 {
		return nil
	}
	referenced := map[string]bool{}
	topics, err := b.meta.Topics(ctx)
	if err != nil {
		return err
	}
	for _, t := range topics {
		cfg, err := b.defaults.Resolve(t.Configs)
		if err != nil || cfg.Durability != topic.DurabilityObject {
			continue
		}
		for p := int32(0); p < t.Partitions; p++ {
			man, err := b.meta.Manifest(ctx, t.ID, p)
			if err != nil {
				return err
			}
			for obj := range tier.WALObjects(man) {
				referenced[obj] = true
			}
		}
	}
	for _, o := range old {
		if referenced[o.Key] {
			continue
		}
		if err := b.cfg.Objects.Delete(ctx, o.Key); err != nil {
			return err
		}
		b.log.Info("collected WAL object of an earlier incarnation", "object", o.Key)
	}
	return nil
}

func (tg *tiering) partitionRound(ctx context.Context, lp ledPartition) error {
	b, p := tg.b, lp.p
	// lp.epoch is the epoch under which the metadata made this broker the
	// leader; the partition moves to a newer one (and a follower's role)
	// as soon as the broker applies newer metadata, possibly mid-round.
	epoch := lp.epoch
	if p.LeaderEpoch() != epoch {
		return nil
	}
	tg.mu.Lock()
	st := tg.parts[lp.key]
	tg.mu.Unlock()
	if st == nil || st.epoch != epoch {
		man, err := b.meta.Manifest(ctx, lp.key.id, lp.key.partition)
		if err != nil {
			return err
		}
		// A manifest written under a later epoch means another broker
		// leads now and this one has not heard yet (a lease that lapsed
		// and was regained): it is fenced and must not touch its log, which
		// follower truncation will line up with the new leader's.
		if end := tier.End(man); man.LeaderEpoch <= epoch && p.LogEndOffset() < end {
			// Elected with a log that ends below the tier (a wiped or
			// replaced disk): everything below end is in S3.
			b.log.Warn("local log ends below the tier; restarting it at the tier's end",
				"topic", lp.name, "partition", lp.key.partition, "localEnd", p.LogEndOffset(), "tierEnd", end, "leaderEpoch", epoch, "manifestEpoch", man.LeaderEpoch)
			if err := p.ResetTo(epoch, true, end); err != nil {
				if errors.Is(err, partition.ErrStaleEpoch) {
					return nil // newer metadata arrived meanwhile
				}
				return err
			}
		}
		st = &tierState{epoch: epoch, man: man, fenced: man.LeaderEpoch > epoch}
		p.SetTier(tier.Start(man), tier.SegmentEnd(man))
		p.SetObjectDurable(tier.End(man))
		tg.mu.Lock()
		tg.parts[lp.key] = st
		if tg.loaded != nil {
			close(tg.loaded) // wake writes waiting in ready
			tg.loaded = nil
		}
		tg.mu.Unlock()
	}
	// The WAL loop and DeleteRecords update st under tg.mu too: read it
	// under the lock every time.
	if _, fenced := tg.snapshot(st); fenced {
		return nil
	}
	if man, _ := tg.snapshot(st); lp.cfg.object && walEntries(man) >= maxWALEntries {
		// Replace the WAL entries by a segment upload before the manifest
		// grows: close the active segment (uploaded once committed).
		if err := p.Roll(); err != nil {
			return err
		}
	}
	cur, _ := tg.snapshot(st)
	end := tier.SegmentEnd(cur)
	for _, seg := range p.ClosedSegments() {
		if seg.NextOffset <= end {
			continue
		}
		if !b.leaseValid() || p.LeaderEpoch() != epoch {
			return nil
		}
		if ts := b.lookup(lp.name); ts == nil || ts.meta.ID != lp.key.id {
			return nil // deleted meanwhile: nothing more goes to S3
		}
		f, err := p.OpenSegment(seg)
		if err != nil {
			if errors.Is(err, segment.ErrOffsetOutOfRange) {
				continue // deleted meanwhile (DeleteRecords)
			}
			return err
		}
		cur, _ := tg.snapshot(st)
		man, err := tg.t.Upload(ctx, lp.key.id, lp.key.partition, epoch, cur, seg, f)
		f.Close()
		if errors.Is(err, tier.ErrFenced) {
			tg.setManifest(lp.key, st, man, true)
			return nil
		}
		if err != nil {
			return err
		}
		tg.setManifest(lp.key, st, man, false)
		b.metrics.tierUploaded(seg.Size)
		end = tier.SegmentEnd(man)
		p.SetTier(tier.Start(man), end)
	}
	if lp.cfg.retention >= 0 || lp.cfg.retentionBytes >= 0 {
		retention := lp.cfg.retention
		if retention < 0 {
			retention = -1
		}
		cur, _ := tg.snapshot(st)
		man, err := tg.t.Expire(ctx, lp.key.id, lp.key.partition, epoch, cur, retention, lp.cfg.retentionBytes)
		if err != nil {
			return err
		}
		if man.Version != cur.Version {
			tg.setManifest(lp.key, st, man, false)
			p.SetTier(tier.Start(man), max(tier.SegmentEnd(man), p.UploadedTo()))
		}
	}
	if time.Since(st.lastGC) >= b.cfg.TierOrphanGrace/2 {
		st.lastGC = time.Now()
		cur, _ := tg.snapshot(st)
		if _, err := tg.t.Collect(ctx, lp.key.id, lp.key.partition, cur); err != nil {
			return err
		}
	}
	return nil
}

// snapshot returns a partition's cached manifest and whether its leader
// epoch was fenced, read under tg.mu.
func (tg *tiering) snapshot(st *tierState) (metastore.Manifest, bool) {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return st.man, st.fenced
}

// setManifest caches a partition's newer manifest and deletes the WAL
// objects no led partition references any more.
func (tg *tiering) setManifest(k tierKey, st *tierState, man metastore.Manifest, fenced bool) {
	tg.mu.Lock()
	st.fenced = st.fenced || fenced
	if man.Version < st.man.Version {
		tg.mu.Unlock()
		return // the WAL loop wrote a newer one meanwhile
	}
	var unused []string
	now := tier.WALObjects(man)
	for obj := range tier.WALObjects(st.man) {
		if now[obj] {
			continue
		}
		if n, ok := tg.walRefs[obj]; ok {
			if n <= 1 {
				delete(tg.walRefs, obj)
				unused = append(unused, obj)
			} else {
				tg.walRefs[obj] = n - 1
			}
		}
	}
	st.man = man
	tg.mu.Unlock()
	for _, obj := range unused {
		ctx, cancel := context.WithTimeout(tg.b.ctx, time.Minute)
		if err := tg.b.cfg.Objects.Delete(ctx, obj); err != nil {
			tg.b.log.Warn("delete WAL object", "object", obj, "err", err)
		}
		cancel()
	}
}

// maxWALEntries bounds the WAL entries of a manifest: at this many, the
// partition's active segment is rolled so an upload replaces them.
const maxWALEntries = 64

func walEntries(man metastore.Manifest) int {
	n := 0
	for _, s := range man.Segments {
		if tier.IsWAL(s) {
			n++
		}
	}
	return n
}

// walMaxBytes bounds one partition's share of a WAL object.
const walMaxBytes = 8 << 20

// kickWAL asks for a flush of "object" durability partitions.
func (tg *tiering) kickWAL() {
	select {
	case tg.walKick <- struct{}{}:
	default:
	}
}

// runWAL makes the batches of "object" durability partitions durable in
// S3: it writes what they appended since the last flush into one shared
// object, references each share from its partition's manifest, and only
// then lets their high watermark (and acks=all) pass it. A flush starts
// as soon as a batch arrives, but at most one per ObjectFlushInterval (the
// PUT-rate cap); batches arriving meanwhile share the next one (group
// commit).
func (tg *tiering) runWAL() {
	b := tg.b
	defer b.wg.Done()
	t := time.NewTicker(b.cfg.ObjectFlushInterval)
	defer t.Stop()
	var last time.Time
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-t.C:
		case <-tg.walKick:
		}
		if wait := b.cfg.ObjectFlushInterval - time.Since(last); wait > 0 {
			sleepCtx(b.ctx, wait)
		}
		last = time.Now()
		if err := tg.flushWAL(); err != nil && b.ctx.Err() == nil {
			b.log.Warn("object durability flush", "err", err)
		}
	}
}

func (tg *tiering) flushWAL() error {
	b := tg.b
	if !b.leaseValid() {
		return nil
	}
	type pending struct {
		lp ledPartition
		st *tierState
	}
	var parts []tier.WALPart
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
		from := tier.End(man)
		if lp.p.LogEndOffset() <= from {
			continue
		}
		data, err := lp.p.ReadUncommitted(nil, from, walMaxBytes)
		if err != nil || len(data) == 0 {
			continue
		}
		part := tier.WALPart{ID: lp.key.id, Partition: lp.key.partition, LeaderEpoch: st.epoch, Man: man, Batches: data, Base: from, MaxTS: -1}
		_ = segment.Split(data, func(h segment.Header, _ []byte) error {
			part.Next = h.LastOffset() + 1
			part.MaxTS = max(part.MaxTS, h.MaxTimestamp)
			return nil
		})
		parts = append(parts, part)
		owners = append(owners, pending{lp, st})
	}
	if len(parts) == 0 {
		return nil
	}
	tg.mu.Lock()
	tg.walSeq++
	key := tier.WALKey(b.cfg.NodeID, b.cfg.Incarnation, tg.walSeq)
	tg.mu.Unlock()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	mans, errs, err := tg.t.PutWAL(ctx, key, parts)
	if err != nil {
		return err
	}
	tg.mu.Lock()
	for i := range parts {
		if errs[i] == nil {
			tg.walRefs[key]++
		}
	}
	tg.mu.Unlock()
	var failed []error
	for i, o := range owners {
		if errs[i] != nil {
			tg.setManifest(o.lp.key, o.st, mans[i], errors.Is(errs[i], tier.ErrFenced))
			failed = append(failed, errs[i])
			continue
		}
		tg.setManifest(o.lp.key, o.st, mans[i], false)
		o.lp.p.SetObjectDurable(parts[i].Next)
	}
	return errors.Join(failed...)
}

// readTier serves a consumer fetch below the local log start from S3.
func (b *Broker) readTier(id metastore.TopicID, idx int32, offset int64, maxBytes int) ([]byte, error) {
	man, ok := b.tiering.manifest(id, idx)
	if !ok {
		return nil, fmt.Errorf("tier of partition %d not loaded yet: %w", idx, errNotLeader)
	}
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	return b.tiering.t.Read(ctx, man, offset, maxBytes)
}

// Meta returns the broker's metastore.
func (b *Broker) Meta() *metastore.Meta { return b.meta }

// ClosedSegmentEnd returns the offset where a local partition's closed,
// committed segments end (what the tier can hold), or 0 if it has none.
func (b *Broker) ClosedSegmentEnd(name string, idx int32) int64 {
	ts := b.lookup(name)
	if ts == nil || idx < 0 || int(idx) >= len(ts.parts) || ts.parts[idx] == nil {
		return 0
	}
	p := ts.parts[idx]
	end := p.UploadedTo()
	if end == math.MaxInt64 {
		end = 0
	}
	for _, s := range p.ClosedSegments() {
		end = max(end, s.NextOffset)
	}
	return end
}

// checkTierConfig refuses "object" durability on a broker without a tier.
func (b *Broker) checkTierConfig(cfg topic.Config) error {
	if cfg.Durability == topic.DurabilityObject && b.tiering == nil {
		return fmt.Errorf("%w: %s=%s needs the S3 tier (brokerfleet serve -bucket)", topic.ErrInvalidConfig, topic.Durability, topic.DurabilityObject)
	}
	return nil
}

// removeTopic deletes a deleted topic's segment objects and manifests in
// the background (the broker that handled DeleteTopics does it; a crash
// midway leaves objects under the topic id's prefix, which nothing reads).
func (tg *tiering) removeTopic(t metastore.Topic) {
	if tg == nil {
		return
	}
	b := tg.b
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		// Leaders learn of the deletion within a watch interval, but an
		// upload already running finishes: sweep again after they have.
		settle := max(5*time.Second, 3*b.cfg.TierInterval+3*b.cfg.WatchInterval)
		for _, wait := range []time.Duration{0, settle, 6 * settle} {
			select {
			case <-b.ctx.Done():
				return
			case <-time.After(wait):
			}
			ctx, cancel := context.WithTimeout(b.ctx, 10*time.Minute)
			n, err := tg.removeTopicObjects(ctx, t)
			cancel()
			if err != nil {
				b.log.Warn("remove deleted topic's tier", "topic", t.Name, "err", err)
			} else if n > 0 {
				b.log.Info("deleted topic's tier removed", "topic", t.Name, "objects", n)
			}
		}
	}()
}

func (tg *tiering) removeTopicObjects(ctx context.Context, t metastore.Topic) (int, error) {
	b := tg.b
	n := 0
	for p := int32(0); p < t.Partitions; p++ {
		objs, err := b.cfg.Objects.List(ctx, tier.Prefix(t.ID, p))
		if err != nil {
			return n, err
		}
		for _, o := range objs {
			if err := b.cfg.Objects.Delete(ctx, o.Key); err != nil {
				return n, err
			}
			n++
		}
		if err := b.meta.DeleteManifest(ctx, t.ID, p); err != nil {
			return n, err
		}
	}
	return n, nil
}

// tierOffsetForTimestamp answers ListOffsets by time from the tier when the
// first record at or after ts lies below the local log; ok is false when
// the tier has none (the local log is searched next).
func (b *Broker) tierOffsetForTimestamp(name string, idx int32, p *partition.Partition, ts int64) (int64, int64, bool, error) {
	if b.tiering == nil || p.LogStartOffset() >= p.LocalLogStartOffset() {
		return 0, 0, false, nil
	}
	ts0 := b.lookup(name)
	if ts0 == nil {
		return 0, 0, false, nil
	}
	man, ok := b.tiering.manifest(ts0.meta.ID, idx)
	if !ok {
		return 0, 0, false, fmt.Errorf("tier of %s-%d not loaded yet: %w", name, idx, errNotLeader)
	}
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	local := p.LocalLogStartOffset()
	batch, found, err := b.tiering.t.FindTimestamp(ctx, man, ts, local)
	if err != nil || !found {
		return 0, 0, false, err
	}
	return partition.FirstRecordAt(batch, ts, p.LogStartOffset())
}

// deleteRecords applies DeleteRecords to a led tiered partition: the local
// log as usual, and the manifest's start offset, so the tier's records
// below offset are gone for readers at once. It returns the new log start.
func (b *Broker) deleteRecords(name string, idx int32, p *partition.Partition, offset int64) (int64, error) {
	if offset == -1 {
		offset = p.HighWatermark()
	}
	low, err := p.DeleteRecords(offset)
	if err != nil || b.tiering == nil {
		return low, err
	}
	ts := b.lookup(name)
	if ts == nil {
		return low, nil
	}
	key := tierKey{ts.meta.ID, idx}
	tg := b.tiering
	st, man, ok := tg.current(key, p)
	if !ok {
		return 0, fmt.Errorf("%s-%d: loading the tier manifest: %w", name, idx, errNotLeader)
	}
	ctx, cancel := context.WithTimeout(b.ctx, metaTimeout)
	defer cancel()
	next, err := tg.t.DeleteRecords(ctx, key.id, idx, st.epoch, man, offset)
	if err != nil {
		return 0, err
	}
	tg.setManifest(key, st, next, false)
	p.SetTier(tier.Start(next), max(tier.SegmentEnd(next), p.UploadedTo()))
	return p.LogStartOffset(), nil
}

package tier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratamq/strata/brokerfleet/internal/catalog"
	"github.com/stratamq/strata/brokerfleet/internal/partition"
	"github.com/stratamq/strata/brokerfleet/internal/topic"
	"github.com/stratamq/strata/pkg/clock"
	"github.com/stratamq/strata/pkg/metastore"
	"github.com/stratamq/strata/pkg/objstore"
	"github.com/stratamq/strata/pkg/segment"
)

// Manager is the S3 tier, broker side. For each partition it leads, the broker keeps
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
	epoch int32              // leader epoch the manifest was read under
	man   metastore.Manifest // as stored
	// pending are the WAL shares flushed under epoch that only this
	// node's WAL index references (the manifest has not absorbed them),
	// in offset order; view() appends them to man.
	pending  []metastore.SegmentRef
	lastGC   time.Time
	fenced   bool      // a newer epoch owns the manifest: stop uploading
	failures int       // consecutive failed rounds
	retryAt  time.Time // no new attempt before (backoff after failures)
}

// ManagerOptions configures a Manager.
type ManagerOptions struct {
	// Catalog is the broker's view: which partitions it leads, and whether
	// its lease lets it act. Required.
	Catalog *catalog.Catalog
	// Meta holds the manifests. Required.
	Meta *metastore.Meta
	// Objects is the object store. Required.
	Objects objstore.Store
	// NodeID and Incarnation name this broker's WAL objects.
	NodeID      int32
	Incarnation string
	// Defaults resolves topic configs (to find "object" durability topics).
	Defaults topic.Defaults
	// Interval is how often led partitions upload closed segments, expire
	// tiered ones and (every OrphanGrace/2) collect orphans.
	Interval time.Duration
	// OrphanGrace is how old an object no manifest references must be
	// before it is deleted.
	OrphanGrace time.Duration
	// FlushInterval is the least time between the starts of two flushes of
	// "object" durability partitions to S3 when the second gathers batches
	// that arrived during the first (runWAL); one shared object per flush.
	FlushInterval time.Duration
	// NoWALIndex makes flushes reference their shares from each
	// partition's manifest (one metastore write per partition) instead of
	// this node's WAL index (one write per flush), as builds without the
	// index did: for a cluster whose brokers do not all read the index yet.
	NoWALIndex bool
	// WatchInterval is how often brokers apply metadata changes (deleted
	// topics' objects are swept again after the leaders have noticed).
	WatchInterval time.Duration
	// Sweep reports whether this broker is the one that sweeps the whole
	// bucket now; the broker wires it to holding the controller lease, so
	// one broker at a time does. While it reports true, at most every
	// OrphanGrace/2, the sweep deletes what no partition's leader can
	// reach: the objects and manifests of deleted topics whose removal did
	// not finish, and the WAL objects of any node id and incarnation that
	// no manifest references, once older than OrphanGrace. nil: never, and
	// each broker sweeps its own WAL objects instead (wal/<NodeID>/).
	Sweep func() bool
	// Uploaded runs after each segment upload with its size.
	Uploaded func(bytes int64)
	// Flushed runs after each object-durability flush that wrote a WAL
	// object, with the metastore writes it made and whether it waited for
	// FlushInterval.
	Flushed func(metaWrites int64, paced bool)
	// Clock drives the loops; nil means the real clock.
	Clock clock.Clock
	// Logger receives operational logs; nil means slog.Default().
	Logger *slog.Logger
}

// Manager runs the tier for the partitions one broker leads.
type Manager struct {
	opts  ManagerOptions
	cat   *catalog.Catalog
	meta  *metastore.Meta
	log   *slog.Logger
	clock clock.Clock
	t     *Tier
	kick  chan struct{}

	ctx context.Context // the broker's; ends the loops and background work
	wg  sync.WaitGroup

	mu      sync.Mutex
	loaded  chan struct{} // closed (and replaced) whenever a manifest is loaded into parts
	parts   map[tierKey]*tierState
	walRefs map[string]int // WAL object -> manifests of led partitions referencing it
	walSeq  int64
	walKick chan struct{}
	// walArrivals counts KickWAL calls: a flush that sees it move while it
	// writes gathered something (the next one is paced).
	walArrivals atomic.Int64
	paced       bool // the flush running waited for FlushInterval (the WAL loop's)
	lastSweep   time.Time
	walDrop     map[walEntryID]bool // foreign entries of this node's WAL index that no absorber would take (pruneWAL)
	lastPrune   time.Time

	// walIdx is this node's WAL index as last read or written; only the
	// WAL loop (flushWAL) uses it.
	walIdx walIndexState
	// indexes caches every node's WAL index for one tier round (read at
	// the round's first manifest load, after the elections it acts on).
	indexes []metastore.WALIndex
	stats   walStats
	// walBudget bounds the encoded WAL index (walIndexBudget; tests lower it).
	walBudget int
	// walCompact asks the WAL loop to rewrite the index without the
	// entries pruneWAL found superseded, even with nothing to flush.
	walCompact atomic.Bool

	// backlogMu guards backlog: per led partition, the oldest closed
	// segment not yet uploaded and when it was first seen so.
	backlogMu sync.Mutex
	backlog   map[tierKey]backlogEntry
}

type backlogEntry struct {
	base  int64
	since time.Time
}

// NewManager returns a manager; Start runs its loops.
func NewManager(opts ManagerOptions) *Manager {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	opts.Clock = clock.Or(opts.Clock)
	return &Manager{
		opts: opts, cat: opts.Catalog, meta: opts.Meta, log: opts.Logger, clock: opts.Clock,
		kick: make(chan struct{}, 1), parts: map[tierKey]*tierState{}, walRefs: map[string]int{}, walDrop: map[walEntryID]bool{},
		walKick: make(chan struct{}, 1), backlog: map[tierKey]backlogEntry{}, walBudget: walIndexBudget,
		t: New(Options{
			Store: opts.Objects, Meta: opts.Meta, Logger: opts.Logger, Now: opts.Clock.Now,
			OrphanGrace: opts.OrphanGrace,
		}),
	}
}

// Start runs the upload loop and the object durability flusher until ctx
// ends; Wait waits for them and for background work.
func (tg *Manager) Start(ctx context.Context) {
	tg.ctx = ctx
	tg.wg.Add(2)
	go tg.run()
	go tg.runWAL()
}

// Wait waits for the loops started by Start and for background work.
func (tg *Manager) Wait() { tg.wg.Wait() }

// readyWait bounds how long a write to a new leader waits for its
// manifest to be loaded before it is refused with NOT_LEADER. Refusing at
// once cost clients up to 5 s on every new topic (franz-go refreshes
// metadata at most every 5 s), while loading takes milliseconds.
const readyWait = 3 * time.Second

// Ready reports whether a led partition may take writes: its manifest was
// read under its current leader epoch. Otherwise it kicks the tier loop
// and waits up to readyWait for it.
func (tg *Manager) Ready(name string, idx int32, p *partition.Partition) bool {
	if tg == nil {
		return true // no tier: nothing to read first
	}
	ts := tg.cat.Snapshot().Topic(name)
	if ts == nil {
		return true // deleted meanwhile: the append fails on its own
	}
	var timeout <-chan time.Time
	for {
		ch := tg.loadedSignal() // taken first, so a load in between is not missed
		if _, _, ok := tg.current(tierKey{ts.Meta.ID, idx}, p); ok {
			return true
		}
		if timeout == nil {
			t := tg.clock.NewTimer(readyWait)
			defer t.Stop()
			timeout = t.C()
		}
		select {
		case <-ch:
		case <-timeout:
			return false
		case <-tg.ctx.Done():
			return false
		}
	}
}

// loadedSignal returns a channel closed at the next manifest load.
func (tg *Manager) loadedSignal() <-chan struct{} {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	if tg.loaded == nil {
		tg.loaded = make(chan struct{})
	}
	return tg.loaded
}

// current returns a partition's tier state and manifest if they were read
// under its current leader epoch; otherwise it kicks the tier loop.
func (tg *Manager) current(key tierKey, p *partition.Partition) (*tierState, metastore.Manifest, bool) {
	tg.mu.Lock()
	st := tg.parts[key]
	ok := st != nil && st.epoch == p.LeaderEpoch()
	var man metastore.Manifest
	if ok {
		man = st.view()
	}
	tg.mu.Unlock()
	if !ok {
		tg.poke()
	}
	return st, man, ok
}

func (tg *Manager) poke() {
	select {
	case tg.kick <- struct{}{}:
	default:
	}
}

// manifest returns the cached manifest of a partition led here.
func (tg *Manager) manifest(id metastore.TopicID, idx int32) (metastore.Manifest, bool) {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	st := tg.parts[tierKey{id, idx}]
	if st == nil {
		return metastore.Manifest{}, false
	}
	return st.view(), true
}

// run uploads, expires and collects every TierInterval, and at once when
// a partition waits to become writable.
func (tg *Manager) run() {
	defer tg.wg.Done()
	t := tg.clock.NewTicker(tg.opts.Interval)
	defer t.Stop()
	for {
		select {
		case <-tg.ctx.Done():
			return
		case <-t.C():
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
	compact        bool // cleanup.policy has compact (compacted.go)
}

func (tg *Manager) led(objectOnly bool) []ledPartition {
	var keep func(*catalog.Topic) bool
	if objectOnly {
		keep = func(t *catalog.Topic) bool { return t.Config.Durability == topic.DurabilityObject }
	}
	var out []ledPartition
	for _, l := range tg.cat.Snapshot().Led(keep) {
		cfg := l.Topic.Config
		pc := partitionCfg{retention: cfg.Retention, retentionBytes: cfg.RetentionBytes, object: cfg.Durability == topic.DurabilityObject, compact: cfg.Compact}
		if cfg.NoDelete {
			// cleanup.policy=compact: nothing expires, in S3 either.
			pc.retention, pc.retentionBytes = -1, -1
		}
		out = append(out, ledPartition{key: tierKey{l.Topic.Meta.ID, l.State.Partition}, name: l.Topic.Meta.Name, p: l.Part, epoch: l.State.LeaderEpoch, cfg: pc})
	}
	return out
}

func (tg *Manager) round() {
	if !tg.cat.LeaseValid() {
		return
	}
	led := tg.led(false)
	tg.indexes = nil // read again after the elections this round acts on
	keep := map[tierKey]bool{}
	now := tg.clock.Now()
	for _, lp := range led {
		keep[lp.key] = true
		tg.mu.Lock()
		st := tg.parts[lp.key]
		wait := st != nil && st.epoch == lp.p.LeaderEpoch() && now.Before(st.retryAt)
		tg.mu.Unlock()
		if wait {
			continue
		}
		ctx, cancel := context.WithTimeout(tg.ctx, 2*time.Minute)
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
				st.retryAt = now.Add(min(tg.opts.Interval<<min(st.failures, 10), time.Minute))
			}
		}
		tg.mu.Unlock()
		if err != nil && tg.ctx.Err() == nil {
			tg.log.Warn("tier", "topic", lp.name, "partition", lp.key.partition, "err", err)
		}
	}
	tg.mu.Lock()
	for k := range tg.parts {
		if !keep[k] {
			delete(tg.parts, k) // no longer led here
		}
	}
	tg.mu.Unlock()
	if now.Sub(tg.lastSweep) >= tg.opts.OrphanGrace/2 {
		tg.sweep(now)
	}
	if now.Sub(tg.lastPrune) >= walPruneInterval {
		tg.lastPrune = now
		ctx, cancel := context.WithTimeout(tg.ctx, time.Minute)
		if err := tg.pruneWAL(ctx); err != nil && tg.ctx.Err() == nil {
			tg.log.Warn("WAL index", "err", err)
		}
		cancel()
	}
}

func (tg *Manager) partitionRound(ctx context.Context, lp ledPartition) error {
	p := lp.p
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
		man, err := tg.loadManifest(ctx, lp, epoch)
		if err != nil {
			return err
		}
		// A manifest written under a later epoch means another broker
		// leads now and this one has not heard yet (a lease that lapsed
		// and was regained): it is fenced and must not touch its log, which
		// follower truncation will line up with the new leader's.
		if end := End(man); man.LeaderEpoch <= epoch && p.LogEndOffset() < end {
			// Elected with a log that ends below the tier (a wiped or
			// replaced disk): everything below end is in S3.
			tg.log.Warn("local log ends below the tier; restarting it at the tier's end",
				"topic", lp.name, "partition", lp.key.partition, "localEnd", p.LogEndOffset(), "tierEnd", end, "leaderEpoch", epoch, "manifestEpoch", man.LeaderEpoch)
			if err := p.ResetTo(epoch, true, end); err != nil {
				if errors.Is(err, partition.ErrStaleEpoch) {
					return nil // newer metadata arrived meanwhile
				}
				return err
			}
		}
		st = &tierState{epoch: epoch, man: man, fenced: man.LeaderEpoch > epoch}
		p.SetTier(Start(man), SegmentEnd(man))
		p.SetObjectDurable(End(man))
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
	end := SegmentEnd(cur)
	for _, seg := range p.ClosedSegments() {
		if seg.NextOffset <= end {
			continue
		}
		if !tg.cat.LeaseValid() || p.LeaderEpoch() != epoch {
			return nil
		}
		if ts := tg.cat.Snapshot().Topic(lp.name); ts == nil || ts.Meta.ID != lp.key.id {
			return nil // deleted meanwhile: nothing more goes to S3
		}
		f, err := p.OpenSegment(seg)
		if err != nil {
			if errors.Is(err, segment.ErrOffsetOutOfRange) {
				continue // deleted meanwhile (DeleteRecords)
			}
			var changed *partition.SegmentChangedError
			if errors.As(err, &changed) {
				return nil // the cleaner rewrote it (a pass begun as a follower): next round
			}
			return err
		}
		cur, _ := tg.snapshot(st)
		key := Key(lp.key.id, lp.key.partition, seg.BaseOffset, epoch)
		if lp.cfg.compact {
			// Read after the open: the bytes are cleaned at most this far.
			key = CompactedKey(lp.key.id, lp.key.partition, seg.BaseOffset, epoch, p.CleanedOffset())
		}
		// Every transaction in the segment is decided (it lies below the
		// last stable offset): the aborted ones go with it.
		aborted := p.AbortedTxns(seg.BaseOffset, seg.NextOffset)
		man, err := tg.t.UploadAs(ctx, key, lp.key.id, lp.key.partition, epoch, cur, seg, f, aborted)
		f.Close()
		if errors.Is(err, ErrFenced) {
			tg.setManifest(lp.key, st, man, true)
			return nil
		}
		if err != nil {
			return err
		}
		tg.setManifest(lp.key, st, man, false)
		if tg.opts.Uploaded != nil {
			tg.opts.Uploaded(seg.Size)
		}
		end = SegmentEnd(man)
		p.SetTier(Start(man), end)
	}
	if lp.cfg.compact {
		if err := tg.recompact(ctx, lp, st); err != nil {
			return err
		}
	}
	if lp.cfg.retention >= 0 || lp.cfg.retentionBytes >= 0 {
		retention := lp.cfg.retention
		if retention < 0 {
			retention = -1
		}
		// The stored manifest, not the view: shares only the WAL index
		// holds are still in the local log and go with the segment upload
		// that covers them; expiring them here would leave them pending,
		// to be expired again at every round.
		tg.mu.Lock()
		cur := st.man
		tg.mu.Unlock()
		man, err := tg.t.Expire(ctx, lp.key.id, lp.key.partition, epoch, cur, retention, lp.cfg.retentionBytes)
		if err != nil {
			return err
		}
		if man.Version != cur.Version {
			tg.setManifest(lp.key, st, man, false)
			p.SetTier(Start(man), max(SegmentEnd(man), p.UploadedTo()))
		}
	}
	if now := tg.clock.Now(); now.Sub(st.lastGC) >= tg.opts.OrphanGrace/2 {
		st.lastGC = now
		cur, _ := tg.snapshot(st)
		if _, err := tg.t.Collect(ctx, lp.key.id, lp.key.partition, cur); err != nil {
			return err
		}
	}
	return nil
}

// snapshot returns a partition's cached manifest and whether its leader
// epoch was fenced, read under tg.mu.
func (tg *Manager) snapshot(st *tierState) (metastore.Manifest, bool) {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return st.view(), st.fenced
}

// view is the partition's manifest with the WAL shares only the WAL index
// references appended: what readers, uploads and flushes work from.
// Writing it (an upload, an expiry) absorbs them. Holds tg.mu.
func (st *tierState) view() metastore.Manifest {
	if len(st.pending) == 0 {
		return st.man
	}
	v := st.man
	v.Segments = append(st.man.Segments[:len(st.man.Segments):len(st.man.Segments)], st.pending...)
	return v
}

// setManifest caches a partition's newer manifest and deletes the WAL
// objects no led partition references any more.
func (tg *Manager) setManifest(k tierKey, st *tierState, man metastore.Manifest, fenced bool) {
	tg.mu.Lock()
	st.fenced = st.fenced || fenced
	if man.Version < st.man.Version {
		tg.mu.Unlock()
		return // a newer one was written meanwhile
	}
	before := st.view()
	// Shares the stored manifest now covers (absorbed, or under a segment
	// object) are no longer pending; those flushed after the write's
	// snapshot still are.
	end := End(man)
	keep := st.pending[:0:0]
	for _, r := range st.pending {
		if r.NextOffset > end {
			keep = append(keep, r)
		}
	}
	st.man, st.pending = man, keep
	var unused []string
	now := WALObjects(st.view())
	for obj := range WALObjects(before) {
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
	tg.mu.Unlock()
	for _, obj := range unused {
		if tg.ctx.Err() != nil {
			return // shutting down: the sweep deletes what is left unreferenced
		}
		ctx, cancel := context.WithTimeout(tg.ctx, time.Minute)
		if err := tg.opts.Objects.Delete(ctx, obj); err != nil {
			tg.log.Warn("delete WAL object", "object", obj, "err", err)
		}
		cancel()
	}
}

// ErrNotLoaded is returned when a partition's manifest has not been read
// under its current leader epoch yet (the client retries, as for a leader
// change).
var ErrNotLoaded = errors.New("tier: manifest not loaded yet")

// Read serves a consumer fetch below the local log start from S3: whole
// batches from the one holding offset, up to maxBytes.
func (tg *Manager) Read(ctx context.Context, id metastore.TopicID, idx int32, offset int64, maxBytes int) ([]byte, error) {
	man, ok := tg.manifest(id, idx)
	if !ok {
		return nil, fmt.Errorf("tier of partition %d: %w", idx, ErrNotLoaded)
	}
	return tg.t.Read(ctx, man, offset, maxBytes)
}

// OffsetForTimestamp answers ListOffsets by time from the tier when the
// first record at or after ts lies below the local log; ok is false when
// the tier has none (the local log is searched next).
func (tg *Manager) OffsetForTimestamp(ctx context.Context, id metastore.TopicID, idx int32, p *partition.Partition, ts int64) (offset, recordTS int64, ok bool, err error) {
	if p.LogStartOffset() >= p.LocalLogStartOffset() {
		return 0, 0, false, nil
	}
	man, ok := tg.manifest(id, idx)
	if !ok {
		return 0, 0, false, fmt.Errorf("tier of partition %d: %w", idx, ErrNotLoaded)
	}
	local := p.LocalLogStartOffset()
	batch, found, err := tg.t.FindTimestamp(ctx, man, ts, local)
	if err != nil || !found {
		return 0, 0, false, err
	}
	return p.FirstRecordAt(batch, ts, p.LogStartOffset())
}

// DeleteRecords applies DeleteRecords to a led tiered partition: the local
// log as usual, and the manifest's start offset, so the tier's records
// below offset are gone for readers at once. It returns the new log start.
func (tg *Manager) DeleteRecords(ctx context.Context, id metastore.TopicID, idx int32, p *partition.Partition, offset int64) (int64, error) {
	low, err := p.DeleteRecords(offset)
	if err != nil {
		return low, err
	}
	key := tierKey{id, idx}
	st, man, ok := tg.current(key, p)
	if !ok {
		return 0, fmt.Errorf("partition %d: %w", idx, ErrNotLoaded)
	}
	next, err := tg.t.DeleteRecords(ctx, id, idx, st.epoch, man, offset)
	if err != nil {
		return 0, err
	}
	tg.setManifest(key, st, next, false)
	p.SetTier(Start(next), max(SegmentEnd(next), p.UploadedTo()))
	return p.LogStartOffset(), nil
}

// RemoveTopic deletes a deleted topic's segment objects and manifests in
// the background (the broker that handled DeleteTopics does it). Each
// partition's manifest goes before its objects, so a crash midway leaves
// objects under the topic id's prefix, which the orphan sweep finds
// (ManagerOptions.Sweep), never a manifest without objects.
func (tg *Manager) RemoveTopic(t metastore.Topic) {
	tg.wg.Add(1)
	go func() {
		defer tg.wg.Done()
		// Leaders learn of the deletion within a watch interval, but an
		// upload already running finishes: sweep again after they have.
		settle := max(5*time.Second, 3*tg.opts.Interval+3*tg.opts.WatchInterval)
		for _, wait := range []time.Duration{0, settle, 6 * settle} {
			if !clock.Sleep(tg.ctx, tg.clock, wait) {
				return
			}
			ctx, cancel := context.WithTimeout(tg.ctx, 10*time.Minute)
			n, err := tg.removeTopicObjects(ctx, t)
			cancel()
			if err != nil {
				tg.log.Warn("remove deleted topic's tier", "topic", t.Name, "err", err)
			} else if n > 0 {
				tg.log.Info("deleted topic's tier removed", "topic", t.Name, "objects", n)
			}
		}
	}()
}

func (tg *Manager) removeTopicObjects(ctx context.Context, t metastore.Topic) (int, error) {
	n := 0
	for p := int32(0); p < t.Partitions; p++ {
		if err := tg.meta.DeleteManifest(ctx, t.ID, p); err != nil {
			return n, err
		}
		objs, err := tg.opts.Objects.List(ctx, Prefix(t.ID, p))
		if err != nil {
			return n, err
		}
		for _, o := range objs {
			if err := tg.opts.Objects.Delete(ctx, o.Key); err != nil {
				return n, err
			}
			n++
		}
	}
	return n, nil
}

// Backlog walks the partitions this broker leads for closed, committed
// segments not yet uploaded: the longest wait of the oldest one per
// partition (measured from when a Backlog call first saw it waiting, so
// its resolution is the caller's interval), and the count and bytes of all
// of them. A partition whose manifest has not been read yet counts all its
// closed segments.
func (tg *Manager) Backlog() (lag time.Duration, segs int, bytes int64) {
	now := tg.clock.Now()
	oldest := map[tierKey]int64{}
	for _, lp := range tg.led(false) {
		uploaded := lp.p.UploadedTo()
		if !lp.p.Tiered() {
			uploaded = -1
		}
		first := true
		for _, s := range lp.p.ClosedSegments() {
			if s.NextOffset <= uploaded {
				continue
			}
			segs++
			bytes += s.Size
			if first {
				oldest[lp.key] = s.BaseOffset
				first = false
			}
		}
	}
	tg.backlogMu.Lock()
	defer tg.backlogMu.Unlock()
	for k, base := range oldest {
		cur, ok := tg.backlog[k]
		if !ok || cur.base != base {
			cur = backlogEntry{base: base, since: now}
			tg.backlog[k] = cur
		}
		lag = max(lag, now.Sub(cur.since))
	}
	for k := range tg.backlog {
		if _, ok := oldest[k]; !ok {
			delete(tg.backlog, k)
		}
	}
	return lag, segs, bytes
}

// Stored returns the bytes and segments the manifest of a partition this
// broker leads references in the object store; false when no manifest is
// loaded here (it does not lead the partition, or has not loaded it yet).
func (tg *Manager) Stored(id metastore.TopicID, idx int32) (bytes int64, segments int, ok bool) {
	man, ok := tg.manifest(id, idx)
	if !ok {
		return 0, 0, false
	}
	for _, s := range man.Segments {
		bytes += s.Size
	}
	return bytes, len(man.Segments), true
}

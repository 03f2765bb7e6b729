package catalog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratamq/strata/brokerfleet/internal/partition"
	"github.com/stratamq/strata/brokerfleet/internal/topic"
	"github.com/stratamq/strata/pkg/clock"
	"github.com/stratamq/strata/pkg/metastore"
	"github.com/stratamq/strata/pkg/segment"
)

// Options configures a Catalog.
type Options struct {
	// Meta is the metastore the view is read from. Required.
	Meta *metastore.Meta
	// NodeID is this broker's id.
	NodeID int32
	// Incarnation identifies this process's life (its registration).
	Incarnation string
	// Lease is this incarnation's registration lease. Required.
	Lease *metastore.Lease
	// DataDir holds the partition logs, under DataDir/logs.
	DataDir string
	// FS is the filesystem under DataDir; nil means the OS filesystem.
	FS segment.FS
	// Defaults resolves topic configs.
	Defaults topic.Defaults
	// Clock is the clock of the logs and partitions; nil means the real one.
	Clock clock.Clock
	// Logger receives operational logs; nil means slog.Default().
	Logger *slog.Logger

	// OnApply runs after every Reconcile with the snapshot it published,
	// in publication order (the broker points its follower fetch loops at
	// the leaders and hands the group coordinator its shards).
	OnApply func(*Snapshot)
	// OnRole runs whenever a partition state is applied to a local
	// replica (metrics count the elections this broker won).
	OnRole func(metastore.PartitionState)
	// OnRemove runs (in its own goroutine) for every topic whose logs were
	// removed because it was deleted.
	OnRemove func(metastore.Topic)
	// ObserveStage, if set, times the replication stages of every local
	// partition's newest append (partition.Options.Observe).
	ObserveStage func(partition.Stage, time.Duration)
	// WakeReplicas is every local partition's Options.WakeReplicas.
	WakeReplicas func(p *partition.Partition, replicas []int32)
}

// Catalog owns the broker's view of the cluster; see the package comment.
type Catalog struct {
	opts Options
	log  *slog.Logger
	meta *metastore.Meta

	snap atomic.Pointer[Snapshot]

	// mu serializes Reconcile (and the writes of LeaveISRs).
	mu sync.Mutex

	signalMu   sync.Mutex
	reconciled chan struct{} // closed (and replaced) at the end of each Reconcile
	catching   chan struct{} // closed when the CatchUp in flight ends; nil if none

	lease    *metastore.Lease
	actEpoch atomic.Int64 // the lease epoch under which partition states were last re-read
	caughtUp atomic.Bool  // every hosted partition had this broker in its ISR once (Ready)

	bg sync.WaitGroup // OnRemove calls
}

// New returns a catalog with an empty view; Reconcile loads it.
func New(opts Options) (*Catalog, error) {
	if opts.Meta == nil || opts.Lease == nil {
		return nil, errors.New("catalog: Meta and Lease are required")
	}
	if opts.FS == nil {
		opts.FS = segment.OS()
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	opts.Clock = clock.Or(opts.Clock)
	c := &Catalog{opts: opts, log: opts.Logger, meta: opts.Meta, lease: opts.Lease}
	c.snap.Store(emptySnapshot(opts.NodeID))
	return c, nil
}

// Snapshot returns the current view. It never blocks.
func (c *Catalog) Snapshot() *Snapshot { return c.snap.Load() }

// Reconciled returns a channel closed when the next Reconcile ends.
func (c *Catalog) Reconciled() <-chan struct{} {
	c.signalMu.Lock()
	defer c.signalMu.Unlock()
	if c.reconciled == nil {
		c.reconciled = make(chan struct{})
	}
	return c.reconciled
}

func (c *Catalog) signalReconciled() {
	c.signalMu.Lock()
	if c.reconciled != nil {
		close(c.reconciled)
		c.reconciled = nil
	}
	c.signalMu.Unlock()
}

// CatchUp re-reads the view if the metastore changed since the snapshot
// was read (its change counter moved past the snapshot's version), and
// returns the current snapshot. It is for a request this broker refuses
// because its view may be stale: a broker the controller has just elected
// would otherwise answer NOT_LEADER_OR_FOLLOWER until its next watch poll,
// and franz-go waits up to 5 s for its next metadata refresh. It costs one
// metastore read, shared by the callers that arrive while one is in
// flight; in steady state nothing calls it.
func (c *Catalog) CatchUp(ctx context.Context) (*Snapshot, error) {
	c.signalMu.Lock()
	if ch := c.catching; ch != nil {
		c.signalMu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
		}
		return c.Snapshot(), ctx.Err()
	}
	ch := make(chan struct{})
	c.catching = ch
	c.signalMu.Unlock()
	defer func() {
		c.signalMu.Lock()
		c.catching = nil
		c.signalMu.Unlock()
		close(ch)
	}()
	v, err := c.meta.ChangeVersion(ctx)
	if err == nil && v > c.Snapshot().Version() {
		err = c.Reconcile(ctx)
	}
	return c.Snapshot(), err
}

// Reconcile makes the view match the metastore: the live brokers, the
// coordinator shards, the controller, and for every topic its partition
// states, opening the partitions this broker has replicas of, closing those
// moved away and removing the logs of deleted topics.
func (c *Catalog) Reconcile(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	defer c.signalReconciled()
	return c.reconcileLocked(ctx)
}

// reconcileLocked is Reconcile. Holds c.mu.
func (c *Catalog) reconcileLocked(ctx context.Context) error {
	version, err := c.meta.ChangeVersion(ctx)
	if err != nil {
		return err
	}
	brokers, err := c.meta.Brokers(ctx)
	if err != nil {
		return err
	}
	list, err := c.meta.Topics(ctx)
	if err != nil {
		return err
	}
	shards, err := c.meta.CoordinatorShards(ctx)
	if err != nil {
		return err
	}
	ctrl, _, err := c.meta.Controller(ctx)
	if err != nil {
		return err
	}
	cur := c.snap.Load()
	next := &Snapshot{
		self: c.opts.NodeID, version: version, ctrl: ctrl,
		topics: make(map[string]*Topic, len(list)), byID: make(map[metastore.TopicID]*Topic, len(list)),
		peers: make(map[int32]metastore.Broker, len(brokers)), shards: make(map[int32]metastore.CoordinatorShard, len(shards)),
	}
	for _, br := range brokers {
		if br.Live {
			next.peers[br.ID] = br
		}
	}
	for _, s := range shards {
		next.shards[s.Shard] = s
	}
	want := make(map[string]metastore.Topic, len(list))
	for _, t := range list {
		want[t.Name] = t
	}
	// Topics gone (or deleted and re-created under a new id) go first, so
	// a re-created topic's logs never meet its predecessor's.
	var removed []*Topic
	for name, t := range cur.topics {
		if w, ok := want[name]; !ok || w.ID != t.Meta.ID {
			removed = append(removed, t)
		}
	}
	// Publish the view without them before their logs go, so no reader
	// picks up a log being removed.
	if len(removed) > 0 {
		trimmed := *cur
		trimmed.topics, trimmed.byID = map[string]*Topic{}, map[metastore.TopicID]*Topic{}
		for name, t := range cur.topics {
			if !slices.Contains(removed, t) {
				trimmed.topics[name], trimmed.byID[t.Meta.ID] = t, t
			}
		}
		c.snap.Store(&trimmed)
		for _, t := range removed {
			c.removeTopic(t)
		}
	}
	var errs []error
	for _, t := range list {
		states, err := c.partitionStates(ctx, t)
		if err != nil {
			errs = append(errs, err)
			c.keep(cur, next, t.Name)
			continue
		}
		cfg, err := c.opts.Defaults.Resolve(t.Configs)
		if err != nil {
			errs = append(errs, fmt.Errorf("topic %q: %w", t.Name, err))
			c.keep(cur, next, t.Name)
			continue
		}
		old := cur.topics[t.Name]
		if old != nil && old.Meta.ID != t.ID {
			old = nil
		}
		nt, err := c.applyTopic(old, t, cfg, states)
		if err != nil {
			errs = append(errs, err)
		}
		if nt != nil {
			next.topics[t.Name], next.byID[t.ID] = nt, nt
		}
	}
	c.snap.Store(next)
	if c.opts.OnApply != nil {
		c.opts.OnApply(next)
	}
	return errors.Join(errs...)
}

// keep carries a topic over unchanged from cur when it could not be read.
func (c *Catalog) keep(cur, next *Snapshot, name string) {
	if t := cur.topics[name]; t != nil {
		next.topics[name], next.byID[t.Meta.ID] = t, t
	}
}

// applyTopic returns the new view of a topic: the partitions this broker
// hosts opened (or kept) with their roles applied, those moved away
// removed. old is the previous view of the same topic id, or nil.
func (c *Catalog) applyTopic(old *Topic, t metastore.Topic, cfg topic.Config, states []metastore.PartitionState) (*Topic, error) {
	nt := &Topic{Meta: t, Config: cfg, States: states, Parts: make([]*partition.Partition, len(states))}
	if old != nil {
		copy(nt.Parts, old.Parts)
	}
	var errs []error
	for i, st := range states {
		p := nt.Parts[i]
		hosts := slices.Contains(st.Replicas, c.opts.NodeID)
		switch {
		case p == nil && hosts:
			var err error
			if p, err = c.openPartition(t, int32(i), cfg); err != nil {
				errs = append(errs, err)
				continue
			}
			nt.Parts[i] = p
		case p != nil && !hosts:
			// Moved away: the log is no longer this broker's to keep.
			if err := p.Remove(); err != nil {
				c.log.Warn("remove moved partition", "topic", t.Name, "partition", i, "err", err)
			}
			nt.Parts[i] = nil
			continue
		case p == nil:
			continue
		case old != nil && cfg != old.Config:
			p.SetConfig(cfg)
		}
		c.applyRole(p, st)
	}
	if old == nil && len(errs) > 0 {
		// A new topic whose logs could not all be opened is not published;
		// the next reconcile tries again.
		for _, p := range nt.Parts {
			if p != nil {
				p.Close()
			}
		}
		return nil, errors.Join(errs...)
	}
	return nt, errors.Join(errs...)
}

// applyRole gives a local partition its control-plane role.
func (c *Catalog) applyRole(p *partition.Partition, st metastore.PartitionState) {
	if c.opts.OnRole != nil {
		c.opts.OnRole(st)
	}
	p.SetLeaderEpoch(st.LeaderEpoch)
	p.SetReplication(c.opts.NodeID, st.Leader == c.opts.NodeID, st.Replicas, st.ISR)
}

func (c *Catalog) partitionDir(t metastore.Topic, p int32) string {
	return path.Join(c.opts.DataDir, "logs", t.Name+"-"+t.ID.String(), strconv.Itoa(int(p)))
}

func (c *Catalog) openPartition(t metastore.Topic, i int32, cfg topic.Config) (*partition.Partition, error) {
	lg, err := segment.Open(segment.Options{
		FS:           c.opts.FS,
		Dir:          c.partitionDir(t, i),
		SegmentBytes: cfg.SegmentBytes,
		SegmentMs:    cfg.SegmentAge,
		Now:          c.opts.Clock.Now,
	})
	if err != nil {
		return nil, fmt.Errorf("open %s-%d: %w", t.Name, i, err)
	}
	p, err := partition.New(partition.Options{Topic: t.Name, Index: i, Log: lg, Config: cfg, Now: c.opts.Clock.Now, Observe: c.opts.ObserveStage, WakeReplicas: c.opts.WakeReplicas})
	if err != nil {
		lg.Close()
		return nil, err
	}
	return p, nil
}

// partitionStates reads a topic's partition states, one per partition (a
// state missing in the metastore reads as leaderless).
func (c *Catalog) partitionStates(ctx context.Context, t metastore.Topic) ([]metastore.PartitionState, error) {
	stored, err := c.meta.Partitions(ctx, t.ID)
	if err != nil {
		return nil, err
	}
	states := make([]metastore.PartitionState, t.Partitions)
	for i := range states {
		states[i] = metastore.PartitionState{Topic: t.ID, Partition: int32(i), Leader: -1}
	}
	for _, st := range stored {
		if st.Partition >= 0 && st.Partition < t.Partitions {
			states[st.Partition] = st
		}
	}
	return states, nil
}

// removeTopic deletes a deleted topic's logs. Holds c.mu.
func (c *Catalog) removeTopic(t *Topic) {
	for _, p := range t.Parts {
		if p == nil {
			continue
		}
		if err := p.Remove(); err != nil {
			c.log.Warn("remove partition log", "topic", t.Meta.Name, "partition", p.Index(), "err", err)
		}
	}
	if err := c.opts.FS.RemoveAll(path.Dir(c.partitionDir(t.Meta, 0))); err != nil {
		c.log.Warn("remove topic directory", "topic", t.Meta.Name, "err", err)
	}
	if c.opts.OnRemove != nil {
		c.bg.Add(1)
		go func() {
			defer c.bg.Done()
			c.opts.OnRemove(t.Meta)
		}()
	}
}

// Close closes every partition log cleanly. The catalog must not be used
// after.
func (c *Catalog) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bg.Wait()
	var errs []error
	for _, p := range c.snap.Load().Hosted() {
		if err := p.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	c.snap.Store(emptySnapshot(c.opts.NodeID))
	return errors.Join(errs...)
}

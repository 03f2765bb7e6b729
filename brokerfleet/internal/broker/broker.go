package broker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/stratamq/strata/brokerfleet/internal/group"
	"github.com/stratamq/strata/brokerfleet/internal/partition"
	"github.com/stratamq/strata/brokerfleet/internal/security"
	"github.com/stratamq/strata/brokerfleet/internal/topic"
	"github.com/stratamq/strata/pkg/metastore"
	"github.com/stratamq/strata/pkg/schemaregistry"
	"github.com/stratamq/strata/pkg/segment"
)

// Broker serves the Kafka protocol for the topics in the metastore, keeping
// their partition logs in its data directory.
type Broker struct {
	cfg      Config
	fs       segment.FS
	log      *slog.Logger
	now      func() time.Time
	defaults topic.Defaults
	meta     *metastore.Meta
	pids     *pidAllocator
	lease    *metastore.Lease // this incarnation's registration and heartbeat
	actEpoch atomic.Int64     // the lease epoch under which partition state was last re-read
	caughtUp atomic.Bool      // every hosted partition had this broker in its ISR once (Ready)
	repl     replicator
	coord    *group.Coordinator
	tiering  *tiering // nil without an object store
	metrics  *brokerMetrics
	registry *schemaregistry.Registry
	// reassignThrottle caps what is sent to replicas being added by a
	// reassignment; nil when unthrottled.
	reassignThrottle *throttle
	secured          bool           // listeners with TLS or SASL, or ACLs: connections carry a connSecurity
	authz            *security.ACLs // nil when ACLs are off

	host string
	port int32

	adminMu sync.Mutex   // serializes topic changes and reconciliation
	mu      sync.RWMutex // guards topics and byID; topicState values are immutable

	reconciledMu sync.Mutex
	reconciled   chan struct{} // closed (and replaced) at the end of each reconcile
	topics       map[string]*topicState
	byID         map[metastore.TopicID]*topicState
	peers        map[int32]metastore.Broker           // live registrations, from the last reconcile
	shards       map[int32]metastore.CoordinatorShard // group coordinator shard assignments

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc

	connMu sync.Mutex
	lns    map[net.Listener]struct{}
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
	closed bool
}

// maxPartitionsPerTopic bounds a request's partition count so one request
// cannot open an unbounded number of logs.
const maxPartitionsPerTopic = 10000

// metaTimeout bounds one metastore operation made for a client request.
const metaTimeout = 10 * time.Second

// topicState is immutable once published; changes swap in a new value.
type topicState struct {
	meta   metastore.Topic
	cfg    topic.Config
	states []metastore.PartitionState // by partition, from the metastore
	parts  []*partition.Partition     // by partition; nil where no replica is here
}

// New opens the broker: it loads the topics from the metastore, opens (and
// if needed recovers) their partition logs, and starts registering this
// incarnation, watching for metadata changes and applying retention.
func New(cfg Config) (*Broker, error) {
	if err := errors.Join(cfg.Validate(), cfg.Security.ValidateAdvertised()); err != nil {
		return nil, err
	}
	if cfg.FS == nil {
		cfg.FS = segment.OS()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Incarnation == "" {
		cfg.Incarnation = newIncarnation()
	}
	if cfg.Advertise == "" {
		cfg.Advertise = cfg.Security.Default().Advertise
	}
	defaults, err := topic.NewDefaults(cfg.TopicDefaults)
	if err != nil {
		return nil, err
	}
	var claimed *metastore.Lease
	if cfg.NodeID == AutoNodeID {
		ctx, cancel := context.WithTimeout(context.Background(), cfg.Lease.Duration)
		cfg.NodeID, claimed, err = claimNodeID(ctx, cfg)
		cancel()
		if err != nil {
			return nil, err
		}
		cfg.Logger.Info("claimed node id", "broker", cfg.NodeID)
	}
	metrics := newBrokerMetrics(&cfg) // wraps cfg.Meta and cfg.Objects to count their requests
	ctx, cancel := context.WithCancel(context.Background())
	b := &Broker{
		cfg: cfg, fs: cfg.FS, log: cfg.Logger.With("broker", cfg.NodeID), now: cfg.Now,
		defaults: defaults, meta: cfg.Meta, pids: &pidAllocator{meta: cfg.Meta},
		topics: map[string]*topicState{}, byID: map[metastore.TopicID]*topicState{}, peers: map[int32]metastore.Broker{},
		shards: map[int32]metastore.CoordinatorShard{},
		ctx:    ctx, cancel: cancel,
		lns: map[net.Listener]struct{}{}, conns: map[net.Conn]struct{}{},
	}
	b.repl.b = b
	b.initSecurity(ctx)
	b.metrics = metrics.register(b)
	b.reassignThrottle = newThrottle(cfg.ReassignThrottle)
	b.registry = schemaregistry.New(cfg.Meta, schemaregistry.Options{})
	b.coord = group.New(group.Options{
		Meta: cfg.Meta, Valid: b.leaseValid, PartitionExists: b.partitionExists,
		MinSessionTimeout: cfg.GroupMinSessionTimeout, MaxSessionTimeout: cfg.GroupMaxSessionTimeout,
		InitialRebalanceDelay: cfg.GroupInitialRebalanceDelay, Logger: b.log,
	})
	b.lease = claimed
	if b.lease == nil {
		b.lease, err = cfg.Meta.BrokerLease(metastore.Broker{
			ID: cfg.NodeID, Endpoint: cfg.Advertise, Listeners: cfg.Security.Advertised(cfg.Advertise), Rack: cfg.Rack, Incarnation: cfg.Incarnation,
		}, cfg.Lease)
	}
	if err != nil {
		cancel()
		b.coord.Close()
		return nil, err
	}
	if err := b.reconcile(ctx); err != nil {
		cancel()
		b.coord.Close()
		b.closePartitions()
		return nil, fmt.Errorf("load topics: %w", err)
	}
	// Register now, so a fresh broker serves produce at once; a restarted
	// one keeps trying in heartbeat until its previous lease runs out.
	tctx, tcancel := context.WithTimeout(ctx, cfg.Lease.Duration/3)
	if st, err := b.lease.Tick(tctx); err != nil {
		b.log.Warn("first broker heartbeat failed", "err", err)
	} else if st.Held {
		b.registered(tctx, st.Epoch)
	}
	tcancel()
	if b.tiering = newTiering(b); b.tiering != nil {
		b.wg.Add(2)
		go b.tiering.run()
		go b.tiering.runWAL()
	}
	b.wg.Add(5)
	go b.maintain()
	go b.watch()
	go b.heartbeat()
	go b.maintainISR()
	go b.runController()
	return b, nil
}

func newIncarnation() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (b *Broker) partitionDir(t metastore.Topic, p int32) string {
	return path.Join(b.cfg.DataDir, "logs", t.Name+"-"+t.ID.String(), strconv.Itoa(int(p)))
}

func (b *Broker) openTopic(t metastore.Topic, cfg topic.Config, states []metastore.PartitionState) (*topicState, error) {
	ts := &topicState{meta: t, cfg: cfg, states: states, parts: make([]*partition.Partition, len(states))}
	for i, st := range states {
		if !b.hosts(st) {
			continue
		}
		p, err := b.openPartition(t, int32(i), cfg)
		if err != nil {
			for _, p := range ts.parts {
				if p != nil {
					p.Close()
				}
			}
			return nil, err
		}
		b.applyState(p, st)
		ts.parts[i] = p
	}
	return ts, nil
}

// applyState gives a local partition its control-plane role.
func (b *Broker) applyState(p *partition.Partition, st metastore.PartitionState) {
	b.observeLeadership(st)
	p.SetLeaderEpoch(st.LeaderEpoch)
	p.SetReplication(b.cfg.NodeID, st.Leader == b.cfg.NodeID, st.Replicas, st.ISR)
}

// hosts reports whether this broker has a replica of the partition.
func (b *Broker) hosts(st metastore.PartitionState) bool {
	return slices.Contains(st.Replicas, b.cfg.NodeID)
}

func (b *Broker) openPartition(t metastore.Topic, i int32, cfg topic.Config) (*partition.Partition, error) {
	lg, err := segment.Open(segment.Options{
		FS:           b.fs,
		Dir:          b.partitionDir(t, i),
		SegmentBytes: cfg.SegmentBytes,
		SegmentMs:    cfg.SegmentAge,
		Now:          b.now,
	})
	if err != nil {
		return nil, fmt.Errorf("open %s-%d: %w", t.Name, i, err)
	}
	p, err := partition.New(partition.Options{Topic: t.Name, Index: i, Log: lg, Config: cfg, Now: b.now})
	if err != nil {
		lg.Close()
		return nil, err
	}
	return p, nil
}

// Serve accepts Kafka connections on ln for the default listener (see
// ServeListener for the others) until Close. The first one served also
// decides the advertised address when Config.Advertise is empty.
func (b *Broker) Serve(ln net.Listener) error {
	b.connMu.Lock()
	if b.closed {
		b.connMu.Unlock()
		return net.ErrClosed
	}
	if b.host == "" && !security.IsNamed(ln) { // the default listener decides
		adv := b.cfg.Advertise
		if adv == "" {
			adv = ln.Addr().String()
		}
		host, port, err := security.SplitHostPort(adv)
		if err != nil {
			b.connMu.Unlock()
			return fmt.Errorf("advertise %q: %w", adv, err)
		}
		b.host, b.port = host, port
	}
	b.lns[ln] = struct{}{}
	b.connMu.Unlock()
	for {
		nc, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || b.ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return err
		}
		b.connMu.Lock()
		if b.closed {
			b.connMu.Unlock()
			nc.Close()
			return nil
		}
		b.conns[nc] = struct{}{}
		b.wg.Add(1)
		b.connMu.Unlock()
		go func() {
			defer b.wg.Done()
			b.serveConn(nc)
			b.connMu.Lock()
			delete(b.conns, nc)
			b.connMu.Unlock()
		}()
	}
}

// ServeListener accepts connections on ln for the named listener of
// Config.Security until Close.
func (b *Broker) ServeListener(name string, ln net.Listener) error {
	named, _, err := b.cfg.Security.Named(name, ln)
	if err != nil {
		return err
	}
	return b.Serve(named)
}

// Addr returns the advertised host and port (valid once Serve has started).
func (b *Broker) Addr() (string, int32) {
	b.connMu.Lock()
	defer b.connMu.Unlock()
	return b.host, b.port
}

// Close stops accepting, closes every connection, waits for in-flight work
// and closes every partition log cleanly.
func (b *Broker) Close() error {
	b.connMu.Lock()
	if b.closed {
		b.connMu.Unlock()
		return nil
	}
	b.closed = true
	for ln := range b.lns {
		ln.Close()
	}
	for nc := range b.conns {
		nc.Close()
	}
	b.connMu.Unlock()
	b.handOver()
	b.cancel()
	b.wg.Wait()
	b.coord.Close()
	b.repl.stop()
	return b.closePartitions()
}

// handOver moves leadership of the partitions this broker leads to another
// in-sync replica before it stops, so clients switch at once instead of
// waiting for the controller to notice.
func (b *Broker) handOver() {
	if !b.leaseValid() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b.mu.RLock()
	live := map[int32]bool{}
	for id := range b.peers {
		live[id] = id != b.cfg.NodeID
	}
	var moves []metastore.PartitionState
	for _, ts := range b.topics {
		for _, st := range ts.states {
			if st.Leader != b.cfg.NodeID {
				continue
			}
			next, ok := st.Elect(live, nil, false)
			if ok && next.Leader >= 0 && next.Leader != b.cfg.NodeID {
				moves = append(moves, next)
			}
		}
	}
	b.mu.RUnlock()
	for _, m := range moves {
		if _, err := b.meta.UpdatePartition(ctx, m); err != nil {
			b.log.Warn("hand over leadership", "partition", m.Partition, "err", err)
		}
	}
	b.handOverShards(ctx, live)
}

// heartbeat keeps this incarnation registered: one conditional write per
// interval, whatever the number of partitions. On Close the lease is
// released so a restarted broker need not wait it out.
func (b *Broker) heartbeat() {
	defer b.wg.Done()
	interval := b.cfg.Lease.Duration / 3
	t := time.NewTimer(interval)
	defer t.Stop()
	held := b.leaseValid()
	for {
		select {
		case <-b.ctx.Done():
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			if err := b.lease.Release(ctx); err != nil {
				b.log.Warn("release broker lease", "err", err)
			} else if err := b.meta.NotifyChange(ctx); err != nil {
				b.log.Warn("announce shutdown", "err", err)
			}
			cancel()
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(b.ctx, interval)
		st, err := b.lease.Tick(ctx)
		cancel()
		switch {
		case err != nil && b.ctx.Err() == nil:
			b.log.Warn("broker heartbeat failed", "err", err)
		case st.Held && (!held || st.Epoch != b.actEpoch.Load()):
			// Newly held, or held under a new epoch: fenced and re-acquired
			// between two ticks (the controller can declare a broker dead
			// while the metastore was unreachable to it) without a tick ever
			// reporting the loss. Acting needs the partition states re-read
			// under the new epoch either way.
			b.log.Info("broker registered", "epoch", st.Epoch, "incarnation", b.cfg.Incarnation)
			rctx, rcancel := context.WithTimeout(b.ctx, interval)
			b.registered(rctx, st.Epoch)
			rcancel()
		case !st.Held && held:
			b.log.Warn("broker registration lost", "holder", st.Holder)
		case !st.Held && err == nil:
			b.log.Info("waiting for the previous incarnation's lease to expire", "holder", st.Holder)
		}
		held = st.Held
		t.Reset(interval)
	}
}

// announce tells the other brokers (through the change counter) that this
// broker's registration changed, so their Metadata answers list it.
func (b *Broker) announce() {
	ctx, cancel := context.WithTimeout(b.ctx, metaTimeout)
	defer cancel()
	if err := b.meta.NotifyChange(ctx); err != nil {
		b.log.Warn("announce registration", "err", err)
	}
}

// registered runs when this broker (re)acquires its registration under a
// new epoch: it tells the others, re-reads the partition states, and only
// then may act as a leader under that epoch. A broker fenced while paused
// thus learns of the leaders elected meanwhile before it accepts a write.
func (b *Broker) registered(ctx context.Context, epoch int64) {
	b.announce()
	if err := b.reconcile(ctx); err != nil {
		b.log.Warn("re-read partitions after registering", "err", err)
		return
	}
	if b.actEpoch.Load() == 0 {
		b.leaveISRs(ctx)
	}
	b.actEpoch.Store(epoch)
}

// leaveISRs takes this new incarnation out of the ISR of every partition it
// follows: its log may have lost a tail (or the whole disk) since its
// previous life, so no election may pick it before the leader has seen it
// catch up to the high watermark again (then it rejoins). The controller
// does the same when it sees the new incarnation; doing it here too covers
// a controller that restarted and forgot the old one. A partition without
// a leader keeps it: its log may be all there is.
func (b *Broker) leaveISRs(ctx context.Context) {
	b.mu.RLock()
	var leave []metastore.PartitionState
	for _, ts := range b.topics {
		for _, st := range ts.states {
			if _, ok := st.LeaveISR(b.cfg.NodeID); ok {
				leave = append(leave, st)
			}
		}
	}
	b.mu.RUnlock()
	changed := false
	for _, st := range leave {
		for attempt := 0; attempt < updateRetries; attempt++ {
			next, ok := st.LeaveISR(b.cfg.NodeID)
			if !ok {
				break
			}
			_, err := b.meta.UpdatePartition(ctx, next)
			if err == nil {
				changed = true
				break
			}
			if !errors.Is(err, metastore.ErrConditionFailed) {
				b.log.Warn("leave the ISR after a restart", "partition", st.Partition, "err", err)
				break
			}
			states, err := b.meta.Partitions(ctx, st.Topic)
			if err != nil || int(st.Partition) >= len(states) {
				break
			}
			st = states[st.Partition]
		}
	}
	if changed {
		if err := b.reconcile(ctx); err != nil {
			b.log.Warn("re-read partitions after leaving the ISR", "err", err)
		}
	}
}

// leaseValid reports whether this broker may act as a leader now: its
// registration lease is held, not past its safe deadline, and its
// partition states were re-read under the current epoch.
func (b *Broker) leaseValid() bool {
	epoch, ok := b.lease.Valid()
	return ok && epoch == b.actEpoch.Load()
}

// watch applies metadata changes made anywhere (another broker, an admin
// tool) within one poll interval.
func (b *Broker) watch() {
	defer b.wg.Done()
	b.meta.WatchChanges(b.ctx, b.cfg.WatchInterval, func(int64) error {
		ctx, cancel := context.WithTimeout(b.ctx, metaTimeout)
		defer cancel()
		err := b.reconcile(ctx)
		b.reloadACLs(ctx)
		if err != nil {
			return fmt.Errorf("apply metadata change (retried next poll): %w", err)
		}
		return nil
	}, func(err error) {
		b.log.Warn("watch metadata changes", "err", err)
	})
}

func (b *Broker) closePartitions() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	var errs []error
	for _, ts := range b.topics {
		for _, p := range ts.parts {
			if p == nil {
				continue
			}
			if err := p.Close(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// maintain applies retention and segment.ms on every partition.
func (b *Broker) maintain() {
	defer b.wg.Done()
	t := time.NewTicker(b.cfg.MaintenanceInterval)
	defer t.Stop()
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-t.C:
			b.RunMaintenance()
		}
	}
}

// RunMaintenance applies retention and time-based rolling to every
// partition once.
func (b *Broker) RunMaintenance() {
	for _, p := range b.allPartitions() {
		if err := p.Maintain(); err != nil && !errors.Is(err, partition.ErrClosed) && !errors.Is(err, segment.ErrClosed) {
			b.log.Warn("maintenance failed", "topic", p.Topic(), "partition", p.Index(), "err", err)
		}
	}
}

func (b *Broker) allPartitions() []*partition.Partition {
	b.mu.RLock()
	defer b.mu.RUnlock()
	var out []*partition.Partition
	for _, ts := range b.topics {
		for _, p := range ts.parts {
			if p != nil {
				out = append(out, p)
			}
		}
	}
	return out
}

// lookup returns a topic's state.
func (b *Broker) lookup(name string) *topicState {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.topics[name]
}

// leaderPartition returns the partition if this broker leads it, or the
// Kafka error to answer: UNKNOWN_TOPIC_OR_PARTITION for a partition that
// does not exist, NOT_LEADER_OR_FOLLOWER for one led elsewhere (the client
// refreshes its metadata and goes there).
func (b *Broker) leaderPartition(name string, idx int32) (*partition.Partition, int16) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	ts := b.topics[name]
	if ts == nil || idx < 0 || int(idx) >= len(ts.states) {
		return nil, kerr.UnknownTopicOrPartition.Code
	}
	if ts.states[idx].Leader != b.cfg.NodeID || ts.parts[idx] == nil {
		return nil, kerr.NotLeaderForPartition.Code
	}
	return ts.parts[idx], 0
}

// clusterBrokers returns the live brokers with their addresses, this one
// included (with its listener's address, even before its registration is
// visible), sorted by id.
func (b *Broker) clusterBrokers() []metastore.Broker {
	host, port := b.Addr()
	self := metastore.Broker{ID: b.cfg.NodeID, Endpoint: net.JoinHostPort(host, strconv.Itoa(int(port))), Listeners: b.cfg.Security.Advertised(b.cfg.Advertise), Rack: b.cfg.Rack, Live: true}
	b.mu.RLock()
	out := make([]metastore.Broker, 0, len(b.peers)+1)
	out = append(out, self)
	for id, br := range b.peers {
		if id != b.cfg.NodeID {
			out = append(out, br)
		}
	}
	b.mu.RUnlock()
	slices.SortFunc(out, func(x, y metastore.Broker) int { return int(x.ID) - int(y.ID) })
	return out
}

// currentLeader returns the leader and leader epoch this broker knows for
// a partition, and the leader's address, for NOT_LEADER_OR_FOLLOWER answers
// that tell the client where to go (KIP-951).
func (b *Broker) currentLeader(name string, idx int32) (leader, epoch int32, host string, port int32, ok bool) {
	b.mu.RLock()
	ts := b.topics[name]
	if ts == nil || idx < 0 || int(idx) >= len(ts.states) || ts.states[idx].Leader < 0 {
		b.mu.RUnlock()
		return 0, 0, "", 0, false
	}
	st := ts.states[idx]
	br, live := b.peers[st.Leader]
	b.mu.RUnlock()
	if !live {
		return 0, 0, "", 0, false
	}
	h, p, err := security.SplitHostPort(br.Endpoint)
	if err != nil {
		return 0, 0, "", 0, false
	}
	return st.Leader, st.LeaderEpoch, h, p, true
}

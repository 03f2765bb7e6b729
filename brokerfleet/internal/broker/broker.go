package broker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stratamq/strata/brokerfleet/internal/catalog"
	"github.com/stratamq/strata/brokerfleet/internal/cleaner"
	"github.com/stratamq/strata/brokerfleet/internal/controller"
	"github.com/stratamq/strata/brokerfleet/internal/fetchsession"
	"github.com/stratamq/strata/brokerfleet/internal/group"
	"github.com/stratamq/strata/brokerfleet/internal/metrics"
	"github.com/stratamq/strata/brokerfleet/internal/partition"
	"github.com/stratamq/strata/brokerfleet/internal/quota"
	"github.com/stratamq/strata/brokerfleet/internal/replication"
	"github.com/stratamq/strata/brokerfleet/internal/security"
	"github.com/stratamq/strata/brokerfleet/internal/share"
	"github.com/stratamq/strata/brokerfleet/internal/tier"
	"github.com/stratamq/strata/brokerfleet/internal/topic"
	"github.com/stratamq/strata/brokerfleet/internal/txn"
	"github.com/stratamq/strata/pkg/clock"
	"github.com/stratamq/strata/pkg/metastore"
	"github.com/stratamq/strata/pkg/schemaregistry"
	"github.com/stratamq/strata/pkg/segment"
)

// Broker serves the Kafka protocol for the topics in the metastore, keeping
// their partition logs in its data directory. It is the composition root:
// it builds the components (catalog, controller, replication, tier,
// security, metrics, group coordinator), wires their hooks to each other,
// runs their loops, and serves requests through the route registry.
type Broker struct {
	cfg      Config
	log      *slog.Logger
	clock    clock.Clock
	defaults topic.Defaults
	meta     *metastore.Meta

	cat      *catalog.Catalog
	ctrl     *controller.Controller
	follower *replication.Follower
	// replicaWaiters wake follower fetches parked here (replicawake.go).
	replicaWaiters replicaWaiters
	tier           *tier.Manager    // nil without an object store
	cleaner        *cleaner.Cleaner // nil when Config.Cleaner.Threads is 0
	coord          *group.Coordinator
	groupCfg       *groupConfigs             // per-group configs (GROUP resources)
	shares         *share.Manager            // share partitions led here (KIP-932)
	dlq            atomic.Pointer[dlqWriter] // copies share dead letters (sharedlq.go)
	offsets        *offsetsTopic             // the __consumer_offsets copy of commits (off unless OffsetsTopicPartitions)
	txn            *txn.Coordinator          // the transaction coordinator
	peers          *peers                    // requests to other brokers (markers, verification)
	metrics        *metrics.Broker
	registry       *schemaregistry.Registry
	admin          *admin
	pids           *pidAllocator
	sessions       *fetchsession.Cache // incremental fetch sessions (KIP-227)
	quotas         *quota.Manager      // client quotas (KIP-546), enforced in serve
	// reassignThrottle caps what is sent to replicas being added by a
	// reassignment; nil when unthrottled.
	reassignThrottle *replication.Throttle
	secured          bool           // listeners with TLS or SASL, or ACLs: connections carry a Session
	authz            *security.ACLs // nil when ACLs are off
	auth             *security.Authenticator
	// replicaAuth: followers authenticate (the inter-broker listener has
	// SASL or requires client certificates), so a replica fetch from an
	// anonymous connection cannot be a follower's and is refused.
	replicaAuth bool
	limits      *connLimits // max.connections, max.connections.per.ip
	budget      *byteBudget // queued.max.request.bytes

	// controlling is whether this broker held the controller lease at its
	// last controller round (the tier's cluster-wide sweep runs there).
	controlling atomic.Bool

	// unsafeShareSyncs holds the share partitions whose delayed store is
	// scheduled (Config.UnsafeShareAckBeforeStore, test-only).
	unsafeShareSyncs sync.Map // *share.Partition -> bool

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // the loops and connections

	// viewMu guards viewSnap and viewSeq: the version of the topic view
	// the group coordinator sees moves with every new catalog snapshot.
	viewMu   sync.Mutex
	viewSnap *catalog.Snapshot
	viewSeq  int64

	connMu sync.Mutex // guards the fields below
	host   string
	port   int32
	lns    map[net.Listener]struct{}
	conns  map[net.Conn]struct{}
	closed bool
}

// maxPartitionsPerTopic bounds a request's partition count so one request
// cannot open an unbounded number of logs.
const maxPartitionsPerTopic = 10000

// metaTimeout bounds one metastore operation made for a client request.
const metaTimeout = 10 * time.Second

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
	cfg.Clock = clock.Or(cfg.Clock)
	if cfg.quietFullLook <= 0 {
		cfg.quietFullLook = fullLookEvery
	}
	if cfg.Lease.Clock == nil {
		cfg.Lease.Clock = cfg.Clock
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
	m := metrics.New()
	cfg.Meta = m.InstrumentMeta(cfg.Meta)
	cfg.Objects = m.CountObjects(cfg.Objects)
	var lease *metastore.Lease
	if cfg.NodeID == AutoNodeID {
		ctx, cancel := context.WithTimeout(context.Background(), cfg.Lease.Duration)
		cfg.NodeID, lease, err = claimNodeID(ctx, cfg)
		cancel()
		if err != nil {
			return nil, err
		}
		cfg.Logger.Info("claimed node id", "broker", cfg.NodeID)
	} else if lease, err = cfg.Meta.BrokerLease(cfg.registration(), cfg.Lease); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &Broker{
		cfg: cfg, log: cfg.Logger.With("broker", cfg.NodeID), clock: cfg.Clock,
		defaults: defaults, meta: cfg.Meta, metrics: m, pids: &pidAllocator{meta: cfg.Meta},
		ctx: ctx, cancel: cancel,
		lns: map[net.Listener]struct{}{}, conns: map[net.Conn]struct{}{},
		limits: newConnLimits(maxConnections(cfg.MaxConnections), cfg.MaxConnectionsPerIP),
		budget: newByteBudget(cfg.QueuedMaxRequestBytes),
	}
	b.initSecurity(ctx)
	b.sessions = fetchsession.New(fetchsession.Options{Slots: cfg.FetchSessionSlots, Clock: cfg.Clock})
	b.reassignThrottle = replication.NewThrottle(cfg.ReassignThrottle, cfg.Clock)
	b.registry = schemaregistry.New(cfg.Meta, schemaregistry.Options{})
	b.follower = replication.NewFollower(ctx, replication.Options{
		NodeID: cfg.NodeID, Dial: cfg.Security.Dialer(cfg.DialPeer, cfg.NodeID), ReplicaLagMax: cfg.ReplicaLagMax,
		Clock: cfg.Clock, Logger: b.log, ObserveAppend: m.FollowerAppended,
	})
	if b.cat, err = catalog.New(catalog.Options{
		Meta: cfg.Meta, NodeID: cfg.NodeID, Incarnation: cfg.Incarnation, Lease: lease,
		DataDir: cfg.DataDir, FS: cfg.FS, Defaults: defaults, Clock: cfg.Clock, Logger: b.log,
		OnApply:      b.applied,
		OnRole:       func(st metastore.PartitionState) { m.RoleApplied(cfg.NodeID, st) },
		OnRemove:     b.topicRemoved,
		ObserveStage: m.ReplicationStage,
		WakeReplicas: b.replicaWaiters.wake,
	}); err != nil {
		cancel()
		return nil, err
	}
	b.groupCfg = newGroupConfigs(cfg.Meta, share.DefaultConfig())
	b.shares = share.New(share.Options{Meta: cfg.Meta, Clock: cfg.Clock, Log: b.log, MaxLocks: cfg.ShareMaxRecordLocks,
		FlushDelay: cfg.ShareFlushDelay, DeadLetters: shareAPI{b}.shareDeadLetters, Leads: shareAPI{b}.leadsShare})
	b.offsets = &offsetsTopic{b: b}
	b.coord = group.New(group.Options{
		Meta: cfg.Meta, Valid: b.cat.LeaseValid, PartitionExists: b.partitionExists,
		MinSessionTimeout: cfg.GroupMinSessionTimeout, MaxSessionTimeout: cfg.GroupMaxSessionTimeout,
		InitialRebalanceDelay: cfg.GroupInitialRebalanceDelay, Clock: cfg.Clock, Logger: b.log,
		OffsetsRetention: cfg.OffsetsRetention, TopicID: b.topicID, Committed: b.offsets.committed,
		Topics: b.topicView, MaxSize: cfg.GroupMaxSize,
		ConsumerSessionTimeout: cfg.GroupConsumerSessionTimeout, ConsumerHeartbeatInterval: cfg.GroupConsumerHeartbeatInterval,
		ConsumerMaxSize: cfg.GroupConsumerMaxSize, ConsumerAssignors: cfg.GroupConsumerAssignors,
		MigrationPolicy: cfg.GroupConsumerMigrationPolicy, ShareConfig: b.groupCfg.share,
	})
	b.peers = newPeers(cfg.Security.Dialer(cfg.DialPeer, cfg.NodeID), cfg.NodeID)
	b.txn = txn.New(txn.Options{
		Meta: cfg.Meta, Valid: b.cat.LeaseValid, NewProducerID: b.pids.allocate, Markers: markerWriter{b},
		MaxTimeout: cfg.TransactionMaxTimeout, IDExpiration: cfg.TransactionalIDExpiration,
		CheckInterval: cfg.TransactionCheckInterval, Aborted: m.TxnAborted, Clock: cfg.Clock, Logger: b.log,
	})
	if cfg.Objects != nil {
		b.tier = tier.NewManager(tier.ManagerOptions{
			Catalog: b.cat, Meta: cfg.Meta, Objects: cfg.Objects, NodeID: cfg.NodeID, Incarnation: cfg.Incarnation,
			Defaults: defaults, Interval: cfg.TierInterval, OrphanGrace: cfg.TierOrphanGrace,
			FlushInterval: cfg.ObjectFlushInterval, NoWALIndex: !cfg.ObjectWALIndex, WatchInterval: cfg.WatchInterval,
			Uploaded: m.TierUploaded, Flushed: m.ObjectFlushed, Sweep: b.controlling.Load, Clock: cfg.Clock, Logger: b.log,
		})
	}
	if b.ctrl, err = controller.New(controller.Options{
		Meta: cfg.Meta, NodeID: cfg.NodeID, Incarnation: cfg.Incarnation, Lease: cfg.Lease, Defaults: defaults,
		ReassignAfter: cfg.ReassignAfter, LeaderRebalanceInterval: cfg.LeaderRebalanceInterval,
		ReplicaBalanceInterval: cfg.ReplicaBalanceInterval, MaxReassignments: cfg.MaxReassignments,
		Changed: b.cat.Reconcile, Clock: cfg.Clock, Logger: b.log,
		Role: func(held bool) { b.controlling.Store(held); m.SetController(held) },
	}); err != nil {
		cancel()
		b.coord.Close()
		b.txn.Close()
		return nil, err
	}
	if cfg.Cleaner.Threads > 0 {
		b.cleaner = cleaner.New(cleaner.Options{
			Threads: cfg.Cleaner.Threads, DedupeBytes: cfg.Cleaner.DedupeBufferBytes,
			IOBytesPerSecond: cfg.Cleaner.IOBytesPerSecond, Backoff: cfg.Cleaner.Backoff, Tier: cfg.Objects != nil,
			Partitions: func() []*partition.Partition { return b.cat.Snapshot().Hosted() },
			Clock:      cfg.Clock, Logger: b.log,
		})
		m.CollectCleaner(func() metrics.CleanerStats { return cleanerStats(b.cleaner) }, cfg.Clock.Now)
	}
	b.quotas = quota.New(quota.Options{Clock: cfg.Clock})
	b.reloadQuotas(ctx)
	b.admin = &admin{cfg: &b.cfg, ctx: ctx, log: b.log, meta: cfg.Meta, cat: b.cat, defaults: defaults, tier: b.tier, clock: cfg.Clock}
	b.dlq.Store(newDLQWriter(b))
	m.Collect(metricsSource{b})
	m.CollectTransactions(metricsSource{b})
	m.CollectShares(metricsSource{b})
	if err := b.cat.Reconcile(ctx); err != nil {
		cancel()
		b.coord.Close()
		b.txn.Close()
		b.cat.Close()
		return nil, fmt.Errorf("load topics: %w", err)
	}
	// Register now, so a fresh broker serves produce at once; a restarted
	// one keeps trying in the heartbeat until its previous lease runs out.
	tctx, tcancel := context.WithTimeout(ctx, cfg.Lease.Duration/3)
	b.cat.Register(tctx)
	tcancel()
	if b.tier != nil {
		b.tier.Start(ctx)
	}
	b.run(func(ctx context.Context) { b.cat.Heartbeat(ctx, cfg.Lease.Duration/3) })
	b.run(b.watch)
	b.run(b.maintain)
	b.run(b.refreshGroupStats)
	if cfg.OffsetsTopicPartitions > 0 {
		b.run(b.offsets.create)
	}
	if b.cleaner != nil {
		b.run(b.cleaner.Run)
	}
	b.run(b.ctrl.Run)
	b.run(func(ctx context.Context) {
		replication.MaintainISR(ctx, replication.ISROptions{
			Catalog: b.cat, Meta: cfg.Meta, ReplicaLagMax: cfg.ReplicaLagMax,
			Changed: m.ISRChanged, Clock: cfg.Clock, Logger: b.log,
		})
	})
	return b, nil
}

// registration is this broker's registration record.
func (c *Config) registration() metastore.Broker {
	return metastore.Broker{ID: c.NodeID, Endpoint: c.Advertise, Listeners: c.Security.Advertised(c.Advertise), Rack: c.Rack, Incarnation: c.Incarnation}
}

func newIncarnation() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// run runs fn in a goroutine until the broker closes.
func (b *Broker) run(fn func(ctx context.Context)) {
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		fn(b.ctx)
	}()
}

// applied runs after every reconcile: the follower fetch loops follow the
// current leaders, and the group coordinator serves the shards assigned
// here.
func (b *Broker) applied(s *catalog.Snapshot) {
	b.follower.Follow(s, b.cfg.Security.InterBrokerEndpoint)
	owned := map[int32]int64{}
	assigned := map[int32]metastore.CoordinatorShard{}
	for _, sh := range s.Shards() {
		if sh.Broker == s.Self() {
			owned[sh.Shard] = sh.Epoch
			assigned[sh.Shard] = sh
		}
	}
	if b.coord != nil {
		b.coord.SetShards(owned)
	}
	if b.cleaner != nil {
		b.cleaner.Kick() // a topic may have become compacted
	}
	if b.txn != nil {
		b.txn.SetShards(assigned)
	}
}

// topicRemoved runs (in its own goroutine) when a deleted topic's logs were
// removed: the groups this broker coordinates lose their offsets of it.
func (b *Broker) topicRemoved(t metastore.Topic) {
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	if err := b.coord.ForgetTopic(ctx, t.Name, t.ID); err != nil && b.ctx.Err() == nil {
		b.log.Warn("delete committed offsets of a deleted topic", "topic", t.Name, "err", err)
	}
	b.shares.Forget(func(k metastore.ShareKey) bool { return k.Topic != t.ID })
}

// partitionExists reports whether a topic partition exists (for commits).
func (b *Broker) partitionExists(name string, p int32) bool {
	t := b.cat.Snapshot().Topic(name)
	return t != nil && p >= 0 && int(p) < len(t.States)
}

// topicID returns the id of the topic called name now (for offset
// commits, so a topic re-created under the name keeps its new offsets).
func (b *Broker) topicID(name string) (metastore.TopicID, bool) {
	t := b.cat.Snapshot().Topic(name)
	if t == nil {
		return metastore.TopicID{}, false
	}
	return t.Meta.ID, true
}

// Serve accepts Kafka connections on ln for the default listener (see
// ServeListener for the others) until Close. The first one served also
// decides the advertised address when Config.Advertise is empty.
func (b *Broker) Serve(ln net.Listener) error {
	return b.accept(ln, b.cfg.Security.Default().Name)
}

// ServeListener accepts connections on ln for the named listener of
// Config.Security until Close.
func (b *Broker) ServeListener(name string, ln net.Listener) error {
	named, _, err := b.cfg.Security.Named(name, ln)
	if err != nil {
		return err
	}
	return b.accept(named, name)
}

// accept runs the accept loop of the listener called name. Accept errors
// (a full file table, say) are retried with net/http's backoff, never
// ending the loop before Close; connections are counted against
// max.connections (at the cap, the loop waits for one to close; the
// inter-broker listener does not when there are several, as in Kafka) and
// max.connections.per.ip (over it, a new connection is closed at once).
func (b *Broker) accept(ln net.Listener, name string) error {
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
	protected := len(b.cfg.Security.Listeners) > 1 && name == b.cfg.Security.InterBroker().Name
	failures := 0
	for {
		nc, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || b.ctx.Err() != nil {
				return nil
			}
			delay := acceptBackoff(failures)
			failures++
			b.log.Warn("accept failed; retrying", "listener", name, "in", delay, "err", err)
			select {
			case <-time.After(delay): // real time, as the kernel's resources free up
			case <-b.ctx.Done():
				return nil
			}
			continue
		}
		failures = 0
		ip := clientIP(nc)
		if !b.limits.admit(b.ctx, ip, protected) {
			b.log.Debug("closing a connection over max.connections.per.ip", "listener", name, "remote", nc.RemoteAddr().String())
			nc.Close()
			continue
		}
		b.connMu.Lock()
		if b.closed {
			b.connMu.Unlock()
			b.limits.release(ip)
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
			b.limits.release(ip)
		}()
	}
}

// Addr returns the advertised host and port (valid once Serve has started).
func (b *Broker) Addr() (string, int32) {
	b.connMu.Lock()
	defer b.connMu.Unlock()
	return b.host, b.port
}

// Close stops accepting, closes every connection, hands this broker's
// leaderships and coordinator shards over, waits for in-flight work and
// closes every partition log cleanly.
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
	if b.cat.LeaseValid() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		s := b.cat.Snapshot()
		var states []metastore.PartitionState
		for _, l := range s.Led(nil) {
			states = append(states, l.State)
		}
		live := map[int32]bool{}
		for id := range s.Peers() {
			live[id] = true
		}
		controller.HandOver(ctx, b.meta, b.log, b.cfg.NodeID, states, s.Shards(), live)
		cancel()
	}
	b.cancel()
	b.wg.Wait()
	if b.tier != nil {
		b.tier.Wait()
	}
	b.coord.Close()
	b.shares.Close()
	b.txn.Close()
	b.peers.close()
	b.follower.Stop()
	return b.cat.Close()
}

// watch applies metadata changes made anywhere (another broker, an admin
// tool) within one poll interval.
func (b *Broker) watch(ctx context.Context) {
	acked := int64(0) // the last sync request acknowledged
	b.meta.WatchChanges(ctx, b.cfg.WatchInterval, func(int64) error {
		rctx, cancel := context.WithTimeout(ctx, metaTimeout)
		defer cancel()
		err := b.cat.Reconcile(rctx)
		b.reloadSecurity(rctx)
		b.reloadQuotas(rctx)
		if err != nil {
			return fmt.Errorf("apply metadata change (retried next poll): %w", err)
		}
		// A broker that made a change waits for every broker to show it
		// (admin.sync): acknowledge once it is applied here.
		req, err := b.meta.SyncRequest(rctx)
		if v := b.cat.Snapshot().Version(); err == nil && req > acked && v >= req {
			if err = b.meta.AckSync(rctx, b.cfg.NodeID, v); err == nil {
				acked = v
			}
		}
		if err != nil {
			return fmt.Errorf("acknowledge metadata change (retried next poll): %w", err)
		}
		return nil
	}, func(err error) {
		b.log.Warn("watch metadata changes", "err", err)
	})
}

// maintain applies retention and segment.ms on every partition.
func (b *Broker) maintain(ctx context.Context) {
	t := b.clock.NewTicker(b.cfg.MaintenanceInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			b.RunMaintenance()
		}
	}
}

// RunMaintenance applies retention and time-based rolling to every
// partition once.
func (b *Broker) RunMaintenance() {
	for _, p := range b.cat.Snapshot().Hosted() {
		if err := p.Maintain(); err != nil && !errors.Is(err, partition.ErrClosed) && !errors.Is(err, segment.ErrClosed) {
			b.log.Warn("maintenance failed", "topic", p.Topic(), "partition", p.Index(), "err", err)
		}
	}
}

// Live returns nil while the broker runs (liveness: the process works,
// whatever the metastore does); ErrClosed once it was closed.
func (b *Broker) Live() error {
	if b.ctx.Err() != nil {
		return ErrClosed
	}
	return nil
}

// Healthy returns nil when the broker may act: it holds its registration
// lease, short of the lease's safe deadline, and has re-read the partition
// states under the lease's current epoch (the same test a leader passes
// before it accepts a write). Otherwise the error says why. It is not a
// liveness test: every broker fails it while the metastore is out of
// reach.
func (b *Broker) Healthy() error {
	if b.ctx.Err() != nil {
		return ErrClosed
	}
	return b.cat.Healthy()
}

// Ready returns nil once the broker has been Healthy and caught up at the
// same time (every partition it hosts whose leader is live lists it in
// the ISR), and from then on while it runs (latched; catalog.Ready).
// Deployments that replace brokers one at a time (ECS rolling updates) wait
// for Ready, so a replacement on an empty disk is in sync before the next
// broker stops; a metastore outage never makes a ready broker unready.
func (b *Broker) Ready() error {
	if b.ctx.Err() != nil {
		return ErrClosed
	}
	return b.cat.Ready()
}

// ErrClosed is returned by Healthy and Ready when the broker has been
// closed.
var ErrClosed = errors.New("broker closed")

// Meta returns the broker's metastore.
func (b *Broker) Meta() *metastore.Meta { return b.meta }

// ACLs returns the broker's ACL cache (for the schema registry), nil when ACLs are off.
func (b *Broker) ACLs() *security.ACLs { return b.authz }

// Gatherer returns the broker's own metrics registry: every strata_* series
// of this broker and no other's.
func (b *Broker) Gatherer() prometheus.Gatherer { return b.metrics.Gatherer() }

// GroupLag returns the lag history this broker keeps of group, a group it
// coordinates (metrics.Broker.GroupLag).
func (b *Broker) GroupLag(group string) ([]metrics.LagSeries, bool) { return b.metrics.GroupLag(group) }

// NewEMF returns a CloudWatch EMF renderer over the broker's registry.
func (b *Broker) NewEMF() *metrics.EMF {
	return metrics.NewEMF(b.Gatherer(), b.cfg.ClusterID, b.cfg.NodeID)
}

// WALStats counts a broker's "object" durability flushes and the
// metastore writes they made (for the bench's writes per flush). A
// function, not a method: Broker keeps at most 40.
func WALStats(b *Broker) tier.WALStats { return b.tier.WALStats() }

// ClosedSegmentEnd returns the offset where a local partition's closed,
// committed segments end (what the tier can hold), or 0 if it has none.
func (b *Broker) ClosedSegmentEnd(name string, idx int32) int64 {
	t := b.cat.Snapshot().Topic(name)
	if t == nil {
		return 0
	}
	_, p, ok := t.Partition(idx)
	if !ok || p == nil {
		return 0
	}
	end := p.UploadedTo()
	if end == math.MaxInt64 {
		end = 0
	}
	for _, s := range p.ClosedSegments() {
		end = max(end, s.NextOffset)
	}
	return end
}

// clusterBrokers returns the live brokers with their addresses, this one
// included (with its listener's address, even before its registration is
// visible), sorted by id.
func (b *Broker) clusterBrokers(s *catalog.Snapshot) []metastore.Broker {
	host, port := b.Addr()
	self := metastore.Broker{ID: b.cfg.NodeID, Endpoint: net.JoinHostPort(host, strconv.Itoa(int(port))), Listeners: b.cfg.Security.Advertised(b.cfg.Advertise), Rack: b.cfg.Rack, Live: true}
	out := make([]metastore.Broker, 0, len(s.Peers())+1)
	out = append(out, self)
	for id, br := range s.Peers() {
		if id != b.cfg.NodeID {
			out = append(out, br)
		}
	}
	slices.SortFunc(out, func(x, y metastore.Broker) int { return int(x.ID) - int(y.ID) })
	return out
}

// leadsShare reports whether this broker leads a share partition's topic
// partition under epoch.
func (b shareAPI) leadsShare(k metastore.ShareKey, epoch int32) bool {
	s := b.cat.Snapshot()
	t := s.TopicByID(k.Topic)
	if t == nil {
		return false
	}
	p, code := leaderOf(s, t.Meta.Name, k.Partition)
	return code == 0 && p.LeaderEpoch() == epoch
}

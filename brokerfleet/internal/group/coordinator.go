package group

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/stratamq/strata/brokerfleet/internal/group/assign"
	"github.com/stratamq/strata/pkg/clock"
	"github.com/stratamq/strata/pkg/metastore"
)

// Options configures a Coordinator.
type Options struct {
	// Meta stores generations and committed offsets. Required.
	Meta *metastore.Meta
	// Valid reports whether this broker may act now (its registration
	// lease is held and not past its safe deadline). Nil means always.
	Valid func() bool
	// PartitionExists reports whether a topic partition exists; commits to
	// others are refused with UNKNOWN_TOPIC_OR_PARTITION. Nil means all do.
	PartitionExists func(topic string, partition int32) bool
	// MinSessionTimeout and MaxSessionTimeout bound the session timeouts
	// members may ask for (group.min/max.session.timeout.ms).
	MinSessionTimeout, MaxSessionTimeout time.Duration
	// InitialRebalanceDelay is how long the first rebalance of an empty
	// group waits for more members (group.initial.rebalance.delay.ms).
	InitialRebalanceDelay time.Duration
	// MaxMetadataBytes caps the metadata string of a committed offset
	// (offset.metadata.max.bytes).
	MaxMetadataBytes int
	// Logger receives operational logs; nil means slog.Default().
	Logger *slog.Logger
	// Clock reads the time for session, rebalance and sync deadlines and
	// offset retention, and drives the loop that checks them; nil means
	// the real clock.
	Clock clock.Clock
	// TopicID returns the id of the topic now called topic, and false if
	// there is none. Commits record the id, so that ForgetTopic of a
	// deleted topic spares offsets committed to a topic created again
	// under its name; a commit to a topic without an id is answered
	// UNKNOWN_TOPIC_OR_PARTITION. Nil means ids are unknown: offsets are
	// stored without one, and ForgetTopic cannot tell incarnations apart.
	// It runs with a group's mu held, like PartitionExists.
	TopicID func(topic string) (metastore.TopicID, bool)
	// Committed, if set, is told the offsets of each commit once they are
	// stored, transactional ones when their commit marker applies them
	// (the __consumer_offsets copy). It runs with the group's mu held and
	// must not block.
	Committed func(group string, offs []metastore.Offset)
	// OffsetsRetention is how long committed offsets are kept once they
	// may expire (offsets.retention.minutes, with Kafka's semantics; see
	// expiredOffsets): an empty group's offsets this long after it became
	// empty, a simple group's this long after each commit. 0 (or less)
	// means DefaultOffsetsRetention, Kafka's 7 days.
	OffsetsRetention time.Duration
	// OffsetsRetentionCheckInterval is how often expired offsets are
	// looked for (offsets.retention.check.interval.ms). 0 (or less) means
	// DefaultOffsetsRetentionCheckInterval, Kafka's 10 minutes. It is also
	// how stale a re-committed unchanged offset's stored commit time may
	// get before the commit rewrites it.
	OffsetsRetentionCheckInterval time.Duration

	// Topics returns the cluster's topics as the broker knows them now,
	// for consumer groups' subscriptions. Nil means none: consumer groups
	// are assigned nothing. It runs with a group's mu held, like TopicID.
	Topics func() TopicView
	// ConsumerSessionTimeout is how long a consumer-protocol member may
	// go without a heartbeat (group.consumer.session.timeout.ms);
	// ConsumerHeartbeatInterval is the interval members are told to
	// heartbeat at (group.consumer.heartbeat.interval.ms). 0 means
	// Kafka's defaults.
	ConsumerSessionTimeout, ConsumerHeartbeatInterval time.Duration
	// ConsumerMaxSize bounds the members of a consumer group
	// (group.consumer.max.size); MaxSize those of a classic group
	// (group.max.size). 0 means unbounded (Kafka's MAX_INT).
	ConsumerMaxSize, MaxSize int
	// ConsumerAssignors are the server-side assignors members may name,
	// the first the default (group.consumer.assignors). Empty means
	// uniform, range. Names must be built-in (assign.ByName).
	ConsumerAssignors []string
	// MigrationPolicy says which online migrations between the classic
	// and the consumer protocol groups with members may make
	// (group.consumer.migration.policy): "bidirectional" (default),
	// "upgrade", "downgrade" or "disabled". Empty groups convert either
	// way whatever it says.
	MigrationPolicy string
}

// Defaults are Kafka's.
const (
	DefaultMinSessionTimeout     = 6 * time.Second
	DefaultMaxSessionTimeout     = 30 * time.Minute
	DefaultInitialRebalanceDelay = 3 * time.Second
	DefaultMaxMetadataBytes      = 4096
	// The consumer protocol's (KIP-848) defaults and bounds, Kafka's.
	DefaultConsumerSessionTimeout       = 45 * time.Second
	DefaultConsumerMinSessionTimeout    = 45 * time.Second
	DefaultConsumerMaxSessionTimeout    = 60 * time.Second
	DefaultConsumerHeartbeatInterval    = 5 * time.Second
	DefaultConsumerMinHeartbeatInterval = 5 * time.Second
	DefaultConsumerMaxHeartbeatInterval = 15 * time.Second
	DefaultMigrationPolicy              = "bidirectional"
	// maxGroupIDBytes bounds a group id, which becomes a metastore key.
	maxGroupIDBytes = 1000
	// metaTimeout bounds one metastore operation.
	metaTimeout = 10 * time.Second
	// tickInterval is how often session and rebalance deadlines are checked.
	tickInterval = 100 * time.Millisecond
)

// DefaultConsumerAssignors is Kafka's group.consumer.assignors.
func DefaultConsumerAssignors() []string { return []string{assign.UniformName, assign.RangeName} }

// ValidateConsumerAssignors checks a group.consumer.assignors list: built-in
// names, no duplicates, at least one.
func ValidateConsumerAssignors(names []string) error {
	if len(names) == 0 {
		return fmt.Errorf("no assignor")
	}
	seen := map[string]bool{}
	for _, n := range names {
		a := assign.ByName(n)
		if a == nil {
			return fmt.Errorf("unknown assignor %q (want %s or %s)", n, assign.UniformName, assign.RangeName)
		}
		if seen[a.Name()] {
			return fmt.Errorf("assignor %q named twice", n)
		}
		seen[a.Name()] = true
	}
	return nil
}

// ValidMigrationPolicy reports whether p is a group.consumer.migration.policy.
func ValidMigrationPolicy(p string) bool {
	switch strings.ToLower(p) {
	case "bidirectional", "upgrade", "downgrade", "disabled":
		return true
	}
	return false
}

// Coordinator serves the groups of the shards assigned to its broker.
type Coordinator struct {
	opts  Options
	log   *slog.Logger
	clock clock.Clock

	// mu guards shards and groups. Holding it, never wait for a group's
	// mu (the lock order is in doc.go).
	mu     sync.Mutex
	shards map[int32]int64 // owned shard -> assignment epoch
	groups map[string]*group
	// gained are shards owned since the run loop last loaded their
	// groups with members (loadGained).
	gained map[int32]bool
	// gainedRetry (the run loop's) is when loadGained may try again
	// after the metastore failed it.
	gainedRetry time.Time

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	// expiryNext and expiryDue belong to the run loop (no lock): when the
	// next expiry check is due, and the groups of the current one left to
	// examine.
	expiryNext time.Time
	expiryDue  []expiryCandidate

	// afterTick, if set before start, is called by the run loop after each
	// check of the deadlines with the time the check began (tests only).
	afterTick func(now time.Time)
}

// New starts a coordinator that owns no shards yet.
func New(opts Options) *Coordinator {
	c := newCoordinator(opts)
	c.start()
	return c
}

// newCoordinator returns a coordinator whose run loop is not started yet.
func newCoordinator(opts Options) *Coordinator {
	if opts.Valid == nil {
		opts.Valid = func() bool { return true }
	}
	if opts.PartitionExists == nil {
		opts.PartitionExists = func(string, int32) bool { return true }
	}
	if opts.MinSessionTimeout <= 0 {
		opts.MinSessionTimeout = DefaultMinSessionTimeout
	}
	if opts.MaxSessionTimeout <= 0 {
		opts.MaxSessionTimeout = DefaultMaxSessionTimeout
	}
	if opts.InitialRebalanceDelay < 0 {
		opts.InitialRebalanceDelay = 0
	}
	if opts.MaxMetadataBytes <= 0 {
		opts.MaxMetadataBytes = DefaultMaxMetadataBytes
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.OffsetsRetention <= 0 {
		opts.OffsetsRetention = DefaultOffsetsRetention
	}
	if opts.OffsetsRetentionCheckInterval <= 0 {
		opts.OffsetsRetentionCheckInterval = DefaultOffsetsRetentionCheckInterval
	}
	opts.OffsetsRetentionCheckInterval = max(opts.OffsetsRetentionCheckInterval, tickInterval)
	opts.Clock = clock.Or(opts.Clock)
	if opts.ConsumerSessionTimeout <= 0 {
		opts.ConsumerSessionTimeout = DefaultConsumerSessionTimeout
	}
	if opts.ConsumerHeartbeatInterval <= 0 {
		opts.ConsumerHeartbeatInterval = DefaultConsumerHeartbeatInterval
	}
	if opts.ConsumerMaxSize <= 0 {
		opts.ConsumerMaxSize = math.MaxInt32
	}
	if opts.MaxSize <= 0 {
		opts.MaxSize = math.MaxInt32
	}
	if len(opts.ConsumerAssignors) == 0 {
		opts.ConsumerAssignors = DefaultConsumerAssignors()
	}
	var assignors []string
	for _, n := range opts.ConsumerAssignors {
		if a := assign.ByName(n); a != nil && !slices.Contains(assignors, a.Name()) {
			assignors = append(assignors, a.Name())
		}
	}
	if len(assignors) == 0 {
		assignors = DefaultConsumerAssignors()
	}
	opts.ConsumerAssignors = assignors
	if opts.MigrationPolicy == "" {
		opts.MigrationPolicy = DefaultMigrationPolicy
	}
	opts.MigrationPolicy = strings.ToLower(opts.MigrationPolicy)
	ctx, cancel := context.WithCancel(context.Background())
	return &Coordinator{
		opts: opts, log: opts.Logger, clock: opts.Clock,
		shards: map[int32]int64{}, groups: map[string]*group{}, gained: map[int32]bool{},
		ctx: ctx, cancel: cancel, done: make(chan struct{}),
	}
}

func (c *Coordinator) start() { go c.run() }

// Close stops the coordinator; parked requests are answered
// NOT_COORDINATOR.
func (c *Coordinator) Close() {
	c.cancel()
	<-c.done
	c.SetShards(nil)
}

// SetShards sets the shards this broker coordinates, with their assignment
// epochs. Groups of shards lost, or reassigned meanwhile (a new epoch), are
// forgotten: their members are told NOT_COORDINATOR and rejoin wherever the
// shard is now, and a shard that comes back starts from the metastore.
func (c *Coordinator) SetShards(owned map[int32]int64) {
	c.mu.Lock()
	var drop []*group
	for name, g := range c.groups {
		if e, ok := owned[g.shard]; !ok || e != c.shards[g.shard] {
			drop = append(drop, g)
			delete(c.groups, name)
		}
	}
	for s, e := range owned {
		if cur, ok := c.shards[s]; !ok || cur != e {
			c.gained[s] = true
		}
	}
	for s := range c.gained {
		if _, ok := owned[s]; !ok {
			delete(c.gained, s)
		}
	}
	c.shards = make(map[int32]int64, len(owned))
	for s, e := range owned {
		c.shards[s] = e
	}
	c.mu.Unlock()
	for _, g := range drop {
		g.mu.Lock()
		g.unload()
		g.mu.Unlock()
	}
}

// Shards returns the owned shards, sorted.
func (c *Coordinator) Shards() []int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]int32, 0, len(c.shards))
	for s := range c.shards {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// Owns reports whether this coordinator may serve the group now.
func (c *Coordinator) Owns(name string) bool {
	if !c.opts.Valid() {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.shards[metastore.GroupShard(name)]
	return ok
}

// lookup returns the group, creating its (unloaded) in-memory record, or
// nil if its shard is not owned or this broker may not act.
func (c *Coordinator) lookup(name string) *group {
	if !c.opts.Valid() {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	shard := metastore.GroupShard(name)
	if _, ok := c.shards[shard]; !ok {
		return nil
	}
	g := c.groups[name]
	if g == nil {
		g = newGroup(c, name, shard)
		c.groups[name] = g
	}
	return g
}

// acquire returns the group locked and loaded from the metastore, or the
// Kafka error code to answer.
func (c *Coordinator) acquire(ctx context.Context, name string) (*group, int16) {
	for range 3 {
		g := c.lookup(name)
		if g == nil {
			return nil, codeNotCoordinator
		}
		g.mu.Lock()
		if g.gone {
			g.mu.Unlock()
			continue // forgotten between lookup and lock: look again
		}
		if !g.loaded {
			if err := g.load(ctx); err != nil {
				g.mu.Unlock()
				c.log.Warn("load group", "group", name, "err", err)
				return nil, codeCoordinatorNotAvailable
			}
		}
		return g, 0
	}
	return nil, codeNotCoordinator
}

func validGroupID(name string) bool { return name != "" && len(name) <= maxGroupIDBytes }

// enter checks a group id and returns the group locked and loaded, or the
// error code to answer.
func (c *Coordinator) enter(ctx context.Context, name string) (*group, int16) {
	if !validGroupID(name) {
		return nil, kerr.InvalidGroupID.Code
	}
	return c.acquire(ctx, name)
}

// run checks session, rebalance and sync deadlines, and expires committed
// offsets (expiryRound).
func (c *Coordinator) run() {
	defer close(c.done)
	t := c.clock.NewTicker(tickInterval)
	defer t.Stop()
	c.expiryNext = c.clock.Now().Add(c.opts.OffsetsRetentionCheckInterval)
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C():
		}
		began := c.clock.Now()
		if c.opts.Valid() {
			c.loadGained()
		}
		c.mu.Lock()
		gs := make([]*group, 0, len(c.groups))
		for name, g := range c.groups {
			gs = append(gs, g)
			// Forget idle groups with nothing in memory worth keeping:
			// they are reloaded from the metastore on the next request.
			// gone is set under g.mu, where a request that looked the
			// group up before this reads it. TryLock, because c.mu is
			// held (lock order): a group in use is not idle anyway.
			if g.mu.TryLock() {
				if g.idleSince(c.clock.Now()) > 10*time.Minute {
					delete(c.groups, name)
					g.gone = true
				}
				g.mu.Unlock()
			}
		}
		c.mu.Unlock()
		valid := c.opts.Valid()
		for _, g := range gs {
			g.mu.Lock()
			if !g.gone && valid {
				g.tick(c.clock.Now())
			}
			g.mu.Unlock()
		}
		if valid {
			c.expiryRound(c.clock.Now())
		}
		if c.afterTick != nil {
			c.afterTick(began)
		}
	}
}

// Snapshot is a group's state and committed offsets, for metrics.
type Snapshot struct {
	Group string
	// Type is "classic" or "consumer" (KIP-848).
	Type    string
	State   string
	Members int
	// Epoch is a consumer group's epoch, a classic group's generation.
	Epoch   int32
	Offsets []metastore.Offset
}

// Snapshots returns the loaded groups of this coordinator.
func (c *Coordinator) Snapshots() []Snapshot {
	c.mu.Lock()
	gs := make([]*group, 0, len(c.groups))
	for _, g := range c.groups {
		gs = append(gs, g)
	}
	c.mu.Unlock()
	var out []Snapshot
	for _, g := range gs {
		g.mu.Lock()
		if g.loaded && !g.gone && g.exists() {
			s := Snapshot{Group: g.name, Type: g.typeName(), State: g.stateName(), Members: g.memberCount(), Epoch: g.generation}
			if g.cg != nil {
				s.Epoch = g.cg.epoch
			}
			for _, o := range g.offsets {
				s.Offsets = append(s.Offsets, o)
			}
			out = append(out, s)
		}
		g.mu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out
}

// loadGained loads, for every shard gained since the last call, the
// groups whose index entry says they may have members, so their members'
// sessions run here even if none of them comes back: a member that died
// with the previous coordinator leaves its group a session later. A shard
// whose index cannot be read is tried again at the next tick.
func (c *Coordinator) loadGained() {
	if c.clock.Now().Before(c.gainedRetry) {
		return
	}
	c.mu.Lock()
	var shards []int32
	for s := range c.gained {
		shards = append(shards, s)
	}
	c.mu.Unlock()
	for _, s := range shards {
		ctx, cancel := context.WithTimeout(c.ctx, metaTimeout)
		infos, err := c.opts.Meta.Groups(ctx, s)
		cancel()
		if err != nil {
			if c.ctx.Err() == nil {
				c.log.Warn("list the groups of a gained shard; trying again in a second", "shard", s, "err", err)
			}
			c.gainedRetry = c.clock.Now().Add(time.Second)
			return
		}
		for _, gi := range infos {
			if gi.ProtocolType == "" || gi.EmptySince != 0 {
				continue // no members when it was last written
			}
			if g, code := c.acquire(c.ctx, gi.Group); code == 0 {
				g.mu.Unlock()
			}
		}
		c.mu.Lock()
		delete(c.gained, s)
		c.mu.Unlock()
	}
}

// LoadAll loads every indexed group of the owned shards, so their
// committed offsets (and lag) are known without a client asking first.
func (c *Coordinator) LoadAll(ctx context.Context) error {
	for _, shard := range c.Shards() {
		if err := c.LoadShard(ctx, shard); err != nil {
			return err
		}
	}
	return nil
}

// LoadShard loads every indexed group of one owned shard (nothing if the
// shard is not owned): one metastore query, plus a read per group not
// loaded yet.
func (c *Coordinator) LoadShard(ctx context.Context, shard int32) error {
	c.mu.Lock()
	_, owned := c.shards[shard]
	c.mu.Unlock()
	if !owned {
		return nil
	}
	infos, err := c.opts.Meta.Groups(ctx, shard)
	if err != nil {
		return err
	}
	for _, gi := range infos {
		g, code := c.acquire(ctx, gi.Group)
		if code != 0 {
			continue
		}
		g.mu.Unlock()
	}
	return nil
}

func newMemberID(clientID string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	return clientID + "-" + id[:8] + "-" + id[8:12] + "-" + id[12:16] + "-" + id[16:20] + "-" + id[20:]
}

// ForgetTopic deletes the committed offsets of a deleted topic, whose id
// was id, from every group of the owned shards (Kafka does the same), so
// a topic created again under the name starts from the groups' reset
// policy instead of stale offsets. Offsets committed against another id
// (the topic created again, before this ran) are kept. Offsets without an
// id are deleted: with Options.TopicID set, every commit records an id,
// so an offset without one was stored before ids were kept (or by a
// broker that does not keep them) and belongs to the deleted topic or an
// older one. A zero id deletes every offset of the name.
func (c *Coordinator) ForgetTopic(ctx context.Context, topic string, id metastore.TopicID) error {
	names := map[string]bool{}
	for _, shard := range c.Shards() {
		infos, err := c.opts.Meta.Groups(ctx, shard)
		if err != nil {
			return err
		}
		for _, gi := range infos {
			names[gi.Group] = true
		}
	}
	c.mu.Lock()
	for name := range c.groups {
		names[name] = true
	}
	c.mu.Unlock()
	var unknown metastore.TopicID
	for name := range names {
		g, code := c.acquire(ctx, name)
		if code != 0 {
			continue // moved or unreachable: its new coordinator forgets it
		}
		var gone []int32
		for k, o := range g.offsets {
			if k.topic == topic && (id == unknown || o.TopicID == unknown || o.TopicID == id) {
				gone = append(gone, k.partition)
			}
		}
		var err error
		for _, p := range gone {
			if err = c.opts.Meta.DeleteOffset(ctx, name, topic, p); err != nil {
				break
			}
			delete(g.offsets, tp{topic, p})
		}
		g.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return nil
}

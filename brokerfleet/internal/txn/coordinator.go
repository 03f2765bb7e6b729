package txn

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/stratamq/strata/pkg/clock"
	"github.com/stratamq/strata/pkg/metastore"
	"github.com/stratamq/strata/pkg/segment"
)

// Options configures a Coordinator.
type Options struct {
	// Meta stores the transactions. Required.
	Meta *metastore.Meta
	// Valid reports whether this broker may act now (its registration
	// lease is held, short of its safe deadline). Nil means always.
	Valid func() bool
	// NewProducerID returns a producer id never handed out before.
	// Required.
	NewProducerID func(ctx context.Context) (int64, error)
	// Markers writes transaction markers. Required.
	Markers Markers
	// MaxTimeout is the longest transaction timeout a producer may ask
	// for (transaction.max.timeout.ms); 0 means DefaultMaxTimeout.
	MaxTimeout time.Duration
	// IDExpiration is how long a transactional id without a transaction
	// is kept after its last use (transactional.id.expiration.ms); 0
	// means DefaultIDExpiration.
	IDExpiration time.Duration
	// CheckInterval is how often timed-out transactions and expired ids
	// are looked for (transaction.abort.timed.out.transaction.cleanup.
	// interval.ms); 0 means DefaultCheckInterval.
	CheckInterval time.Duration
	// EndWait bounds how long EndTxn waits for the markers of its
	// decision before it answers (the decision is durable once written,
	// so the answer is success either way); 0 means DefaultEndWait.
	EndWait time.Duration
	// Aborted, if set, is told of every abort decided, with its cause
	// ("client", "timeout", "fenced").
	Aborted func(cause string)
	// Clock reads the time and drives the check loop; nil means the real
	// clock.
	Clock clock.Clock
	// Logger receives operational logs; nil means slog.Default().
	Logger *slog.Logger
}

// Defaults are Kafka's, but for EndWait.
const (
	DefaultMaxTimeout    = 15 * time.Minute
	DefaultIDExpiration  = 7 * 24 * time.Hour
	DefaultCheckInterval = 10 * time.Second
	DefaultEndWait       = 5 * time.Second
	// MaxIDBytes bounds a transactional id, which becomes a metastore key.
	MaxIDBytes = 1000
	// metaTimeout bounds one metastore operation.
	metaTimeout = 10 * time.Second
	// markerTimeout bounds one round of marker writes.
	markerTimeout = 30 * time.Second
)

// Markers writes one transaction's markers.
type Markers interface {
	// WriteMarkers writes marker m to each partition (for OffsetsTopic,
	// to the groups of that group coordinator shard) and returns one error
	// per partition: nil once the marker is written and committed there,
	// ErrGone when the partition no longer exists, ErrFenced when a newer
	// coordinator has written to it; others are retried.
	WriteMarkers(ctx context.Context, m segment.Marker, parts []TopicPartition) []error
}

var (
	// ErrGone is returned by Markers for a partition that no longer
	// exists (its topic was deleted): nothing is left to end there.
	ErrGone = errors.New("txn: partition gone")
	// ErrFenced is returned by Markers for a partition that took a marker
	// of a newer coordinator epoch or producer epoch: this coordinator was
	// superseded.
	ErrFenced = errors.New("txn: coordinator fenced")
)

// shardState is an owned shard as assigned: immutable but for loaded,
// which Coordinator.mu guards.
type shardState struct {
	cs     metastore.CoordinatorShard
	loaded bool
	loadMu sync.Mutex // one load at a time
}

// entry is one transactional id's cached state.
type entry struct {
	mu     sync.Mutex
	id     string
	shard  *shardState // the assignment it was read under
	loaded bool
	exists bool // it has a record
	t      metastore.Transaction
	gone   bool // forgotten: look it up again
	// busy: a Prepare* decision is being carried out; done is closed
	// when it ends (completed, or forgotten).
	busy bool
	done chan struct{}
}

// Coordinator serves the transactional ids of the shards assigned to its
// broker.
type Coordinator struct {
	opts  Options
	log   *slog.Logger
	clock clock.Clock

	// mu guards shards, the loaded flags and txns. Holding it, never wait
	// for an entry's mu.
	mu     sync.Mutex
	shards map[int32]*shardState
	txns   map[string]*entry

	kick   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // the run loop and completions
}

// New starts a coordinator that owns no shards yet.
func New(opts Options) *Coordinator {
	if opts.Valid == nil {
		opts.Valid = func() bool { return true }
	}
	if opts.MaxTimeout <= 0 {
		opts.MaxTimeout = DefaultMaxTimeout
	}
	if opts.IDExpiration <= 0 {
		opts.IDExpiration = DefaultIDExpiration
	}
	if opts.CheckInterval <= 0 {
		opts.CheckInterval = DefaultCheckInterval
	}
	if opts.EndWait <= 0 {
		opts.EndWait = DefaultEndWait
	}
	if opts.Aborted == nil {
		opts.Aborted = func(string) {}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	opts.Clock = clock.Or(opts.Clock)
	ctx, cancel := context.WithCancel(context.Background())
	c := &Coordinator{
		opts: opts, log: opts.Logger, clock: opts.Clock,
		shards: map[int32]*shardState{}, txns: map[string]*entry{},
		kick: make(chan struct{}, 1), ctx: ctx, cancel: cancel,
	}
	c.wg.Add(1)
	go c.run()
	return c
}

// Close stops the coordinator and waits for its marker writes to stop.
// Transactions it was completing are completed by the shard's next owner.
func (c *Coordinator) Close() {
	c.cancel()
	c.SetShards(nil)
	c.wg.Wait()
}

// SetShards sets the shards this broker coordinates, with their
// assignments. The transactions of shards lost or reassigned meanwhile (a
// new epoch) are forgotten; their completions stop (the new owner
// resumes them); a gained shard is loaded.
func (c *Coordinator) SetShards(owned map[int32]metastore.CoordinatorShard) {
	c.mu.Lock()
	next := make(map[int32]*shardState, len(owned))
	for s, cs := range owned {
		if old := c.shards[s]; old != nil && old.cs.Epoch == cs.Epoch && old.cs.Version == cs.Version {
			next[s] = old
		} else {
			next[s] = &shardState{cs: cs}
		}
	}
	var drop []*entry
	for id, e := range c.txns {
		if next[metastore.GroupShard(id)] != e.shard {
			drop = append(drop, e)
			delete(c.txns, id)
		}
	}
	c.shards = next
	c.mu.Unlock()
	for _, e := range drop {
		e.mu.Lock()
		e.gone = true
		e.mu.Unlock()
	}
	c.wake()
}

func (c *Coordinator) wake() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// Owns reports whether this coordinator serves the transactional id now.
func (c *Coordinator) Owns(id string) bool {
	if !c.opts.Valid() {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.shards[metastore.GroupShard(id)] != nil
}

// shardOf returns the owned shard of id, or nil.
func (c *Coordinator) shardOf(id string) *shardState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.shards[metastore.GroupShard(id)]
}

// loadShard reads every transaction of an owned shard into memory (once
// per assignment, again after an entry was forgotten on a failed write)
// and resumes the decisions it finds not carried out.
func (c *Coordinator) loadShard(ctx context.Context, sh *shardState) error {
	sh.loadMu.Lock()
	defer sh.loadMu.Unlock()
	c.mu.Lock()
	loaded := sh.loaded
	c.mu.Unlock()
	if loaded {
		return nil
	}
	txns, err := c.opts.Meta.Transactions(ctx, sh.cs.Shard)
	if err != nil {
		return err
	}
	var resume []*entry
	c.mu.Lock()
	if c.shards[sh.cs.Shard] != sh {
		c.mu.Unlock()
		return nil // moved on meanwhile
	}
	for _, t := range txns {
		if c.txns[t.ID] != nil {
			continue // looked up meanwhile: it reads its own record
		}
		e := &entry{id: t.ID, shard: sh, loaded: true, exists: true, t: t}
		c.txns[t.ID] = e
		if preparing(t.State) {
			resume = append(resume, e)
		}
	}
	sh.loaded = true
	c.mu.Unlock()
	for _, e := range resume {
		e.mu.Lock()
		if !e.gone && !e.busy && preparing(e.t.State) {
			c.log.Info("resuming a decided transaction", "transactional_id", e.id, "state", e.t.State)
			c.startCompletion(e)
		}
		e.mu.Unlock()
	}
	return nil
}

func preparing(state string) bool {
	return state == metastore.TxnPrepareCommit || state == metastore.TxnPrepareAbort
}

// acquire returns id's entry locked and read, or the error code to answer.
func (c *Coordinator) acquire(ctx context.Context, id string) (*entry, int16) {
	for range 3 {
		if !c.opts.Valid() {
			return nil, codeNotCoordinator
		}
		sh := c.shardOf(id)
		if sh == nil {
			return nil, codeNotCoordinator
		}
		lctx, cancel := context.WithTimeout(ctx, metaTimeout)
		err := c.loadShard(lctx, sh)
		cancel()
		if err != nil {
			c.log.Warn("load transactions", "shard", sh.cs.Shard, "err", err)
			return nil, codeNotAvailable
		}
		c.mu.Lock()
		if c.shards[sh.cs.Shard] != sh {
			c.mu.Unlock()
			continue
		}
		e := c.txns[id]
		if e == nil {
			e = &entry{id: id, shard: sh, t: metastore.Transaction{ID: id}}
			c.txns[id] = e
		}
		c.mu.Unlock()
		e.mu.Lock()
		if e.gone {
			e.mu.Unlock()
			continue
		}
		if !e.loaded {
			gctx, cancel := context.WithTimeout(ctx, metaTimeout)
			t, ok, err := c.opts.Meta.Transaction(gctx, id)
			cancel()
			if err != nil {
				c.forgetLocked(e)
				e.mu.Unlock()
				c.log.Warn("read transaction", "transactional_id", id, "err", err)
				return nil, codeNotAvailable
			}
			e.loaded, e.exists = true, ok
			if ok {
				e.t = t
				if preparing(t.State) {
					c.startCompletion(e)
				}
			}
		}
		return e, 0
	}
	return nil, codeNotCoordinator
}

// release unlocks e after a request. An entry of an id without state is
// dropped then, so asking about ids that do not exist (or exist on no
// record) never grows memory. Holds e.mu.
func (c *Coordinator) release(e *entry) {
	if !e.exists && !e.busy && !e.gone {
		e.gone = true
		c.mu.Lock()
		if c.txns[e.id] == e {
			delete(c.txns, e.id)
		}
		c.mu.Unlock()
	}
	e.mu.Unlock()
}

// forgetLocked drops e from memory: the next request reads it again. An
// entry forgotten after a failed write marks its shard for reloading, so
// a decision that was written after all is still carried out. Holds e.mu.
func (c *Coordinator) forgetLocked(e *entry) {
	e.gone = true
	c.mu.Lock()
	if c.txns[e.id] == e {
		delete(c.txns, e.id)
	}
	if c.shards[e.shard.cs.Shard] == e.shard {
		e.shard.loaded = false
	}
	c.mu.Unlock()
	c.wake()
}

// write stores next as e's state. A write fenced by the metastore (the
// shard moved, or another coordinator wrote) or that failed otherwise
// (its outcome unknown) forgets e. Holds e.mu.
func (c *Coordinator) write(ctx context.Context, e *entry, next metastore.Transaction) error {
	wctx, cancel := context.WithTimeout(ctx, metaTimeout)
	defer cancel()
	next.Version = e.t.Version
	if !e.exists {
		next.Version = 0
	}
	stored, err := c.opts.Meta.PutTransaction(wctx, next, e.shard.cs.Version)
	if err != nil {
		c.forgetLocked(e)
		return err
	}
	e.t, e.exists = stored, true
	return nil
}

// codeOf is the answer to a failed write.
func codeOf(err error) int16 {
	if errors.Is(err, metastore.ErrFenced) {
		return codeNotCoordinator
	}
	return codeNotAvailable
}

// run aborts timed-out transactions, expires idle transactional ids and
// loads gained shards.
func (c *Coordinator) run() {
	defer c.wg.Done()
	t := c.clock.NewTicker(c.opts.CheckInterval)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C():
			if c.opts.Valid() {
				c.loadAll()
				c.check(c.clock.Now())
			}
		case <-c.kick:
			if c.opts.Valid() {
				c.loadAll()
			}
		}
	}
}

// loadAll loads every owned shard not loaded yet.
func (c *Coordinator) loadAll() {
	c.mu.Lock()
	var todo []*shardState
	for _, sh := range c.shards {
		if !sh.loaded {
			todo = append(todo, sh)
		}
	}
	c.mu.Unlock()
	for _, sh := range todo {
		ctx, cancel := context.WithTimeout(c.ctx, metaTimeout)
		if err := c.loadShard(ctx, sh); err != nil && c.ctx.Err() == nil {
			c.log.Warn("load transactions", "shard", sh.cs.Shard, "err", err)
		}
		cancel()
	}
}

// check aborts the ongoing transactions that outlived their timeout and
// deletes the ids idle past the expiration.
func (c *Coordinator) check(now time.Time) {
	c.mu.Lock()
	es := make([]*entry, 0, len(c.txns))
	for _, e := range c.txns {
		es = append(es, e)
	}
	c.mu.Unlock()
	ms := now.UnixMilli()
	for _, e := range es {
		e.mu.Lock()
		if e.gone || !e.loaded || !e.exists || e.busy {
			e.mu.Unlock()
			continue
		}
		if next, ok := decideTimeout(e.t, ms); ok {
			if err := c.write(c.ctx, e, next); err != nil {
				c.log.Warn("abort a timed-out transaction", "transactional_id", e.id, "err", err)
			} else {
				c.log.Info("aborting a timed-out transaction", "transactional_id", e.id, "producer_id", e.t.ProducerID, "timeout_ms", e.t.TimeoutMs)
				c.opts.Aborted("timeout")
				c.startCompletion(e)
			}
		} else if e.t.State != metastore.TxnOngoing && ms-e.t.UpdateMs > c.opts.IDExpiration.Milliseconds() {
			ctx, cancel := context.WithTimeout(c.ctx, metaTimeout)
			err := c.opts.Meta.DeleteTransaction(ctx, e.t, e.shard.cs.Version)
			cancel()
			if err != nil {
				c.log.Warn("expire a transactional id", "transactional_id", e.id, "err", err)
			}
			c.forgetLocked(e)
		}
		e.mu.Unlock()
	}
}

// startCompletion carries out e's Prepare* decision in the background:
// markers to every partition, then the Complete* state. Holds e.mu.
func (c *Coordinator) startCompletion(e *entry) {
	if e.busy {
		return
	}
	e.busy, e.done = true, make(chan struct{})
	c.wg.Add(1)
	go c.complete(e, e.t)
}

// finishLocked ends e's completion. Holds e.mu.
func (e *entry) finishLocked() {
	if e.busy {
		e.busy = false
		close(e.done)
	}
}

// complete writes t's markers until every partition has one (or is gone),
// then records the transaction complete. It stops when the coordinator
// closes, loses the shard, or is fenced; the shard's next owner resumes.
func (c *Coordinator) complete(e *entry, t metastore.Transaction) {
	defer c.wg.Done()
	m := segment.Marker{ProducerID: t.ProducerID, ProducerEpoch: t.ProducerEpoch,
		Commit: t.State == metastore.TxnPrepareCommit, CoordinatorEpoch: int32(e.shard.cs.Epoch)}
	parts := partitionsOf(t)
	backoff := 20 * time.Millisecond
	stop := func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.gone || c.ctx.Err() != nil {
			e.finishLocked()
			return true
		}
		return false
	}
	for len(parts) > 0 {
		if stop() {
			return
		}
		ctx, cancel := context.WithTimeout(c.ctx, markerTimeout)
		errs := c.opts.Markers.WriteMarkers(ctx, m, parts)
		cancel()
		var retry []TopicPartition
		var last error
		for i, err := range errs {
			switch {
			case err == nil, errors.Is(err, ErrGone):
			case errors.Is(err, ErrFenced):
				c.log.Warn("a newer coordinator wrote a partition of the transaction; stopping", "transactional_id", e.id,
					"topic", parts[i].Topic, "partition", parts[i].Partition, "err", err)
				e.mu.Lock()
				c.forgetLocked(e)
				e.finishLocked()
				e.mu.Unlock()
				return
			default:
				retry, last = append(retry, parts[i]), err
			}
		}
		if len(retry) < len(parts) {
			e.mu.Lock()
			if !e.gone && e.t.Version == t.Version {
				e.t.Partitions = topicsOf(retry) // DescribeTransactions lists what is left
			}
			e.mu.Unlock()
		}
		parts = retry
		if len(parts) == 0 {
			break
		}
		c.log.Debug("transaction markers not written yet; retrying", "transactional_id", e.id, "partitions", len(parts), "err", last)
		tm := c.clock.NewTimer(backoff)
		select {
		case <-tm.C():
		case <-c.ctx.Done():
		}
		tm.Stop()
		backoff = min(2*backoff, time.Second)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.gone || c.ctx.Err() != nil || e.t.Version != t.Version {
		e.finishLocked()
		return
	}
	if err := c.write(c.ctx, e, completed(e.t, c.clock.Now().UnixMilli())); err != nil && c.ctx.Err() == nil {
		// Forgotten: the shard is read again and the decision resumed
		// (markers are written again; a partition takes a repeat).
		c.log.Warn("record a transaction complete", "transactional_id", e.id, "err", err)
	}
	e.finishLocked()
}

// topicsOf groups partitions by topic, sorted.
func topicsOf(parts []TopicPartition) []metastore.TxnTopic {
	var out metastore.Transaction
	for _, tp := range parts {
		out.AddPartition(tp.Topic, tp.Partition)
	}
	return out.Partitions
}

package replication

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratamq/strata/brokerfleet/internal/catalog"
	"github.com/stratamq/strata/brokerfleet/internal/wire"
	"github.com/stratamq/strata/pkg/clock"
	"github.com/stratamq/strata/pkg/metastore"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/partition"
)

// Follower fetch tuning.
const (
	replicaFetchWait = 2 * time.Second // at most; see fetchWait
	// replicaFetchMaxBytes bounds an answer so that it lands in the one
	// buffer the connection keeps (wire.Conn keeps up to 8 MiB): with
	// 1,000 partitions and a 64 MiB bound, every answer was a fresh
	// allocation of tens of MiB, zeroed and then collected. Kafka's
	// replica.fetch.response.max.bytes is 10 MiB.
	replicaFetchMaxBytes = 4 << 20
	replicaPartMaxBytes  = 8 << 20
	replicaBackoff       = 200 * time.Millisecond
	// fullFillEvery is how often a fetch looks at every followed
	// partition for a fetch state to tell (see fetchSession.fill): a
	// local log start that retention or the tier moved is told within it.
	fullFillEvery = 100 * time.Millisecond
	// reconcileRetry is the longest a fetch parks at the leader while some
	// of its partitions still await reconciliation under a new epoch.
	reconcileRetry = 20 * time.Millisecond
)

// followed is a partition this broker follows.
type followed struct {
	topic string
	index int32
	epoch int32
	p     *partition.Partition
}

// Options configures a Follower.
type Options struct {
	// NodeID is this broker's id: the replica id of its fetches.
	NodeID int32
	// Dial opens connections to leaders (TLS and SASL included); nil means
	// plain TCP.
	Dial wire.DialFunc
	// ReplicaLagMax is replica.lag.time.max.ms: fetches wait at most a
	// quarter of it at the leader, so a caught-up follower proves it often
	// enough.
	ReplicaLagMax time.Duration
	// Clock drives backoffs; nil means the real clock.
	Clock clock.Clock
	// Logger receives operational logs; nil means slog.Default().
	Logger *slog.Logger
	// ObserveAppend, if set, times each fetch answer from its arrival to
	// its records appended (and synced, for fsync topics).
	ObserveAppend func(time.Duration)
}

// fetchLoop pulls every partition led by one broker, over one connection:
// a Kafka Fetch with this broker's id as the replica id, whose fetch offset
// tells the leader how far this replica is.
type fetchLoop struct {
	leader int32
	addr   string
	parts  atomic.Pointer[[]followed]
	cancel context.CancelFunc
	done   chan struct{}
	connMu sync.Mutex
	conn   *wire.Conn // closed on stop to abort a request in flight

	// interrupted is set when the connection was closed because the loop
	// gained a partition (or a partition's epoch moved): the fetch parked
	// at the leader (up to fetchWait) did not ask for it, so the loop
	// reconnects at once instead of backing off.
	interrupted atomic.Bool
}

// interrupt cuts the request in flight short (see interrupted).
func (l *fetchLoop) interrupt() {
	l.connMu.Lock()
	if l.conn != nil {
		l.interrupted.Store(true)
		l.conn.Close()
	}
	l.connMu.Unlock()
}

// gained reports whether next follows a partition, or a leader epoch,
// that prev did not.
func gained(prev, next []followed) bool {
	had := make(map[partKey]int32, len(prev))
	for _, f := range prev {
		had[partKey{f.topic, f.index}] = f.epoch
	}
	for _, f := range next {
		if e, ok := had[partKey{f.topic, f.index}]; !ok || e != f.epoch {
			return true
		}
	}
	return false
}

func (l *fetchLoop) setConn(c *wire.Conn) {
	l.connMu.Lock()
	l.conn = c
	l.connMu.Unlock()
}

func (l *fetchLoop) stop() {
	l.cancel()
	l.connMu.Lock()
	if l.conn != nil {
		l.conn.Close()
	}
	l.connMu.Unlock()
	<-l.done
}

// Follower runs this broker's follower fetch loops, one per leader.
type Follower struct {
	opts  Options
	log   *slog.Logger
	clock clock.Clock
	ctx   context.Context

	// mu guards loops; it is held while loops start and stop (a stop
	// waits for the loop's goroutine).
	mu    sync.Mutex
	loops map[int32]*fetchLoop
}

// NewFollower returns a Follower whose loops run until ctx ends or Stop.
func NewFollower(ctx context.Context, opts Options) *Follower {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	opts.Clock = clock.Or(opts.Clock)
	return &Follower{opts: opts, log: opts.Logger, clock: opts.Clock, ctx: ctx}
}

// Follow points the fetch loops at the leaders of the partitions this
// broker follows in s, reaching each leader at addr(leader's registration)
// (its inter-broker listener).
func (r *Follower) Follow(s *catalog.Snapshot, addr func(metastore.Broker) string) {
	byLeader := map[int32][]followed{}
	addrs := map[int32]string{}
	for id, br := range s.Peers() {
		addrs[id] = addr(br)
	}
	self := s.Self()
	for _, t := range s.Topics() {
		for i, st := range t.States {
			p := t.Parts[i]
			if p == nil || st.Leader == self || st.Leader < 0 {
				continue
			}
			byLeader[st.Leader] = append(byLeader[st.Leader], followed{topic: t.Meta.Name, index: int32(i), epoch: st.LeaderEpoch, p: p})
		}
	}
	if r.ctx.Err() != nil {
		return
	}
	r.update(byLeader, addrs)
}

// update sets what is followed from which leader (at addr), starting and
// stopping loops as needed.
func (r *Follower) update(byLeader map[int32][]followed, addrs map[int32]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.loops == nil {
		r.loops = map[int32]*fetchLoop{}
	}
	for id, l := range r.loops {
		if len(byLeader[id]) == 0 || addrs[id] != l.addr {
			l.stop()
			delete(r.loops, id)
		}
	}
	for id, parts := range byLeader {
		if len(parts) == 0 || addrs[id] == "" {
			continue
		}
		parts := parts
		if l := r.loops[id]; l != nil {
			prev := l.parts.Swap(&parts)
			if prev == nil || gained(*prev, parts) {
				l.interrupt()
			}
			continue
		}
		ctx, cancel := context.WithCancel(r.ctx)
		l := &fetchLoop{leader: id, addr: addrs[id], cancel: cancel, done: make(chan struct{})}
		l.parts.Store(&parts)
		r.loops[id] = l
		go r.run(ctx, l)
	}
}

// Stop ends every loop.
func (r *Follower) Stop() {
	r.update(nil, nil)
}

func (r *Follower) run(ctx context.Context, l *fetchLoop) {
	defer close(l.done)
	log := r.log.With("leader", l.leader)
	var conn *wire.Conn
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	// rec holds, per partition, the leader epoch whose log this replica
	// has reconciled with (KIP-101): a new epoch means a new leader,
	// whose log may differ past the last common epoch.
	rec := reconciled{at: map[partKey]int32{}}
	var set fetchSet      // what the rounds fetch, kept while nothing changes
	var sess fetchSession // the incremental fetch session with this leader
	pending := 0          // consecutive rounds with partitions not yet reconciled
	for ctx.Err() == nil {
		if conn == nil {
			dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			c, err := wire.Dial(dctx, r.opts.Dial, l.addr, fmt.Sprintf("strata-replica-%d", r.opts.NodeID), 2*replicaFetchMaxBytes)
			cancel()
			if err != nil {
				log.Debug("connect to leader", "addr", l.addr, "err", err)
				clock.Sleep(ctx, r.clock, replicaBackoff)
				continue
			}
			conn = c
			l.setConn(c)
		}
		allp := l.parts.Load()
		all := *allp
		// Reconciling looks at every partition; once all of them are
		// reconciled under their epochs and neither they nor rec changed,
		// it would find nothing to do.
		if !set.current(allp, &rec) || len(set.parts) < len(all) {
			if err := r.truncate(conn, all, &rec); err != nil {
				if ctx.Err() == nil {
					log.Debug("offset for leader epoch", "err", err)
				}
				conn.Close()
				conn = nil
				if !l.interrupted.Swap(false) {
					clock.Sleep(ctx, r.clock, replicaBackoff)
				}
				continue
			}
			set.build(allp, &rec)
		}
		parts := set.parts
		// Partitions not reconciled with this leader yet (it may not have
		// applied its election) are tried again soon, backing off from
		// reconcileRetry to 16 times it: the fetch does not park at the
		// leader meanwhile.
		wait := r.fetchWait()
		if len(parts) < len(all) {
			wait = min(wait, reconcileRetry<<min(pending, 4))
			pending++
		} else {
			pending = 0
		}
		if len(parts) == 0 {
			clock.Sleep(ctx, r.clock, wait)
			continue
		}
		req := r.fetchRequest(parts, &sess, wait, set.hint(r.clock.Now()))
		set.named = set.named[:0] // this answer's, which apply notes
		resp, err := conn.Do(req, wait+10*time.Second)
		if err != nil {
			if ctx.Err() == nil {
				log.Debug("replica fetch", "err", err)
			}
			conn.Close()
			conn = nil
			sess.reset() // the answer is lost: the leader's session may be ahead
			if !l.interrupted.Swap(false) {
				clock.Sleep(ctx, r.clock, replicaBackoff)
			}
			continue
		}
		arrived := r.clock.Now()
		fr := resp.(*kmsg.FetchResponse)
		if !sess.answered(fr) {
			if fr.ErrorCode != kerr.FetchSessionIDNotFound.Code && fr.ErrorCode != kerr.InvalidFetchSessionEpoch.Code {
				log.Warn("replica fetch error", "err", kerr.ErrorForCode(fr.ErrorCode))
				clock.Sleep(ctx, r.clock, replicaBackoff)
			}
			continue // a session error: a full fetch at once
		}
		progressed, appended := r.apply(&set, fr, &rec, log)
		if appended && r.opts.ObserveAppend != nil {
			r.opts.ObserveAppend(clock.Since(r.clock, arrived))
		}
		if !progressed {
			clock.Sleep(ctx, r.clock, replicaBackoff)
		}
	}
}

type partKey struct {
	topic string
	index int32
}

// reconciled is a fetch loop's record of the leader epoch each partition
// was reconciled under; gen moves on every change.
type reconciled struct {
	at  map[partKey]int32
	gen uint64
}

func (c *reconciled) set(k partKey, epoch int32) { c.at[k] = epoch; c.gen++ }
func (c *reconciled) drop(k partKey)             { delete(c.at, k); c.gen++ }

// done reports whether f is reconciled under its current epoch.
func (c *reconciled) done(f followed) bool {
	e, ok := c.at[partKey{f.topic, f.index}]
	return ok && e == f.epoch
}

// fetchSet is what a fetch loop's rounds fetch: the followed partitions
// reconciled under their epochs, and where each sits in parts. With
// 1,000 partitions, building it every round cost two allocations and a
// thousand lookups per round; it is built again only when the followed
// partitions or the reconciliations change.
type fetchSet struct {
	from  *[]followed // the loop's partition list it was built from
	gen   uint64      // reconciled.gen it was built at
	parts []followed
	index map[partKey]int

	// named are the positions in parts the last answer named: a
	// follower's log moves only as it applies answers, so the next fetch
	// need only look at those (fetchSession.fill), except after a build
	// (fresh) and every fullFillEvery (lookedAll: the last full look).
	named     []int
	fresh     bool
	lookedAll time.Time
}

// hint returns what the next fill looks at: the positions the last answer
// named, or nil for every partition.
func (s *fetchSet) hint(now time.Time) []int {
	if s.fresh || now.Sub(s.lookedAll) >= fullFillEvery {
		s.fresh, s.lookedAll = false, now
		return nil
	}
	return s.named
}

// current reports whether the set was built from all and rec as they are.
func (s *fetchSet) current(all *[]followed, rec *reconciled) bool {
	return s.from == all && s.index != nil && s.gen == rec.gen
}

func (s *fetchSet) build(all *[]followed, rec *reconciled) {
	if s.current(all, rec) {
		return
	}
	s.from, s.gen, s.fresh = all, rec.gen, true
	if s.named == nil {
		s.named = make([]int, 0, 64) // nil would mean "look at all"
	}
	s.parts = s.parts[:0:0] // a new array: rounds before may still hold the old one
	s.index = make(map[partKey]int, len(*all))
	for _, f := range *all {
		if rec.done(f) {
			s.index[partKey{f.topic, f.index}] = len(s.parts)
			s.parts = append(s.parts, f)
		}
	}
}

// truncate reconciles, for every partition whose leader epoch is new to
// this replica, its log with the leader's: it asks the leader where its
// own last epoch ends in the leader's log and cuts everything after that
// (and after where that epoch ends locally). Only then does it fetch.
func (r *Follower) truncate(conn *wire.Conn, parts []followed, done *reconciled) error {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.Version = 3
	req.ReplicaID = r.opts.NodeID
	byTopic := map[string]int{}
	pending := map[partKey]followed{}
	for _, f := range parts {
		k := partKey{f.topic, f.index}
		if done.done(f) {
			continue
		}
		last := f.p.LastEpoch()
		if last < 0 {
			done.set(k, f.epoch) // nothing to reconcile
			continue
		}
		pending[k] = f
		rt := topicEntry(&req.Topics, byTopic, f.topic, func(name string) kmsg.OffsetForLeaderEpochRequestTopic {
			t := kmsg.NewOffsetForLeaderEpochRequestTopic()
			t.Topic = name
			return t
		})
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = f.index, f.epoch, last
		rt.Partitions = append(rt.Partitions, rp)
	}
	if len(pending) == 0 {
		return nil
	}
	raw, err := conn.Do(req, 10*time.Second)
	if err != nil {
		return err
	}
	for _, rt := range raw.(*kmsg.OffsetForLeaderEpochResponse).Topics {
		for _, rp := range rt.Partitions {
			k := partKey{rt.Topic, rp.Partition}
			f, ok := pending[k]
			if !ok || rp.ErrorCode != 0 {
				continue // retried on the next round
			}
			_, localEnd := f.p.EndOffsetForEpoch(rp.LeaderEpoch)
			target := min(rp.EndOffset, localEnd)
			if rp.LeaderEpoch < 0 {
				target = rp.EndOffset
			}
			if target < f.p.LogEndOffset() {
				r.log.Info("truncating diverged replica", "topic", f.topic, "partition", f.index,
					"from", f.p.LogEndOffset(), "to", target, "leaderEpoch", f.epoch)
				if err := f.p.TruncateTo(f.epoch, target); err != nil {
					if !errors.Is(err, partition.ErrStaleEpoch) {
						r.log.Warn("truncate replica", "topic", f.topic, "partition", f.index, "err", err)
					}
					continue
				}
			}
			done.set(k, f.epoch)
		}
	}
	return nil
}

// fetchWait is how long the leader may hold a follower's fetch while it has
// nothing new. The leader answers as soon as it appends, so this costs no
// latency; it only sets how often an idle follower asks (the leader reads
// every partition of the fetch session each time: with 1,000 partitions,
// asking twice a second was most of an idle cluster's CPU). It stays well
// inside ReplicaLagMax, since a follower proves it is caught up by
// fetching.
func (r *Follower) fetchWait() time.Duration {
	return min(replicaFetchWait, r.opts.ReplicaLagMax/4)
}

// fetchRequest builds the next fetch of parts within sess: full, or
// incremental (only what changed since the leader's session last heard).
func (r *Follower) fetchRequest(parts []followed, sess *fetchSession, wait time.Duration, hint []int) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.Version = 12
	req.ReplicaID = r.opts.NodeID
	req.MaxWaitMillis = int32(wait / time.Millisecond)
	req.MinBytes = 1
	req.MaxBytes = replicaFetchMaxBytes
	sess.fill(req, parts, hint)
	return req
}

// apply appends what the leader sent. It returns false when nothing
// progressed because of errors, so the loop backs off, and whether any
// records were appended.
func (r *Follower) apply(set *fetchSet, resp *kmsg.FetchResponse, rec *reconciled, log interface {
	Warn(string, ...any)
}) (progressed, appendedAny bool) {
	if resp.ErrorCode != 0 {
		return false, false
	}
	var appended []*partition.Partition // fsync durability, to sync
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			i, ok := set.index[partKey{rt.Topic, rp.Partition}]
			if !ok {
				continue
			}
			f := set.parts[i]
			set.named = append(set.named, i) // whatever happens next, its state may move
			p := f.p
			if rp.ErrorCode == kerr.OffsetOutOfRange.Code && rp.LogStartOffset > p.LogEndOffset() {
				// Our whole log lies below the leader's (its older segments
				// went to the tier, or our disk was wiped): start over at
				// the leader's log start, as Kafka's followers do.
				if err := p.ResetTo(f.epoch, false, rp.LogStartOffset); err != nil && !errors.Is(err, partition.ErrClosed) && !errors.Is(err, partition.ErrStaleEpoch) {
					log.Warn("reset replica to the leader's log start", "topic", rt.Topic, "partition", rp.Partition, "err", err)
				}
				progressed = true
				continue
			}
			if rp.ErrorCode == kerr.OffsetOutOfRange.Code {
				// Our log ends past the leader's: reconcile again (ask
				// where our last epoch ends in its log) before fetching.
				log.Warn("replica ahead of its leader: reconciling", "topic", rt.Topic, "partition", rp.Partition, "logEnd", p.LogEndOffset())
				rec.drop(partKey{f.topic, f.index})
				continue
			}
			if rp.ErrorCode != 0 {
				// NOT_LEADER, UNKNOWN_TOPIC (the leader has not applied a
				// new topic yet), FENCED/UNKNOWN_LEADER_EPOCH: the metastore
				// watcher brings the new state.
				if rp.ErrorCode != kerr.NotLeaderForPartition.Code && rp.ErrorCode != kerr.UnknownTopicOrPartition.Code {
					log.Warn("replica fetch error", "topic", rt.Topic, "partition", rp.Partition, "err", kerr.ErrorForCode(rp.ErrorCode))
				}
				continue
			}
			// Appended only while the partition is still at the epoch the
			// fetch was sent under (checked under the partition's lock).
			if err := p.AppendReplica(f.epoch, rp.RecordBatches, rp.HighWatermark); err != nil {
				if !errors.Is(err, partition.ErrClosed) && !errors.Is(err, partition.ErrStaleEpoch) {
					log.Warn("replica append", "topic", rt.Topic, "partition", rp.Partition, "err", err)
				}
				continue
			}
			progressed = true
			appendedAny = appendedAny || len(rp.RecordBatches) > 0
			if p.Fsync() {
				appended = append(appended, p)
			}
		}
	}
	// fsync durability: sync the partitions of this answer in parallel
	// (one fsync each, the disk overlaps them) before the next fetch
	// reports their new ends.
	var wg sync.WaitGroup
	for _, p := range appended {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := p.SyncReplica(); err != nil && !errors.Is(err, partition.ErrClosed) {
				log.Warn("replica sync", "partition", p.Index(), "err", err)
			}
		}()
	}
	wg.Wait()
	return progressed || len(resp.Topics) == 0, appendedAny
}

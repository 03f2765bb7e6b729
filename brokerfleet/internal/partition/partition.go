package partition

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratamq/strata/brokerfleet/internal/topic"
	"github.com/stratamq/strata/pkg/segment"
)

// ErrClosed is returned when the partition has been closed (its topic was
// deleted or the broker is shutting down).
var ErrClosed = errors.New("partition closed")

// ErrStaleEpoch is returned by the replica operations (AppendReplica,
// TruncateTo, ResetTo) when the partition has left the leader epoch, or
// the role, they were decided under.
var ErrStaleEpoch = errors.New("partition: leader epoch or role moved on")

// ErrNotLeader is returned by WaitCommitted when the partition stopped
// leading while it waited: what it waited for may never commit here (the
// new leader may truncate it), and the client must go to the new leader.
var ErrNotLeader = errors.New("partition: no longer the leader")

// checkEpochLocked fails with ErrStaleEpoch unless the partition is at
// leader epoch epoch and leads (asLeader) or follows (!asLeader). Called
// under p.mu, which SetLeaderEpoch also takes: a follower fetch loop that
// asked the previous leader can never append its answer after the loop
// of the new leader has truncated the log to that leader's (which would
// leave this replica holding batches the new leader does not have).
func (p *Partition) checkEpochLocked(epoch int32, asLeader bool) error {
	if p.leaderEpoch.Load() != epoch || p.IsLeader() != asLeader {
		return ErrStaleEpoch
	}
	return nil
}

// Options configure a Partition.
type Options struct {
	Topic  string
	Index  int32
	Log    *segment.Log // owned by the partition from now on
	Config topic.Config
	Now    func() time.Time // default time.Now
	// Observe, if set, receives the replication stages of the newest
	// append as a leader sees them (stages.go).
	Observe func(Stage, time.Duration)
	// WakeReplicas, if set, is called with the partition and its
	// replicas whenever its records, high watermark, local log start or
	// role change. Every change of LogEndOffset, HighWatermark and
	// LocalLogStartOffset calls it after the new value is stored.
	WakeReplicas func(p *Partition, replicas []int32)
}

// Partition is one partition's leader state.
type Partition struct {
	topic string
	index int32
	log   *segment.Log
	now   func() time.Time
	cfg   atomic.Pointer[topic.Config]

	mu        sync.Mutex // orders appends; guards producers, epochs, snapBase and closed
	producers producers
	epochs    epochCache
	closed    bool
	snapBase  int64 // the active segment's base when the last snapshot was taken
	snapErr   atomic.Pointer[error]

	txnMu sync.Mutex // guards txns; written under mu too
	txns  txnState

	hwm         atomic.Int64
	logStart    atomic.Int64
	leaderEpoch atomic.Int32
	tierStart   atomic.Int64 // first offset in the object tier; -1: none
	uploadedTo  atomic.Int64 // segments below are uploaded; MaxInt64: not tiered

	repMu sync.Mutex
	rep   replication

	observe     func(Stage, time.Duration) // nil: stages not timed
	wake        func(*Partition, []int32)  // Options.WakeReplicas
	markEnd     atomic.Int64               // the newest append's end (stages.go)
	markAt      atomic.Int64               // its time, in Unix nanoseconds
	committedAt atomic.Int64               // when the high watermark passed it; 0: not yet

	watchMu  sync.Mutex
	watchers map[chan struct{}]struct{} // high watermark / log start moved

	flushKick chan struct{}
	flushStop chan struct{}
	flushDone chan struct{}
}

// New wraps an open log. It rebuilds the idempotence window, the epoch
// history and the transactions from the newest snapshot in the log and
// the headers of the batches after it (of every batch without one).
func New(o Options) (*Partition, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	p := &Partition{
		topic:     o.Topic,
		index:     o.Index,
		log:       o.Log,
		now:       o.Now,
		observe:   o.Observe,
		wake:      o.WakeReplicas,
		producers: producers{},
		txns:      newTxnState(),
		watchers:  map[chan struct{}]struct{}{},
		flushKick: make(chan struct{}, 1),
		flushStop: make(chan struct{}),
		flushDone: make(chan struct{}),
	}
	cfg := o.Config
	p.cfg.Store(&cfg)
	o.Log.SetSegmentConfig(cfg.SegmentBytes, time.Duration(segmentAge(cfg)))
	p.snapBase = o.Log.ActiveBase()
	if err := p.restoreLocked(math.MaxInt64); err != nil {
		return nil, err
	}
	// Everything recovered from disk is committed: a single replica has
	// nothing to wait for. Recovery keeps only what survived, which for
	// "fsync" topics is at least everything ever acknowledged.
	p.hwm.Store(o.Log.NextOffset())
	p.logStart.Store(o.Log.StartOffset())
	p.tierStart.Store(-1)
	p.uploadedTo.Store(math.MaxInt64)
	// Until told otherwise, a partition is the sole replica and leader.
	p.rep = replication{leader: true, durable: o.Log.NextOffset()}
	go p.flusher()
	return p, nil
}

// Topic returns the partition's topic name.
func (p *Partition) Topic() string { return p.topic }

// Index returns the partition number.
func (p *Partition) Index() int32 { return p.index }

// Config returns the partition's current topic config.
func (p *Partition) Config() topic.Config { return *p.cfg.Load() }

// SetConfig applies a changed topic config.
func (p *Partition) SetConfig(c topic.Config) {
	p.cfg.Store(&c)
	p.log.SetSegmentConfig(c.SegmentBytes, time.Duration(segmentAge(c)))
	p.kickFlush()
}

// HighWatermark is the offset below which records are committed and
// visible to consumers.
func (p *Partition) HighWatermark() int64 { return p.hwm.Load() }

// LogStartOffset is the earliest offset still readable, from the object
// tier or the local log (what clients are told).
func (p *Partition) LogStartOffset() int64 {
	local := p.logStart.Load()
	if t := p.tierStart.Load(); t >= 0 && t < local {
		return t
	}
	return local
}

// LogEndOffset is the offset the next appended record will get.
func (p *Partition) LogEndOffset() int64 { return p.log.NextOffset() }

// LeaderEpoch is the leader epoch from the partition's control-plane
// state, stamped into every appended batch.
func (p *Partition) LeaderEpoch() int32 { return p.leaderEpoch.Load() }

// SetLeaderEpoch records the partition's current leader epoch. It waits
// for a ResetAsLeader in progress.
func (p *Partition) SetLeaderEpoch(e int32) {
	p.mu.Lock()
	p.leaderEpoch.Store(e)
	p.mu.Unlock()
}

// AppendResult describes an appended (or deduplicated) batch.
type AppendResult struct {
	BaseOffset    int64
	LastOffset    int64
	LogAppendTime int64 // -1 unless the topic uses LogAppendTime
	LogStart      int64
	Duplicate     bool // the batch repeated one already in the log
}

// Append assigns offsets to one validated batch (CRC already checked by the
// caller), stamps it and writes it to the log. A batch that repeats one of a
// producer's last five returns the original offsets with Duplicate set and
// writes nothing. A transactional batch that opens its producer's
// transaction here needs AppendTxn.
func (p *Partition) Append(batch []byte, h segment.Header) (AppendResult, error) {
	return p.AppendTxn(batch, h, nil)
}

// AppendTxn is Append for a batch whose transaction the coordinator
// verified under g (GuardTxn): a transactional batch opens its producer's
// transaction only with the guard it was verified under, and only if no
// marker of the producer was written since (ErrInvalidTxnState).
func (p *Partition) AppendTxn(batch []byte, h segment.Header, g *TxnGuard) (AppendResult, error) {
	cfg := p.cfg.Load()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return AppendResult{}, ErrClosed
	}
	dup, err := p.producers.check(h)
	if err != nil {
		return AppendResult{}, err
	}
	if dup != nil {
		return AppendResult{BaseOffset: dup.baseOffset, LastOffset: dup.lastOffset,
			LogAppendTime: dup.appendTime, LogStart: p.logStart.Load(), Duplicate: true}, nil
	}
	if err := p.checkTxnLocked(h, g); err != nil {
		return AppendResult{}, err
	}
	base := p.log.NextOffset()
	segment.SetBaseOffset(batch, base)
	segment.SetPartitionLeaderEpoch(batch, p.LeaderEpoch())
	appendTime := int64(-1)
	if cfg.LogAppendTime {
		appendTime = p.now().UnixMilli()
		segment.SetLogAppendTime(batch, appendTime)
	}
	if err := p.log.Append(batch); err != nil {
		return AppendResult{}, fmt.Errorf("partition %s-%d: %w", p.topic, p.index, err)
	}
	h.BaseOffset = base
	p.producers.record(h, appendTime)
	p.epochs.note(p.LeaderEpoch(), base)
	if h.IsTransactional() {
		p.txnMu.Lock()
		p.txns.data(h)
		p.txnMu.Unlock()
	}
	p.snapshotOnRollLocked()
	p.markAppend(h.LastOffset() + 1)
	p.durableAfterAppendLocked(cfg.Durability)
	p.notifyAppend() // followers long-polling for new data
	return AppendResult{BaseOffset: base, LastOffset: h.LastOffset(), LogAppendTime: appendTime,
		LogStart: p.logStart.Load()}, nil
}

// durableAfterAppendLocked moves the leader's durable end after an append
// as the topic's durability says. Holds p.mu.
func (p *Partition) durableAfterAppendLocked(durability string) {
	switch durability {
	case topic.DurabilityFsync:
		p.kickFlush()
	case topic.DurabilityObject:
		// Durable once the object tier says so (SetObjectDurable).
	default:
		p.setDurable(p.log.NextOffset())
	}
}

func (p *Partition) kickFlush() {
	select {
	case p.flushKick <- struct{}{}:
	default:
	}
}

// flusher advances the high watermark of "fsync" topics to what is durable,
// sharing one fsync among all appends since the previous one. It also
// catches up a topic switched from "fsync" to "replicated".
func (p *Partition) flusher() {
	defer close(p.flushDone)
	for {
		select {
		case <-p.flushStop:
			return
		case <-p.flushKick:
		}
		end := p.log.NextOffset()
		if p.cfg.Load().Durability == topic.DurabilityObject {
			continue
		}
		if p.cfg.Load().Durability == topic.DurabilityFsync {
			if err := p.log.Flush(end); err != nil {
				// The data stays unacknowledged; the next append retries.
				continue
			}
		}
		p.setDurable(end)
	}
}

func (p *Partition) advanceHWM(off int64) {
	for {
		cur := p.hwm.Load()
		if off <= cur {
			return
		}
		if p.hwm.CompareAndSwap(cur, off) {
			if p.observe != nil {
				if d, ok := p.since(cur, off); ok {
					p.committedAt.Store(p.now().UnixNano())
					p.observe(StageCommitted, d)
				}
			}
			break
		}
	}
	p.notify()
}

func (p *Partition) notify() { p.signal(p.watchers); p.wakeReplicas() }

// notifyAppend tells of new records: only follower fetches read them
// before they commit.
func (p *Partition) notifyAppend() { p.wakeReplicas() }

// wakeReplicas tells Options.WakeReplicas of a change (records, high
// watermark, log start, role): follower fetches parked at this leader
// wait on one channel each there, not on every partition of their
// session.
func (p *Partition) wakeReplicas() {
	if p.wake == nil {
		return
	}
	p.repMu.Lock()
	replicas := p.rep.replicas // replaced, never changed in place
	p.repMu.Unlock()
	p.wake(p, replicas)
}

func (p *Partition) signal(set map[chan struct{}]struct{}) {
	p.watchMu.Lock()
	for ch := range set {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	p.watchMu.Unlock()
}

// Watch registers ch to receive a non-blocking send whenever the high
// watermark or log start offset moves. The returned func unregisters it.
func (p *Partition) Watch(ch chan struct{}) (cancel func()) {
	p.watchMu.Lock()
	p.watchers[ch] = struct{}{}
	p.watchMu.Unlock()
	return func() {
		p.watchMu.Lock()
		delete(p.watchers, ch)
		p.watchMu.Unlock()
	}
}

// WaitCommitted blocks until the high watermark reaches off, ctx ends, or
// the partition stops leading (ErrNotLeader).
func (p *Partition) WaitCommitted(ctx context.Context, off int64) error {
	if p.hwm.Load() >= off {
		return nil
	}
	ch := make(chan struct{}, 1)
	defer p.Watch(ch)()
	for p.hwm.Load() < off {
		if !p.IsLeader() {
			return ErrNotLeader // watchers hear of every change of role
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// Read appends to dst whole committed batches starting with the one holding
// offset, up to maxBytes. With minOne, the first batch is returned whole
// even if it exceeds maxBytes (KIP-74).
func (p *Partition) Read(dst []byte, offset int64, maxBytes int, minOne bool) ([]byte, error) {
	start := len(dst)
	out, err := p.log.Read(dst, offset, maxBytes, p.hwm.Load())
	if err != nil {
		return dst, err
	}
	if !minOne && len(out)-start > maxBytes {
		return out[:start], nil
	}
	return out, nil
}

// Bound is where a read stops: below the high watermark (Read), the last
// stable offset (ReadCommitted) or the log end (ReadUncommitted).
type Bound int

const (
	ToHighWatermark Bound = iota
	ToLastStable
	ToLogEnd
)

// ReadSpan reads like Read, ReadCommitted or ReadUncommitted (upTo), but a
// record set of at least minSpan bytes is left in its segment file
// (segment.Log.ReadSpan): dst comes back unchanged with a span the caller
// closes. A follower's read (ToLogEnd) always takes its first batch whole.
func (p *Partition) ReadSpan(dst []byte, offset int64, maxBytes int, minOne bool, upTo Bound, minSpan int) ([]byte, *segment.Span, error) {
	var limit int64
	switch upTo {
	case ToLastStable:
		limit = p.LastStableOffset()
	case ToLogEnd:
		limit, minOne = p.log.NextOffset(), true
	default:
		limit = p.hwm.Load()
	}
	start := len(dst)
	out, sp, err := p.log.ReadSpan(dst, offset, maxBytes, limit, minSpan)
	if err != nil {
		return dst, nil, err
	}
	if !minOne && (len(out)-start > maxBytes || (sp != nil && sp.Len > int64(maxBytes))) {
		if sp != nil {
			_ = sp.Close()
		}
		return out[:start], nil, nil
	}
	return out, sp, nil
}

// DeleteRecords moves the log start offset to off (-1: the high watermark)
// and returns the new log start offset.
func (p *Partition) DeleteRecords(off int64) (int64, error) {
	hwm := p.hwm.Load()
	if off == -1 {
		off = hwm
	}
	if off < 0 || off > hwm {
		return 0, fmt.Errorf("delete records to %d (high watermark %d): %w", off, hwm, segment.ErrOffsetOutOfRange)
	}
	if err := p.log.DeleteTo(off); err != nil {
		return 0, err
	}
	p.logStart.Store(p.log.StartOffset())
	p.dropAbortedBelow(p.logStart.Load())
	p.notify()
	return p.logStart.Load(), nil
}

// Maintain applies retention and time-based rolling; the broker calls it
// periodically.
func (p *Partition) Maintain() error {
	cfg := p.cfg.Load()
	if err := p.log.MaybeRoll(); err != nil {
		return err
	}
	if cfg.NoDelete {
		// cleanup.policy=compact: the cleaner keeps the latest record of
		// every key for ever, here and (not expired) in the tier, so local
		// disk holds the whole table for the cleaner and new replicas.
		return nil
	}
	// segment.Log reads a non-positive retention as unlimited; Kafka's 0
	// means "already expired".
	retention := cfg.Retention
	switch {
	case retention == 0:
		retention = time.Nanosecond
	case retention < 0:
		retention = 0
	}
	retentionBytes, limit := cfg.RetentionBytes, int64(math.MaxInt64)
	if p.Tiered() {
		// The tier keeps the log for retention.*; locally only uploaded
		// segments go, after local.retention.*.
		retention, retentionBytes, limit = cfg.LocalRetention, cfg.LocalRetentionBytes, p.uploadedTo.Load()
		switch {
		case retention == 0:
			retention = time.Nanosecond
		case retention < 0:
			retention = 0
		}
	}
	// Nothing above the high watermark goes, as in Kafka: a follower may
	// still need it, and it is not committed (a replica opened from disk
	// keeps its whole log until the ISR proves the high watermark).
	limit = min(limit, p.hwm.Load())
	if _, err := p.log.ApplyRetentionBelow(retention, retentionBytes, limit); err != nil {
		return err
	}
	if start := p.log.StartOffset(); p.logStart.Swap(start) != start {
		p.dropAbortedBelow(start)
		p.wakeReplicas() // followers are told the new local log start
	}
	return nil
}

// Size is the bytes of the partition's local log.
func (p *Partition) Size() int64 { return p.log.Size() }

// Close stops the flusher and closes the log cleanly.
func (p *Partition) Close() error {
	if !p.markClosed() {
		return nil
	}
	close(p.flushStop)
	<-p.flushDone
	return p.log.Close()
}

// Remove closes the partition and deletes its log from disk.
func (p *Partition) Remove() error {
	if p.markClosed() {
		close(p.flushStop)
		<-p.flushDone
	}
	return p.log.Remove()
}

func (p *Partition) markClosed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.closed = true
	return true
}

package share

// A share partition on its partition's leader: the state machine of
// state.go under a lock, its persisted form in the metastore and the
// group commit that makes acknowledgements durable before they are
// answered.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratamq/strata/pkg/metastore"
)

// ErrFenced is returned when the partition's stored state was written by
// someone else (a newer leader, or AlterShareGroupOffsets) since this
// broker read it: the in-memory state is dropped and read again.
var ErrFenced = errors.New("share: share partition state superseded")

// Partition is one share partition (a group's view of one topic
// partition) on the partition's leader. Guarded by mu; its methods take
// it themselves.
type Partition struct {
	key         metastore.ShareKey
	m           *Manager
	leaderEpoch int32

	mu      sync.Mutex
	st      state
	version int64       // of the stored state
	stale   atomic.Bool // the stored state moved on: reload before use
	// Group commit: seq counts changes, durable the last stored.
	seq, durable uint64
	flushing     bool
	waiters      []waiter
	wake         chan struct{} // closed and replaced when records become available
	cfg          Config        // the group's config as of the last request
	next         time.Time     // earliest lock expiry (zero: none)
}

type waiter struct {
	seq uint64
	ch  chan error
}

// Key returns the partition's key.
func (p *Partition) Key() metastore.ShareKey { return p.key }

// LeaderEpoch is the leader epoch it was loaded under.
func (p *Partition) LeaderEpoch() int32 { return p.leaderEpoch }

// Stats is a share partition's backlog.
type Stats struct {
	Start, End                    int64
	Available, Acquired, Archived int
}

// Stats returns the partition's backlog in its window.
func (p *Partition) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	a, q, r := p.st.counts()
	return Stats{Start: p.st.start, End: p.st.end, Available: a, Acquired: q, Archived: r}
}

// Backlog is Stats with the records past the window up to hw counted
// available, and the first available offset (-1: none).
func (p *Partition) Backlog(hw int64) (st Stats, first int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	a, q, r := p.st.counts()
	st = Stats{Start: p.st.start, End: p.st.end, Available: a + int(max(hw-p.st.end, 0)), Acquired: q, Archived: r}
	first = p.st.firstAvailable()
	if first >= hw {
		first = -1
	}
	return st, first
}

// Wake returns a channel closed when records may have become available
// (acknowledged, released, expired).
func (p *Partition) Wake() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.wake
}

// notify wakes waiting fetchers. Holds p.mu.
func (p *Partition) notify() {
	close(p.wake)
	p.wake = make(chan struct{})
}

// Reader reads whole committed batches of the log from an offset.
type Reader interface {
	// Read returns batches starting with the one holding offset, up
	// to about maxBytes (at least one batch).
	Read(offset int64, maxBytes int) ([]byte, []Batch, error)
	LogStartOffset() int64
}

// Acquire acquires up to max records for member from the log behind r
// and returns the record bytes (whole batches) and acquired ranges.
func (p *Partition) Acquire(member string, r Reader, max, maxBytes int, cfg Config) ([]byte, []Range, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stale.Load() {
		return nil, nil, ErrFenced
	}
	if ls := r.LogStartOffset(); ls > p.st.start {
		p.st.trimTo(ls)
		p.seq++
	}
	from := p.st.firstAvailable()
	if from == p.st.end && p.st.inflight() >= p.m.opts.MaxLocks {
		return nil, nil, nil
	}
	data, batches, err := r.Read(from, maxBytes)
	if err != nil || len(batches) == 0 {
		return nil, nil, err
	}
	deadline := p.m.opts.Clock.Now().Add(cfg.LockDuration)
	ranges := p.st.acquire(batches, member, deadline, max, p.m.opts.MaxLocks, cfg.DeliveryLimit)
	if len(ranges) == 0 {
		return nil, nil, nil
	}
	p.seq++
	// Send only the batches up to the last acquired offset.
	last := ranges[len(ranges)-1].Last
	cut := 0
	for _, b := range batches {
		if b.Base > last {
			break
		}
		cut++
	}
	if cut < len(batches) {
		data = data[:batchesLen(data, cut)]
	}
	p.cfg = cfg
	if p.next.IsZero() || deadline.Before(p.next) {
		p.next = deadline
	}
	return data, ranges, nil
}

// Ack validates and applies member's acknowledgements; the caller then
// waits for Sync before answering. renew allows RENEW.
func (p *Partition) Ack(member string, batches []AckBatch, renew bool, cfg Config) (int16, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stale.Load() {
		return 0, ErrFenced
	}
	if len(batches) == 0 {
		return 0, nil
	}
	if code := p.st.validateAcks(member, batches, renew); code != 0 {
		return code, nil
	}
	p.cfg = cfg
	deadline := p.m.opts.Clock.Now().Add(cfg.LockDuration)
	dead := p.st.applyAcks(batches, deadline, cfg.DeliveryLimit)
	p.seq++
	p.m.acked.Add(ackedCount(batches))
	p.deadLetters(dead)
	p.notify()
	return 0, nil
}

func ackedCount(batches []AckBatch) int64 {
	var n int64
	for _, b := range batches {
		n += b.Last - b.First + 1
	}
	return n
}

// ReleaseMember releases member's acquisitions (its session closed).
func (p *Partition) ReleaseMember(member string, cfg Config) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if changed, dead := p.st.releaseMember(member, cfg.DeliveryLimit); changed {
		p.seq++
		p.deadLetters(dead)
		p.notify()
		p.startFlush(nil)
	}
}

// expire releases the locks that ran out by now.
func (p *Partition) expire(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.next.IsZero() || now.Before(p.next) {
		return
	}
	if changed, dead := p.st.expire(now, p.cfg.DeliveryLimit); changed {
		p.seq++
		p.deadLetters(dead)
		p.notify()
		p.startFlush(nil)
	}
	p.next = p.st.nextDeadline()
}

// deadLetters hands dead letters to the manager's sink. Holds p.mu.
func (p *Partition) deadLetters(dead []Archived) {
	if len(dead) > 0 && p.m.opts.DeadLetters != nil {
		p.m.opts.DeadLetters(p.key, dead)
	}
}

// Sync waits until every change made so far is stored.
func (p *Partition) Sync(ctx context.Context) error {
	ch := make(chan error, 1)
	p.mu.Lock()
	if p.stale.Load() {
		p.mu.Unlock()
		return ErrFenced
	}
	if p.durable >= p.seq {
		p.mu.Unlock()
		return nil
	}
	p.startFlush(&waiter{seq: p.seq, ch: ch})
	p.mu.Unlock()
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// startFlush registers w (if any) and starts the flusher unless it
// runs. Holds p.mu.
func (p *Partition) startFlush(w *waiter) {
	if w != nil {
		p.waiters = append(p.waiters, *w)
	}
	if !p.flushing {
		p.flushing = true
		go p.flush()
	}
}

// flush stores the state until it is durable: each write carries every
// change made before it began, so acknowledgements arriving while one
// write is in flight share the next (group commit).
func (p *Partition) flush() {
	if d := p.m.opts.FlushDelay; d > 0 {
		time.Sleep(d) // gather the acknowledgements of concurrent requests
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for p.durable < p.seq && !p.stale.Load() {
		seq := p.seq
		st := p.snapshot()
		p.mu.Unlock()
		ctx, cancel := context.WithTimeout(p.m.ctx, 10*time.Second)
		v, err := p.m.opts.Meta.StoreShareState(ctx, p.key, st)
		cancel()
		p.m.writes.Add(1)
		p.mu.Lock()
		if err != nil {
			if errors.Is(err, metastore.ErrFenced) {
				err = fmt.Errorf("%w: %v", ErrFenced, err)
				p.stale.Store(true)
				p.m.drop(p)
			}
			p.m.opts.Log.Warn("store share partition state", "group", p.key.Group, "topic", p.key.Topic, "partition", p.key.Partition, "err", err)
			p.answer(seq, err)
			if !p.stale.Load() {
				// Unknown outcome: the next write's condition tells.
				p.stale.Store(true)
				p.m.drop(p)
			}
			break
		}
		p.version = v
		p.durable = seq
		p.answer(seq, nil)
	}
	if p.stale.Load() {
		p.answer(p.seq, ErrFenced)
	}
	p.flushing = false
}

// answer tells the waiters of changes up to seq. Holds p.mu.
func (p *Partition) answer(seq uint64, err error) {
	keep := p.waiters[:0]
	for _, w := range p.waiters {
		if w.seq <= seq {
			w.ch <- err
		} else {
			keep = append(keep, w)
		}
	}
	p.waiters = keep
}

// snapshot is the state to store. Holds p.mu.
func (p *Partition) snapshot() metastore.ShareState {
	return metastore.ShareState{Version: p.version, LeaderEpoch: p.leaderEpoch, StartOffset: p.st.start, EndOffset: p.st.end,
		Initialized: true, Runs: p.st.stored()}
}

// batchesLen is the byte length of the first n batches of data.
func batchesLen(data []byte, n int) int {
	off := 0
	for range n {
		if off+12 > len(data) {
			return len(data)
		}
		l := int(uint32(data[off+8])<<24 | uint32(data[off+9])<<16 | uint32(data[off+10])<<8 | uint32(data[off+11]))
		off += 12 + l
	}
	return min(off, len(data))
}

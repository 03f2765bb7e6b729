package partition

import (
	"errors"
	"fmt"
	"github.com/stratamq/strata/brokerfleet/internal/topic"
	"slices"
	"sync/atomic"
	"time"

	"github.com/stratamq/strata/pkg/segment"
)

// replica is what a leader knows of one follower.
type replica struct {
	fetched    bool      // it has fetched since we became leader
	leo        int64     // the follower holds every offset below this
	logStart   int64     // its local log start, as its last fetch said (-1: unknown)
	caughtUpAt time.Time // last time its fetch reached our log end (monotonic)
	answered   int64     // the newest append it was sent (stages.go)
	// session is the clock (Unix ns) of the fetch session whose fetches
	// find this partition quiet without asking it (ReplicaQuiet): while
	// the follower is at our log end, each fetch of that session counts
	// as caught up. Nil when no session vouches for it.
	session *atomic.Int64
}

// replication is the partition's role as the control plane assigns it.
// Guarded by Partition.repMu.
type replication struct {
	assigned  bool // SetReplication was called
	self      int32
	leader    bool
	replicas  []int32
	isr       []int32
	followers map[int32]*replica
	durable   int64 // the leader's own durable end: LEO, or fsynced end
}

// SetReplication applies the partition's control-plane state as this
// broker sees it: whether it leads, the replicas and the ISR. A leader's
// high watermark is the lowest log end among the ISR.
func (p *Partition) SetReplication(self int32, leader bool, replicas, isr []int32) {
	p.repMu.Lock()
	r := &p.rep
	wasLeader := r.leader
	if !r.assigned && len(replicas) > 1 {
		// Opened from disk as one of several replicas: the log may end in
		// batches that were never committed, so the high watermark starts
		// at the log start and rises as the ISR proves what it holds.
		p.hwm.Store(p.log.StartOffset())
		wasLeader = false
	}
	r.assigned = true
	if leader && wasLeader {
		// A follower taken out of the ISR elsewhere (the controller does
		// that to a restarted broker, whose log may have lost a tail) must
		// prove again what it holds: what its previous life fetched says
		// nothing about its disk now.
		for _, id := range r.isr {
			if f := r.followers[id]; f != nil && !slices.Contains(isr, id) {
				f.fetched, f.leo = false, 0
			}
		}
	}
	r.self, r.leader = self, leader
	r.replicas, r.isr = slices.Clone(replicas), slices.Clone(isr)
	if leader && !wasLeader && p.cfg.Load().Durability != topic.DurabilityObject {
		// A follower's whole log is durable as its mode demands (fsync
		// topics fsync every replicated append), so it is the new
		// leader's own end. With "object" durability only what the tier
		// holds is (SetObjectDurable).
		r.durable = max(r.durable, p.log.NextOffset())
	}
	if leader && (!wasLeader || r.followers == nil) {
		// Fresh leadership: followers' progress is unknown until they
		// fetch; a follower counts as caught up from now, so it gets a full
		// lag window before it may be dropped from the ISR.
		r.followers = map[int32]*replica{}
		now := p.now()
		for _, id := range replicas {
			if id != self {
				r.followers[id] = &replica{caughtUpAt: now}
			}
		}
	}
	p.repMu.Unlock()
	p.recomputeHWM()
	if wasLeader && !leader {
		p.notify() // acks=all waits end: see WaitCommitted
	}
}

// IsLeader reports whether this broker leads the partition.
func (p *Partition) IsLeader() bool {
	p.repMu.Lock()
	defer p.repMu.Unlock()
	return p.rep.leader
}

// ISR returns the in-sync replicas as last set.
func (p *Partition) ISR() []int32 {
	p.repMu.Lock()
	defer p.repMu.Unlock()
	return slices.Clone(p.rep.isr)
}

// ErrNotReplica is returned by ReplicaFetched for a broker that is not a
// replica of the partition.
var ErrNotReplica = errors.New("partition: not a replica")

// ReplicaFetched records a follower's fetch from offset: it holds
// everything below it, from logStart (its local log start; -1 when it did
// not say). The high watermark may move. Only what a follower can hold is
// recorded: a broker that is not a replica of the partition (nor this
// one) is ErrNotReplica, and an offset past this leader's log end (no
// follower holds what the leader does not) segment.ErrOffsetOutOfRange;
// neither changes anything, so a fetch cannot raise the high watermark
// past what the leader holds.
func (p *Partition) ReplicaFetched(id int32, fetchOffset, logStart int64) error {
	leo := p.log.NextOffset()
	if fetchOffset < 0 || fetchOffset > leo {
		return fmt.Errorf("partition %s-%d: replica %d fetches from %d, the log ends at %d: %w", p.topic, p.index, id, fetchOffset, leo, segment.ErrOffsetOutOfRange)
	}
	p.repMu.Lock()
	if id == p.rep.self || !slices.Contains(p.rep.replicas, id) {
		p.repMu.Unlock()
		return fmt.Errorf("partition %s-%d: broker %d: %w", p.topic, p.index, id, ErrNotReplica)
	}
	f := p.rep.followers[id]
	if f == nil {
		f = &replica{}
		if p.rep.followers != nil {
			p.rep.followers[id] = f
		}
	}
	// An idle partition of a follower's fetch session says the same on
	// every fetch: only its catching up is news (the high watermark moves
	// only when a log end in the ISR does, and ISR changes recompute it).
	unchanged := f.fetched && f.leo == fetchOffset && f.logStart == logStart
	prev := f.leo
	f.leo, f.logStart, f.fetched = fetchOffset, logStart, true
	if !unchanged {
		f.session = nil // until a quiet fetch vouches again
	}
	if fetchOffset >= leo {
		f.caughtUpAt = p.now()
	}
	p.repMu.Unlock()
	if unchanged {
		return nil
	}
	if p.observe != nil {
		if d, ok := p.since(prev, fetchOffset); ok {
			p.observe(StageFollowerAcked, d)
		}
	}
	p.recomputeHWM()
	return nil
}

// ReplicaQuiet is ReplicaFetched for a follower that asks again from
// where it last fetched, at this leader's log end, with the same log
// start: it records that the follower is caught up and reports true;
// otherwise it changes nothing and reports false (call ReplicaFetched).
// An idle partition of a follower's session costs one lock this way.
//
// session, if not nil, is the clock of the follower's fetch session: the
// broker may then skip asking again while nothing changes (neither this
// partition's log end, high watermark and log start nor the follower's
// offsets), and store each fetch's time in it instead; LaggingISR counts
// the follower caught up as of that time while its log end is ours.
func (p *Partition) ReplicaQuiet(id int32, fetchOffset, logStart int64, session *atomic.Int64) bool {
	if fetchOffset != p.log.NextOffset() {
		return false
	}
	p.repMu.Lock()
	f := p.rep.followers[id]
	ok := p.rep.leader && f != nil && f.fetched && f.leo == fetchOffset && f.logStart == logStart
	if ok {
		f.caughtUpAt = p.now()
		f.session = session
	}
	p.repMu.Unlock()
	return ok
}

// ReplicaForgot records that a follower's fetch session no longer holds
// the partition: no fetch of it vouches for the follower any more.
func (p *Partition) ReplicaForgot(id int32) {
	p.repMu.Lock()
	if f := p.rep.followers[id]; f != nil {
		f.session = nil
	}
	p.repMu.Unlock()
}

// ReplicaRange returns the offsets a follower holds as its fetches since
// this broker became leader tell: from logStart (-1: unknown) to logEnd;
// ok is false when it has not fetched yet. Consumers may be sent to it
// (KIP-392) only for offsets in that range.
func (p *Partition) ReplicaRange(id int32) (logStart, logEnd int64, ok bool) {
	p.repMu.Lock()
	defer p.repMu.Unlock()
	f := p.rep.followers[id]
	if f == nil || !f.fetched {
		return 0, 0, false
	}
	return f.logStart, f.leo, true
}

// LaggingISR returns the ISR followers that have not caught up with the
// log end for longer than maxLag: candidates to drop from the ISR.
func (p *Partition) LaggingISR(maxLag time.Duration) []int32 {
	p.repMu.Lock()
	defer p.repMu.Unlock()
	var out []int32
	leo := p.log.NextOffset()
	for _, id := range p.rep.isr {
		f := p.rep.followers[id]
		if id == p.rep.self || f == nil {
			continue
		}
		caught := f.caughtUpAt
		if f.session != nil && f.fetched && f.leo == leo {
			if t := time.Unix(0, f.session.Load()); t.After(caught) {
				caught = t
			}
		}
		if p.now().Sub(caught) > maxLag {
			out = append(out, id)
		}
	}
	return out
}

// CaughtUpOutOfSync returns replicas outside the ISR whose log reaches the
// high watermark: candidates to add back to the ISR.
func (p *Partition) CaughtUpOutOfSync() []int32 {
	hwm := p.hwm.Load()
	p.repMu.Lock()
	defer p.repMu.Unlock()
	var out []int32
	for _, id := range p.rep.replicas {
		if id == p.rep.self || slices.Contains(p.rep.isr, id) {
			continue
		}
		if f := p.rep.followers[id]; f != nil && f.fetched && f.leo >= hwm {
			out = append(out, id)
		}
	}
	return out
}

// setDurable records the leader's own durable end and recomputes the high
// watermark.
func (p *Partition) setDurable(end int64) {
	p.repMu.Lock()
	if end > p.rep.durable {
		p.rep.durable = end
	}
	p.repMu.Unlock()
	p.recomputeHWM()
}

// recomputeHWM advances a leader's high watermark to the lowest log end
// among the ISR (its own durable end included).
func (p *Partition) recomputeHWM() {
	p.repMu.Lock()
	r := &p.rep
	if !r.leader {
		p.repMu.Unlock()
		return
	}
	hw := r.durable
	for _, id := range r.isr {
		if id == r.self {
			continue
		}
		f := r.followers[id]
		if f == nil {
			hw = min(hw, 0)
			continue
		}
		hw = min(hw, f.leo)
	}
	p.repMu.Unlock()
	p.advanceHWM(hw)
}

// AppendReplica appends batches a follower fetched from the leader, as
// they are (offsets and epochs assigned by the leader), and takes the
// leader's high watermark, capped by what it holds. epoch is the leader
// epoch the fetch was sent under: an answer from a leader the partition
// has since left is dropped with ErrStaleEpoch.
func (p *Partition) AppendReplica(epoch int32, batches []byte, leaderHWM int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	if err := p.checkEpochLocked(epoch, false); err != nil {
		return err
	}
	if len(batches) > 0 {
		// The leader's cleaner may have left gaps between its batches.
		if err := p.log.AppendFrom(batches); err != nil {
			return fmt.Errorf("partition %s-%d: replicate: %w", p.topic, p.index, err)
		}
		_ = segment.Split(batches, func(h segment.Header, _ []byte) error {
			appendTime := int64(-1)
			if h.LogAppendTime() {
				appendTime = h.MaxTimestamp
			}
			p.producers.record(h, appendTime)
			return nil
		})
		p.noteBatches(batches)
		p.noteTxnBatches(batches)
		p.snapshotOnRollLocked()
	}
	p.advanceHWM(min(leaderHWM, p.log.NextOffset()))
	return nil
}

// SyncReplica makes what AppendReplica appended durable if the topic's
// durability is "fsync" (else it does nothing). The fetch loop syncs every
// partition of an answer at once before it fetches again, since its next
// fetch offset tells the leader the data is on disk.
func (p *Partition) SyncReplica() error {
	if !p.Fsync() {
		return nil
	}
	return p.log.Flush(p.log.NextOffset())
}

// Fsync reports whether the topic's durability is "fsync".
func (p *Partition) Fsync() bool { return p.cfg.Load().Durability == "fsync" }

// ReadUncommitted reads like Read but up to the log end, for followers.
func (p *Partition) ReadUncommitted(dst []byte, offset int64, maxBytes int) ([]byte, error) {
	return p.log.Read(dst, offset, maxBytes, p.log.NextOffset())
}

package partition

import "time"

// Stage names a step of replicating an appended batch, timed on the
// leader from the append (Options.Observe): where an acks=all produce
// spends its time between the leader's write and its high watermark.
type Stage uint8

const (
	// StageAnswered: a follower's fetch was answered with the batch.
	StageAnswered Stage = iota
	// StageFollowerAcked: a follower's next fetch said it holds the batch.
	StageFollowerAcked
	// StageCommitted: the high watermark passed the batch.
	StageCommitted
)

// String is the stage's metric label.
func (s Stage) String() string {
	switch s {
	case StageAnswered:
		return "follower_fetch_answered"
	case StageFollowerAcked:
		return "follower_acked"
	case StageCommitted:
		return "high_watermark_advanced"
	}
	return "unknown"
}

// The stages follow the newest append only (markEnd, markAt): each is
// observed once, when it first passes that append's end. With one batch
// in flight that is every batch; under load it samples the newest one at
// each step, so the figures describe a batch's path, not every batch's.

// CommittedSince returns how long ago the high watermark passed end,
// when end is the newest append's (a produce waiting for it learns how
// long its wake-up took); ok is false otherwise.
func (p *Partition) CommittedSince(end int64) (time.Duration, bool) {
	if p.observe == nil || p.markEnd.Load() != end {
		return 0, false
	}
	at := p.committedAt.Load()
	if at == 0 {
		return 0, false
	}
	return time.Duration(p.now().UnixNano() - at), true
}

// markAppend notes the newest append's end and time. Holds p.mu.
func (p *Partition) markAppend(end int64) {
	if p.observe == nil {
		return
	}
	p.committedAt.Store(0)
	p.markAt.Store(p.now().UnixNano())
	p.markEnd.Store(end)
}

// since returns how long ago the newest append was, and whether the
// offsets from (exclusive) to to (inclusive) pass its end.
func (p *Partition) since(from, to int64) (time.Duration, bool) {
	end := p.markEnd.Load()
	if end <= 0 || from >= end || to < end {
		return 0, false
	}
	return time.Duration(p.now().UnixNano() - p.markAt.Load()), true
}

// ReplicaAnswered notes that follower id's fetch from fetchOffset was
// answered with records: the first answer that carries the newest append
// is StageAnswered.
func (p *Partition) ReplicaAnswered(id int32, fetchOffset int64) {
	if p.observe == nil {
		return
	}
	end := p.markEnd.Load()
	if fetchOffset >= end {
		return
	}
	p.repMu.Lock()
	f := p.rep.followers[id]
	first := f != nil && f.answered < end
	if first {
		f.answered = end
	}
	p.repMu.Unlock()
	if first {
		if d, ok := p.since(fetchOffset, end); ok {
			p.observe(StageAnswered, d)
		}
	}
}

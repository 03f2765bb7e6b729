package broker

import (
	"sync"
	"time"
	"unsafe"

	"github.com/stratamq/strata/brokerfleet/internal/catalog"
	"github.com/stratamq/strata/brokerfleet/internal/fetchsession"
	"github.com/stratamq/strata/brokerfleet/internal/partition"
)

// Skipping a follower session's quiet partitions without looking at them.
//
// A partition of a follower's incremental fetch is quiet when the
// follower asks from this leader's log end and was told its high
// watermark and local log start (fetchRead.quiet). A quiet partition gets
// a note in the session (fetchsession.Part.Quiet, holding the
// *partition.Partition), and the session a quietSkip. The invariant:
//
//	while the session's quietSkip says snapshot s and change-log position
//	c, every partition of the session with a note was quiet under s at c.
//
// Partitions log every change of their log end, high watermark and local
// log start to the change log of each of their replicas
// (replicaWaiters.since), after storing the new value. So a read under
// the same snapshot takes the partitions logged since c and, of the
// noted ones, looks only at those: each is quiet again if its values
// still match what the follower asked and was told (quietAgain), else it
// is read and its note goes. A noted partition not in the log is quiet
// without a load of its own.
//
// Each read takes its position before it looks at any value: a change it
// races is then both in what it sees and in the log after its position,
// so the next read looks again. The notes and the position a fetch took
// become the session's together, after its last read (commit): a fetch
// cut short leaves the session as it was. A read looks at every note
// (quietAgain, no log) when the log does not reach back to the position
// (another reader emptied it, or it overflowed) and every fullLookEvery
// in any case, so a change that was not logged costs at most that delay;
// under another snapshot (an election, a topic change) notes count for
// nothing and every partition is checked in full.
//
// Two fetches of one session at once (on two connections) are allowed by
// KIP-227; the second one finds the quietSkip busy and neither trusts nor
// takes notes.

// fullLookEvery is how often a follower session's read looks at every
// noted partition even when the change log names none of them.
const fullLookEvery = 100 * time.Millisecond

// quietSkip is a follower session's position (see above). Its mutex is
// held for a whole fetch.
type quietSkip struct {
	mu     sync.Mutex
	snap   *catalog.Snapshot // nil: no note is valid
	cursor uint64            // the change-log position the notes are valid at
	looked time.Time         // the last read that looked at every note
}

// quietView is one fetch's use of its session's quietSkip.
type quietView struct {
	qs *quietSkip // held for the fetch; nil: no notes trusted or taken

	// What the fetch's reads have established, committed at the end.
	snap   *catalog.Snapshot
	cursor uint64
	looked time.Time

	// This read: trust is whether a noted partition outside changed is
	// quiet unseen; check whether a note counts at all (quietAgain).
	trust, check bool
	changed      ptrBits
	ents         []*partition.Partition
}

// begin takes the session's quietSkip for a follower's incremental
// fetch; busy (another fetch has it) or any other fetch: none.
func (v *quietView) begin(f *fetchsession.Fetch, replica int32) {
	if replica < 0 || !f.Incremental() {
		return
	}
	qs, _ := f.Aux(func() any { return new(quietSkip) }).(*quietSkip)
	if qs == nil || !qs.mu.TryLock() {
		return
	}
	v.qs, v.snap, v.cursor, v.looked = qs, qs.snap, qs.cursor, qs.looked
}

// noted reports whether fp's note counts under s before any read (the
// catch-up check: a noted partition was not ahead of s).
func (v *quietView) noted(fp *fetchsession.Part, s *catalog.Snapshot) bool {
	return v.qs != nil && v.snap == s && fp.Quiet != nil
}

// refresh starts a read under s: it reads the change log and sets what
// the read may trust; every is the time between full looks
// (fullLookEvery).
func (v *quietView) refresh(w *replicaWaiters, replica int32, s *catalog.Snapshot, now time.Time, every time.Duration) {
	if v.qs == nil {
		return
	}
	var ok bool
	v.ents, v.cursor, ok = w.since(replica, v.cursor, v.ents[:0])
	v.check = v.snap == s
	v.trust = v.check && ok && now.Sub(v.looked) < every
	if v.check && !v.trust {
		v.looked = now
	}
	v.changed.reset()
	for _, p := range v.ents {
		v.changed.add(p)
	}
	clear(v.ents)
	v.snap = s // after this read every note is valid under s
}

// end commits what the fetch established (call after its notes are in
// the session: fetchsession.Fetch.NoteQuiet) and releases the quietSkip.
func (v *quietView) end() {
	if v.qs == nil {
		return
	}
	v.qs.snap, v.qs.cursor, v.qs.looked = v.snap, v.cursor, v.looked
	v.qs.mu.Unlock()
	v.qs = nil
}

// abandon releases the quietSkip, if end has not, without committing:
// a fetch cut short (a panic) leaves the session's position and notes as
// they were. Deferred at begin.
func (v *quietView) abandon() {
	if v.qs != nil {
		v.qs.mu.Unlock()
		v.qs = nil
	}
}

// ptrBits is a set of partitions as bits of their addresses' hash: has may
// say yes for one not added (it is looked at, no more), never no for one
// added.
type ptrBits [128]uint64

func (b *ptrBits) reset() { clear(b[:]) }

func (b *ptrBits) bit(p *partition.Partition) (int, uint64) {
	h := uint64(uintptr(unsafe.Pointer(p))) * 0x9e3779b97f4a7c15 >> (64 - 13) // 8,192 bits
	return int(h >> 6), 1 << (h & 63)
}

func (b *ptrBits) add(p *partition.Partition) {
	i, m := b.bit(p)
	b[i] |= m
}

func (b *ptrBits) has(p *partition.Partition) bool {
	i, m := b.bit(p)
	return b[i]&m != 0
}

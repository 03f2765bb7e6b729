package share

// The share-partition state machine, with no I/O: which records are in
// flight past the share start offset, in which state, acquired by whom
// until when, delivered how often. The Partition (partition.go) wraps it
// with its lock, persistence and waiters.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/stratamq/strata/pkg/metastore"
)

// Record states (Kafka's RecordState).
const (
	stateAvailable    int8 = 0
	stateAcquired     int8 = 1
	stateAcknowledged int8 = 2
	stateArchived     int8 = 4
)

// Acknowledgement types (KIP-932, KIP-1222).
const (
	AckGap     int8 = 0
	AckAccept  int8 = 1
	AckRelease int8 = 2
	AckReject  int8 = 3
	AckRenew   int8 = 4
)

// rec is one in-flight offset.
type rec struct {
	state    int8
	count    int16 // deliveries so far
	member   string
	deadline time.Time // acquisition lock expiry (acquired only)
}

// Batch is what acquire needs of one record batch read from the log.
// Control batches hold nothing for consumers: a transaction marker, or
// (read_committed) an aborted transaction's records; their offsets are
// archived undelivered.
type Batch struct {
	Base, Last int64
	Control    bool
}

// Range is a run of acquired offsets with one delivery count.
type Range struct {
	First, Last int64
	Count       int16
}

// AckBatch is one acknowledgement batch of a request.
type AckBatch struct {
	First, Last int64
	Types       []int8 // one for the whole range, or one per offset
}

// Archived is a record archived by a reject or by reaching the delivery
// limit: a dead letter.
type Archived struct {
	Offset   int64
	Count    int16
	Rejected bool
}

// state is one share partition's in-flight window: offsets in
// [start, end) are recs[offset-start]; below start everything is done,
// from end on nothing was delivered.
type state struct {
	start, end int64
	recs       []rec
}

// inflight is how many offsets the window spans.
func (s *state) inflight() int { return len(s.recs) }

func (s *state) at(off int64) *rec {
	if off < s.start || off >= s.end {
		return nil
	}
	return &s.recs[off-s.start]
}

// advance moves the start past done records at the front.
func (s *state) advance() {
	i := 0
	for i < len(s.recs) && (s.recs[i].state == stateAcknowledged || s.recs[i].state == stateArchived) {
		i++
	}
	if i == 0 {
		return
	}
	s.start += int64(i)
	n := copy(s.recs, s.recs[i:])
	clear(s.recs[n:])
	s.recs = s.recs[:n]
}

// firstAvailable returns the lowest available offset in the window, or
// end when none is.
func (s *state) firstAvailable() int64 {
	for i := range s.recs {
		if s.recs[i].state == stateAvailable {
			return s.start + int64(i)
		}
	}
	return s.end
}

// countAvailable is the number of available offsets in the window.
func (s *state) counts() (available, acquired, archived int) {
	for i := range s.recs {
		switch s.recs[i].state {
		case stateAvailable:
			available++
		case stateAcquired:
			acquired++
		case stateArchived:
			archived++
		}
	}
	return
}

// trimTo archives what lies below the log start off (retention or
// DeleteRecords removed it).
func (s *state) trimTo(off int64) {
	if off <= s.start {
		return
	}
	if off >= s.end {
		s.resetTo(off)
		return
	}
	for i := int64(0); i < off-s.start; i++ {
		s.recs[i] = rec{state: stateArchived}
	}
	s.advance()
}

// resetTo empties the window and restarts it at off (share
// auto.offset.reset, AlterShareGroupOffsets, a log start that passed it).
func (s *state) resetTo(off int64) {
	s.start, s.end = off, off
	s.recs = s.recs[:0]
}

// acquire acquires for member, in offset order, the available records of
// the batches (read from the log starting at or before the first
// available offset) and new records past the window, at most max of
// them, keeping the window within maxLocks offsets. Offsets between
// batches and of control batches are archived undelivered. Records
// whose delivery would exceed limit are archived instead (they were
// returned by an expired lock at the limit before a limit change).
func (s *state) acquire(batches []Batch, member string, deadline time.Time, max, maxLocks, limit int) []Range {
	var out []Range
	n := 0
	add := func(off int64, count int16) {
		n++
		if l := len(out); l > 0 && out[l-1].Last == off-1 && out[l-1].Count == count {
			out[l-1].Last = off
			return
		}
		out = append(out, Range{First: off, Last: off, Count: count})
	}
	// grow adds the next new offset to the window, if it has room.
	grow := func(st int8) bool {
		if len(s.recs) >= maxLocks {
			s.advance()
			if len(s.recs) >= maxLocks {
				return false
			}
		}
		s.recs = append(s.recs, rec{state: st})
		s.end++
		return true
	}
	for _, b := range batches {
		if n >= max {
			break
		}
		if b.Last < s.start {
			continue
		}
		// Offsets the log skips (between batches) were never records.
		for s.end < b.Base {
			if !grow(stateArchived) {
				s.advance()
				return out
			}
		}
		for off := max64(b.Base, s.start); off <= b.Last && n < max; off++ {
			if off >= s.end && !grow(stateAvailable) {
				s.advance()
				return out
			}
			if off < s.start {
				continue // advanced past by grow
			}
			r := &s.recs[off-s.start]
			if b.Control {
				if r.state == stateAvailable {
					r.state = stateArchived
				}
				continue
			}
			if r.state != stateAvailable {
				continue
			}
			if limit > 0 && int(r.count) >= limit {
				r.state = stateArchived
				continue
			}
			r.state, r.count, r.member, r.deadline = stateAcquired, r.count+1, member, deadline
			add(off, r.count)
		}
	}
	s.advance()
	return out
}

// validateAcks checks a request's batches for one partition: increasing,
// not overlapping, well-formed (INVALID_REQUEST), and every offset
// acquired by member (INVALID_RECORD_STATE; a gap may also name an
// offset already archived). Offsets below the start are ignored.
func (s *state) validateAcks(member string, batches []AckBatch, renew bool) int16 {
	prev := int64(-1)
	maxType := AckReject
	if renew {
		maxType = AckRenew
	}
	for _, b := range batches {
		switch {
		case b.First < 0 || b.First > b.Last || b.First <= prev:
			return kerr.InvalidRequest.Code
		case len(b.Types) == 0 || (len(b.Types) > 1 && int64(len(b.Types)) != b.Last-b.First+1):
			return kerr.InvalidRequest.Code
		case b.Last >= s.end:
			return kerr.InvalidRecordState.Code
		}
		for _, t := range b.Types {
			if t < 0 || t > maxType {
				return kerr.InvalidRequest.Code
			}
		}
		prev = b.Last
		for off := max64(b.First, s.start); off <= b.Last; off++ {
			r := s.at(off)
			t := ackType(b, off)
			if t == AckGap && r.state == stateArchived {
				continue
			}
			if r.state != stateAcquired || r.member != member {
				return kerr.InvalidRecordState.Code
			}
		}
	}
	return 0
}

func ackType(b AckBatch, off int64) int8 {
	if len(b.Types) == 1 {
		return b.Types[0]
	}
	return b.Types[off-b.First]
}

// applyAcks applies validated batches; renewals move the lock to
// deadline. It returns the dead letters it made.
func (s *state) applyAcks(batches []AckBatch, deadline time.Time, limit int) []Archived {
	var dead []Archived
	for _, b := range batches {
		for off := max64(b.First, s.start); off <= b.Last; off++ {
			r := s.at(off)
			if r.state != stateAcquired {
				continue
			}
			switch ackType(b, off) {
			case AckGap:
				*r = rec{state: stateArchived, count: r.count}
			case AckAccept:
				*r = rec{state: stateAcknowledged, count: r.count}
			case AckRelease:
				if d, ok := s.release(r, off, limit); ok {
					dead = append(dead, d)
				}
			case AckReject:
				dead = append(dead, Archived{Offset: off, Count: r.count, Rejected: true})
				*r = rec{state: stateArchived, count: r.count}
			case AckRenew:
				r.deadline = deadline
			}
		}
	}
	s.advance()
	return dead
}

// release makes an acquired record available again, or archives it when
// it was delivered limit times.
func (s *state) release(r *rec, off int64, limit int) (Archived, bool) {
	if limit > 0 && int(r.count) >= limit {
		*r = rec{state: stateArchived, count: r.count}
		return Archived{Offset: off, Count: r.count}, true
	}
	*r = rec{state: stateAvailable, count: r.count}
	return Archived{}, false
}

// expire releases acquisitions whose lock ran out by now.
func (s *state) expire(now time.Time, limit int) (changed bool, dead []Archived) {
	for i := range s.recs {
		r := &s.recs[i]
		if r.state == stateAcquired && !now.Before(r.deadline) {
			changed = true
			if d, ok := s.release(r, s.start+int64(i), limit); ok {
				dead = append(dead, d)
			}
		}
	}
	if changed {
		s.advance()
	}
	return changed, dead
}

// releaseMember releases every acquisition of member (its share session
// closed).
func (s *state) releaseMember(member string, limit int) (changed bool, dead []Archived) {
	for i := range s.recs {
		r := &s.recs[i]
		if r.state == stateAcquired && r.member == member {
			changed = true
			if d, ok := s.release(r, s.start+int64(i), limit); ok {
				dead = append(dead, d)
			}
		}
	}
	if changed {
		s.advance()
	}
	return changed, dead
}

// nextDeadline is the earliest lock expiry, zero when nothing is
// acquired.
func (s *state) nextDeadline() time.Time {
	var d time.Time
	for i := range s.recs {
		if r := &s.recs[i]; r.state == stateAcquired && (d.IsZero() || r.deadline.Before(d)) {
			d = r.deadline
		}
	}
	return d
}

// stored is the window's persisted form: runs of equal (state, count)
// that are not "available, never delivered"; acquired records are
// stored as available, with their count.
func (s *state) stored() (runs []metastore.ShareRun) {
	for i := range s.recs {
		r := s.recs[i]
		st := r.state
		if st == stateAcquired {
			st = stateAvailable
		}
		if st == stateAvailable && r.count == 0 {
			continue
		}
		off := s.start + int64(i)
		if l := len(runs); l > 0 && runs[l-1].Last == off-1 && runs[l-1].State == st && runs[l-1].Count == r.count {
			runs[l-1].Last = off
			continue
		}
		runs = append(runs, metastore.ShareRun{First: off, Last: off, State: st, Count: r.count})
	}
	return runs
}

// restore rebuilds the window from its persisted form; every record is
// available or done (no lock survives a leader).
func (s *state) restore(st metastore.ShareState, maxLocks int) {
	s.start, s.end = st.StartOffset, max64(st.EndOffset, st.StartOffset)
	if s.end-s.start > int64(maxLocks) {
		s.end = s.start + int64(maxLocks)
	}
	s.recs = make([]rec, s.end-s.start, maxLocks)
	for _, run := range st.Runs {
		for off := max64(run.First, s.start); off <= run.Last && off < s.end; off++ {
			r := &s.recs[off-s.start]
			r.count = run.Count
			switch run.State {
			case metastore.ShareAcknowledged:
				r.state = stateAcknowledged
			case metastore.ShareArchived:
				r.state = stateArchived
			default:
				r.state = stateAvailable
			}
		}
	}
	s.advance()
}

func max64(a, b int64) int64 {
	if a > b {
		return a
	}
	return b
}

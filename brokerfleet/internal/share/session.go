package share

// Share sessions (KIP-932): per broker, one per (group, member), holding
// the partitions the member fetches here and the epoch its next request
// must carry. Epoch 0 opens (or reopens) a session, -1 closes it; every
// other request must carry the session's next epoch.

import (
	"math"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/stratamq/strata/pkg/clock"
	"github.com/stratamq/strata/pkg/metastore"
)

// TP is a topic partition by topic id.
type TP struct {
	Topic     metastore.TopicID
	Partition int32
}

// SessionKey names a share session.
type SessionKey struct{ Group, Member string }

// Session is one share session. Its fields are guarded by Sessions.mu;
// use the Sessions methods.
type Session struct {
	next     int32 // the epoch the next request must carry
	parts    map[TP]struct{}
	order    []TP // parts in the order added
	lastUsed time.Time
}

// Sessions is the broker's share session cache, bounded.
type Sessions struct {
	mu    sync.Mutex
	max   int
	clock clock.Clock
	m     map[SessionKey]*Session
	// idleAfter: a session unused this long may be evicted when the
	// cache is full (its member vanished without closing it).
	idleAfter time.Duration
}

func newSessions(max int, c clock.Clock) *Sessions {
	return &Sessions{max: max, clock: c, m: map[SessionKey]*Session{}, idleAfter: 2 * time.Minute}
}

// Open opens a new session for k with parts, replacing any it had:
// SHARE_SESSION_LIMIT_REACHED when the cache is full.
func (s *Sessions) Open(k SessionKey, parts []TP) int16 {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, k)
	if len(s.m) >= s.max {
		s.evictLocked(true)
		if len(s.m) >= s.max {
			return kerr.ShareSessionLimitReached.Code
		}
	}
	ss := &Session{next: 1, parts: map[TP]struct{}{}, lastUsed: s.clock.Now()}
	ss.add(parts)
	s.m[k] = ss
	return 0
}

func (ss *Session) add(parts []TP) {
	for _, p := range parts {
		if _, ok := ss.parts[p]; !ok {
			ss.parts[p] = struct{}{}
			ss.order = append(ss.order, p)
		}
	}
}

func (ss *Session) remove(parts []TP) {
	if len(parts) == 0 {
		return
	}
	for _, p := range parts {
		delete(ss.parts, p)
	}
	keep := ss.order[:0]
	for _, p := range ss.order {
		if _, ok := ss.parts[p]; ok {
			keep = append(keep, p)
		}
	}
	ss.order = keep
}

// Use checks epoch against k's session and moves it on, adding and
// removing partitions: SHARE_SESSION_NOT_FOUND or
// INVALID_SHARE_SESSION_EPOCH otherwise. It returns the session's
// partitions in the order added.
func (s *Sessions) Use(k SessionKey, epoch int32, add, forget []TP) ([]TP, int16) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.m[k]
	switch {
	case ss == nil:
		return nil, kerr.ShareSessionNotFound.Code
	case epoch != ss.next:
		return nil, kerr.InvalidShareSessionEpoch.Code
	}
	ss.next = nextEpoch(ss.next)
	ss.lastUsed = s.clock.Now()
	ss.add(add)
	ss.remove(forget)
	return append([]TP(nil), ss.order...), 0
}

// Parts returns the partitions of k's session.
func (s *Sessions) Parts(k SessionKey) ([]TP, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.m[k]
	if ss == nil {
		return nil, false
	}
	return append([]TP(nil), ss.order...), true
}

// Close removes k's session and returns its partitions, or
// SHARE_SESSION_NOT_FOUND.
func (s *Sessions) Close(k SessionKey) ([]TP, int16) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ss := s.m[k]
	if ss == nil {
		return nil, kerr.ShareSessionNotFound.Code
	}
	delete(s.m, k)
	return ss.order, 0
}

// Len is the number of sessions.
func (s *Sessions) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

func nextEpoch(e int32) int32 {
	if e == math.MaxInt32 {
		return 1
	}
	return e + 1
}

func (s *Sessions) evictIdle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.evictLocked(false)
}

// evictLocked drops sessions idle past idleAfter; with one, at least
// the longest idle of them when the cache is full. Holds s.mu.
func (s *Sessions) evictLocked(one bool) {
	now := s.clock.Now()
	var oldest SessionKey
	var oldestAt time.Time
	for k, ss := range s.m {
		if now.Sub(ss.lastUsed) > s.idleAfter*5 {
			delete(s.m, k) // long abandoned
			continue
		}
		if now.Sub(ss.lastUsed) > s.idleAfter && (oldestAt.IsZero() || ss.lastUsed.Before(oldestAt)) {
			oldest, oldestAt = k, ss.lastUsed
		}
	}
	if one && !oldestAt.IsZero() {
		delete(s.m, oldest)
	}
}

// Package fetchsession is the broker's cache of incremental fetch sessions
// (KIP-227). A client (a consumer or a follower replica) that fetches the
// same partitions over and over sends them once, in a full fetch that
// creates a session; its later, incremental fetches list only what changed
// (a new fetch offset, a partition added) and what it no longer wants
// (forgotten topics), and the answers leave out the partitions with
// nothing new. An idle fetch over a thousand partitions then costs a few
// dozen bytes each way instead of tens of kilobytes.
//
// The cache holds at most Options.Slots sessions and Options.MaxPartitions
// partitions among them. When it is full a new session takes the place of
// one idle for EvictAfter, or else of a less valuable one that is not
// new: followers' sessions are worth more than consumers', then larger
// ones more than smaller (Kafka's FetchSessionCache rules). A session
// belongs to the principal and replica id that created it: any other
// requester is told it does not exist.
package fetchsession

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/pkg/clock"
)

// Errors of Begin, answered as the fetch's top-level error.
var (
	// ErrNotFound is returned when an incremental fetch names a session
	// the cache does not hold: never created, evicted, closed, grown past
	// the partition budget, or another requester's.
	ErrNotFound = errors.New("fetch session: not found")
	// ErrInvalidEpoch is returned when an incremental fetch's epoch is not
	// the one its session expects next (a lost or repeated request).
	ErrInvalidEpoch = errors.New("fetch session: invalid epoch")
)

// Defaults (Kafka's max.incremental.fetch.session.cache.slots and
// min.incremental.fetch.session.eviction.ms).
const (
	DefaultSlots         = 1000
	DefaultEvictAfter    = 2 * time.Minute
	DefaultMaxPartitions = 200_000
)

// Options configure a Cache.
type Options struct {
	// Slots is the most sessions held at once; 0 or less: no sessions
	// (every fetch is answered sessionless, session id 0).
	Slots int
	// MaxPartitions is the most partitions held among all sessions (it
	// bounds the cache's memory); 0 means DefaultMaxPartitions.
	MaxPartitions int
	// EvictAfter is how long a session must be idle before any new one
	// may take its place, and how old it must be before a more valuable
	// one may; 0 means DefaultEvictAfter.
	EvictAfter time.Duration
	// Clock measures idleness; nil means the real clock.
	Clock clock.Clock
}

// Owner is who may use a session: the principal that created it and the
// replica id it fetches as (-1 for consumers).
type Owner struct {
	Principal string
	Replica   int32
}

// Part is one partition of a fetch: what the client asks for it, and (in
// a session) what it was last told.
type Part struct {
	Topic       string
	Partition   int32
	FetchOffset int64
	MaxBytes    int32
	// LeaderEpoch is the client's current leader epoch (-1: none).
	LeaderEpoch int32
	// LogStartOffset is a follower's local log start (-1: not given).
	LogStartOffset int64

	// What the last answer told the client (-1: nothing yet, or an
	// error): the partition is answered again when either changes.
	toldHWM, toldStart int64

	// Quiet is what the broker noted of the partition when it last found
	// it had nothing to tell a follower (Fetch.NoteQuiet); nil again once
	// the client sends the partition anew.
	Quiet any

	fed bool // Finish: the answer carried its records
}

type key struct {
	topic     string
	partition int32
}

// session is one client's cached fetch. Guarded by Cache.mu.
type session struct {
	id       int32
	epoch    int32 // the epoch the next incremental fetch must carry
	owner    Owner
	created  time.Time
	lastUsed time.Time
	parts    map[key]*Part
	order    []*Part      // fetch order (the parts' entries): partitions that returned data move last
	clock    atomic.Int64 // Fetch.Clock

	// spare is the array of a finished fetch's Parts, for the next
	// snapshot (nil while a fetch holds it): a follower's session of
	// 1,000 partitions fetches dozens of times a second.
	spare []Part
	// orderSpare is the array of the order before the last (Finish
	// builds the next order in it).
	orderSpare []*Part
	// fedSpare is Finish's list of the parts its answer fed.
	fedSpare []*Part
	// aux is the broker's own state of the session (Fetch.Aux).
	aux any
}

func (s *session) privileged() bool { return s.owner.Replica >= 0 }

// Cache holds the fetch sessions of one broker. It is safe for concurrent
// use.
type Cache struct {
	opts Options

	mu        sync.Mutex
	sessions  map[int32]*session
	parts     int // partitions among all sessions
	evictions int64
}

// New returns an empty cache.
func New(opts Options) *Cache {
	if opts.MaxPartitions <= 0 {
		opts.MaxPartitions = DefaultMaxPartitions
	}
	if opts.EvictAfter <= 0 {
		opts.EvictAfter = DefaultEvictAfter
	}
	opts.Clock = clock.Or(opts.Clock)
	return &Cache{opts: opts, sessions: map[int32]*session{}}
}

// Stats reports the sessions held, the partitions among them and the
// evictions so far.
func (c *Cache) Stats() (sessions, partitions int, evictions int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.sessions), c.parts, c.evictions
}

// Fetch is one fetch request's view of its session: the partitions to
// read, and the session they belong to (none for a sessionless fetch).
type Fetch struct {
	// Parts are the partitions to read, in order. They are copies: the
	// fetch may read them while the session changes. Finish takes them
	// back (nil after it).
	Parts []Part

	c           *Cache
	s           *session // nil: sessionless
	incremental bool
}

// Incremental reports whether the fetch is an incremental one of a
// session: its answer leaves out the partitions with no news.
func (f *Fetch) Incremental() bool { return f.s != nil && f.incremental }

// Told returns what the session's last answer told the client of the
// partition: its high watermark and log start (-1: nothing yet, or an
// error).
func (p *Part) Told() (hwm, logStart int64) { return p.toldHWM, p.toldStart }

// Clock returns the session's clock, a time (Unix ns) the broker stores
// and reads as it likes (the last fetch of a follower's session that
// found its quiet partitions quiet); nil for a sessionless fetch.
func (f *Fetch) Clock() *atomic.Int64 {
	if f.s == nil {
		return nil
	}
	return &f.s.clock
}

// NoteQuiet sets the Quiet note of the session's partitions at the given
// indexes of f.Parts (a fetch's notes, taken at once, in order: the last
// for an index wins; nil drops a note). A partition the client has sent
// anew since this fetch began (another fetch of the session) keeps the
// note it has.
func (f *Fetch) NoteQuiet(idx []int, notes []any) {
	if f.s == nil || len(idx) == 0 {
		return
	}
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	for n, i := range idx {
		fp := &f.Parts[i]
		if p := f.s.parts[key{fp.Topic, fp.Partition}]; p != nil && p.FetchOffset == fp.FetchOffset &&
			p.LogStartOffset == fp.LogStartOffset && p.LeaderEpoch == fp.LeaderEpoch {
			p.Quiet = notes[n]
		}
	}
}

// Aux returns the broker's own state of the fetch's session, made by
// init at its first use; nil for a sessionless fetch. The session keeps
// it until it ends; the broker guards it (two fetches of one session may
// run at once, on two connections).
func (f *Fetch) Aux(init func() any) any {
	if f.s == nil {
		return nil
	}
	f.c.mu.Lock()
	defer f.c.mu.Unlock()
	if f.s.aux == nil {
		f.s.aux = init()
	}
	return f.s.aux
}

// Session returns the fetch's session id (0: none).
func (f *Fetch) Session() int32 {
	if f.s == nil {
		return 0
	}
	return f.s.id
}

// Begin resolves req's session for o. A full fetch (epoch 0 or -1) first
// closes the session it names, if o owns it; with epoch 0 it creates a
// new one holding its partitions when the cache has or can make room
// (else it is served sessionless). An incremental fetch (epoch > 0)
// applies its changes to its session (added and updated partitions, then
// forgotten ones) and reads every partition the session holds.
func (c *Cache) Begin(req *kmsg.FetchRequest, o Owner) (*Fetch, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.opts.Clock.Now()
	if req.SessionEpoch == 0 || req.SessionEpoch == -1 {
		if s := c.sessions[req.SessionID]; s != nil && s.owner == o {
			c.remove(s)
		}
		f := &Fetch{c: c, Parts: requested(req)}
		if req.SessionEpoch == 0 && c.opts.Slots > 0 {
			f.s = c.create(o, f.Parts, now)
			if f.s != nil {
				f.Parts = f.s.snapshot()
			}
		}
		return f, nil
	}
	s := c.sessions[req.SessionID]
	switch {
	case s == nil || s.owner != o:
		return nil, ErrNotFound
	case req.SessionEpoch != s.epoch:
		return nil, ErrInvalidEpoch
	}
	before := len(s.parts)
	for _, p := range requested(req) {
		k := key{p.Topic, p.Partition}
		if cur := s.parts[k]; cur != nil {
			cur.FetchOffset, cur.MaxBytes, cur.LeaderEpoch, cur.LogStartOffset = p.FetchOffset, p.MaxBytes, p.LeaderEpoch, p.LogStartOffset
			cur.Quiet = nil
			continue
		}
		np := p
		s.parts[k] = &np
		s.order = append(s.order, &np)
	}
	for _, ft := range req.ForgottenTopics {
		for _, idx := range ft.Partitions {
			delete(s.parts, key{ft.Topic, idx})
		}
	}
	if len(s.parts) != len(s.order) {
		s.order = slices.DeleteFunc(s.order, func(p *Part) bool { return s.parts[key{p.Topic, p.Partition}] != p })
	}
	c.parts += len(s.parts) - before
	if c.parts > c.opts.MaxPartitions {
		// Grown past the budget: the client starts over with a full fetch,
		// which gets a session only if it fits.
		c.remove(s)
		return nil, ErrNotFound
	}
	s.epoch = nextEpoch(s.epoch)
	s.lastUsed = now
	return &Fetch{c: c, s: s, incremental: true, Parts: s.snapshot()}, nil
}

// requested returns req's partitions as Parts, told nothing yet.
func requested(req *kmsg.FetchRequest) []Part {
	n := 0
	for _, t := range req.Topics {
		n += len(t.Partitions)
	}
	out := make([]Part, 0, n)
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			out = append(out, Part{Topic: t.Topic, Partition: p.Partition, FetchOffset: p.FetchOffset,
				MaxBytes: p.PartitionMaxBytes, LeaderEpoch: p.CurrentLeaderEpoch, LogStartOffset: p.LogStartOffset,
				toldHWM: -1, toldStart: -1})
		}
	}
	return out
}

// nextEpoch follows epoch, wrapping to 1 (0 and -1 mean full fetches).
func nextEpoch(e int32) int32 {
	if e == math.MaxInt32 {
		return 1
	}
	return e + 1
}

// snapshot copies the session's partitions in fetch order. Holds c.mu.
func (s *session) snapshot() []Part {
	out := s.spare[:0]
	s.spare = nil
	if cap(out) < len(s.order) {
		out = make([]Part, 0, len(s.order))
	}
	for _, p := range s.order {
		out = append(out, *p)
	}
	return out
}

// create adds a session for o holding parts (the last of duplicates
// wins), making room if it may; nil if it may not. Holds c.mu.
func (c *Cache) create(o Owner, parts []Part, now time.Time) *session {
	s := &session{owner: o, epoch: 1, created: now, lastUsed: now, parts: make(map[key]*Part, len(parts))}
	for _, p := range parts {
		k := key{p.Topic, p.Partition}
		if cur := s.parts[k]; cur != nil {
			*cur = p
			continue
		}
		np := p
		s.parts[k] = &np
		s.order = append(s.order, &np)
	}
	n := len(s.parts)
	if n > c.opts.MaxPartitions {
		return nil
	}
	for len(c.sessions) >= c.opts.Slots || c.parts+n > c.opts.MaxPartitions {
		if !c.evictFor(s, now) {
			return nil
		}
	}
	for s.id == 0 || c.sessions[s.id] != nil {
		s.id = rand.Int32N(math.MaxInt32) + 1
	}
	c.sessions[s.id] = s
	c.parts += n
	return s
}

// evictFor removes one session to make room for s, if the rules allow:
// the least recently used one if it has been idle for EvictAfter; else
// the least valuable of those s may displace (consumers' sessions by a
// follower's, and any older than EvictAfter), if s is worth more.
// Holds c.mu.
func (c *Cache) evictFor(s *session, now time.Time) bool {
	var lru, victim *session
	for _, o := range c.sessions {
		if lru == nil || o.lastUsed.Before(lru.lastUsed) {
			lru = o
		}
		if (s.privileged() && !o.privileged()) || now.Sub(o.created) > c.opts.EvictAfter {
			if victim == nil || worth(o).less(worth(victim)) {
				victim = o
			}
		}
	}
	switch {
	case lru == nil:
		return false
	case now.Sub(lru.lastUsed) > c.opts.EvictAfter:
		victim = lru
	case victim == nil || !worth(victim).less(worth(s)):
		return false
	}
	c.remove(victim)
	c.evictions++
	return true
}

// value orders sessions for eviction: followers' over consumers', then by
// partition count.
type value struct {
	privileged bool
	size       int
}

func worth(s *session) value { return value{s.privileged(), len(s.parts)} }

func (v value) less(o value) bool {
	if v.privileged != o.privileged {
		return o.privileged
	}
	return v.size < o.size
}

// remove drops s from the cache. Holds c.mu.
func (c *Cache) remove(s *session) {
	if c.sessions[s.id] == s {
		delete(c.sessions, s.id)
		c.parts -= len(s.parts)
	}
}

package share

// The broker's share partitions: loaded on first use under the
// partition's leader epoch (read from the metastore, started from the
// group's share.auto.offset.reset when new, and written back under that
// epoch so an older leader can no longer store), dropped when fenced,
// and one loop that expires acquisition locks.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratamq/strata/pkg/clock"
	"github.com/stratamq/strata/pkg/metastore"
)

// ErrStaleLeader is returned by Get when the stored state was written
// under a newer leader epoch than the caller's.
var ErrStaleLeader = errors.New("share: a newer leader owns the share partition")

// Options configure a Manager.
type Options struct {
	Meta  *metastore.Meta
	Clock clock.Clock
	Log   *slog.Logger
	// MaxLocks bounds the in-flight window of a share partition
	// (group.share.partition.max.record.locks, Kafka's default 2000).
	MaxLocks int
	// MaxSessions bounds the share sessions of the broker
	// (group.share.max.share.sessions).
	MaxSessions int
	// FlushDelay is how long a flush waits to gather the
	// acknowledgements of concurrent requests into one write.
	FlushDelay time.Duration
	// ExpiryInterval is how often acquisition locks are checked.
	ExpiryInterval time.Duration
	// DeadLetters, if set, receives records archived by a reject or by
	// the delivery limit. It runs under the partition's lock and must
	// not block.
	DeadLetters func(metastore.ShareKey, []Archived)
	// Leads, if set, reports whether this broker still leads a share
	// partition's topic partition under epoch; the expiry loop drops
	// those it no longer leads (their state is stored).
	Leads func(k metastore.ShareKey, epoch int32) bool
}

// Manager holds the share partitions this broker leads.
type Manager struct {
	opts   Options
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	parts   map[metastore.ShareKey]*Partition
	loading map[metastore.ShareKey]chan struct{}

	// Sessions is the broker's share session cache.
	Sessions *Sessions

	writes, acked atomic.Int64
}

// New starts a Manager.
func New(opts Options) *Manager {
	if opts.Clock == nil {
		opts.Clock = clock.Real()
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.MaxLocks <= 0 {
		opts.MaxLocks = 2000
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = 2000
	}
	if opts.ExpiryInterval <= 0 {
		opts.ExpiryInterval = 100 * time.Millisecond
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{opts: opts, ctx: ctx, cancel: cancel, done: make(chan struct{}),
		parts: map[metastore.ShareKey]*Partition{}, loading: map[metastore.ShareKey]chan struct{}{}}
	m.Sessions = newSessions(opts.MaxSessions, opts.Clock)
	go m.run()
	return m
}

// Close stops the expiry loop and fails pending flushes.
func (m *Manager) Close() {
	m.cancel()
	<-m.done
}

// Writes is the number of share state writes so far; Acked the number
// of acknowledged offsets.
func (m *Manager) Writes() int64 { return m.writes.Load() }

// Acked is the number of offsets acknowledged so far (any type).
func (m *Manager) Acked() int64 { return m.acked.Load() }

// Init tells Get where a new share partition starts: the partition's
// offsets and what the group's config says.
type Init struct {
	LogStart, HighWatermark int64
	// ByTime, for a by_duration reset, returns the first offset with a
	// timestamp at or after t.
	ByTime func(t time.Time) (int64, error)
	Config Config
}

// start is where a new share partition starts.
func (in Init) start(now time.Time) int64 {
	switch {
	case in.Config.AutoReset == "earliest":
		return in.LogStart
	case in.ByTime != nil:
		if d, ok := in.Config.ResetDuration(); ok {
			if off, err := in.ByTime(now.Add(-d)); err == nil {
				return off
			}
		}
	}
	return in.HighWatermark
}

// Get returns the share partition of key, loading it under leaderEpoch
// if it is not loaded under that epoch. With fresh, a loaded partition
// that holds no acquisitions is checked against the stored version
// first (AlterShareGroupOffsets may have moved it).
func (m *Manager) Get(ctx context.Context, key metastore.ShareKey, leaderEpoch int32, fresh bool, init func() Init) (*Partition, error) {
	for {
		m.mu.Lock()
		p := m.parts[key]
		if p != nil && p.leaderEpoch == leaderEpoch && !p.isStale() {
			m.mu.Unlock()
			if fresh && p.idle() {
				st, err := m.opts.Meta.ShareState(ctx, key)
				if err != nil {
					return nil, err
				}
				if p.sameVersion(st.Version) {
					return p, nil
				}
				p.markStale()
				m.drop(p)
				continue
			}
			return p, nil
		}
		if ch, ok := m.loading[key]; ok {
			m.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		ch := make(chan struct{})
		m.loading[key] = ch
		m.mu.Unlock()
		p, err := m.load(ctx, key, leaderEpoch, init)
		m.mu.Lock()
		delete(m.loading, key)
		var old *Partition
		if err == nil {
			old = m.parts[key]
			m.parts[key] = p
		}
		close(ch)
		m.mu.Unlock()
		if old != nil {
			old.markStale()
		}
		return p, err
	}
}

// load reads a share partition's state and claims it for leaderEpoch.
func (m *Manager) load(ctx context.Context, key metastore.ShareKey, leaderEpoch int32, init func() Init) (*Partition, error) {
	for range 3 {
		st, err := m.opts.Meta.ShareState(ctx, key)
		if err != nil {
			return nil, err
		}
		if st.LeaderEpoch > leaderEpoch {
			return nil, fmt.Errorf("%w: stored under epoch %d, ours %d", ErrStaleLeader, st.LeaderEpoch, leaderEpoch)
		}
		in := init()
		read := st.Version
		if !st.Initialized {
			start := in.start(m.opts.Clock.Now())
			st = metastore.ShareState{StartOffset: start, EndOffset: start, Initialized: true}
		}
		p := &Partition{key: key, m: m, leaderEpoch: leaderEpoch, wake: make(chan struct{}), cfg: in.Config, version: read}
		p.st.restore(st, m.opts.MaxLocks)
		p.st.trimTo(in.LogStart)
		claim := p.snapshot()
		v, err := m.opts.Meta.StoreShareState(ctx, key, claim)
		m.writes.Add(1)
		if errors.Is(err, metastore.ErrFenced) {
			continue // someone wrote between our read and write: read again
		}
		if err != nil {
			return nil, err
		}
		p.version = v
		m.opts.Log.Debug("share partition loaded", "group", key.Group, "topic", key.Topic, "partition", key.Partition,
			"epoch", leaderEpoch, "start", p.st.start, "end", p.st.end)
		return p, nil
	}
	return nil, fmt.Errorf("share: load %s/%s/%d: too many concurrent writers", key.Group, key.Topic, key.Partition)
}

// drop forgets p if it is still the loaded one.
func (m *Manager) drop(p *Partition) {
	m.mu.Lock()
	if m.parts[p.key] == p {
		delete(m.parts, p.key)
	}
	m.mu.Unlock()
}

// Forget drops every share partition of a topic partition (its
// leadership moved) or, with group set, of a group.
func (m *Manager) Forget(keep func(metastore.ShareKey) bool) {
	m.mu.Lock()
	var gone []*Partition
	for k, p := range m.parts {
		if !keep(k) {
			delete(m.parts, k)
			gone = append(gone, p)
		}
	}
	m.mu.Unlock()
	for _, p := range gone {
		p.markStale()
	}
}

// Loaded returns the loaded share partitions.
func (m *Manager) Loaded() []*Partition {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*Partition, 0, len(m.parts))
	for _, p := range m.parts {
		out = append(out, p)
	}
	return out
}

// run expires acquisition locks.
func (m *Manager) run() {
	defer close(m.done)
	t := time.NewTicker(m.opts.ExpiryInterval)
	defer t.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-t.C:
		}
		now := m.opts.Clock.Now()
		for _, p := range m.Loaded() {
			if m.opts.Leads != nil && !m.opts.Leads(p.key, p.leaderEpoch) {
				p.markStale()
				m.drop(p)
				continue
			}
			p.expire(now)
		}
		m.Sessions.evictIdle()
	}
}

func (p *Partition) isStale() bool { return p.stale.Load() }

func (p *Partition) markStale() {
	p.mu.Lock()
	p.stale.Store(true)
	p.notify()
	if !p.flushing {
		p.answer(p.seq, ErrFenced)
	}
	p.mu.Unlock()
}

// idle reports whether p holds no acquisitions and nothing unstored.
func (p *Partition) idle() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, acquired, _ := p.st.counts()
	return acquired == 0 && p.durable >= p.seq && !p.flushing
}

func (p *Partition) sameVersion(v int64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.version == v
}

// Package cleaner is the log cleaner of compacted topics
// (cleanup.policy=compact or compact,delete), Kafka's LogCleaner: every
// broker runs one over the replicas it hosts, leader or follower, and each
// replica compacts its own log.
//
// A pass over one partition builds a map from key to the offset of its
// latest record over the dirty part of the log (from the cleaner
// checkpoint to the end of the cleanable segments: closed, wholly below
// the high watermark, newest record older than min.compaction.lag.ms, and
// for a tiered partition already uploaded), in memory bounded by
// Options.DedupeBytes (a full map ends the pass's dirty range at the last
// segment it holds whole). It then rewrites every cleanable segment from
// the start of the log to the end of the mapped range, consecutive
// segments merged up to segment.bytes, keeping a record unless a later
// record of its key is in the map, it has no key, or it is a tombstone
// whose delete horizon (stamped into its batch, KIP-534, when a pass
// first keeps it: now + delete.retention.ms) has passed. Records keep
// their offsets; rebuilt batches keep their header fields. A batch left
// without records is dropped unless it must stay as Kafka's empty batch:
// the last batch of a rewritten segment (segments stay contiguous), the
// first batch of a leader epoch (the epoch history, rebuilt from batch
// headers, stays exact for OffsetForLeaderEpoch), or the last batch of an
// idempotent producer (its sequence survives a restart). Control and
// transactional batches are kept whole (see keepWhole).
//
// Partitions are picked dirtiest first (dirty bytes over all cleanable
// bytes) among those at or above min.cleanable.dirty.ratio, those whose
// first dirty segment is older than max.compaction.lag.ms, and those with
// a tombstone past its delete horizon. A pass that fails marks the
// partition uncleanable (logged, counted in the metrics) until the
// partition is reopened; the others go on. I/O is throttled across all
// threads (Options.IOBytesPerSecond).
package cleaner

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratamq/strata/brokerfleet/internal/partition"
	"github.com/stratamq/strata/pkg/clock"
)

// Options configure a Cleaner. Zero values take the defaults.
type Options struct {
	// Threads is how many partitions are cleaned at once
	// (log.cleaner.threads; default 1).
	Threads int
	// DedupeBytes is the memory of the offset maps of all threads
	// together (log.cleaner.dedupe.buffer.size; default 128 MiB).
	DedupeBytes int64
	// IOBytesPerSecond bounds what all threads read and write
	// (log.cleaner.io.max.bytes.per.second); 0 is unlimited.
	IOBytesPerSecond float64
	// Backoff is how long an idle thread waits before it looks for work
	// again (log.cleaner.backoff.ms; default 15 s). Kick wakes it.
	Backoff time.Duration
	// MaxBatchBytes bounds the decompressed size of one batch (default
	// 128 MiB); a larger batch makes its partition uncleanable.
	MaxBatchBytes int
	// Tier says the broker has an object tier, which may hold records
	// below a replica's local log start (see mayDropTombstones).
	Tier bool
	// Partitions returns the replicas this broker hosts. Required.
	Partitions func() []*partition.Partition
	Clock      clock.Clock
	Logger     *slog.Logger
}

// Defaults.
const (
	DefaultDedupeBytes   = 128 << 20
	DefaultBackoff       = 15 * time.Second
	DefaultMaxBatchBytes = 128 << 20
)

func (o Options) withDefaults() Options {
	if o.Threads <= 0 {
		o.Threads = 1
	}
	if o.DedupeBytes <= 0 {
		o.DedupeBytes = DefaultDedupeBytes
	}
	if o.Backoff <= 0 {
		o.Backoff = DefaultBackoff
	}
	if o.MaxBatchBytes <= 0 {
		o.MaxBatchBytes = DefaultMaxBatchBytes
	}
	o.Clock = clock.Or(o.Clock)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// Cleaner cleans the compacted partitions of one broker.
type Cleaner struct {
	o        Options
	throttle *throttle
	kick     chan struct{}

	read, written, passes atomic.Int64
	dirty, busy           atomic.Int64 // dirty bytes cleaned; nanoseconds spent in passes

	mu    sync.Mutex // guards parts
	parts map[*partition.Partition]*state
}

// state is what the cleaner knows of one replica; guarded by Cleaner.mu.
type state struct {
	busy        bool
	uncleanable error
	lastClean   time.Time // end of the last pass that completed
	dirtyRatio  float64   // as of the last assessment
	// horizon is the earliest delete horizon of a tombstone the last pass
	// kept (zero: none known); the partition is due then.
	horizon time.Time
	// scanned: horizon was read from the log (after a restart it is
	// unknown until the first pass).
	scanned bool
}

// New returns a cleaner; Run starts it.
func New(o Options) *Cleaner {
	o = o.withDefaults()
	return &Cleaner{o: o, throttle: newThrottle(o.IOBytesPerSecond, o.Clock), kick: make(chan struct{}, 1),
		parts: map[*partition.Partition]*state{}}
}

// Kick makes idle threads look for work now (a topic's config changed).
func (c *Cleaner) Kick() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// Run cleans until ctx ends, with Options.Threads threads.
func (c *Cleaner) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for range c.o.Threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.thread(ctx)
		}()
	}
	wg.Wait()
}

func (c *Cleaner) thread(ctx context.Context) {
	for ctx.Err() == nil {
		p := c.pick()
		if p == nil {
			t := c.o.Clock.NewTimer(c.o.Backoff)
			select {
			case <-ctx.Done():
			case <-c.kick:
			case <-t.C():
			}
			t.Stop()
			continue
		}
		c.run(ctx, p)
	}
}

// run cleans p once and records the outcome.
func (c *Cleaner) run(ctx context.Context, p *partition.Partition) {
	start := c.o.Clock.Now()
	res, err := c.clean(ctx, p)
	c.busy.Add(int64(clock.Since(c.o.Clock, start)))
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.parts[p]
	if st == nil {
		return
	}
	st.busy = false
	switch {
	case err == nil:
		st.lastClean = c.o.Clock.Now()
		st.horizon, st.scanned = res.horizon, true
		c.passes.Add(1)
		c.dirty.Add(res.dirtyBytes)
	case ctx.Err() != nil, errors.Is(err, errGone):
	default:
		st.uncleanable = err
		c.o.Logger.Error("log cleaner: partition marked uncleanable; cleaning the others goes on",
			"topic", p.Topic(), "partition", p.Index(), "err", err)
	}
}

// CleanNow runs one pass over p on the caller's goroutine (tests, admin),
// unless a thread is cleaning it; it returns the pass's error.
func (c *Cleaner) CleanNow(ctx context.Context, p *partition.Partition) error {
	c.mu.Lock()
	st := c.stateLocked(p)
	if st.busy {
		c.mu.Unlock()
		return errors.New("cleaner: partition is being cleaned")
	}
	st.busy = true
	c.mu.Unlock()
	c.run(ctx, p)
	c.mu.Lock()
	defer c.mu.Unlock()
	return st.uncleanable
}

// stateLocked returns p's state, made on first sight; c.mu held.
func (c *Cleaner) stateLocked(p *partition.Partition) *state {
	st := c.parts[p]
	if st == nil {
		st = &state{}
		c.parts[p] = st
	}
	return st
}

// pick returns the dirtiest partition due for cleaning, marked busy, or
// nil.
func (c *Cleaner) pick() *partition.Partition {
	hosted := c.o.Partitions()
	now := c.o.Clock.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	live := make(map[*partition.Partition]bool, len(hosted))
	var best *partition.Partition
	bestScore := -1.0
	for _, p := range hosted {
		live[p] = true
		cfg := p.Config()
		if !cfg.Compact {
			continue
		}
		st := c.stateLocked(p)
		a := assess(p, now)
		st.dirtyRatio = a.ratio
		if st.busy || st.uncleanable != nil {
			continue
		}
		score := a.ratio
		due := a.dirtyBytes > 0 && (a.ratio >= cfg.MinCleanableRatio || a.forced)
		if !st.scanned || (!st.horizon.IsZero() && !now.Before(st.horizon)) {
			// Tombstones may be due (or, after a restart, unknown): one
			// pass over the clean part decides.
			due = due || a.cleanBytes > 0
		}
		if a.forced {
			score += 2 // max.compaction.lag.ms first
		}
		if due && score > bestScore {
			best, bestScore = p, score
		}
	}
	for p := range c.parts {
		if !live[p] {
			delete(c.parts, p) // closed: its topic deleted, or reopened
		}
	}
	if best != nil {
		c.parts[best].busy = true
	}
	return best
}

// Stats is the cleaner's state for the metrics.
type Stats struct {
	ReadBytes, WrittenBytes int64 // since start
	Passes                  int64
	// DirtyBytes is the size of the dirty segments cleaned, Busy the time
	// spent in passes (DirtyBytes/Busy: the cleaner's throughput).
	DirtyBytes int64
	Busy       time.Duration
	Partitions []PartitionStats
}

// PartitionStats describes one compacted replica.
type PartitionStats struct {
	Topic       string
	Partition   int32
	DirtyRatio  float64
	LastClean   time.Time // zero: not cleaned since the broker started
	Uncleanable bool
}

// Stats returns the counters and, for every compacted replica assessed,
// its dirty ratio as of the last assessment, the time of its last clean
// and whether it is uncleanable. It reads memory only.
func (c *Cleaner) Stats() Stats {
	s := Stats{ReadBytes: c.read.Load(), WrittenBytes: c.written.Load(), Passes: c.passes.Load(),
		DirtyBytes: c.dirty.Load(), Busy: time.Duration(c.busy.Load())}
	c.mu.Lock()
	defer c.mu.Unlock()
	for p, st := range c.parts {
		s.Partitions = append(s.Partitions, PartitionStats{Topic: p.Topic(), Partition: p.Index(),
			DirtyRatio: st.dirtyRatio, LastClean: st.lastClean, Uncleanable: st.uncleanable != nil})
	}
	return s
}

package metastore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Clock reads a local clock. Only differences between two readings of the
// same Clock are ever used, so the monotonic reading of time.Now is what
// matters; tests inject clocks that are skewed or driven by hand.
type Clock interface {
	Now() time.Time
}

// SystemClock is the process's monotonic clock.
type SystemClock struct{}

// Now returns time.Now (with its monotonic reading).
func (SystemClock) Now() time.Time { return time.Now() }

// leaseRecord is a lease as stored.
type leaseRecord struct {
	Holder     string `json:"holder"` // "" when released
	Epoch      int64  `json:"epoch"`
	DurationMs int64  `json:"durationMs"`
}

// LeaseOptions configure a Lease.
type LeaseOptions struct {
	// Duration is how long a renewal entitles the holder to act, and how
	// long a contender must see the record unchanged before taking over.
	Duration time.Duration
	// Margin is subtracted from the holder's entitlement to absorb clock
	// rate differences and scheduling delays: the holder stops acting at
	// renewSentAt + Duration - Margin.
	Margin time.Duration
	// Clock is the local clock; nil means SystemClock.
	Clock Clock
}

// Validate checks the options.
func (o LeaseOptions) Validate() error {
	switch {
	case o.Duration <= 0:
		return fmt.Errorf("lease duration %v is not positive", o.Duration)
	case o.Margin <= 0 || o.Margin >= o.Duration:
		return fmt.Errorf("lease margin %v must be positive and below the duration %v", o.Margin, o.Duration)
	}
	return nil
}

// Lease is one party's view of a lease record: as holder it renews the
// record and knows until when it may act; as contender it watches the
// record's version and takes over only after seeing it unchanged for a full
// lease on its own clock. Every takeover increments the epoch, which the
// holder stamps on everything it writes so stale holders are fenced.
//
// The rules (DESIGN §3): time is measured only on the local monotonic
// clock. A holder may act until renewSentAt + Duration - Margin, where
// renewSentAt is read before the renewal is sent; since the renewal reached
// the store after that instant, a contender that first saw the renewed
// version at its own time T (read after the reply arrived) and waits until
// T + Duration takes over after the holder stopped, whatever the two
// clocks' offsets. Tick must be called more often than Duration - Margin
// for a holder to keep the lease.
type Lease struct {
	store  Store
	key    Key
	holder string
	opts   LeaseOptions

	mu       sync.Mutex
	held     bool
	epoch    int64
	version  int64     // record version after our last successful write
	deadline time.Time // holder: stop acting at this local time

	seenVersion int64     // contender: record version being watched
	seenAt      time.Time // contender: local time it was first seen
	seenValid   bool

	// extra, if set, encodes the record with more fields than the lease
	// (a broker's registration rides on its heartbeat lease).
	extra func(leaseRecord) []byte
}

// NewLease returns a Lease on key for holder (a unique id: broker id plus
// incarnation, so a restarted process is a new holder).
func NewLease(store Store, key Key, holder string, opts LeaseOptions) (*Lease, error) {
	if opts.Clock == nil {
		opts.Clock = SystemClock{}
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if holder == "" {
		return nil, errors.New("lease holder id is empty")
	}
	return &Lease{store: store, key: key, holder: holder, opts: opts}, nil
}

// LeaseState is the outcome of a Tick.
type LeaseState struct {
	Held   bool   // this party holds the lease now
	Epoch  int64  // the current epoch as last read or written
	Holder string // the holder as last read ("" if released or unknown)
}

// Tick performs one step: renew if held, take over if the record is free or
// its version has stood still for a full lease, otherwise keep watching. A
// store error leaves the state unchanged: a holder keeps acting only until
// its deadline, which no failed renewal extends.
func (l *Lease) Tick(ctx context.Context) (LeaseState, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	clock := l.opts.Clock
	cur, err := l.store.Get(ctx, l.key)
	readAt := clock.Now()
	var rec leaseRecord
	switch {
	case errors.Is(err, ErrNotFound):
		sent := clock.Now()
		return l.write(ctx, leaseRecord{Holder: l.holder, Epoch: 1}, IfAbsent(), sent)
	case err != nil:
		return l.stateLocked(""), fmt.Errorf("lease %s: read: %w", l.key, err)
	}
	if err := json.Unmarshal(cur.Value, &rec); err != nil {
		return l.stateLocked(""), fmt.Errorf("lease %s: decode: %w", l.key, err)
	}
	if rec.Holder == l.holder && l.held && cur.Version == l.version {
		sent := clock.Now()
		return l.write(ctx, leaseRecord{Holder: l.holder, Epoch: rec.Epoch}, IfVersion(cur.Version), sent)
	}
	// Someone else holds it (or our own earlier incarnation, or a write of
	// ours we did not see succeed): we are not the holder.
	l.held = false
	l.epoch = rec.Epoch
	if rec.Holder == "" {
		sent := clock.Now()
		return l.write(ctx, leaseRecord{Holder: l.holder, Epoch: rec.Epoch + 1}, IfVersion(cur.Version), sent)
	}
	if !l.seenValid || cur.Version != l.seenVersion {
		l.seenVersion, l.seenAt, l.seenValid = cur.Version, readAt, true
		return LeaseState{Epoch: rec.Epoch, Holder: rec.Holder}, nil
	}
	wait := max(l.opts.Duration, time.Duration(rec.DurationMs)*time.Millisecond)
	if clock.Now().Sub(l.seenAt) < wait {
		return LeaseState{Epoch: rec.Epoch, Holder: rec.Holder}, nil
	}
	sent := clock.Now()
	return l.write(ctx, leaseRecord{Holder: l.holder, Epoch: rec.Epoch + 1}, IfVersion(cur.Version), sent)
}

// write stores rec under c; on success we hold the lease until
// sent + Duration - Margin.
func (l *Lease) write(ctx context.Context, rec leaseRecord, c Cond, sent time.Time) (LeaseState, error) {
	rec.DurationMs = l.opts.Duration.Milliseconds()
	it, err := l.store.Put(ctx, Item{Key: l.key, Value: l.encode(rec)}, c)
	if err != nil {
		l.seenValid = false
		if errors.Is(err, ErrConditionFailed) {
			l.held = false
			return LeaseState{Epoch: l.epoch}, nil
		}
		// Unknown outcome: if the write landed, the record's version moved
		// and the next Tick sees a holder that is us but a version we do not
		// know, so we wait like any contender: safe.
		return l.stateLocked(""), fmt.Errorf("lease %s: write: %w", l.key, err)
	}
	l.held, l.epoch, l.version = true, rec.Epoch, it.Version
	l.deadline = sent.Add(l.opts.Duration - l.opts.Margin)
	l.seenValid = false
	return LeaseState{Held: true, Epoch: rec.Epoch, Holder: l.holder}, nil
}

func (l *Lease) stateLocked(holder string) LeaseState {
	if l.held && l.opts.Clock.Now().Before(l.deadline) {
		return LeaseState{Held: true, Epoch: l.epoch, Holder: l.holder}
	}
	return LeaseState{Epoch: l.epoch, Holder: holder}
}

// Valid reports whether the holder may act now, and under which epoch: it
// holds the lease and its safe deadline has not passed on the local clock.
func (l *Lease) Valid() (epoch int64, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held && l.opts.Clock.Now().Before(l.deadline) {
		return l.epoch, true
	}
	return 0, false
}

// StillValid is Valid without the epoch.
func (l *Lease) StillValid() bool {
	_, ok := l.Valid()
	return ok
}

// Deadline returns the local time until which the holder may act (zero if
// not held).
func (l *Lease) Deadline() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.held {
		return time.Time{}
	}
	return l.deadline
}

// Release gives the lease up at once (graceful shutdown or hand-over): the
// record is marked free under the same epoch, so the next taker need not
// wait a full lease and still gets a new epoch. It stops acting first.
func (l *Lease) Release(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.held {
		return nil
	}
	l.held = false
	val := l.encode(leaseRecord{Holder: "", Epoch: l.epoch, DurationMs: l.opts.Duration.Milliseconds()})
	if _, err := l.store.Put(ctx, Item{Key: l.key, Value: val}, IfVersion(l.version)); err != nil && !errors.Is(err, ErrConditionFailed) {
		return fmt.Errorf("lease %s: release: %w", l.key, err)
	}
	return nil
}

func (l *Lease) encode(rec leaseRecord) []byte {
	if l.extra != nil {
		return l.extra(rec)
	}
	return encodeJSON(rec)
}

package clock

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Fake is a Clock that moves only through Advance and Set. It is safe for
// concurrent use. Timers and tickers deliver on buffered channels of one,
// as the time package's do: a tick nobody reads is dropped, not queued.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	waiters []*fakeWaiter
	changed chan struct{} // closed (and replaced) whenever waiters change
}

// NewFake returns a fake clock reading start.
func NewFake(start time.Time) *Fake { return &Fake{now: start, changed: make(chan struct{})} }

var _ Clock = (*Fake)(nil)

type fakeWaiter struct {
	at     time.Time
	period time.Duration // tickers only
	ch     chan time.Time
	active bool
}

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Advance moves the clock forward by d, firing every timer and ticker whose
// deadline it passes, earliest first.
func (f *Fake) Advance(d time.Duration) { f.Set(f.Now().Add(d)) }

// Set moves the clock to t (never backwards), firing what falls due.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for {
		w := f.nextLocked()
		if w == nil || w.at.After(t) {
			break
		}
		if w.at.After(f.now) {
			f.now = w.at
		}
		select {
		case w.ch <- f.now:
		default:
		}
		if w.period > 0 {
			w.at = w.at.Add(w.period)
		} else {
			f.removeLocked(w)
		}
	}
	if t.After(f.now) {
		f.now = t
	}
}

// Pending returns how many timers and tickers are active.
func (f *Fake) Pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.waiters)
}

// WaitForPending blocks until at least n timers and tickers are active or
// ctx ends, so a test can advance the clock once the code under test is
// waiting on it. It reports whether n were reached.
func (f *Fake) WaitForPending(ctx context.Context, n int) bool {
	for {
		f.mu.Lock()
		have, ch := len(f.waiters), f.changed
		f.mu.Unlock()
		if have >= n {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-ch:
		}
	}
}

// NextDeadline returns when the earliest active timer or ticker fires.
func (f *Fake) NextDeadline() (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if w := f.nextLocked(); w != nil {
		return w.at, true
	}
	return time.Time{}, false
}

func (f *Fake) nextLocked() *fakeWaiter {
	var best *fakeWaiter
	for _, w := range f.waiters {
		if best == nil || w.at.Before(best.at) {
			best = w
		}
	}
	return best
}

func (f *Fake) addLocked(w *fakeWaiter) {
	w.active = true
	f.waiters = append(f.waiters, w)
	f.notifyLocked()
}

func (f *Fake) removeLocked(w *fakeWaiter) bool {
	if !w.active {
		return false
	}
	w.active = false
	f.waiters = slices.DeleteFunc(f.waiters, func(o *fakeWaiter) bool { return o == w })
	f.notifyLocked()
	return true
}

func (f *Fake) notifyLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

// NewTimer returns a timer that fires when the clock reaches now+d; a
// timer of d <= 0 fires at once.
func (f *Fake) NewTimer(d time.Duration) Timer {
	t := &fakeTimer{f: f, w: &fakeWaiter{ch: make(chan time.Time, 1)}}
	t.Reset(d)
	return t
}

// NewTicker returns a ticker with period d.
func (f *Fake) NewTicker(d time.Duration) Ticker {
	if d <= 0 {
		panic("clock: non-positive interval for NewTicker")
	}
	t := &fakeTicker{f: f, w: &fakeWaiter{ch: make(chan time.Time, 1)}}
	t.Reset(d)
	return t
}

type fakeTimer struct {
	f *Fake
	w *fakeWaiter
}

func (t *fakeTimer) C() <-chan time.Time { return t.w.ch }

func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	return t.f.removeLocked(t.w)
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	f := t.f
	f.mu.Lock()
	defer f.mu.Unlock()
	was := f.removeLocked(t.w)
	if d <= 0 {
		select {
		case t.w.ch <- f.now:
		default:
		}
		return was
	}
	t.w.at = f.now.Add(d)
	f.addLocked(t.w)
	return was
}

type fakeTicker struct {
	f *Fake
	w *fakeWaiter
}

func (t *fakeTicker) C() <-chan time.Time { return t.w.ch }

func (t *fakeTicker) Stop() {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	t.f.removeLocked(t.w)
}

func (t *fakeTicker) Reset(d time.Duration) {
	if d <= 0 {
		panic("clock: non-positive interval for Ticker.Reset")
	}
	f := t.f
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removeLocked(t.w)
	t.w.period = d
	t.w.at = f.now.Add(d)
	f.addLocked(t.w)
}

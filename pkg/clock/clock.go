// Package clock is the one seam through which Strata's components read the
// time and wait on it, so that tests can drive time by hand.
//
// Real is the process clock. Fake is a clock that moves only when a test
// moves it: timers and tickers made from it fire, in deadline order, as
// Advance passes their deadlines. Components take a Clock in their options
// and never call time.Now, time.Since, time.After or time.NewTimer
// themselves; durations between two readings of one Clock are all they
// use, so a Real clock's monotonic reading is what counts.
package clock

import (
	"context"
	"time"
)

// Clock reads the time and makes timers.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a timer that fires once, d from now.
	NewTimer(d time.Duration) Timer
	// NewTicker returns a ticker that fires every d (d > 0).
	NewTicker(d time.Duration) Ticker
}

// Timer is time.Timer behind an interface.
type Timer interface {
	// C delivers the time the timer fired.
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it did.
	Stop() bool
	// Reset makes the timer fire d from now; it reports whether it was
	// active.
	Reset(d time.Duration) bool
}

// Ticker is time.Ticker behind an interface.
type Ticker interface {
	// C delivers the ticks.
	C() <-chan time.Time
	// Stop turns the ticker off.
	Stop()
	// Reset stops the ticker and restarts it with period d.
	Reset(d time.Duration)
}

// Real returns the process's clock.
func Real() Clock { return realClock{} }

// Or returns c, or the real clock when c is nil (for options structs whose
// zero value means "the real clock").
func Or(c Clock) Clock {
	if c == nil {
		return Real()
	}
	return c
}

// Since returns the time elapsed on c since t.
func Since(c Clock, t time.Time) time.Duration { return c.Now().Sub(t) }

// Until returns the time left on c until t.
func Until(c Clock, t time.Time) time.Duration { return t.Sub(c.Now()) }

// Sleep waits d on c, or until ctx ends; it reports whether the whole
// duration passed.
func Sleep(ctx context.Context, c Clock, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

func (realClock) NewTicker(d time.Duration) Ticker { return realTicker{time.NewTicker(d)} }

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time        { return t.t.C }
func (t realTimer) Stop() bool                 { return t.t.Stop() }
func (t realTimer) Reset(d time.Duration) bool { return t.t.Reset(d) }

type realTicker struct{ t *time.Ticker }

func (t realTicker) C() <-chan time.Time   { return t.t.C }
func (t realTicker) Stop()                 { t.t.Stop() }
func (t realTicker) Reset(d time.Duration) { t.t.Reset(d) }

// Offset returns c shifted by d: Now reads c's time plus d, and timers are
// c's (durations are unchanged). A test hook uses it to skew one broker's
// clock against the others'.
func Offset(c Clock, d time.Duration) Clock { return offsetClock{c, d} }

type offsetClock struct {
	Clock
	d time.Duration
}

func (o offsetClock) Now() time.Time { return o.Clock.Now().Add(o.d) }

package cleaner

import (
	"context"
	"sync"
	"time"

	"github.com/stratamq/strata/pkg/clock"
)

// throttle bounds the cleaner's I/O (bytes read plus written, all threads)
// to a rate, as Kafka's log.cleaner.io.max.bytes.per.second: a thread that
// got ahead of the rate sleeps until it is back on it. A rate <= 0 is
// unlimited.
type throttle struct {
	rate  float64
	clock clock.Clock

	mu    sync.Mutex
	start time.Time
	bytes float64
}

func newThrottle(rate float64, c clock.Clock) *throttle {
	return &throttle{rate: rate, clock: c}
}

// wait accounts n bytes and sleeps while the cleaner is ahead of the rate.
func (t *throttle) wait(ctx context.Context, n int) error {
	if t.rate <= 0 || n <= 0 {
		return ctx.Err()
	}
	t.mu.Lock()
	now := t.clock.Now()
	// Restart the window after an idle second, so idle time is no credit.
	if t.start.IsZero() || now.Sub(t.start) > time.Second+time.Duration(t.bytes/t.rate*float64(time.Second)) {
		t.start, t.bytes = now, 0
	}
	t.bytes += float64(n)
	due := t.start.Add(time.Duration(t.bytes / t.rate * float64(time.Second)))
	t.mu.Unlock()
	if d := due.Sub(now); d > 0 {
		timer := t.clock.NewTimer(d)
		defer timer.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C():
		}
	}
	return ctx.Err()
}

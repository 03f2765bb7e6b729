package replication

import (
	"sync"
	"time"

	"github.com/stratamq/strata/pkg/clock"
)

// Throttle is a token bucket of bytes per second with a one-second burst,
// for what a leader sends to replicas being added by a reassignment
// (Kafka's leader.replication.throttled.rate). A read may overdraw it (a
// batch is never split); the debt is paid before the next read is allowed.
type Throttle struct {
	rate  int64
	clock clock.Clock

	mu     sync.Mutex
	tokens float64
	last   time.Time
}

// NewThrottle returns a throttle of rate bytes per second, or nil (no
// throttle) for rate <= 0.
func NewThrottle(rate int64, c clock.Clock) *Throttle {
	if rate <= 0 {
		return nil
	}
	c = clock.Or(c)
	return &Throttle{rate: rate, clock: c, tokens: float64(rate), last: c.Now()}
}

// Allow returns how many bytes may be read now (0: none), at most want.
func (t *Throttle) Allow(want int) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.clock.Now()
	t.tokens = min(t.tokens+now.Sub(t.last).Seconds()*float64(t.rate), float64(t.rate))
	t.last = now
	if t.tokens <= 0 {
		return 0
	}
	return min(want, int(t.tokens))
}

// Spend takes n bytes read from the bucket.
func (t *Throttle) Spend(n int) {
	t.mu.Lock()
	t.tokens -= float64(n)
	t.mu.Unlock()
}

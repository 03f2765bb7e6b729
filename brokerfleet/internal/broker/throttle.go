package broker

import (
	"slices"
	"sync"
	"time"
)

// throttle is a token bucket of bytes per second with a one-second burst.
// A read may overdraw it (a batch is never split); the debt is paid before
// the next read is allowed.
type throttle struct {
	rate int64

	mu     sync.Mutex
	tokens float64
	last   time.Time
}

func newThrottle(rate int64) *throttle {
	if rate <= 0 {
		return nil
	}
	return &throttle{rate: rate, tokens: float64(rate), last: time.Now()}
}

// allow returns how many bytes may be read now (0: none), at most want.
func (t *throttle) allow(want int) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	t.tokens = min(t.tokens+now.Sub(t.last).Seconds()*float64(t.rate), float64(t.rate))
	t.last = now
	if t.tokens <= 0 {
		return 0
	}
	return min(want, int(t.tokens))
}

// spend takes n bytes read from the bucket.
func (t *throttle) spend(n int) {
	t.mu.Lock()
	t.tokens -= float64(n)
	t.mu.Unlock()
}

// throttled reports whether replica's fetches of a partition count against
// the reassignment throttle: it is being added by a reassignment.
func (b *Broker) throttled(topic string, idx, replica int32) bool {
	if b.reassignThrottle == nil {
		return false
	}
	ts := b.lookup(topic)
	return ts != nil && idx >= 0 && int(idx) < len(ts.states) && slices.Contains(ts.states[idx].AddingReplicas, replica)
}

package retry

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// Policy says how often a record is retried and how long to wait between
// deliveries.
type Policy struct {
	// MaxAttempts is the number of failed deliveries after which a record
	// moves to the dead-letter topic: the MaxAttempts-th failure goes to
	// <topic>.dlq with MaxAttempts entries of history.
	MaxAttempts int
	// Backoff is the delay before redelivery after the attempt-th failure
	// (attempt counts from 1).
	Backoff func(attempt int) time.Duration
}

// DefaultPolicy is three attempts with ExponentialBackoff(1s, 5m, 0.2, nil).
func DefaultPolicy() Policy {
	return Policy{MaxAttempts: 3, Backoff: ExponentialBackoff(time.Second, 5*time.Minute, 0.2, nil)}
}

// ErrInvalidPolicy is returned by Validate when a policy cannot be used.
var ErrInvalidPolicy = errors.New("retry: invalid policy")

// Validate checks p.
func (p Policy) Validate() error {
	if p.MaxAttempts < 1 {
		return fmt.Errorf("%w: MaxAttempts %d, want at least 1", ErrInvalidPolicy, p.MaxAttempts)
	}
	if p.Backoff == nil {
		return fmt.Errorf("%w: no Backoff", ErrInvalidPolicy)
	}
	return nil
}

// ExponentialBackoff returns base, 2×base, 4×base … capped at max, each
// multiplied by a random factor in [1-jitter, 1+jitter] so that records that
// failed together do not come back together. rnd supplies the randomness
// (tests pass a seeded source to make it deterministic); nil uses a
// randomly seeded one. The returned function is safe for concurrent use.
func ExponentialBackoff(base, max time.Duration, jitter float64, rnd rand.Source) func(attempt int) time.Duration {
	if rnd == nil {
		rnd = rand.NewPCG(rand.Uint64(), rand.Uint64())
	}
	r := rand.New(rnd)
	var mu sync.Mutex
	return func(attempt int) time.Duration {
		d := base
		for i := 1; i < attempt && d < max; i++ {
			d *= 2
		}
		d = min(d, max)
		if jitter > 0 {
			mu.Lock()
			f := 1 + jitter*(2*r.Float64()-1)
			mu.Unlock()
			d = time.Duration(float64(d) * f)
		}
		return d
	}
}

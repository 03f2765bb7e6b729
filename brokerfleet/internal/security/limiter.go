package security

// The limit on failed authentications per client address: a token bucket
// per address (IPv4, or an IPv6 /64, what one client typically holds)
// with room for limit failures, refilled at limit per minute. Every
// failed login takes a token; while an address has less than one, its
// logins are refused before any credential is read or any password
// hashed, answered like a failure (after the failure delay). So a flood
// from one address gets limit tries at once, then one every minute/limit,
// and costs no metastore reads or PBKDF2 work; other addresses are not
// affected. Refusals take no token, so a client that stops for
// minute/limit gets one try again. The table holds at most
// failureTableSize addresses: full buckets are dropped first (they mean
// nothing), then arbitrary ones, so an attacker with more addresses than
// that can only shorten other addresses' cool-offs.

import (
	"net/netip"
	"sync"
	"time"

	"github.com/stratamq/strata/pkg/clock"
)

// Limiter defaults.
const (
	// DefaultAuthFailureLimit is the failures an address may have in a
	// burst, and per minute after it.
	DefaultAuthFailureLimit = 10
	// failureTableSize bounds the addresses tracked.
	failureTableSize = 10000
)

type bucket struct {
	tokens float64
	at     time.Time
}

// failureLimiter limits failed logins per client address.
type failureLimiter struct {
	clock clock.Clock
	burst float64
	rate  float64 // tokens per second
	size  int

	mu sync.Mutex
	m  map[netip.Prefix]*bucket
}

func newFailureLimiter(limit int, c clock.Clock) *failureLimiter {
	if limit <= 0 {
		limit = DefaultAuthFailureLimit
	}
	return &failureLimiter{
		clock: clock.Or(c), burst: float64(limit), rate: float64(limit) / time.Minute.Seconds(),
		size: failureTableSize, m: map[netip.Prefix]*bucket{},
	}
}

// addressKey is the key of host ("" or unparsable: one shared key).
func addressKey(host string) netip.Prefix {
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Prefix{}
	}
	a = a.Unmap()
	if a.Is4() {
		return netip.PrefixFrom(a, 32)
	}
	p, _ := a.WithZone("").Prefix(64)
	return p
}

// refill brings b up to now. Lock held.
func (l *failureLimiter) refill(b *bucket, now time.Time) {
	b.tokens = min(l.burst, b.tokens+now.Sub(b.at).Seconds()*l.rate)
	b.at = now
}

// allow reports whether a login from host may be tried.
func (l *failureLimiter) allow(host string) bool {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.m[addressKey(host)]
	if b == nil {
		return true
	}
	l.refill(b, now)
	return b.tokens >= 1
}

// failed records a failed login from host.
func (l *failureLimiter) failed(host string) {
	now := l.clock.Now()
	k := addressKey(host)
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.m[k]
	if b == nil {
		if len(l.m) >= l.size {
			l.evict(now)
		}
		b = &bucket{tokens: l.burst, at: now}
		l.m[k] = b
	}
	l.refill(b, now)
	b.tokens = max(0, b.tokens-1)
}

// evict makes room: it drops full buckets, and if that is not enough an
// eighth of the table, arbitrary ones (so a table kept full costs one sweep
// per size/8 new addresses). Lock held.
func (l *failureLimiter) evict(now time.Time) {
	for k, b := range l.m {
		if l.refill(b, now); b.tokens >= l.burst {
			delete(l.m, k)
		}
	}
	for k := range l.m {
		if len(l.m) < l.size-l.size/8 {
			return
		}
		delete(l.m, k)
	}
}

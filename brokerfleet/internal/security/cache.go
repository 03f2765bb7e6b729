package security

// A short-lived cache of credential lookups, so that each SCRAM or PLAIN
// login does not cost a metastore read. It keeps answers for
// credentialTTL, found and not found alike (a cached "not found" makes an
// unknown user's login as fast as a known one's; a user created meanwhile
// is seen once the broker invalidates the cache, which it does on every
// metadata change). Store errors are not kept. Re-authentication reads
// past the cache, so a credential removed without a metadata change still
// ends its sessions at their next re-authentication (a re-authentication
// takes a cached answer only if it is under reauthCredentialAge old, so a
// client re-authenticating in a loop costs at most one read a second).

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/stratamq/strata/pkg/clock"
	"github.com/stratamq/strata/pkg/metastore"
)

// Cache limits.
const (
	// credentialTTL is how long a looked-up credential is used.
	credentialTTL = 5 * time.Second
	// credentialCacheSize bounds the cached lookups.
	credentialCacheSize = 10000
	// reauthCredentialAge is the oldest cached answer a re-authentication
	// takes.
	reauthCredentialAge = time.Second
)

type credKey struct{ user, mech string }

type credEntry struct {
	cred  metastore.ScramCredential
	found bool
	at    time.Time
}

// credentialCache caches Credentials.ScramCredential.
type credentialCache struct {
	src   Credentials
	clock clock.Clock
	ttl   time.Duration
	size  int

	mu  sync.Mutex
	gen uint64 // moved by invalidate
	m   map[credKey]credEntry
}

func newCredentialCache(src Credentials, c clock.Clock) *credentialCache {
	return &credentialCache{src: src, clock: clock.Or(c), ttl: credentialTTL, size: credentialCacheSize, m: map[credKey]credEntry{}}
}

// get returns user's credential for mech (metastore.ErrNotFound when
// there is none), from the cache when it is younger than maxAge (and the
// TTL).
func (c *credentialCache) get(ctx context.Context, user, mech string, maxAge time.Duration) (metastore.ScramCredential, error) {
	k := credKey{user, mech}
	now := c.clock.Now()
	c.mu.Lock()
	gen := c.gen
	e, ok := c.m[k]
	c.mu.Unlock()
	if ok && now.Sub(e.at) < min(maxAge, c.ttl) {
		if !e.found {
			return metastore.ScramCredential{}, metastore.ErrNotFound
		}
		return e.cred, nil
	}
	cred, err := c.src.ScramCredential(ctx, user, mech)
	found := err == nil
	if err != nil && !errors.Is(err, metastore.ErrNotFound) {
		return cred, err
	}
	c.mu.Lock()
	if c.gen == gen { // not invalidated while reading: the answer is current
		if _, ok := c.m[k]; !ok && len(c.m) >= c.size {
			c.evict(now)
		}
		c.m[k] = credEntry{cred: cred, found: found, at: now}
	}
	c.mu.Unlock()
	if !found {
		return metastore.ScramCredential{}, metastore.ErrNotFound
	}
	return cred, nil
}

// evict makes room: it drops expired entries, and if that is not enough
// an eighth of the cache, arbitrary ones. Lock held.
func (c *credentialCache) evict(now time.Time) {
	for k, e := range c.m {
		if now.Sub(e.at) >= c.ttl {
			delete(c.m, k)
		}
	}
	for k := range c.m {
		if len(c.m) < c.size-c.size/8 {
			return
		}
		delete(c.m, k)
	}
}

// invalidate forgets every cached answer.
func (c *credentialCache) invalidate() {
	c.mu.Lock()
	c.gen++
	clear(c.m)
	c.mu.Unlock()
}

// generation returns the current generation.
func (c *credentialCache) generation() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

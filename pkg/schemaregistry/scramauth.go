package schemaregistry

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/stratamq/strata/pkg/metastore"
)

// Credentials looks up a user's stored SCRAM credential, or returns an
// error wrapping metastore.ErrNotFound; *metastore.Meta is one.
type Credentials interface {
	ScramCredential(ctx context.Context, user, mechanism string) (metastore.ScramCredential, error)
}

// Defaults of ScramOptions.
const (
	DefaultAuthCacheTTL  = 30 * time.Second
	DefaultAuthCacheSize = 4096
	// maxChecks bounds the password checks (PBKDF2 with thousands of
	// iterations each) running at once; more wait for their turn, so a
	// flood of bad passwords cannot take every core.
	maxChecks = 4
)

// ScramOptions configure a ScramAuthenticator. The zero value is valid.
type ScramOptions struct {
	// CacheTTL is how long a successful check is remembered (0 means
	// DefaultAuthCacheTTL, negative disables the cache). A user whose
	// credentials are changed or deleted keeps working for at most this
	// long with the old password.
	CacheTTL time.Duration
	// CacheSize bounds the remembered checks (0 means
	// DefaultAuthCacheSize).
	CacheSize int
	// Now is the clock (nil means time.Now).
	Now func() time.Time
}

// ScramAuthenticator checks HTTP basic credentials against the SCRAM
// credentials Kafka clients authenticate with (SCRAM-SHA-512, then
// SCRAM-SHA-256), as the broker checks SASL/PLAIN: the same users, the
// same passwords. Successful checks are remembered for CacheTTL under an
// HMAC of the user name and password with a key drawn at start (the
// password itself is never kept), so a busy client costs one PBKDF2 and
// one metastore read per TTL instead of per request. Failures are never
// remembered; an unknown user costs a check against a made-up credential,
// like a wrong password. It is safe for concurrent use.
type ScramAuthenticator struct {
	creds Credentials
	ttl   time.Duration
	size  int
	now   func() time.Time
	key   [32]byte
	fake  metastore.ScramCredential // checked for unknown users
	sem   chan struct{}

	mu sync.Mutex
	ok map[[sha256.Size]byte]time.Time // HMAC(user, password) -> expiry
}

var _ Authenticator = (*ScramAuthenticator)(nil)

// NewScramAuthenticator checks passwords against creds.
func NewScramAuthenticator(creds Credentials, opts ScramOptions) *ScramAuthenticator {
	a := &ScramAuthenticator{creds: creds, ttl: opts.CacheTTL, size: opts.CacheSize, now: opts.Now,
		sem: make(chan struct{}, maxChecks), ok: map[[sha256.Size]byte]time.Time{}}
	if a.ttl == 0 {
		a.ttl = DefaultAuthCacheTTL
	}
	if a.size <= 0 {
		a.size = DefaultAuthCacheSize
	}
	if a.now == nil {
		a.now = time.Now
	}
	_, _ = rand.Read(a.key[:])
	var pass [16]byte
	_, _ = rand.Read(pass[:])
	// The iteration count of `brokerfleet users set` and -sasl-admin.
	a.fake, _ = metastore.NewScramCredential("unknown", metastore.ScramSHA512, string(pass[:]), 8192)
	return a
}

// Authenticate implements Authenticator.
func (a *ScramAuthenticator) Authenticate(ctx context.Context, user, password string) error {
	key := a.cacheKey(user, password)
	if a.cached(key) {
		return nil
	}
	select {
	case a.sem <- struct{}{}:
		defer func() { <-a.sem }()
	case <-ctx.Done():
		return fmt.Errorf("schemaregistry: authenticate %s: %w", user, ctx.Err())
	}
	known := false
	for _, mech := range []string{metastore.ScramSHA512, metastore.ScramSHA256} {
		c, err := a.creds.ScramCredential(ctx, user, mech)
		if errors.Is(err, metastore.ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("schemaregistry: authenticate %s: %w", user, err)
		}
		known = true
		if c.CheckPassword(password) {
			a.remember(key)
			return nil
		}
	}
	if !known {
		a.fake.CheckPassword(password) // as long as a wrong password takes
	}
	return fmt.Errorf("user %q: %w", user, ErrBadCredentials)
}

func (a *ScramAuthenticator) cacheKey(user, password string) [sha256.Size]byte {
	m := hmac.New(sha256.New, a.key[:])
	m.Write([]byte(user))
	m.Write([]byte{0})
	m.Write([]byte(password))
	var k [sha256.Size]byte
	m.Sum(k[:0])
	return k
}

func (a *ScramAuthenticator) cached(key [sha256.Size]byte) bool {
	if a.ttl < 0 {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	exp, ok := a.ok[key]
	if ok && a.now().Before(exp) {
		return true
	}
	delete(a.ok, key)
	return false
}

func (a *ScramAuthenticator) remember(key [sha256.Size]byte) {
	if a.ttl < 0 {
		return
	}
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.ok) >= a.size {
		for k, exp := range a.ok {
			if !now.Before(exp) {
				delete(a.ok, k)
			}
		}
		for k := range a.ok { // still full: forget any one
			if len(a.ok) < a.size {
				break
			}
			delete(a.ok, k)
		}
	}
	a.ok[key] = now.Add(a.ttl)
}

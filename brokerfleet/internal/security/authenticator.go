package security

// The broker-wide side of SASL: what every connection's Session checks
// logins against (the credential cache over the store, and the fake
// credentials of unknown users), the limit on failed logins per address,
// and the table of authenticated sessions by user, so that a user whose
// credential is deleted loses its sessions.

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/stratamq/strata/pkg/clock"
	"github.com/stratamq/strata/pkg/metastore"
)

// AuthOptions configure an Authenticator.
type AuthOptions struct {
	// Credentials is where credentials are stored (*metastore.Meta).
	Credentials Credentials
	// FakeKey keys the fake credentials of unknown users: brokers with the
	// same key answer an unknown name alike. Empty means a random key.
	FakeKey []byte
	// FailureLimit is how many failed logins an address may have in a
	// burst, and per minute after it; 0 means DefaultAuthFailureLimit.
	FailureLimit int
	// Clock times the cache and the limiter; nil means the real clock.
	Clock clock.Clock
}

// Authenticator is shared by a broker's sessions; its methods are safe
// for concurrent use.
type Authenticator struct {
	src     Credentials
	creds   *credentialCache
	fakes   fakes
	limiter *failureLimiter

	mu     sync.Mutex
	byUser map[string]map[*Session]string // authenticated sessions, with their mechanism
}

// NewAuthenticator returns an Authenticator over o.Credentials.
func NewAuthenticator(o AuthOptions) *Authenticator {
	return &Authenticator{
		src: o.Credentials, creds: newCredentialCache(o.Credentials, o.Clock), fakes: newFakes(o.FakeKey),
		limiter: newFailureLimiter(o.FailureLimit, o.Clock), byUser: map[string]map[*Session]string{},
	}
}

// listAllAbove is how many users with sessions make CredentialsChanged
// list every credential rather than read each user's.
const listAllAbove = 32

// recheckTimeout bounds Track's second look at a credential.
const recheckTimeout = 10 * time.Second

// Track records an authenticated session under its user until ctx (the
// connection's) ends, so that CredentialsChanged can end it. When
// credentials changed while the login ran, the user's credential is read
// again at once, so that a deletion the login raced is not missed. It
// does nothing for a session without a SASL user or already tracked, and
// must be called from the session's goroutine.
func (a *Authenticator) Track(ctx context.Context, s *Session) {
	if s.tracked || s.user == "" {
		return
	}
	s.tracked = true
	user, mech := s.user, s.authMech
	a.mu.Lock()
	if a.byUser[user] == nil {
		a.byUser[user] = map[*Session]string{}
	}
	a.byUser[user][s] = mech
	a.mu.Unlock()
	context.AfterFunc(ctx, func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		delete(a.byUser[user], s)
		if len(a.byUser[user]) == 0 {
			delete(a.byUser, user)
		}
	})
	if a.creds.generation() == s.credGen {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, recheckTimeout)
	defer cancel()
	if creds, err := a.src.ScramCredentials(rctx, user); err == nil && !holds(creds, user, mech) {
		s.Revoke()
	}
}

// holds reports whether creds let user log in with mech (PLAIN: with any
// credential).
func holds(creds []metastore.ScramCredential, user, mech string) bool {
	return slices.ContainsFunc(creds, func(c metastore.ScramCredential) bool {
		return c.User == user && (mech == MechPlain || c.Mechanism == mech)
	})
}

// CredentialsChanged forgets every cached credential and ends the
// sessions whose user no longer has the credential it logged in with (for
// PLAIN: any credential): their next request closes the connection. It
// reads the credentials of the users with sessions (all credentials when
// there are many such users) and returns how many sessions it ended. The
// broker calls it on every metadata change and after
// AlterUserScramCredentials.
func (a *Authenticator) CredentialsChanged(ctx context.Context) (int, error) {
	a.creds.invalidate()
	a.mu.Lock()
	users := slices.Collect(maps.Keys(a.byUser))
	a.mu.Unlock()
	if len(users) == 0 {
		return 0, nil
	}
	var creds []metastore.ScramCredential
	if len(users) > listAllAbove {
		var err error
		if creds, err = a.src.ScramCredentials(ctx, ""); err != nil {
			return 0, err
		}
	} else {
		for _, u := range users {
			cs, err := a.src.ScramCredentials(ctx, u)
			if err != nil {
				return 0, err
			}
			creds = append(creds, cs...)
		}
	}
	byUser := map[string][]metastore.ScramCredential{}
	for _, c := range creds {
		byUser[c.User] = append(byUser[c.User], c)
	}
	ended := 0
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, u := range users {
		for s, mech := range a.byUser[u] {
			if !s.revoked.Load() && !holds(byUser[u], u, mech) {
				s.Revoke()
				ended++
			}
		}
	}
	return ended, nil
}

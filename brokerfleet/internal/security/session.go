package security

// Per-connection authentication: TLS (with the certificate subject as the
// principal under mutual TLS) and SASL PLAIN and SCRAM-SHA-256/512 through
// SaslHandshake v0-1 and SaslAuthenticate v0-2 (KIP-43, KIP-84, KIP-152).
// Until a SASL listener's client authenticated, only ApiVersions,
// SaslHandshake and SaslAuthenticate are served (the broker's front end
// enforces that), frames are capped at PreAuthFrame bytes, and the
// connection is cut after AuthTimeout.
//
// Re-authentication (KIP-368): with Config.MaxReauth set, a login is good
// for that long (SaslAuthenticate v1+ tells the client so); a client
// re-authenticates on the same connection with SaslHandshake v1 and
// SaslAuthenticate, as the same user with the same mechanism, its other
// requests still served meanwhile. Once the lifetime has passed, any
// request but the SaslAuthenticate of a re-authentication begun in time
// closes the connection, as in Kafka (clients that cannot re-authenticate,
// SaslHandshake v0 or SaslAuthenticate v0, are disconnected then). A
// session whose user lost its credential (Authenticator.CredentialsChanged)
// ends the same way, at once.

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/stratamq/strata/pkg/metastore"
)

// Session limits.
const (
	// PreAuthFrame caps request frames before a SASL listener's client has
	// authenticated.
	PreAuthFrame = 64 << 10
	// TLSHandshakeTimeout bounds a TLS handshake.
	TLSHandshakeTimeout = 10 * time.Second
	// AuthTimeout bounds TLS and SASL together on a SASL listener.
	AuthTimeout = 30 * time.Second
)

// Credentials reads stored SCRAM credentials; *metastore.Meta is one.
type Credentials interface {
	// ScramCredential returns a user's credential for a mechanism, or
	// metastore.ErrNotFound.
	ScramCredential(ctx context.Context, user, mechanism string) (metastore.ScramCredential, error)
	// ScramCredentials lists the credentials of user, or of every user
	// when user is empty.
	ScramCredentials(ctx context.Context, user string) ([]metastore.ScramCredential, error)
}

// Session is one connection's listener and authentication state. It is
// touched only by the connection's reader goroutine, except done and
// revoked.
type Session struct {
	listener  *Listener
	principal string // "User:name"; AnonymousUser until authenticated
	host      string // the client's IP, for ACL host matching
	authed    bool   // SASL done (at least once), or not required
	done      atomic.Bool
	mech      string // chosen by SaslHandshake for the conversation under way
	rawTokens bool   // SaslHandshake v0: the next frames are bare SASL tokens
	scram     *scramServer

	user      string        // the SASL user, once authenticated
	authMech  string        // the mechanism the user authenticated with
	maxReauth time.Duration // Config.MaxReauth
	now       func() time.Time
	expires   time.Time // when the login ends unless renewed; zero: never
	reauth    bool      // the conversation under way re-authenticates
	credGen   uint64    // the credential cache generation the conversation read
	tracked   bool      // in its Authenticator's table
	revoked   atomic.Bool
}

// Accept starts a session for a connection accepted on one of the
// configured listeners (its default listener unless ln came from Named),
// wrapping nc in TLS when the listener asks for it.
func (s *Config) Accept(nc net.Conn) (net.Conn, *Session) {
	sess := &Session{principal: AnonymousUser, maxReauth: s.MaxReauth, now: time.Now}
	if lc, ok := nc.(listenerConn); ok {
		sess.listener = lc.l
	} else {
		l := s.Default()
		sess.listener = &l
	}
	if host, _, err := net.SplitHostPort(nc.RemoteAddr().String()); err == nil {
		sess.host = host
	}
	sess.authed = len(sess.listener.SASLMechanisms) == 0
	sess.done.Store(sess.authed)
	if sess.listener.TLS != nil {
		nc = tls.Server(nc, sess.listener.TLS)
	}
	return nc, sess
}

// Start completes the TLS handshake, taking the principal from a verified
// client certificate, and arms the authentication timeout of a SASL
// listener (cancelled with ctx). It reports false when the connection
// must close.
func (s *Session) Start(ctx context.Context, nc net.Conn, log *slog.Logger) bool {
	if !s.authed {
		// A client that has not authenticated within AuthTimeout is cut
		// off, so idle unauthenticated connections cannot pile up.
		t := time.AfterFunc(AuthTimeout, func() {
			if !s.done.Load() {
				nc.Close()
			}
		})
		context.AfterFunc(ctx, func() { t.Stop() })
	}
	tc, ok := nc.(*tls.Conn)
	if !ok {
		return true
	}
	hctx, cancel := context.WithTimeout(ctx, TLSHandshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		log.Debug("tls handshake failed", "remote", nc.RemoteAddr().String(), "err", err)
		return false
	}
	if st := tc.ConnectionState(); len(st.VerifiedChains) > 0 && len(st.PeerCertificates) > 0 {
		s.principal = "User:" + st.PeerCertificates[0].Subject.String()
	}
	return true
}

// Listener returns the listener the connection came in on.
func (s *Session) Listener() *Listener { return s.listener }

// Principal returns the connection's principal ("User:name"), or
// AnonymousUser for a nil session (security off).
func (s *Session) Principal() string {
	if s == nil {
		return AnonymousUser
	}
	return s.principal
}

// Host returns the client's IP address ("" for a nil session).
func (s *Session) Host() string {
	if s == nil {
		return ""
	}
	return s.host
}

// Authenticated reports whether requests other than ApiVersions and SASL
// may be served (always, for a nil session): the client authenticated
// and its login has neither expired nor been revoked.
func (s *Session) Authenticated() bool {
	return s == nil || (s.authed && !s.revoked.Load() && !s.expired())
}

// expired reports whether the login's lifetime has passed.
func (s *Session) expired() bool { return !s.expires.IsZero() && !s.now().Before(s.expires) }

// Ended reports whether the connection must close at its next request,
// whatever it is: the login was revoked, or its lifetime passed and no
// re-authentication began before that.
func (s *Session) Ended() bool {
	return s != nil && s.authed && (s.revoked.Load() || (s.expired() && !s.reauth))
}

// Revoke ends the session: its next request closes the connection. Safe
// from any goroutine.
func (s *Session) Revoke() { s.revoked.Store(true) }

// Lifetime is how long a login now completed is good for, for
// SaslAuthenticate's SessionLifetimeMs; 0 means it does not expire.
func (s *Session) Lifetime() time.Duration { return s.maxReauth }

// RawTokens reports whether the next frame is a bare SASL token (after
// SaslHandshake v0).
func (s *Session) RawTokens() bool { return s != nil && s.rawTokens }

// Mechanism returns the mechanism chosen by SaslHandshake.
func (s *Session) Mechanism() string { return s.mech }

// FrameLimit is the request size cap for the connection's next frame.
func (s *Session) FrameLimit(limit int32) int32 {
	if s != nil && !s.authed {
		return min(limit, PreAuthFrame)
	}
	return limit
}

// Handshake picks the mechanism the following SaslAuthenticate requests
// (or, for version 0, bare tokens) use; on an authenticated session it
// begins a re-authentication, which needs version 1. It returns the Kafka
// error code to answer with; any code but 0 closes the connection.
func (s *Session) Handshake(mech string, version int16) int16 {
	switch {
	case len(s.listener.SASLMechanisms) == 0 || s.mech != "":
		return kerr.IllegalSaslState.Code
	case s.authed && (version == 0 || s.user == ""):
		return kerr.IllegalSaslState.Code // re-authentication is SaslAuthenticate only
	case !slices.Contains(s.listener.SASLMechanisms, mech):
		return kerr.UnsupportedSaslMechanism.Code
	}
	s.mech, s.rawTokens, s.reauth = mech, version == 0, s.authed
	return 0
}

// Mechanisms lists the listener's mechanisms, for SaslHandshake answers.
func (s *Session) Mechanisms() []string { return s.listener.SASLMechanisms }

// Errors of Step besides ErrBadCredentials.
var (
	// ErrIllegalState is returned by Step without a successful Handshake.
	ErrIllegalState = errors.New("sasl: authenticate without a handshake")
	// ErrTooManyFailures is returned by Step while the client's address
	// has had too many failed logins.
	ErrTooManyFailures = errors.New("sasl: too many failed logins from this address")
	// ErrReauthChange is returned by Step when a re-authentication names
	// another user or mechanism than the login it renews.
	ErrReauthChange = errors.New("sasl: re-authentication may not change the user or the mechanism")
)

var (
	errBadPlain        = errors.New("malformed PLAIN message")
	errCredentialStore = errors.New("read credentials")
)

// Step runs one step of the chosen mechanism against a's credentials:
// the bytes to send back and whether authentication is now complete (the
// principal is then the user). Any error fails the authentication; a
// failure other than the credential store's counts against the client's
// address.
func (s *Session) Step(ctx context.Context, a *Authenticator, in []byte) (out []byte, done bool, err error) {
	if s.mech == "" {
		return nil, false, ErrIllegalState
	}
	if !a.limiter.allow(s.host) {
		return nil, false, ErrTooManyFailures
	}
	if s.scram == nil { // a conversation begins (PLAIN has one step)
		s.credGen = a.creds.generation()
	}
	var user string
	if s.reauth && s.mech != s.authMech {
		err = fmt.Errorf("%w: %s renewing a %s login", ErrReauthChange, s.mech, s.authMech)
	} else if user, out, done, err = s.step(ctx, a, in); err == nil && done && s.reauth && user != s.user {
		err = fmt.Errorf("%w: %q renewing %q's login", ErrReauthChange, user, s.user)
	}
	if err != nil {
		if !errors.Is(err, errCredentialStore) {
			a.limiter.failed(s.host)
		}
		return nil, false, err
	}
	if !done {
		return out, false, nil
	}
	s.authed, s.user, s.principal, s.authMech = true, user, "User:"+user, s.mech
	s.mech, s.scram, s.rawTokens, s.reauth = "", nil, false, false
	if s.maxReauth > 0 {
		s.expires = s.now().Add(s.maxReauth)
	}
	s.done.Store(true)
	return out, true, nil
}

func (s *Session) step(ctx context.Context, a *Authenticator, in []byte) (user string, out []byte, done bool, err error) {
	// A re-authentication (nearly) reads past the cache: a credential
	// removed anywhere ends the session by its next renewal.
	maxAge := credentialTTL
	if s.reauth {
		maxAge = reauthCredentialAge
	}
	lookup := func(user, mech string) (metastore.ScramCredential, error) {
		c, err := a.creds.get(ctx, user, mech, maxAge)
		if err != nil && !errors.Is(err, metastore.ErrNotFound) {
			err = fmt.Errorf("%w: %w", errCredentialStore, err)
		}
		return c, err
	}
	switch s.mech {
	case MechPlain:
		// authzid NUL authcid NUL passwd (RFC 4616).
		parts := bytes.Split(in, []byte{0})
		if len(parts) != 3 || len(parts[1]) == 0 {
			return "", nil, false, errBadPlain
		}
		user, pass := string(parts[1]), string(parts[2])
		if len(parts[0]) > 0 && string(parts[0]) != user {
			return "", nil, false, fmt.Errorf("user %q may not act as %q", user, parts[0])
		}
		// A missing credential is checked as a fake one, so that an unknown
		// user costs the same PBKDF2 work as a wrong password.
		known := false
		for _, mech := range []string{MechSCRAM512, MechSCRAM256} {
			c, err := lookup(user, mech)
			unknown := errors.Is(err, metastore.ErrNotFound)
			switch {
			case unknown:
				c = a.fakes.credential(user, mech)
			case err != nil:
				return "", nil, false, err
			}
			if c.CheckPassword(pass) && !unknown {
				return user, nil, true, nil
			}
			known = known || !unknown
		}
		return "", nil, false, badCredentials(user, !known)
	case MechSCRAM256, MechSCRAM512:
		if s.scram == nil {
			// The lookup runs in the first step, within this call's ctx.
			mech := s.mech
			s.scram = &scramServer{mech: mech, fake: a.fakes.credential, lookup: func(user string) (metastore.ScramCredential, error) {
				return lookup(user, mech)
			}}
		}
		out, done, err := s.scram.next(string(in))
		if err != nil {
			return "", nil, false, err
		}
		if done {
			return s.scram.user, []byte(out), true, nil
		}
		return "", []byte(out), false, nil
	}
	return "", nil, false, fmt.Errorf("mechanism %q not served", s.mech)
}

package security

// Per-connection authentication: TLS (with the certificate subject as the
// principal under mutual TLS) and SASL PLAIN and SCRAM-SHA-256/512 through
// SaslHandshake v0-1 and SaslAuthenticate v0-2 (KIP-43, KIP-84, KIP-152).
// Until a SASL listener's client authenticated, only ApiVersions,
// SaslHandshake and SaslAuthenticate are served (the broker's front end
// enforces that), frames are capped at PreAuthFrame bytes, and the
// connection is cut after AuthTimeout.

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

// Credentials looks up a user's stored SCRAM credential; *metastore.Meta
// is one.
type Credentials interface {
	ScramCredential(ctx context.Context, user, mechanism string) (metastore.ScramCredential, error)
}

// Session is one connection's listener and authentication state. It is
// touched only by the connection's reader goroutine, except Done.
type Session struct {
	listener  *Listener
	principal string // "User:name"; AnonymousUser until authenticated
	host      string // the client's IP, for ACL host matching
	authed    bool   // SASL done, or not required
	done      atomic.Bool
	mech      string // chosen by SaslHandshake
	rawTokens bool   // SaslHandshake v0: the next frames are bare SASL tokens
	scram     *scramServer
}

// Accept starts a session for a connection accepted on one of the
// configured listeners (its default listener unless ln came from Named),
// wrapping nc in TLS when the listener asks for it.
func (s *Config) Accept(nc net.Conn) (net.Conn, *Session) {
	sess := &Session{principal: AnonymousUser}
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
// may be served (always, for a nil session).
func (s *Session) Authenticated() bool { return s == nil || s.authed }

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
// (or, for version 0, bare tokens) use. It returns the Kafka error code to
// answer with; any code but 0 closes the connection.
func (s *Session) Handshake(mech string, version int16) int16 {
	switch {
	case len(s.listener.SASLMechanisms) == 0 || s.authed || s.mech != "":
		return kerr.IllegalSaslState.Code
	case !slices.Contains(s.listener.SASLMechanisms, mech):
		return kerr.UnsupportedSaslMechanism.Code
	}
	s.mech, s.rawTokens = mech, version == 0
	return 0
}

// Mechanisms lists the listener's mechanisms, for SaslHandshake answers.
func (s *Session) Mechanisms() []string { return s.listener.SASLMechanisms }

// ErrIllegalState is returned by Step without a successful Handshake, or
// after authentication completed.
var ErrIllegalState = errors.New("sasl: authenticate without a handshake")

var errBadPlain = errors.New("malformed PLAIN message")

// Step runs one step of the chosen mechanism: the bytes to send back and
// whether authentication is now complete (the principal is then the
// user). Any error fails the authentication.
func (s *Session) Step(ctx context.Context, creds Credentials, in []byte) (out []byte, done bool, err error) {
	if s.mech == "" || s.authed {
		return nil, false, ErrIllegalState
	}
	user, out, done, err := s.step(ctx, creds, in)
	if err != nil || !done {
		return out, false, err
	}
	s.authed, s.principal, s.scram, s.rawTokens = true, "User:"+user, nil, false
	s.done.Store(true)
	return out, true, nil
}

func (s *Session) step(ctx context.Context, creds Credentials, in []byte) (user string, out []byte, done bool, err error) {
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
		for _, mech := range []string{MechSCRAM512, MechSCRAM256} {
			c, err := creds.ScramCredential(ctx, user, mech)
			if err == nil && c.CheckPassword(pass) {
				return user, nil, true, nil
			}
			if err != nil && !errors.Is(err, metastore.ErrNotFound) {
				return "", nil, false, err
			}
		}
		return "", nil, false, fmt.Errorf("user %q: bad password or no credential", user)
	case MechSCRAM256, MechSCRAM512:
		if s.scram == nil {
			// The lookup runs in the first step, within this call's ctx.
			mech := s.mech
			s.scram = &scramServer{mech: mech, lookup: func(user string) (metastore.ScramCredential, error) {
				return creds.ScramCredential(ctx, user, mech)
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

package broker

// Per-connection authentication: TLS (with the certificate subject as the
// principal under mutual TLS) and SASL PLAIN and SCRAM-SHA-256/512
// through SaslHandshake v0-1 and SaslAuthenticate v0-2 (KIP-43, KIP-84,
// KIP-152). Until a SASL listener's client authenticated, only ApiVersions,
// SaslHandshake and SaslAuthenticate are served, frames are capped at
// preAuthFrame bytes, and anything else closes the connection.

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/stratamq/strata/brokerfleet/internal/wire"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/xdg-go/scram"

	"github.com/stratamq/strata/pkg/metastore"
)

// connSecurity is one connection's listener and authentication state,
// touched only by the connection's reader goroutine.
type connSecurity struct {
	l         *Listener
	principal string      // "User:name"; anonymousUser until authenticated
	host      string      // the client's IP, for ACL host matching
	authed    bool        // SASL done, or not required
	authDone  atomic.Bool // authed, for the authentication timer
	mech      string      // chosen by SaslHandshake
	rawTokens bool        // SaslHandshake v0: the next frames are bare SASL tokens
	scram     *scramServer
}

// secureConn wraps nc in TLS when its listener asks for it.
func (b *Broker) secureConn(nc net.Conn) (net.Conn, *connSecurity) {
	sec := &connSecurity{principal: anonymousUser, authed: true}
	if lc, ok := nc.(listenerConn); ok {
		sec.l = lc.l
	} else {
		l := b.cfg.Security.defaultListener()
		sec.l = &l
	}
	if host, _, err := net.SplitHostPort(nc.RemoteAddr().String()); err == nil {
		sec.host = host
	}
	sec.authed = len(sec.l.SASLMechanisms) == 0
	if sec.l.TLS != nil {
		nc = tls.Server(nc, sec.l.TLS)
	}
	return nc, sec
}

// startSecurity completes the TLS handshake, taking the principal from a
// verified client certificate. It reports false when the connection must
// close.
func (b *Broker) startSecurity(nc net.Conn, cc *clientConn) bool {
	if cc.sec == nil {
		return true
	}
	if !cc.sec.authed {
		// A client that has not authenticated within authTimeout is cut
		// off, so idle unauthenticated connections cannot pile up.
		sec := cc.sec
		t := time.AfterFunc(authTimeout, func() {
			if !sec.authDone.Load() {
				nc.Close()
			}
		})
		context.AfterFunc(cc.ctx, func() { t.Stop() })
	}
	tc, ok := nc.(*tls.Conn)
	if !ok {
		return true
	}
	ctx, cancel := context.WithTimeout(cc.ctx, tlsHandshake)
	defer cancel()
	if err := tc.HandshakeContext(ctx); err != nil {
		b.log.Debug("tls handshake failed", "remote", cc.remote, "err", err)
		return false
	}
	if st := tc.ConnectionState(); len(st.VerifiedChains) > 0 && len(st.PeerCertificates) > 0 {
		cc.sec.principal = "User:" + st.PeerCertificates[0].Subject.String()
	}
	return true
}

// frameLimit is the request size cap for the connection's next frame.
func (cc *clientConn) frameLimit(limit int32) int32 {
	if cc.sec != nil && !cc.sec.authed {
		return min(limit, preAuthFrame)
	}
	return limit
}

// principal returns the connection's principal ("User:name").
func (cc *clientConn) principal() string {
	if cc.sec == nil {
		return anonymousUser
	}
	return cc.sec.principal
}

// closeSilently makes p close the connection without answering.
func closeSilently(p *pending) {
	p.resp, p.wait, p.raw, p.last = nil, nil, []byte{}, true
}

// dispatchSecured is dispatch behind authentication and authorization.
func (b *Broker) dispatchSecured(cc *clientConn, req kmsg.Request, p *pending) bool {
	if cc.sec == nil {
		return b.dispatch(cc, req, p)
	}
	switch r := req.(type) {
	case *kmsg.SASLHandshakeRequest:
		p.resp = b.handleSASLHandshake(cc, r, p)
		return true
	case *kmsg.SASLAuthenticateRequest:
		p.resp = b.handleSASLAuthenticate(cc, r, p)
		return true
	case *kmsg.ApiVersionsRequest:
		return b.dispatch(cc, req, p)
	}
	if !cc.sec.authed {
		b.log.Debug("closing unauthenticated connection", "remote", cc.remote, "request", kmsg.NameForKey(req.Key()))
		closeSilently(p)
		return true
	}
	var answered bool
	if b.authz == nil {
		answered = b.dispatch(cc, req, p)
	} else {
		answered = b.dispatchAuthorized(cc, req, p)
	}
	if answered && cc.sec.l.Name != b.cfg.Security.defaultListener().Name {
		b.rewriteEndpoints(cc.sec.l.Name, p)
	}
	return answered
}

// handleSASLHandshake serves SaslHandshake v0-1: it picks the mechanism the
// following SaslAuthenticate requests use.
func (b *Broker) handleSASLHandshake(cc *clientConn, req *kmsg.SASLHandshakeRequest, p *pending) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.SupportedMechanisms = cc.sec.l.SASLMechanisms
	switch {
	case len(cc.sec.l.SASLMechanisms) == 0 || cc.sec.authed || cc.sec.mech != "":
		resp.ErrorCode = kerr.IllegalSaslState.Code
		p.last = true
	case !containsMech(cc.sec.l.SASLMechanisms, req.Mechanism):
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		p.last = true
	default:
		cc.sec.mech = req.Mechanism
		cc.sec.rawTokens = req.Version == 0
	}
	return resp
}

// rawSASLToken answers a bare SASL token (after SaslHandshake v0, KIP-43)
// with a bare token; a failure closes the connection after the delay.
func (b *Broker) rawSASLToken(cc *clientConn, token []byte, start time.Time) pending {
	p := pending{key: 36, start: start}
	user, out, done, err := b.saslStep(cc.sec, token)
	if err != nil {
		b.log.Info("sasl authentication failed", "remote", cc.remote, "mechanism", cc.sec.mech, "err", err)
		closeSilently(&p)
		p.wait = b.authFailureWait(cc.ctx, nil)
		return p
	}
	p.raw = binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(out)), uint32(len(out)))
	p.raw = append(p.raw, out...)
	if done {
		cc.sec.authed, cc.sec.principal, cc.sec.scram, cc.sec.rawTokens = true, "User:"+user, nil, false
		cc.sec.authDone.Store(true)
	}
	return p
}

// authFailureWait returns a pending.wait that holds a failed
// authentication's answer for Security.AuthFailureDelay.
func (b *Broker) authFailureWait(ctx context.Context, resp kmsg.Response) func() kmsg.Response {
	delay := b.cfg.Security.AuthFailureDelay
	if delay == 0 {
		delay = time.Second
	}
	return func() kmsg.Response {
		t := time.NewTimer(delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		return resp
	}
}

// handleSASLAuthenticate runs one step of the chosen mechanism. A failure
// is answered after Security.AuthFailureDelay, then the connection closes.
func (b *Broker) handleSASLAuthenticate(cc *clientConn, req *kmsg.SASLAuthenticateRequest, p *pending) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	sec := cc.sec
	if sec.mech == "" || sec.authed {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		resp.ErrorMessage = kmsg.StringPtr("SaslAuthenticate without a SaslHandshake")
		p.last = true
		return resp
	}
	user, out, done, err := b.saslStep(sec, req.SASLAuthBytes)
	if err != nil {
		b.log.Info("sasl authentication failed", "remote", cc.remote, "mechanism", sec.mech, "err", err)
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		resp.ErrorMessage = kmsg.StringPtr("Authentication failed: invalid username or password")
		p.wait = b.authFailureWait(cc.ctx, resp)
		p.last = true
		return nil
	}
	resp.SASLAuthBytes = out
	if done {
		sec.authed, sec.principal, sec.scram = true, "User:"+user, nil
		sec.authDone.Store(true)
	}
	return resp
}

var errBadPlain = errors.New("malformed PLAIN message")

// saslStep runs one step: the user once authenticated, the bytes to send
// back, and whether authentication is complete.
func (b *Broker) saslStep(sec *connSecurity, in []byte) (user string, out []byte, done bool, err error) {
	ctx, cancel := context.WithTimeout(b.ctx, metaTimeout)
	defer cancel()
	switch sec.mech {
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
			c, err := b.meta.ScramCredential(ctx, user, mech)
			if err == nil && c.CheckPassword(pass) {
				return user, nil, true, nil
			}
			if err != nil && !errors.Is(err, metastore.ErrNotFound) {
				return "", nil, false, err
			}
		}
		return "", nil, false, fmt.Errorf("user %q: bad password or no credential", user)
	case MechSCRAM256, MechSCRAM512:
		if sec.scram == nil {
			// The lookup runs in the first step, within this call's ctx.
			mech := sec.mech
			sec.scram = &scramServer{mech: mech, lookup: func(user string) (metastore.ScramCredential, error) {
				return b.meta.ScramCredential(ctx, user, mech)
			}}
		}
		out, done, err := sec.scram.next(string(in))
		if err != nil {
			return "", nil, false, err
		}
		if done {
			return sec.scram.user, []byte(out), true, nil
		}
		return "", []byte(out), false, nil
	}
	return "", nil, false, fmt.Errorf("mechanism %q not served", sec.mech)
}

// saslClient authenticates a fresh connection to another broker.
func saslClient(ctx context.Context, c net.Conn, cred SASLCredentials, self int32) error {
	pc := wire.NewConn(c, fmt.Sprintf("strata-replica-%d", self), 0, 4<<10)
	timeout := metaTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	defer c.SetDeadline(time.Time{})
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, cred.Mechanism
	r, err := pc.Do(hs, timeout)
	if err != nil {
		return err
	}
	if err := kerr.ErrorForCode(r.(*kmsg.SASLHandshakeResponse).ErrorCode); err != nil {
		return err
	}
	step := func(in []byte) ([]byte, error) {
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.Version, req.SASLAuthBytes = 1, in
		r, err := pc.Do(req, timeout)
		if err != nil {
			return nil, err
		}
		resp := r.(*kmsg.SASLAuthenticateResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return nil, err
		}
		return resp.SASLAuthBytes, nil
	}
	if cred.Mechanism == MechPlain {
		_, err := step([]byte("\x00" + cred.User + "\x00" + cred.Password))
		return err
	}
	hg := scram.SHA256
	if cred.Mechanism == MechSCRAM512 {
		hg = scram.SHA512
	}
	cl, err := hg.NewClient(cred.User, cred.Password, "")
	if err != nil {
		return err
	}
	conv := cl.NewConversation()
	msg, err := conv.Step("")
	for err == nil && !conv.Done() {
		var in []byte
		if in, err = step([]byte(msg)); err == nil {
			msg, err = conv.Step(string(in))
		}
	}
	if err == nil && !conv.Valid() {
		err = errors.New("server signature invalid")
	}
	return err
}

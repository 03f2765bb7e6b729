package broker

// The SASL requests and the front end's authentication gate. A connection
// on a listener with security carries a security.Session; until its
// client authenticated, only ApiVersions, SaslHandshake and
// SaslAuthenticate are served and anything else closes the connection.

import (
	"context"
	"encoding/binary"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

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
	if !cc.sec.Authenticated() {
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
	if l := cc.sec.Listener(); answered && l.Name != b.cfg.Security.Default().Name {
		b.rewriteEndpoints(l.Name, p)
	}
	return answered
}

// handleSASLHandshake serves SaslHandshake v0-1: it picks the mechanism the
// following SaslAuthenticate requests use.
func (b *Broker) handleSASLHandshake(cc *clientConn, req *kmsg.SASLHandshakeRequest, p *pending) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.SupportedMechanisms = cc.sec.Mechanisms()
	if resp.ErrorCode = cc.sec.Handshake(req.Mechanism, req.Version); resp.ErrorCode != 0 {
		p.last = true
	}
	return resp
}

// rawSASLToken answers a bare SASL token (after SaslHandshake v0, KIP-43)
// with a bare token; a failure closes the connection after the delay.
func (b *Broker) rawSASLToken(cc *clientConn, token []byte, start time.Time) pending {
	p := pending{key: 36, start: start}
	ctx, cancel := context.WithTimeout(b.ctx, metaTimeout)
	defer cancel()
	out, _, err := cc.sec.Step(ctx, b.meta, token)
	if err != nil {
		b.log.Info("sasl authentication failed", "remote", cc.remote, "mechanism", cc.sec.Mechanism(), "err", err)
		closeSilently(&p)
		p.wait = b.authFailureWait(cc.ctx, nil)
		return p
	}
	p.raw = binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(out)), uint32(len(out)))
	p.raw = append(p.raw, out...)
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
	if cc.sec.Mechanism() == "" || cc.sec.Authenticated() {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		resp.ErrorMessage = kmsg.StringPtr("SaslAuthenticate without a SaslHandshake")
		p.last = true
		return resp
	}
	ctx, cancel := context.WithTimeout(b.ctx, metaTimeout)
	defer cancel()
	out, _, err := cc.sec.Step(ctx, b.meta, req.SASLAuthBytes)
	if err != nil {
		b.log.Info("sasl authentication failed", "remote", cc.remote, "mechanism", cc.sec.Mechanism(), "err", err)
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		resp.ErrorMessage = kmsg.StringPtr("Authentication failed: invalid username or password")
		p.wait = b.authFailureWait(cc.ctx, resp)
		p.last = true
		return nil
	}
	resp.SASLAuthBytes = out
	return resp
}

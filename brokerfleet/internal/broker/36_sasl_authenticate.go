package broker

// SaslAuthenticate, versions 0-2 (KIP-152): one step of the mechanism
// chosen by SaslHandshake; v1 adds the session lifetime (not set: sessions
// do not expire). Served before authentication. A failure is answered
// after Security.AuthFailureDelay, then the connection closes.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { registerPublic(36, 0, 2, handleSASLAuthenticate) }

// handleSASLAuthenticate runs one step of the chosen mechanism. A failure
// is answered after Security.AuthFailureDelay, then the connection closes.
func handleSASLAuthenticate(b *Broker, cc *clientConn, req *kmsg.SASLAuthenticateRequest, p *pending) bool {
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	p.resp = resp
	if cc.sec == nil { // security off: nothing to authenticate
		resp.ErrorCode, p.last = kerr.IllegalSaslState.Code, true
		return true
	}
	if cc.sec.Mechanism() == "" || cc.sec.Authenticated() {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		resp.ErrorMessage = kmsg.StringPtr("SaslAuthenticate without a SaslHandshake")
		p.last = true
		return true
	}
	ctx, cancel := context.WithTimeout(b.ctx, metaTimeout)
	defer cancel()
	out, _, err := cc.sec.Step(ctx, b.meta, req.SASLAuthBytes)
	if err != nil {
		b.log.Info("sasl authentication failed", "remote", cc.remote, "mechanism", cc.sec.Mechanism(), "err", err)
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		resp.ErrorMessage = kmsg.StringPtr("Authentication failed: invalid username or password")
		p.resp, p.wait, p.last = nil, authFailureWait(b, cc.ctx, resp), true
		return true
	}
	resp.SASLAuthBytes = out
	return true
}

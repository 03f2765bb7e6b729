package broker

// SaslAuthenticate, versions 0-2 (KIP-152): one step of the mechanism
// chosen by SaslHandshake; v1 adds the session lifetime (KIP-368), set on
// the last step to Security.MaxReauth (0: the login does not expire), and
// the client re-authenticates before it runs out, with SaslHandshake and
// SaslAuthenticate on the same connection. Served before authentication.
// A failure is answered after Security.AuthFailureDelay, then the
// connection closes.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { registerPublic(36, 0, 2, handleSASLAuthenticate) }

// handleSASLAuthenticate runs one step of the chosen mechanism. A failure
// is answered after Security.AuthFailureDelay, then the connection closes.
func handleSASLAuthenticate(b *Broker, cc *clientConn, req *kmsg.SASLAuthenticateRequest, p *pending) bool {
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	p.resp = resp
	switch {
	case cc.sec == nil: // security off: nothing to authenticate
		resp.ErrorCode, p.last = kerr.IllegalSaslState.Code, true
		return true
	case sessionEnded(b, cc, p):
		return true
	case cc.sec.Mechanism() == "":
		resp.ErrorCode = kerr.IllegalSaslState.Code
		resp.ErrorMessage = kmsg.StringPtr("SaslAuthenticate without a SaslHandshake")
		p.last = true
		return true
	}
	out, done, err := authenticate(b, cc, req.SASLAuthBytes)
	if err != nil {
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		resp.ErrorMessage = kmsg.StringPtr("Authentication failed: invalid username or password")
		p.resp, p.wait, p.last = nil, authFailureWait(b, cc.ctx, resp), true
		return true
	}
	resp.SASLAuthBytes = out
	if done && req.Version >= 1 {
		resp.SessionLifetimeMillis = cc.sec.Lifetime().Milliseconds()
	}
	return true
}

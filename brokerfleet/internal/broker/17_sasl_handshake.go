package broker

// SaslHandshake, versions 0-1 (KIP-43, KIP-84): the client picks a
// mechanism; v0 means the following frames are bare SASL tokens, v1 that
// they come in SaslAuthenticate requests. Served before authentication;
// v1 on an authenticated connection begins a re-authentication (KIP-368)
// with the same mechanism. On a broker without security it answers
// ILLEGAL_SASL_STATE and closes.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { registerPublic(17, 0, 1, handleSASLHandshake) }

// handleSASLHandshake serves SaslHandshake v0-1: it picks the mechanism the
// following SaslAuthenticate requests use.
func handleSASLHandshake(b *Broker, cc *clientConn, req *kmsg.SASLHandshakeRequest, p *pending) bool {
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	p.resp = resp
	if cc.sec == nil { // security off: nothing to authenticate
		resp.ErrorCode, p.last = kerr.IllegalSaslState.Code, true
		return true
	}
	if sessionEnded(b, cc, p) { // too late to re-authenticate
		return true
	}
	resp.SupportedMechanisms = cc.sec.Mechanisms()
	if resp.ErrorCode = cc.sec.Handshake(req.Mechanism, req.Version); resp.ErrorCode != 0 {
		p.last = true
	}
	return true
}

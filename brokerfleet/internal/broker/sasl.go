package broker

// SASL helpers of the front end: bare tokens after SaslHandshake v0, and
// the delay before a failed authentication is answered. A connection on a
// listener with security carries a security.Session; until its client
// authenticated, only the public routes (ApiVersions, SaslHandshake,
// SaslAuthenticate) are served and anything else closes the connection.

import (
	"context"
	"encoding/binary"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// closeSilently makes p close the connection without answering.
func closeSilently(p *pending) {
	p.resp, p.wait, p.raw, p.last = nil, nil, []byte{}, true
}

// rawSASLToken answers a bare SASL token (after SaslHandshake v0, KIP-43)
// with a bare token; a failure closes the connection after the delay.
func rawSASLToken(b *Broker, cc *clientConn, token []byte, start time.Time) pending {
	p := pending{key: 36, start: start}
	ctx, cancel := context.WithTimeout(b.ctx, metaTimeout)
	defer cancel()
	out, _, err := cc.sec.Step(ctx, b.meta, token)
	if err != nil {
		b.log.Info("sasl authentication failed", "remote", cc.remote, "mechanism", cc.sec.Mechanism(), "err", err)
		closeSilently(&p)
		p.wait = authFailureWait(b, cc.ctx, nil)
		return p
	}
	p.raw = binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(out)), uint32(len(out)))
	p.raw = append(p.raw, out...)
	return p
}

// authFailureWait returns a pending.wait that holds a failed
// authentication's answer for Security.AuthFailureDelay.
func authFailureWait(b *Broker, ctx context.Context, resp kmsg.Response) func() kmsg.Response {
	delay := b.cfg.Security.AuthFailureDelay
	if delay == 0 {
		delay = time.Second
	}
	return func() kmsg.Response {
		t := b.clock.NewTimer(delay)
		defer t.Stop()
		select {
		case <-t.C():
		case <-ctx.Done():
		}
		return resp
	}
}

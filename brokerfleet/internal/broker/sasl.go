package broker

// SASL helpers of the front end: one authentication step (with the
// session then tracked, so that deleting its user's credential ends it),
// bare tokens after SaslHandshake v0, and the delay before a failed
// authentication is answered. A connection on a listener with security
// carries a security.Session; until its client authenticated, only the
// public routes (ApiVersions, SaslHandshake, SaslAuthenticate) are served
// and anything else closes the connection. A session that ended (its
// login expired without re-authentication, KIP-368, or its credential was
// deleted) closes the connection at its next request, public ones
// included.

import (
	"context"
	"encoding/binary"
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/security"
)

// closeSilently makes p close the connection without answering.
func closeSilently(p *pending) {
	p.resp, p.wait, p.raw, p.last = nil, nil, []byte{}, true
}

// sessionEnded closes the connection of a session that ended, silently
// as Kafka does, and reports whether it did.
func sessionEnded(b *Broker, cc *clientConn, p *pending) bool {
	if !cc.sec.Ended() {
		return false
	}
	b.log.Debug("closing the connection of an ended session", "remote", cc.remote, "principal", cc.sec.Principal())
	closeSilently(p)
	return true
}

// authenticate runs one step of cc's SASL conversation; once it succeeds
// the session is tracked under its user.
func authenticate(b *Broker, cc *clientConn, in []byte) (out []byte, done bool, err error) {
	ctx, cancel := context.WithTimeout(b.ctx, metaTimeout)
	defer cancel()
	out, done, err = cc.sec.Step(ctx, b.auth, in)
	switch {
	case errors.Is(err, security.ErrTooManyFailures):
		b.log.Debug("sasl authentication refused", "remote", cc.remote, "err", err)
	case err != nil:
		b.log.Info("sasl authentication failed", "remote", cc.remote, "mechanism", cc.sec.Mechanism(), "err", err)
	case done:
		b.auth.Track(cc.ctx, cc.sec)
	}
	return out, done, err
}

// rawSASLToken answers a bare SASL token (after SaslHandshake v0, KIP-43)
// with a bare token; a failure closes the connection after the delay.
func rawSASLToken(b *Broker, cc *clientConn, token []byte, start time.Time) pending {
	p := pending{key: 36, start: start}
	out, _, err := authenticate(b, cc, token)
	if err != nil {
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

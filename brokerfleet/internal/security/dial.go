package security

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	xscram "github.com/xdg-go/scram"

	"github.com/stratamq/strata/brokerfleet/internal/wire"
)

// Dialer returns the dial function of a broker's connections to another:
// base (nil: plain TCP), then TLS and SASL as the inter-broker settings
// say. self names the broker in its SASL client id.
func (s *Config) Dialer(base wire.DialFunc, self int32) wire.DialFunc {
	sec := s
	if sec.InterBrokerTLS == nil && sec.InterBrokerSASL == nil {
		return base
	}
	if base == nil {
		base = wire.TCP
	}
	return func(ctx context.Context, addr string) (net.Conn, error) {
		c, err := base(ctx, addr)
		if err != nil {
			return nil, err
		}
		if sec.InterBrokerTLS != nil {
			cfg := sec.InterBrokerTLS.Clone()
			if cfg.ServerName == "" {
				if host, _, err := net.SplitHostPort(addr); err == nil {
					cfg.ServerName = host
				}
			}
			tc := tls.Client(c, cfg)
			if err := tc.HandshakeContext(ctx); err != nil {
				c.Close()
				return nil, fmt.Errorf("tls to %s: %w", addr, err)
			}
			c = tc
		}
		if sec.InterBrokerSASL != nil {
			rc := &reauthConn{Conn: c, cred: *sec.InterBrokerSASL, clientID: fmt.Sprintf("strata-replica-%d", self)}
			if err := rc.login(ctx); err != nil {
				c.Close()
				return nil, fmt.Errorf("sasl to %s: %w", addr, err)
			}
			c = rc
		}
		return c, nil
	}
}

// reauthConn is a connection to another broker that logs in again before
// its login runs out (KIP-368), so that a leader with MaxReauth set does
// not cut its followers off. It relies on how wire.Conn uses a connection:
// one request at a time, each written with one Write once the previous
// answer was read, so at a Write nothing is in flight and the SASL
// exchange can run there, on the same connection, before the request.
type reauthConn struct {
	net.Conn
	cred     SASLCredentials
	clientID string
	renewAt  time.Time // zero: the login does not expire
	deadline time.Time // the caller's, restored after a renewal
}

// login authenticates and schedules the renewal, a margin before the
// lifetime the leader gave runs out: 15% of it (the Java client renews
// between 85% and 95%), at least 5 s (a fetch may wait at the leader
// between two writes), at most half the lifetime.
func (c *reauthConn) login(ctx context.Context) error {
	lifetime, err := Authenticate(ctx, wire.NewConn(c.Conn, c.clientID, 0, 4<<10), c.cred)
	c.renewAt = time.Time{}
	if err == nil && lifetime > 0 {
		margin := max(lifetime*15/100, min(lifetime/2, 5*time.Second))
		c.renewAt = time.Now().Add(lifetime - margin)
	}
	return err
}

// SetDeadline records the caller's deadline (a renewal restores it).
func (c *reauthConn) SetDeadline(t time.Time) error {
	c.deadline = t
	return c.Conn.SetDeadline(t)
}

// Write renews the login when it is due, then writes p.
func (c *reauthConn) Write(p []byte) (int, error) {
	if !c.renewAt.IsZero() && !time.Now().Before(c.renewAt) {
		ctx, cancel := context.WithTimeout(context.Background(), reauthTimeout)
		err := c.login(ctx)
		cancel()
		if err == nil {
			err = c.Conn.SetDeadline(c.deadline)
		}
		if err != nil {
			return 0, fmt.Errorf("sasl re-authentication: %w", err)
		}
	}
	return c.Conn.Write(p)
}

// reauthTimeout bounds a renewal.
const reauthTimeout = 10 * time.Second

// ClientOpts are the franz-go options for a broker's own clients of the
// cluster (the metrics lag refresher's): the inter-broker listener's TLS
// and SASL.
func (s *Config) ClientOpts() []kgo.Opt {
	sec := s
	var opts []kgo.Opt
	if sec.InterBrokerTLS != nil {
		opts = append(opts, kgo.DialTLSConfig(sec.InterBrokerTLS.Clone()))
	}
	if c := sec.InterBrokerSASL; c != nil {
		switch c.Mechanism {
		case MechPlain:
			opts = append(opts, kgo.SASL(plain.Auth{User: c.User, Pass: c.Password}.AsMechanism()))
		case MechSCRAM256:
			opts = append(opts, kgo.SASL(scram.Auth{User: c.User, Pass: c.Password}.AsSha256Mechanism()))
		case MechSCRAM512:
			opts = append(opts, kgo.SASL(scram.Auth{User: c.User, Pass: c.Password}.AsSha512Mechanism()))
		}
	}
	return opts
}

// Authenticate logs a connection to another broker in with cred
// (SaslHandshake v1, then SaslAuthenticate v1 steps), or again when it
// was logged in already, and returns the login's lifetime (0: it does not
// expire). Its deadline is ctx's, or 10 s.
func Authenticate(ctx context.Context, pc *wire.Conn, cred SASLCredentials) (time.Duration, error) {
	timeout := 10 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	defer pc.SetDeadline(time.Time{})
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, cred.Mechanism
	r, err := pc.Do(hs, timeout)
	if err != nil {
		return 0, err
	}
	if err := kerr.ErrorForCode(r.(*kmsg.SASLHandshakeResponse).ErrorCode); err != nil {
		return 0, err
	}
	var lifetime time.Duration
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
		lifetime = time.Duration(resp.SessionLifetimeMillis) * time.Millisecond
		return resp.SASLAuthBytes, nil
	}
	if cred.Mechanism == MechPlain {
		_, err := step([]byte("\x00" + cred.User + "\x00" + cred.Password))
		return lifetime, err
	}
	hg := xscram.SHA256
	if cred.Mechanism == MechSCRAM512 {
		hg = xscram.SHA512
	}
	cl, err := hg.NewClient(cred.User, cred.Password, "")
	if err != nil {
		return 0, err
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
	return lifetime, err
}

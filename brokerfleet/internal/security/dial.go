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
			if err := Authenticate(ctx, wire.NewConn(c, fmt.Sprintf("strata-replica-%d", self), 0, 4<<10), *sec.InterBrokerSASL); err != nil {
				c.Close()
				return nil, fmt.Errorf("sasl to %s: %w", addr, err)
			}
		}
		return c, nil
	}
}

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

// Authenticate logs a fresh connection to another broker in with cred
// (SaslHandshake v1, then SaslAuthenticate v1 steps). Its deadline is
// ctx's, or metaTimeout.
func Authenticate(ctx context.Context, pc *wire.Conn, cred SASLCredentials) error {
	timeout := 10 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	defer pc.SetDeadline(time.Time{})
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
	hg := xscram.SHA256
	if cred.Mechanism == MechSCRAM512 {
		hg = xscram.SHA512
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

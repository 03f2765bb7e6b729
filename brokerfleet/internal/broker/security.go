package broker

// Security: listeners (each plaintext or TLS, with or without SASL), the
// credentials followers use towards leaders, and whether ACLs are enforced.
// Everything is off by default: one plaintext listener, no SASL, no ACLs.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/stratamq/strata/pkg/metastore"
)

// DefaultListener is the name of the listener Serve serves when no
// listeners are configured.
const DefaultListener = "PLAINTEXT"

// SASL mechanisms served.
const (
	MechPlain     = "PLAIN"
	MechSCRAM256  = metastore.ScramSHA256
	MechSCRAM512  = metastore.ScramSHA512
	preAuthFrame  = 64 << 10 // frame cap before a SASL listener's client authenticated
	tlsHandshake  = 10 * time.Second
	authTimeout   = 30 * time.Second // to finish TLS and SASL on a SASL listener
	anonymousUser = "User:ANONYMOUS"
)

// Security configures listeners, authentication and authorization.
type Security struct {
	// Listeners are the broker's listeners; the first is the default one
	// (served by Serve, advertised as the registration's Endpoint). Empty
	// means one plaintext listener named PLAINTEXT at Config.Advertise.
	Listeners []Listener
	// InterBrokerListener names the listener followers connect to on
	// leaders; empty means the default listener.
	InterBrokerListener string
	// InterBrokerTLS is the client TLS config for connections to other
	// brokers; nil means plaintext. It must match the inter-broker
	// listener.
	InterBrokerTLS *tls.Config
	// InterBrokerSASL are the credentials followers authenticate with; nil
	// means none. They must match the inter-broker listener.
	InterBrokerSASL *SASLCredentials
	// Authorizer turns ACL enforcement on; off, every principal may do
	// everything (and CreateAcls answers SECURITY_DISABLED).
	Authorizer bool
	// SuperUsers bypass ACLs ("User:admin").
	SuperUsers []string
	// AuthFailureDelay is how long a failed SASL authentication waits before
	// it is answered and the connection closed; 0 means one second.
	AuthFailureDelay time.Duration
}

// Listener is one named listener.
type Listener struct {
	// Name identifies the listener ("INTERNAL", "EXTERNAL"); clients are
	// told the addresses of the listener they connected on.
	Name string
	// Address is where `brokerfleet serve` listens (host:port); the broker
	// itself is handed net.Listeners.
	Address string
	// Advertise is the host:port clients are told to connect to; it is
	// required for every listener but the default one.
	Advertise string
	// TLS is the server TLS config; nil means plaintext. Set ClientAuth and
	// ClientCAs for mutual TLS: the principal is then the certificate's
	// subject ("User:CN=alice,O=example") unless SASL names one.
	TLS *tls.Config
	// SASLMechanisms are the mechanisms clients must authenticate with
	// (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512); empty means no SASL.
	SASLMechanisms []string
	// AllowPlainWithoutTLS permits PLAIN on a plaintext listener, where the
	// password crosses the network in the clear.
	AllowPlainWithoutTLS bool
}

// SASLCredentials are a client's mechanism, user and password.
type SASLCredentials struct {
	Mechanism, User, Password string
}

func (s *Security) validate() []error {
	var errs []error
	names := map[string]bool{}
	for i, l := range s.Listeners {
		switch {
		case l.Name == "":
			errs = append(errs, fmt.Errorf("listeners: listener %d has no name", i))
		case names[l.Name]:
			errs = append(errs, fmt.Errorf("listeners: %s is listed twice", l.Name))
		}
		names[l.Name] = true
		if l.Advertise != "" {
			if _, _, err := splitHostPort(l.Advertise); err != nil {
				errs = append(errs, fmt.Errorf("advertised-listeners: %s: %w", l.Name, err))
			}
		} else if i > 0 && l.Address == "" {
			errs = append(errs, fmt.Errorf("advertised-listeners: %s has no advertised address", l.Name))
		}
		for _, m := range l.SASLMechanisms {
			switch m {
			case MechPlain:
				if l.TLS == nil && !l.AllowPlainWithoutTLS {
					errs = append(errs, fmt.Errorf("sasl-mechanisms: PLAIN on %s without TLS sends passwords in the clear (allow it explicitly)", l.Name))
				}
			case MechSCRAM256, MechSCRAM512:
			default:
				errs = append(errs, fmt.Errorf("sasl-mechanisms: %s: unknown mechanism %q", l.Name, m))
			}
		}
	}
	if s.InterBrokerListener != "" && !names[s.InterBrokerListener] {
		errs = append(errs, fmt.Errorf("inter-broker-listener: %q is not a listener", s.InterBrokerListener))
	}
	if c := s.InterBrokerSASL; c != nil {
		if c.Mechanism != MechPlain && c.Mechanism != MechSCRAM256 && c.Mechanism != MechSCRAM512 {
			errs = append(errs, fmt.Errorf("inter-broker-sasl: unknown mechanism %q", c.Mechanism))
		}
		if c.User == "" {
			errs = append(errs, errors.New("inter-broker-sasl: no user"))
		}
	}
	if s.AuthFailureDelay < 0 {
		errs = append(errs, fmt.Errorf("auth-failure-delay: %v is negative", s.AuthFailureDelay))
	}
	return errs
}

// validateAdvertised checks that every listener but the default one has
// its advertised address by the time the broker starts.
func (s *Security) validateAdvertised() error {
	var errs []error
	for i, l := range s.Listeners {
		if i > 0 && l.Advertise == "" {
			errs = append(errs, fmt.Errorf("advertised-listeners: %s has no advertised address", l.Name))
		}
	}
	return errors.Join(errs...)
}

// defaultListener returns the listener Serve serves.
func (s *Security) defaultListener() Listener {
	if len(s.Listeners) == 0 {
		return Listener{Name: DefaultListener}
	}
	return s.Listeners[0]
}

// advertised maps listener names to advertised addresses, for the
// broker's registration; nil with at most one listener.
func (s *Security) advertised(defaultAddr string) map[string]string {
	if len(s.Listeners) < 2 {
		return nil
	}
	m := make(map[string]string, len(s.Listeners))
	for i, l := range s.Listeners {
		adv := l.Advertise
		if i == 0 && defaultAddr != "" {
			adv = defaultAddr
		}
		m[l.Name] = adv
	}
	return m
}

// enabled reports whether connections need a connSecurity: ACLs, TLS,
// SASL, or more than one listener (whose addresses differ).
func (s *Security) enabled() bool {
	if s.Authorizer || len(s.Listeners) > 1 {
		return true
	}
	for _, l := range s.Listeners {
		if l.TLS != nil || len(l.SASLMechanisms) > 0 {
			return true
		}
	}
	return false
}

// listenerOf recovers the listener a connection was accepted on.
type listenerConn struct {
	net.Conn
	l *Listener
}

type namedListener struct {
	net.Listener
	l *Listener
}

func (n namedListener) Accept() (net.Conn, error) {
	c, err := n.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return listenerConn{Conn: c, l: n.l}, nil
}

// ServeListener accepts connections on ln for the named listener of
// Config.Security until Close.
func (b *Broker) ServeListener(name string, ln net.Listener) error {
	for i := range b.cfg.Security.Listeners {
		if l := &b.cfg.Security.Listeners[i]; l.Name == name {
			if i == 0 {
				return b.Serve(ln)
			}
			return b.Serve(namedListener{Listener: ln, l: l})
		}
	}
	return fmt.Errorf("serve listener %q: no such listener", name)
}

// endpointFor returns br's address on the named listener, or false when br
// does not have that listener.
func (b *Broker) endpointFor(br metastore.Broker, listener string) (string, bool) {
	if listener == "" || listener == b.cfg.Security.defaultListener().Name {
		return br.Endpoint, br.Endpoint != ""
	}
	ep, ok := br.Listeners[listener]
	return ep, ok && ep != ""
}

// interBrokerListener returns the listener followers connect to.
func (b *Broker) interBrokerListener() Listener {
	for _, l := range b.cfg.Security.Listeners {
		if l.Name == b.cfg.Security.InterBrokerListener {
			return l
		}
	}
	return b.cfg.Security.defaultListener()
}

// interBrokerEndpoint is where followers reach br.
func (b *Broker) interBrokerEndpoint(br metastore.Broker) string {
	ep, _ := b.endpointFor(br, b.cfg.Security.InterBrokerListener)
	return ep
}

// ReloadingCertificate serves the certificate and key in two PEM files,
// re-reading them when either file's modification time or size changes
// (checked at most once a second), so a renewed certificate is picked up
// without a restart.
type ReloadingCertificate struct {
	certFile, keyFile string

	mu      sync.Mutex
	checked time.Time
	stamp   [4]int64
	cert    *tls.Certificate
}

// NewReloadingCertificate loads the pair once, failing on a bad pair.
func NewReloadingCertificate(certFile, keyFile string) (*ReloadingCertificate, error) {
	r := &ReloadingCertificate{certFile: certFile, keyFile: keyFile}
	if _, err := r.load(true); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *ReloadingCertificate) load(force bool) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	if !force && r.cert != nil && now.Sub(r.checked) < time.Second {
		return r.cert, nil
	}
	r.checked = now
	var stamp [4]int64
	for i, f := range []string{r.certFile, r.keyFile} {
		st, err := os.Stat(f)
		if err != nil {
			if r.cert != nil {
				return r.cert, nil // keep serving the last good pair
			}
			return nil, fmt.Errorf("tls certificate: %w", err)
		}
		stamp[2*i], stamp[2*i+1] = st.ModTime().UnixNano(), st.Size()
	}
	if r.cert != nil && stamp == r.stamp {
		return r.cert, nil
	}
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		if r.cert != nil {
			return r.cert, nil // a half-written renewal: retry next time
		}
		return nil, fmt.Errorf("tls certificate: %w", err)
	}
	r.cert, r.stamp = &cert, stamp
	return r.cert, nil
}

// GetCertificate is for tls.Config.GetCertificate.
func (r *ReloadingCertificate) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.load(false)
}

// ServerTLS builds a listener's TLS config from PEM files: the
// certificate chain and key (reloaded on change) and, when clientCAFile is
// set, the CAs client certificates must chain to (mutual TLS).
func ServerTLS(certFile, keyFile, clientCAFile string) (*tls.Config, error) {
	rc, err := NewReloadingCertificate(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: rc.GetCertificate}
	if clientCAFile != "" {
		pool, err := loadCAs(clientCAFile)
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// ClientTLS builds the TLS config brokers use towards each other: the CAs
// to trust (empty: the system's) and, for mutual TLS, a client
// certificate.
func ClientTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pool, err := loadCAs(caFile)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	if certFile != "" {
		rc, err := NewReloadingCertificate(certFile, keyFile)
		if err != nil {
			return nil, err
		}
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return rc.load(false) }
	}
	return cfg, nil
}

func loadCAs(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("tls ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("tls ca: no certificates in %s", file)
	}
	return pool, nil
}

// peerDialer returns the dial function of follower connections: the
// configured (or plain TCP) dial, then TLS and SASL as configured.
func (b *Broker) peerDialer() func(context.Context, string) (net.Conn, error) {
	base := b.cfg.DialPeer
	sec := &b.cfg.Security
	if sec.InterBrokerTLS == nil && sec.InterBrokerSASL == nil {
		return base
	}
	if base == nil {
		var d net.Dialer
		base = func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
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
			if err := saslClient(ctx, c, *sec.InterBrokerSASL, b.cfg.NodeID); err != nil {
				c.Close()
				return nil, fmt.Errorf("sasl to %s: %w", addr, err)
			}
		}
		return c, nil
	}
}

func containsMech(mechs []string, m string) bool { return slices.Contains(mechs, m) }

// rewriteEndpoints replaces the default listener's broker addresses in a
// response with those of the listener the client connected on; brokers
// without that listener are left out (or answered as unavailable).
func (b *Broker) rewriteEndpoints(listener string, p *pending) {
	fix := func(resp kmsg.Response) {
		type hostPort struct {
			host string
			port int32
		}
		var eps map[int32]hostPort
		addr := func(id int32) (string, int32, bool) {
			if eps == nil {
				eps = map[int32]hostPort{}
				for _, br := range b.clusterBrokers() {
					if ep, ok := b.endpointFor(br, listener); ok {
						if h, port, err := splitHostPort(ep); err == nil {
							eps[br.ID] = hostPort{h, port}
						}
					}
				}
			}
			e, ok := eps[id]
			if !ok {
				return "", -1, false
			}
			return e.host, e.port, true
		}
		switch r := resp.(type) {
		case *kmsg.MetadataResponse:
			filter(&r.Brokers, func(br *kmsg.MetadataResponseBroker) bool {
				var ok bool
				br.Host, br.Port, ok = addr(br.NodeID)
				return ok
			})
		case *kmsg.DescribeClusterResponse:
			filter(&r.Brokers, func(br *kmsg.DescribeClusterResponseBroker) bool {
				var ok bool
				br.Host, br.Port, ok = addr(br.NodeID)
				return ok
			})
		case *kmsg.FindCoordinatorResponse:
			if r.Version < 4 {
				if r.ErrorCode == 0 {
					var ok bool
					if r.Host, r.Port, ok = addr(r.NodeID); !ok {
						r.ErrorCode, r.NodeID = kerr.CoordinatorNotAvailable.Code, -1
					}
				}
			}
			for i := range r.Coordinators {
				c := &r.Coordinators[i]
				if c.ErrorCode == 0 {
					var ok bool
					if c.Host, c.Port, ok = addr(c.NodeID); !ok {
						c.ErrorCode, c.NodeID = kerr.CoordinatorNotAvailable.Code, -1
					}
				}
			}
		case *kmsg.ProduceResponse:
			filter(&r.Brokers, func(br *kmsg.ProduceResponseBroker) bool {
				var ok bool
				br.Host, br.Port, ok = addr(br.NodeID)
				return ok
			})
		}
	}
	switch {
	case p.resp != nil:
		fix(p.resp)
	case p.wait != nil:
		wait := p.wait
		p.wait = func() kmsg.Response {
			r := wait()
			if r != nil {
				fix(r)
			}
			return r
		}
	}
}

// interBrokerClientOpts are the franz-go options for this broker's own
// clients of the cluster (the metrics collector's): the inter-broker
// listener's TLS and SASL.
func (b *Broker) interBrokerClientOpts() []kgo.Opt {
	sec := &b.cfg.Security
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

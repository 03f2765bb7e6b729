package security

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stratamq/strata/pkg/metastore"
)

// DefaultListener is the name of the listener Serve serves when no
// listeners are configured.
const DefaultListener = "PLAINTEXT"

// SASL mechanisms served.
const (
	MechPlain    = "PLAIN"
	MechSCRAM256 = metastore.ScramSHA256
	MechSCRAM512 = metastore.ScramSHA512
)

// AnonymousUser is the principal of a connection that has not
// authenticated (and of every connection without security).
const AnonymousUser = "User:ANONYMOUS"

// Config configures listeners, authentication and authorization; the
// zero value is one plaintext listener without authentication.
type Config struct {
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
	// AllowSASLWithoutAuthorizer lets SASL listeners run without
	// Authorizer, where every authenticated user may do everything but
	// manage credentials (which then needs a super user).
	AllowSASLWithoutAuthorizer bool
	// AuthFailureDelay is how long a failed SASL authentication waits before
	// it is answered and the connection closed; 0 means one second.
	AuthFailureDelay time.Duration
	// AuthFailureLimit is how many failed SASL logins a client address may
	// have in a burst, and per minute after it; further logins from it are
	// refused until it has room again. 0 means DefaultAuthFailureLimit.
	AuthFailureLimit int
	// MaxReauth is Kafka's connections.max.reauth.ms: how long a SASL login
	// is good for before the client must re-authenticate on its connection
	// (KIP-368). 0 means logins do not expire.
	MaxReauth time.Duration
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

// Validate reports every invalid field, named as the flag that sets it.
func (s *Config) Validate() []error {
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
			if _, _, err := SplitHostPort(l.Advertise); err != nil {
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
	if s.SASL() && !s.Authorizer && !s.AllowSASLWithoutAuthorizer {
		errs = append(errs, errors.New("authorizer: a SASL listener without -authorizer lets every authenticated user do everything; set -authorizer (and -super-users), or -allow-sasl-without-authorizer to run it so anyway"))
	}
	if s.AuthFailureDelay < 0 {
		errs = append(errs, fmt.Errorf("auth-failure-delay: %v is negative", s.AuthFailureDelay))
	}
	if s.AuthFailureLimit < 0 {
		errs = append(errs, fmt.Errorf("auth-failure-limit: %d is negative", s.AuthFailureLimit))
	}
	if s.MaxReauth < 0 {
		errs = append(errs, fmt.Errorf("connections-max-reauth: %v is negative", s.MaxReauth))
	}
	return errs
}

// ValidateAdvertised checks that every listener but the default one has
// its advertised address by the time the broker starts.
func (s *Config) ValidateAdvertised() error {
	var errs []error
	for i, l := range s.Listeners {
		if i > 0 && l.Advertise == "" {
			errs = append(errs, fmt.Errorf("advertised-listeners: %s has no advertised address", l.Name))
		}
	}
	return errors.Join(errs...)
}

// Default returns the default listener (the first, or a plaintext one
// named PLAINTEXT).
func (s *Config) Default() Listener {
	if len(s.Listeners) == 0 {
		return Listener{Name: DefaultListener}
	}
	return s.Listeners[0]
}

// Advertised maps listener names to advertised addresses, for the
// broker's registration; nil with at most one listener.
func (s *Config) Advertised(defaultAddr string) map[string]string {
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

// IsSuperUser reports whether principal is listed in SuperUsers.
func (s *Config) IsSuperUser(principal string) bool {
	return slices.ContainsFunc(s.SuperUsers, func(u string) bool { return strings.TrimSpace(u) == principal })
}

// SASL reports whether some listener uses SASL.
func (s *Config) SASL() bool {
	return slices.ContainsFunc(s.Listeners, func(l Listener) bool { return len(l.SASLMechanisms) > 0 })
}

// Authenticates reports whether some listener authenticates clients: with
// SASL, or with client certificates.
func (s *Config) Authenticates() bool {
	return slices.ContainsFunc(s.Listeners, func(l Listener) bool {
		return len(l.SASLMechanisms) > 0 || (l.TLS != nil && l.TLS.ClientAuth >= tls.VerifyClientCertIfGiven)
	})
}

// Enabled reports whether connections need a Session: ACLs, TLS,
// SASL, or more than one listener (whose addresses differ).
func (s *Config) Enabled() bool {
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

// listenerConn carries the listener a connection was accepted on.
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

// Named wraps ln so that the connections it accepts carry the named
// listener; it reports whether that is the default listener (whose
// connections need no wrapping).
func (s *Config) Named(name string, ln net.Listener) (net.Listener, bool, error) {
	for i := range s.Listeners {
		if l := &s.Listeners[i]; l.Name == name {
			if i == 0 {
				return ln, true, nil
			}
			return namedListener{Listener: ln, l: l}, false, nil
		}
	}
	return nil, false, fmt.Errorf("serve listener %q: no such listener", name)
}

// IsNamed reports whether ln came from Named for a listener other than
// the default one.
func IsNamed(ln net.Listener) bool {
	_, ok := ln.(namedListener)
	return ok
}

// Endpoint returns br's address on the named listener, or false when br
// does not have that listener.
func (s *Config) Endpoint(br metastore.Broker, listener string) (string, bool) {
	if listener == "" || listener == s.Default().Name {
		return br.Endpoint, br.Endpoint != ""
	}
	ep, ok := br.Listeners[listener]
	return ep, ok && ep != ""
}

// InterBroker returns the listener followers connect to.
func (s *Config) InterBroker() Listener {
	for _, l := range s.Listeners {
		if l.Name == s.InterBrokerListener {
			return l
		}
	}
	return s.Default()
}

// InterBrokerEndpoint is where followers reach br.
func (s *Config) InterBrokerEndpoint(br metastore.Broker) string {
	ep, _ := s.Endpoint(br, s.InterBrokerListener)
	return ep
}

// SplitHostPort splits an advertised host:port, checking the port.
func SplitHostPort(hp string) (string, int32, error) {
	host, portStr, err := net.SplitHostPort(hp)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return "", 0, fmt.Errorf("port %q: %w", portStr, err)
	}
	return host, int32(port), nil
}

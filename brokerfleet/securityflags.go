package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/stratamq/strata/brokerfleet/internal/security"

	"github.com/stratamq/strata/brokerfleet/internal/broker"
	"github.com/stratamq/strata/pkg/metastore"
)

// securityFlags are serve's listener, TLS, SASL and ACL flags. Everything
// is off by default: one plaintext listener at -listen.
type securityFlags struct {
	listeners, advertised, protocols string
	tlsCert, tlsKey, tlsClientCA     string
	mechanisms                       string
	plainWithoutTLS                  bool
	interBroker                      string
	interMech, interUser, interPass  string
	interCA                          string
	authorizer                       bool
	superUsers                       string
	admin                            string
	failureDelay                     time.Duration
	env                              envSecurityFlags // securityenv.go
	failureLimit                     int
	maxReauth                        time.Duration
	saslWithoutAuthorizer            bool
}

func (f *securityFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.listeners, "listeners", "", "listeners as NAME://host:port,... (the first is the default one and replaces -listen; empty: one PLAINTEXT listener at -listen)")
	fs.StringVar(&f.advertised, "advertised-listeners", "", "advertised addresses as NAME://host:port,... (default: -advertise for the first listener, each listener's address for the others)")
	fs.StringVar(&f.protocols, "listener-security-protocol-map", "", "NAME:PROTOCOL,... with PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (default: a listener named after a protocol uses it)")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "PEM certificate chain of SSL and SASL_SSL listeners (re-read when the file changes)")
	fs.StringVar(&f.tlsKey, "tls-key", "", "PEM private key of -tls-cert")
	fs.StringVar(&f.tlsClientCA, "tls-client-ca", "", "PEM CA certificates client certificates must chain to: mutual TLS on SSL and SASL_SSL listeners (empty: no client certificates)")
	fs.StringVar(&f.mechanisms, "sasl-mechanisms", security.MechSCRAM512+","+security.MechSCRAM256, "SASL mechanisms of SASL_* listeners: SCRAM-SHA-512, SCRAM-SHA-256, PLAIN")
	fs.BoolVar(&f.plainWithoutTLS, "sasl-plain-without-tls", false, "allow PLAIN on SASL_PLAINTEXT listeners, where passwords cross the network in the clear")
	fs.StringVar(&f.interBroker, "inter-broker-listener", "", "listener followers use to reach leaders (default: the first)")
	fs.StringVar(&f.interMech, "inter-broker-sasl-mechanism", security.MechSCRAM512, "SASL mechanism brokers authenticate to each other with, when the inter-broker listener uses SASL")
	fs.StringVar(&f.interUser, "inter-broker-user", "", "SASL user brokers authenticate to each other as")
	fs.StringVar(&f.interPass, "inter-broker-password", "", "password of -inter-broker-user (prefer STRATA_INTER_BROKER_PASSWORD)")
	fs.StringVar(&f.interCA, "inter-broker-tls-ca", "", "PEM CA certificates to verify other brokers with (default: -tls-client-ca, else the system's)")
	fs.BoolVar(&f.authorizer, "authorizer", false, "enforce ACLs (managed with CreateAcls, DescribeAcls, DeleteAcls); off: everyone may do everything. Followers need CLUSTER_ACTION: list the -inter-broker-user in -super-users")
	fs.StringVar(&f.superUsers, "super-users", "", "principals that bypass ACLs, as User:admin;User:broker")
	fs.StringVar(&f.admin, "sasl-admin", "", "create this SCRAM user at start if it has no credentials, as name:password (prefer STRATA_SASL_ADMIN)")
	fs.DurationVar(&f.failureDelay, "auth-failure-delay", time.Second, "how long a failed SASL authentication waits before it is answered and the connection closed")
	f.env.register(fs)
	fs.IntVar(&f.failureLimit, "auth-failure-limit", security.DefaultAuthFailureLimit, "failed SASL logins a client address (an IPv6 /64) may have in a burst, and per minute after it; further logins from it are refused until it has room")
	fs.DurationVar(&f.maxReauth, "connections-max-reauth", 0, "connections.max.reauth.ms: how long a SASL login lasts before the client must re-authenticate on its connection (KIP-368), or be disconnected at its next request; 0: logins last as long as the connection")
	fs.BoolVar(&f.saslWithoutAuthorizer, "allow-sasl-without-authorizer", false, "run SASL listeners without -authorizer, where every authenticated user may do everything except manage SCRAM credentials (-super-users only)")
}

// parseNamed parses NAME://host:port,... into names in order and addresses.
func parseNamed(flagName, s string) ([]string, map[string]string, error) {
	var names []string
	addrs := map[string]string{}
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		name, addr, ok := strings.Cut(item, "://")
		if !ok || name == "" {
			return nil, nil, fmt.Errorf("invalid value %q for flag -%s: want NAME://host:port", item, flagName)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, nil, fmt.Errorf("invalid value %q for flag -%s: %v", item, flagName, err)
		}
		if _, dup := addrs[name]; dup {
			return nil, nil, fmt.Errorf("invalid value for flag -%s: %s is listed twice", flagName, name)
		}
		names = append(names, name)
		addrs[name] = addr
	}
	return names, addrs, nil
}

// apply fills cfg.Security; with -listeners the default listener's
// address replaces *listen.
func (f *securityFlags) apply(cfg *broker.Config, listen *string) error {
	sec := &cfg.Security
	sec.Authorizer, sec.AuthFailureDelay, sec.AuthFailureLimit = f.authorizer, f.failureDelay, f.failureLimit
	sec.MaxReauth, sec.AllowSASLWithoutAuthorizer = f.maxReauth, f.saslWithoutAuthorizer
	for _, u := range strings.Split(f.superUsers, ";") {
		if u = strings.TrimSpace(u); u != "" {
			sec.SuperUsers = append(sec.SuperUsers, u)
		}
	}
	names, addrs, err := parseNamed("listeners", f.listeners)
	if err != nil {
		return err
	}
	_, adv, err := parseNamed("advertised-listeners", f.advertised)
	if err != nil {
		return err
	}
	protos := map[string]string{}
	for _, item := range strings.Split(f.protocols, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		name, proto, ok := strings.Cut(item, ":")
		if !ok {
			return fmt.Errorf("invalid value %q for flag -listener-security-protocol-map: want NAME:PROTOCOL", item)
		}
		protos[name] = proto
	}
	var mechs []string
	for _, m := range strings.Split(f.mechanisms, ",") {
		if m = strings.TrimSpace(m); m != "" {
			mechs = append(mechs, m)
		}
	}
	var srvTLS *security.Listener // only for its TLS field, built once
	for i, name := range names {
		proto := protos[name]
		if proto == "" {
			proto = name
		}
		l := security.Listener{Name: name, Address: addrs[name], Advertise: adv[name], AllowPlainWithoutTLS: f.plainWithoutTLS}
		if i == 0 && l.Advertise == "" {
			l.Advertise = cfg.Advertise
		}
		switch proto {
		case "PLAINTEXT":
		case "SASL_PLAINTEXT":
			l.SASLMechanisms = mechs
		case "SSL", "SASL_SSL":
			if srvTLS == nil {
				c, err := f.serverTLS(name, proto)
				if err != nil {
					return err
				}
				srvTLS = &security.Listener{TLS: c}
			}
			l.TLS = srvTLS.TLS
			if proto == "SASL_SSL" {
				l.SASLMechanisms = mechs
			}
		default:
			return fmt.Errorf("listener %s: unknown security protocol %q (set -listener-security-protocol-map)", name, proto)
		}
		sec.Listeners = append(sec.Listeners, l)
	}
	if len(sec.Listeners) == 0 {
		if f.interBroker != "" || f.advertised != "" {
			return errors.New("-inter-broker-listener and -advertised-listeners need -listeners")
		}
		return nil
	}
	*listen = sec.Listeners[0].Address
	if cfg.Advertise == "" {
		cfg.Advertise = sec.Listeners[0].Advertise
	}
	sec.InterBrokerListener = f.interBroker
	ib := sec.Listeners[0]
	for _, l := range sec.Listeners {
		if l.Name == f.interBroker {
			ib = l
		}
	}
	if len(ib.SASLMechanisms) > 0 {
		if f.interUser == "" {
			return fmt.Errorf("inter-broker listener %s uses SASL: set -inter-broker-user and -inter-broker-password", ib.Name)
		}
		sec.InterBrokerSASL = &security.SASLCredentials{Mechanism: f.interMech, User: f.interUser, Password: f.interPass}
	}
	if ib.TLS != nil {
		if sec.InterBrokerTLS, err = f.interBrokerTLS(); err != nil {
			return err
		}
	}
	return nil
}

// listenExtra listens on every listener but the default one, filling in
// advertised addresses from the bound ones.
func listenExtra(ctx context.Context, cfg *broker.Config) (map[string]net.Listener, error) {
	lns := map[string]net.Listener{}
	for i := 1; i < len(cfg.Security.Listeners); i++ {
		l := &cfg.Security.Listeners[i]
		ln, err := net.Listen("tcp", l.Address)
		if err == nil && l.Advertise == "" {
			l.Advertise, err = advertiseFor(ctx, ln.Addr())
		}
		if err != nil {
			for _, o := range lns {
				o.Close()
			}
			if ln != nil {
				ln.Close()
			}
			return nil, fmt.Errorf("listen on %s (listener %s): %w", l.Address, l.Name, err)
		}
		lns[l.Name] = ln
	}
	return lns, nil
}

// bootstrapAdmin creates the -sasl-admin user's SCRAM credentials unless
// the user already has some.
func (f *securityFlags) bootstrapAdmin(ctx context.Context, meta *metastore.Meta) error {
	if f.admin == "" {
		return nil
	}
	user, pass, ok := strings.Cut(f.admin, ":")
	if !ok || user == "" || pass == "" {
		return usageError{errors.New("invalid value for -sasl-admin (STRATA_SASL_ADMIN): want name:password")}
	}
	have, err := meta.ScramCredentials(ctx, user)
	if err != nil || len(have) > 0 {
		return err
	}
	for _, mech := range []string{metastore.ScramSHA512, metastore.ScramSHA256} {
		c, err := metastore.NewScramCredential(user, mech, pass, 8192)
		if err == nil {
			err = meta.PutScramCredential(ctx, c)
		}
		if err != nil {
			return fmt.Errorf("create sasl admin %s: %w", user, err)
		}
	}
	return nil
}

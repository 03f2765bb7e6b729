package main

// Security settings shaped for a deployment whose secrets arrive as
// environment variables (an ECS task definition's "secrets"): the TLS
// certificate, key and CA as PEM text instead of files, SCRAM users and
// ACLs kept in step with the environment at every start, and the ECS
// task's private DNS name as the advertised host, which a certificate
// issued before the task started can name (its IP address it cannot).

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/broker"
	"github.com/stratamq/strata/brokerfleet/internal/security"
	"github.com/stratamq/strata/pkg/metastore"
)

// envSecurityFlags are the flags of this file; securityFlags embeds them.
type envSecurityFlags struct {
	certPEM, keyPEM, interCAPEM string
	usersFromEnv, aclsFromEnv   string
	advertiseDNS                bool

	users []envUser                             // from usersFromEnv, by load
	acls  []metastore.ACL                       // from aclsFromEnv, by load
	owned map[string]bool                       // principals whose ACLs aclsFromEnv decides
	env   func() []string                       // os.Environ when nil (tests replace it)
	dns   func(context.Context) (string, error) // ecsPrivateDNSName when nil
}

// envUser is one SCRAM user from the environment.
type envUser struct{ from, name, password string }

// scramIterations is what the users from the environment are salted with
// (as -sasl-admin's).
const scramIterations = 8192

func (f *envSecurityFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.certPEM, "tls-cert-pem", "", "PEM certificate chain of SSL and SASL_SSL listeners as text, instead of -tls-cert (prefer STRATA_TLS_CERT_PEM, e.g. from an ECS secret)")
	fs.StringVar(&f.keyPEM, "tls-key-pem", "", "PEM private key of -tls-cert-pem as text, instead of -tls-key (prefer STRATA_TLS_KEY_PEM)")
	fs.StringVar(&f.interCAPEM, "inter-broker-tls-ca-pem", "", "PEM CA certificates to verify other brokers with, as text, instead of -inter-broker-tls-ca (prefer STRATA_INTER_BROKER_TLS_CA_PEM)")
	fs.StringVar(&f.usersFromEnv, "scram-users-from-env", "", "environment variables holding SCRAM users, comma-separated; NAME* stands for every variable starting with NAME. Each holds {\"username\":...,\"password\":...} (a Secrets Manager secret) or name:password; at start each user gets SCRAM-SHA-512 and SCRAM-SHA-256 credentials for that password unless it has them already")
	fs.StringVar(&f.aclsFromEnv, "acls-from-env", "", "environment variables holding ACLs, as -scram-users-from-env names them. Each holds entries separated by ';' or newlines: PRINCIPAL RESOURCE[:prefixed] NAME OPERATION[,OPERATION...] (e.g. User:app topic orders read,describe). At start every principal named there gets exactly these ALLOW entries (host *): missing ones are created, its other entries deleted")
	fs.BoolVar(&f.advertiseDNS, "advertise-private-dns", false, "advertise the ECS task's private DNS name (ip-10-0-1-2.<region>.compute.internal, which a broker certificate can cover with a wildcard) with each listener's port, instead of its IP address")
}

// envNames expands a comma-separated list of variable names, NAME*
// standing for every variable of environ starting with NAME, in order,
// each once.
func envNames(spec string, environ []string) []string {
	var out []string
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		if prefix, ok := strings.CutSuffix(item, "*"); ok {
			var matched []string
			for _, kv := range environ {
				if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, prefix) {
					matched = append(matched, k)
				}
			}
			slices.Sort(matched)
			out = append(out, matched...)
			continue
		}
		out = append(out, item)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func (f *envSecurityFlags) lookup(names []string, flagName string) (map[string]string, error) {
	environ := os.Environ()
	if f.env != nil {
		environ = f.env()
	}
	vals := map[string]string{}
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		vals[k] = v
	}
	out := map[string]string{}
	for _, n := range names {
		v, ok := vals[n]
		if !ok || strings.TrimSpace(v) == "" {
			return nil, fmt.Errorf("flag -%s: %s is not set", flagName, n)
		}
		out[n] = v
	}
	return out, nil
}

// load reads the users and ACLs the flags name from the environment;
// errors are the operator's (usage errors).
func (f *envSecurityFlags) load() error {
	environ := os.Environ
	if f.env != nil {
		environ = f.env
	}
	if f.usersFromEnv != "" {
		names := envNames(f.usersFromEnv, environ())
		if len(names) == 0 {
			return fmt.Errorf("flag -scram-users-from-env %q: no such variables", f.usersFromEnv)
		}
		vals, err := f.lookup(names, "scram-users-from-env")
		if err != nil {
			return err
		}
		for _, n := range names {
			u, err := parseEnvUser(n, vals[n])
			if err != nil {
				return err
			}
			f.users = append(f.users, u)
		}
	}
	if f.aclsFromEnv != "" {
		names := envNames(f.aclsFromEnv, environ())
		vals, err := f.lookup(names, "acls-from-env")
		if err != nil {
			return err
		}
		f.owned = map[string]bool{}
		for _, n := range names {
			acls, err := parseACLSpec(n, vals[n])
			if err != nil {
				return err
			}
			for _, a := range acls {
				f.owned[a.Principal] = true
				if !slices.Contains(f.acls, a) {
					f.acls = append(f.acls, a)
				}
			}
		}
	}
	return nil
}

// parseEnvUser reads {"username","password"} or name:password. Errors
// never quote the value: it holds a password.
func parseEnvUser(from, v string) (envUser, error) {
	v = strings.TrimSpace(v)
	u := envUser{from: from}
	if strings.HasPrefix(v, "{") {
		var s struct {
			Username string `json:"username"`
			Password string `json:"password"`
		}
		if err := json.Unmarshal([]byte(v), &s); err != nil {
			return u, fmt.Errorf("flag -scram-users-from-env: %s is not JSON {\"username\":...,\"password\":...}", from)
		}
		u.name, u.password = s.Username, s.Password
	} else {
		u.name, u.password, _ = strings.Cut(v, ":")
	}
	if u.name == "" || u.password == "" {
		return u, fmt.Errorf("flag -scram-users-from-env: %s lacks a user name or a password (want {\"username\":...,\"password\":...} or name:password)", from)
	}
	return u, nil
}

// parseACLSpec parses the ACL entries of one variable.
func parseACLSpec(from, spec string) ([]metastore.ACL, error) {
	var out []metastore.ACL
	for _, line := range strings.FieldsFunc(spec, func(r rune) bool { return r == ';' || r == '\n' }) {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		bad := func(why string) error {
			return fmt.Errorf("flag -acls-from-env: %s: entry %q: %s (want PRINCIPAL RESOURCE[:prefixed] NAME OPERATION[,OPERATION...])", from, strings.Join(fields, " "), why)
		}
		if len(fields) != 4 {
			return nil, bad("want 4 fields")
		}
		principal, resource, name, ops := fields[0], fields[1], fields[2], fields[3]
		if !strings.HasPrefix(principal, "User:") || len(principal) == len("User:") {
			return nil, bad("the principal is User:NAME")
		}
		pattern := kmsg.ACLResourcePatternTypeLiteral
		if r, p, ok := strings.Cut(resource, ":"); ok {
			pt, err := kmsg.ParseACLResourcePatternType(p)
			if err != nil || (pt != kmsg.ACLResourcePatternTypeLiteral && pt != kmsg.ACLResourcePatternTypePrefixed) {
				return nil, bad("the pattern is literal or prefixed")
			}
			resource, pattern = r, pt
		}
		rt, err := kmsg.ParseACLResourceType(resource)
		if err != nil {
			return nil, bad("unknown resource type")
		}
		for _, o := range strings.Split(ops, ",") {
			op, err := kmsg.ParseACLOperation(o)
			if err != nil || op == kmsg.ACLOperationAny {
				return nil, bad(fmt.Sprintf("unknown operation %q", o))
			}
			e := metastore.ACL{ResourceType: int8(rt), ResourceName: name, PatternType: int8(pattern),
				Principal: principal, Host: "*", Operation: int8(op), Permission: int8(kmsg.ACLPermissionTypeAllow)}
			if err := security.CheckEntry(e); err != nil {
				return nil, bad(err.Error())
			}
			out = append(out, e)
		}
	}
	return out, nil
}

// provision brings the metastore in step with the users and ACLs load
// read: a user whose credentials do not match its password gets new ones,
// and each owned principal's ACL entries become exactly the listed ones.
func (f *envSecurityFlags) provision(ctx context.Context, meta *metastore.Meta) error {
	for _, u := range f.users {
		for _, mech := range []string{metastore.ScramSHA512, metastore.ScramSHA256} {
			have, err := meta.ScramCredential(ctx, u.name, mech)
			switch {
			case err == nil && have.CheckPassword(u.password):
				continue
			case err != nil && !errors.Is(err, metastore.ErrNotFound):
				return fmt.Errorf("scram user %s (from %s): %w", u.name, u.from, err)
			}
			c, err := metastore.NewScramCredential(u.name, mech, u.password, scramIterations)
			if err == nil {
				err = meta.PutScramCredential(ctx, c)
			}
			if err != nil {
				return fmt.Errorf("scram user %s (from %s): %w", u.name, u.from, err)
			}
		}
	}
	if f.owned == nil {
		return nil
	}
	existing, err := meta.ACLs(ctx)
	if err != nil {
		return err
	}
	var stale, missing []metastore.ACL
	for _, e := range existing {
		if f.owned[e.Principal] && !slices.Contains(f.acls, e) {
			stale = append(stale, e)
		}
	}
	for _, e := range f.acls {
		if !slices.Contains(existing, e) {
			missing = append(missing, e)
		}
	}
	if len(stale) > 0 {
		if err := meta.DeleteACLs(ctx, stale); err != nil {
			return err
		}
	}
	if len(missing) > 0 {
		return meta.CreateACLs(ctx, missing)
	}
	return nil
}

// advertise applies -advertise-private-dns: cfg.Advertise and every
// listener without an advertised address get the task's DNS name with
// their own port (listen is the default listener's address).
func (f *envSecurityFlags) advertise(ctx context.Context, cfg *broker.Config, listen string) error {
	if !f.advertiseDNS {
		return nil
	}
	if cfg.Advertise != "" {
		return usageError{errors.New("-advertise-private-dns and -advertise (or an advertised default listener) exclude each other")}
	}
	lookup := f.dns
	if lookup == nil {
		lookup = ecsPrivateDNSName
	}
	name, err := lookup(ctx)
	if err != nil {
		return usageError{fmt.Errorf("flag -advertise-private-dns: %v", err)}
	}
	withPort := func(addr string) (string, error) {
		_, port, err := net.SplitHostPort(addr)
		if err != nil || port == "0" || port == "" {
			return "", usageError{fmt.Errorf("flag -advertise-private-dns: listener address %q has no fixed port", addr)}
		}
		return net.JoinHostPort(name, port), nil
	}
	if cfg.Advertise, err = withPort(listen); err != nil {
		return err
	}
	for i := range cfg.Security.Listeners {
		l := &cfg.Security.Listeners[i]
		if l.Advertise == "" {
			if l.Advertise, err = withPort(l.Address); err != nil {
				return err
			}
		}
	}
	return nil
}

// ecsPrivateDNSName is the ECS task's private DNS name, from its task
// metadata.
func ecsPrivateDNSName(ctx context.Context) (string, error) {
	t, err := readECSTask(ctx)
	if err != nil {
		return "", err
	}
	for _, c := range t.Containers {
		for _, n := range c.Networks {
			if n.PrivateDNSName != "" {
				return n.PrivateDNSName, nil
			}
		}
	}
	return "", errors.New("ECS task metadata has no PrivateDNSName (does the VPC have DNS hostnames on?)")
}

// pemText accepts PEM with real newlines, or with "\n" escapes where a
// secret store flattened it to one line.
func pemText(s string) []byte {
	if !strings.Contains(s, "\n") && strings.Contains(s, `\n`) {
		s = strings.ReplaceAll(s, `\n`, "\n")
	}
	return []byte(s)
}

func pemPool(flagName, s string) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemText(s)) {
		return nil, fmt.Errorf("flag -%s: no PEM certificates", flagName)
	}
	return pool, nil
}

// pemPair is the certificate and key of -tls-cert-pem and -tls-key-pem.
func (f *envSecurityFlags) pemPair() (tls.Certificate, error) {
	pair, err := tls.X509KeyPair(pemText(f.certPEM), pemText(f.keyPEM))
	if err != nil {
		return pair, fmt.Errorf("flags -tls-cert-pem and -tls-key-pem: %v", err)
	}
	return pair, nil
}

// serverTLS is the TLS config of SSL and SASL_SSL listeners: from the
// files (-tls-cert, -tls-key, reloaded on change) or from the PEM text.
func (f *securityFlags) serverTLS(listener, proto string) (*tls.Config, error) {
	e := &f.env
	if e.certPEM == "" && e.keyPEM == "" {
		if f.tlsCert == "" || f.tlsKey == "" {
			return nil, fmt.Errorf("listener %s (%s): -tls-cert and -tls-key (or -tls-cert-pem and -tls-key-pem) are required", listener, proto)
		}
		return security.ServerTLS(f.tlsCert, f.tlsKey, f.tlsClientCA)
	}
	if f.tlsCert != "" || f.tlsKey != "" {
		return nil, errors.New("-tls-cert/-tls-key and -tls-cert-pem/-tls-key-pem exclude each other")
	}
	pair, err := e.pemPair()
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}}
	if f.tlsClientCA != "" {
		pem, err := os.ReadFile(f.tlsClientCA)
		if err != nil {
			return nil, fmt.Errorf("flag -tls-client-ca: %w", err)
		}
		if cfg.ClientCAs, err = pemPool("tls-client-ca", string(pem)); err != nil {
			return nil, err
		}
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// interBrokerTLS is the TLS config brokers dial each other with: trusting
// -inter-broker-tls-ca-pem, -inter-broker-tls-ca or -tls-client-ca (else
// the system's CAs), presenting the broker's certificate under mutual TLS.
func (f *securityFlags) interBrokerTLS() (*tls.Config, error) {
	e := &f.env
	if e.interCAPEM == "" && e.certPEM == "" {
		ca := f.interCA
		if ca == "" {
			ca = f.tlsClientCA
		}
		cert, key := "", ""
		if f.tlsClientCA != "" { // mutual TLS: present the broker's certificate
			cert, key = f.tlsCert, f.tlsKey
		}
		return security.ClientTLS(ca, cert, key)
	}
	if e.interCAPEM != "" && f.interCA != "" {
		return nil, errors.New("-inter-broker-tls-ca and -inter-broker-tls-ca-pem exclude each other")
	}
	var cfg *tls.Config
	if e.interCAPEM != "" {
		pool, err := pemPool("inter-broker-tls-ca-pem", e.interCAPEM)
		if err != nil {
			return nil, err
		}
		cfg = &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}
	} else {
		ca := f.interCA
		if ca == "" {
			ca = f.tlsClientCA
		}
		c, err := security.ClientTLS(ca, "", "")
		if err != nil {
			return nil, err
		}
		cfg = c
	}
	if f.tlsClientCA != "" { // mutual TLS: present the broker's certificate
		if e.certPEM != "" {
			pair, err := e.pemPair()
			if err != nil {
				return nil, err
			}
			cfg.Certificates = []tls.Certificate{pair}
		} else {
			c, err := security.ClientTLS("", f.tlsCert, f.tlsKey)
			if err != nil {
				return nil, err
			}
			cfg.GetClientCertificate = c.GetClientCertificate
		}
	}
	return cfg, nil
}

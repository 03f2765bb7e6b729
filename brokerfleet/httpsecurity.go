package main

import (
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"

	"github.com/stratamq/strata/brokerfleet/internal/broker"
	"github.com/stratamq/strata/brokerfleet/internal/security"
	"github.com/stratamq/strata/pkg/schemaregistry"
)

// httpFlags are serve's flags for its two HTTP listeners: the schema
// registry's authentication and TLS, and basic authentication of
// /metrics.
type httpFlags struct {
	registryAuth              string // auto, basic or none
	registryTLS               string // auto, on or off
	registryCert, registryKey string
	metricsAuth               string // user:password; empty: open
}

func (f *httpFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.registryAuth, "registry-auth", "auto", "schema registry authentication: basic (HTTP basic authentication against the SCRAM users, what Confluent clients send with basic.auth.credentials.source=USER_INFO), none (every request is User:ANONYMOUS), or auto: basic when a listener uses SASL or -authorizer is on, else none. With -authorizer every request is also checked against the ACLs")
	fs.StringVar(&f.registryTLS, "registry-tls", "auto", "serve the schema registry over HTTPS: on, off, or auto: on when it has a certificate (-registry-tls-cert, else -tls-cert). Basic authentication without TLS needs an explicit off")
	fs.StringVar(&f.registryCert, "registry-tls-cert", "", "PEM certificate chain of the schema registry's HTTPS (re-read when the file changes; default: -tls-cert)")
	fs.StringVar(&f.registryKey, "registry-tls-key", "", "PEM private key of -registry-tls-cert (default: -tls-key)")
	fs.StringVar(&f.metricsAuth, "metrics-auth", "", "require HTTP basic authentication as user:password for -http's /metrics (and for /healthz and /readyz from anywhere but loopback); prefer STRATA_METRICS_AUTH. Empty: open")
}

// registrySecurity is how the schema registry is served.
type registrySecurity struct {
	basic bool        // HTTP basic authentication against the SCRAM users
	tls   *tls.Config // nil: plain HTTP
}

// registry resolves the registry flags against the broker's security
// (sec) and TLS files (sf); log gets a warning for basic authentication
// over plain HTTP, which only an explicit -registry-tls off allows.
func (f *httpFlags) registry(sec *security.Config, sf *securityFlags, log *slog.Logger) (registrySecurity, error) {
	var rs registrySecurity
	switch f.registryAuth {
	case "basic":
		rs.basic = true
	case "none":
	case "auto":
		rs.basic = sec.Authorizer
		for _, l := range sec.Listeners {
			rs.basic = rs.basic || len(l.SASLMechanisms) > 0
		}
	default:
		return rs, fmt.Errorf("invalid value %q for flag -registry-auth: want auto, basic or none", f.registryAuth)
	}
	cert, key := f.registryCert, f.registryKey
	if cert == "" && key == "" {
		cert, key = sf.tlsCert, sf.tlsKey
	}
	// Or the broker's certificate given as PEM text (-tls-cert-pem).
	pem := cert == "" && key == "" && sf.env.certPEM != ""
	switch f.registryTLS {
	case "off":
		if rs.basic {
			log.Warn("the schema registry takes basic authentication over plain HTTP: passwords cross the network in the clear (-registry-tls off)")
		}
		return rs, nil
	case "auto":
		if cert == "" && key == "" && !pem {
			if rs.basic {
				return rs, errors.New("-registry-auth basic over plain HTTP would send passwords in the clear: give the registry a certificate (-registry-tls-cert and -registry-tls-key, or -tls-cert and -tls-key), or set -registry-tls off (behind a TLS-terminating proxy)")
			}
			return rs, nil
		}
	case "on":
	default:
		return rs, fmt.Errorf("invalid value %q for flag -registry-tls: want auto, on or off", f.registryTLS)
	}
	if pem {
		pair, err := sf.env.pemPair()
		if err != nil {
			return rs, fmt.Errorf("-registry-tls: %w", err)
		}
		rs.tls = &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}}
		return rs, nil
	}
	if cert == "" || key == "" {
		return rs, errors.New("-registry-tls: the registry's HTTPS needs -registry-tls-cert and -registry-tls-key (or -tls-cert and -tls-key)")
	}
	c, err := security.ServerTLS(cert, key, "")
	if err != nil {
		return rs, fmt.Errorf("-registry-tls: %w", err)
	}
	rs.tls = c
	return rs, nil
}

// registryHandler is b's schema registry as rs says to serve it: behind
// basic authentication against the metastore's SCRAM users, and checked
// against b's ACLs when they are on. Anonymous only when neither is.
// registryHandler serves b's schema registry and, beside it under the same
// authentication and ACLs, the admin endpoints (adminhttp.go: partition
// sizes, lag history) of the brokers adminOf.
func registryHandler(b *broker.Broker, rs registrySecurity, adminOf []*broker.Broker) http.Handler {
	var sec schemaregistry.Security
	if rs.basic {
		sec.Authenticator = schemaregistry.NewScramAuthenticator(b.Meta(), schemaregistry.ScramOptions{})
	}
	if acls := b.ACLs(); acls != nil {
		sec.Authorizer = acls
	}
	mux := http.NewServeMux()
	mux.Handle("/strata/", adminHandler(adminOf))
	mux.Handle("/", b.Registry())
	return schemaregistry.Protect(mux, sec)
}

// basicCreds are the one user and password /metrics accepts.
type basicCreds struct{ user, pass [sha256.Size]byte }

// metricsCreds parses -metrics-auth; nil when it is empty.
func (f *httpFlags) metricsCreds() (*basicCreds, error) {
	if f.metricsAuth == "" {
		return nil, nil
	}
	user, pass, ok := strings.Cut(f.metricsAuth, ":")
	if !ok || user == "" || pass == "" {
		return nil, errors.New("invalid value for flag -metrics-auth (STRATA_METRICS_AUTH): want user:password")
	}
	return &basicCreds{sha256.Sum256([]byte(user)), sha256.Sum256([]byte(pass))}, nil
}

// match compares in constant time (over hashes, so lengths leak nothing).
func (c *basicCreds) match(user, pass string) bool {
	u, p := sha256.Sum256([]byte(user)), sha256.Sum256([]byte(pass))
	return subtle.ConstantTimeCompare(u[:], c.user[:])&subtle.ConstantTimeCompare(p[:], c.pass[:]) == 1
}

// withMetricsAuth requires creds on h, except for the health checks
// (/healthz, /readyz) from a loopback address: the container's own check
// (`brokerfleet health`) asks there, and it carries no credentials.
func withMetricsAuth(h http.Handler, creds *basicCreds) http.Handler {
	if creds == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if (r.URL.Path == "/healthz" || r.URL.Path == "/readyz") && fromLoopback(r) {
			h.ServeHTTP(w, r)
			return
		}
		if user, pass, ok := r.BasicAuth(); !ok || !creds.match(user, pass) {
			w.Header().Set("WWW-Authenticate", `Basic realm="Strata metrics", charset="UTF-8"`)
			http.Error(w, "401 unauthorized: basic authentication required (serve -metrics-auth)", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func fromLoopback(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

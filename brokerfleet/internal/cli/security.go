package cli

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// security is the TLS and SASL flags that let the admin commands reach
// SSL and SASL listeners.
type security struct {
	tls                     bool
	caFile, cert, key       string
	mechanism, user, secret string
}

func (f *security) register(fs *flag.FlagSet) {
	f.user, f.secret = os.Getenv("STRATA_SASL_USER"), os.Getenv("STRATA_SASL_PASSWORD")
	f.mechanism = "SCRAM-SHA-512"
	fs.BoolVar(&f.tls, "tls", false, "connect with TLS (implied by -tls-ca and -tls-cert)")
	fs.StringVar(&f.caFile, "tls-ca", "", "PEM CA certificates to verify brokers with (default: the system's)")
	fs.StringVar(&f.cert, "tls-cert", "", "PEM client certificate, for mutual TLS")
	fs.StringVar(&f.key, "tls-key", "", "PEM private key of -tls-cert")
	fs.StringVar(&f.mechanism, "sasl-mechanism", f.mechanism, "SASL mechanism used with -sasl-user: SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN")
	fs.StringVar(&f.user, "sasl-user", f.user, "SASL user (default STRATA_SASL_USER; empty: no SASL)")
	fs.StringVar(&f.secret, "sasl-password", f.secret, "SASL password (prefer STRATA_SASL_PASSWORD)")
}

// opts returns the client options for the flags.
func (f *security) opts() ([]kgo.Opt, error) {
	var opts []kgo.Opt
	if f.tls || f.caFile != "" || f.cert != "" {
		cfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if f.caFile != "" {
			pem, err := os.ReadFile(f.caFile)
			if err != nil {
				return nil, fmt.Errorf("flag -tls-ca: %w", err)
			}
			cfg.RootCAs = x509.NewCertPool()
			if !cfg.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("flag -tls-ca: no certificates in %s", f.caFile)
			}
		}
		if f.cert != "" {
			c, err := tls.LoadX509KeyPair(f.cert, f.key)
			if err != nil {
				return nil, fmt.Errorf("flags -tls-cert, -tls-key: %w", err)
			}
			cfg.Certificates = []tls.Certificate{c}
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	if f.user != "" {
		switch f.mechanism {
		case "SCRAM-SHA-512":
			opts = append(opts, kgo.SASL(scram.Auth{User: f.user, Pass: f.secret}.AsSha512Mechanism()))
		case "SCRAM-SHA-256":
			opts = append(opts, kgo.SASL(scram.Auth{User: f.user, Pass: f.secret}.AsSha256Mechanism()))
		case "PLAIN":
			opts = append(opts, kgo.SASL(plain.Auth{User: f.user, Pass: f.secret}.AsMechanism()))
		default:
			return nil, UsageError{errors.New("invalid value for flag -sasl-mechanism: want SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN")}
		}
	}
	return opts, nil
}

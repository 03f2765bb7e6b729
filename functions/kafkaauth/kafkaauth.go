// Package kafkaauth is how the functions (and any Go Lambda function) reach
// a secured Strata cluster: TLS verified against the deployment's private
// CA, and SASL/SCRAM with the function's own user. Both come from AWS
// Secrets Manager, read once at cold start, in the shapes AWS Lambda's
// Kafka event source reads too. The environment names the secrets, never
// their values:
//
//	STRATA_TLS_CA_SECRET_ARN  secret {"certificate": PEM} of the CAs to trust
//	                          (SERVER_ROOT_CA_CERTIFICATE's shape); unset: the system's CAs
//	STRATA_TLS                TLS to the brokers (default: on when STRATA_TLS_CA_SECRET_ARN is set)
//	STRATA_SASL_SECRET_ARN    secret {"username": ..., "password": ...} (SASL_SCRAM_512_AUTH's
//	                          shape); unset: no SASL
//	STRATA_SASL_MECHANISM     SCRAM-SHA-512 (default) or SCRAM-SHA-256
//	STRATA_SECRETS_ENDPOINT   Secrets Manager endpoint override (default: AWS's)
//
// SASL without TLS is refused: the brokers' SASL_SSL listener would not
// answer it, and the password exchange deserves the channel binding TLS
// gives it anyway.
package kafkaauth

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/secretsmanager"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/stratamq/strata/functions/internal/lambdaenv"
)

// SASL mechanisms.
const (
	SCRAMSHA512 = "SCRAM-SHA-512"
	SCRAMSHA256 = "SCRAM-SHA-256"
)

// Settings say how to reach the brokers.
type Settings struct {
	TLS             bool
	CASecretARN     string // empty: the system's CAs
	SASLSecretARN   string // empty: no SASL
	Mechanism       string // SCRAMSHA512 or SCRAMSHA256
	SecretsEndpoint string // Secrets Manager endpoint override
}

// FromEnv reads the settings from the environment variables above through
// lookup (os.LookupEnv), and validates them.
func FromEnv(lookup func(string) (string, bool)) (Settings, error) {
	env := lambdaenv.Env{Lookup: lookup}
	s := Settings{Mechanism: SCRAMSHA512}
	env.String(&s.CASecretARN, "STRATA_TLS_CA_SECRET_ARN")
	s.TLS = s.CASecretARN != ""
	env.Bool(&s.TLS, "STRATA_TLS")
	env.String(&s.SASLSecretARN, "STRATA_SASL_SECRET_ARN")
	env.String(&s.Mechanism, "STRATA_SASL_MECHANISM")
	env.String(&s.SecretsEndpoint, "STRATA_SECRETS_ENDPOINT")
	if env.Err != nil {
		return s, env.Err
	}
	return s, s.Validate()
}

// Validate checks s.
func (s Settings) Validate() error {
	switch {
	case s.Mechanism != SCRAMSHA512 && s.Mechanism != SCRAMSHA256:
		return fmt.Errorf("STRATA_SASL_MECHANISM %q: want %s or %s", s.Mechanism, SCRAMSHA512, SCRAMSHA256)
	case s.CASecretARN != "" && !s.TLS:
		return errors.New("STRATA_TLS_CA_SECRET_ARN is set but STRATA_TLS is false")
	case s.SASLSecretARN != "" && !s.TLS:
		return errors.New("STRATA_SASL_SECRET_ARN without TLS: the password exchange needs TLS (set STRATA_TLS_CA_SECRET_ARN or STRATA_TLS=true)")
	}
	return nil
}

// NeedsSecrets reports whether Opts reads Secrets Manager.
func (s Settings) NeedsSecrets() bool { return s.CASecretARN != "" || s.SASLSecretARN != "" }

// Secrets is the part of the Secrets Manager API Opts uses
// (*secretsmanager.Client).
type Secrets interface {
	GetSecretValue(ctx context.Context, in *secretsmanager.GetSecretValueInput, optFns ...func(*secretsmanager.Options)) (*secretsmanager.GetSecretValueOutput, error)
}

// CASecret is the shape of the CA secret.
type CASecret struct {
	Certificate string `json:"certificate"`
}

// UserSecret is the shape of a SCRAM user's secret.
type UserSecret struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

func read(ctx context.Context, sm Secrets, arn string, v any) error {
	out, err := sm.GetSecretValue(ctx, &secretsmanager.GetSecretValueInput{SecretId: &arn})
	if err != nil {
		return fmt.Errorf("read secret %s: %w", arn, err)
	}
	if out.SecretString == nil || json.Unmarshal([]byte(*out.SecretString), v) != nil {
		return fmt.Errorf("secret %s is not the JSON object expected", arn)
	}
	return nil
}

// Resolved is what the settings name, read from Secrets Manager: the TLS
// config (nil without TLS) and the SCRAM user (empty without SASL).
type Resolved struct {
	TLS            *tls.Config
	User, Password string
	Mechanism      string
}

// Resolve reads the secrets s names from sm (which may be nil when
// NeedsSecrets is false).
func (s Settings) Resolve(ctx context.Context, sm Secrets) (Resolved, error) {
	r := Resolved{Mechanism: s.Mechanism}
	if err := s.Validate(); err != nil {
		return r, err
	}
	if s.NeedsSecrets() && sm == nil {
		return r, errors.New("kafkaauth: no Secrets Manager client")
	}
	if s.TLS {
		r.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
		if s.CASecretARN != "" {
			var ca CASecret
			if err := read(ctx, sm, s.CASecretARN, &ca); err != nil {
				return r, err
			}
			pool := x509.NewCertPool()
			if !pool.AppendCertsFromPEM([]byte(ca.Certificate)) {
				return r, fmt.Errorf("secret %s: no PEM certificate under \"certificate\"", s.CASecretARN)
			}
			r.TLS.RootCAs = pool
		}
	}
	if s.SASLSecretARN != "" {
		var u UserSecret
		if err := read(ctx, sm, s.SASLSecretARN, &u); err != nil {
			return r, err
		}
		if strings.TrimSpace(u.Username) == "" || u.Password == "" {
			return r, fmt.Errorf("secret %s: want \"username\" and \"password\"", s.SASLSecretARN)
		}
		r.User, r.Password = u.Username, u.Password
	}
	return r, nil
}

// KgoOpts are the franz-go options: DialTLSConfig and SASL; none without
// TLS and SASL.
func (r Resolved) KgoOpts() []kgo.Opt {
	var opts []kgo.Opt
	if r.TLS != nil {
		opts = append(opts, kgo.DialTLSConfig(r.TLS.Clone()))
	}
	if r.User != "" {
		auth := scram.Auth{User: r.User, Pass: r.Password}
		if r.Mechanism == SCRAMSHA256 {
			opts = append(opts, kgo.SASL(auth.AsSha256Mechanism()))
		} else {
			opts = append(opts, kgo.SASL(auth.AsSha512Mechanism()))
		}
	}
	return opts
}

// RegistryOpts are the schema registry client's options: the same CA and
// the same user, by HTTP basic authentication (the registry checks the
// brokers' SCRAM users).
func (r Resolved) RegistryOpts() []sr.ClientOpt {
	var opts []sr.ClientOpt
	if r.TLS != nil {
		opts = append(opts, sr.DialTLSConfig(r.TLS.Clone()))
	}
	if r.User != "" {
		opts = append(opts, sr.BasicAuth(r.User, r.Password))
	}
	return opts
}

// Opts reads the secrets s names from sm and returns the franz-go
// options (Resolve, then KgoOpts).
func (s Settings) Opts(ctx context.Context, sm Secrets) ([]kgo.Opt, error) {
	r, err := s.Resolve(ctx, sm)
	if err != nil {
		return nil, err
	}
	return r.KgoOpts(), nil
}

// ClientOpts is what a Lambda main calls at cold start: it builds the
// Secrets Manager client (only when s needs it) and returns Opts.
func ClientOpts(ctx context.Context, s Settings) ([]kgo.Opt, error) {
	r, err := ResolveFromAWS(ctx, s)
	if err != nil {
		return nil, err
	}
	return r.KgoOpts(), nil
}

// ResolveFromAWS builds the Secrets Manager client (only when s needs it)
// and resolves s.
func ResolveFromAWS(ctx context.Context, s Settings) (Resolved, error) {
	var sm Secrets
	if s.NeedsSecrets() {
		c, err := lambdaenv.SecretsManagerClient(ctx, s.SecretsEndpoint)
		if err != nil {
			return Resolved{Mechanism: s.Mechanism}, err
		}
		sm = c
	}
	return s.Resolve(ctx, sm)
}

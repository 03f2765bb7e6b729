package main

import (
	"bytes"
	"context"
	"crypto/x509/pkix"
	"errors"
	"flag"
	"io"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/stratamq/strata/brokerfleet/internal/broker"
	"github.com/stratamq/strata/brokerfleet/internal/brokertest"
)

func applySecurityFlags(t *testing.T, args ...string) (broker.Config, string, error) {
	t.Helper()
	var sf securityFlags
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	sf.register(fs)
	require.NoError(t, fs.Parse(args))
	cfg := broker.DefaultConfig()
	listen := "127.0.0.1:9092"
	err := sf.apply(&cfg, &listen)
	return cfg, listen, err
}

func TestSecurityFlags(t *testing.T) {
	cfg, listen, err := applySecurityFlags(t)
	require.NoError(t, err)
	require.Empty(t, cfg.Security.Listeners, "off by default")
	require.Equal(t, "127.0.0.1:9092", listen)

	ca := brokertest.NewCA(t)
	cert, key := ca.Issue(t, "b", pkix.Name{CommonName: "b"})
	cfg, listen, err = applySecurityFlags(t,
		"-listeners", "EXTERNAL://0.0.0.0:9093,INTERNAL://10.0.0.5:9092",
		"-advertised-listeners", "EXTERNAL://kafka.example.com:9093",
		"-listener-security-protocol-map", "EXTERNAL:SASL_SSL,INTERNAL:PLAINTEXT",
		"-tls-cert", cert, "-tls-key", key, "-tls-client-ca", ca.CAFile,
		"-inter-broker-listener", "INTERNAL", "-authorizer", "-super-users", "User:admin; User:broker")
	require.NoError(t, err)
	require.Equal(t, "0.0.0.0:9093", listen)
	require.Equal(t, "kafka.example.com:9093", cfg.Advertise)
	require.Len(t, cfg.Security.Listeners, 2)
	require.NotNil(t, cfg.Security.Listeners[0].TLS)
	require.Equal(t, []string{"SCRAM-SHA-512", "SCRAM-SHA-256"}, cfg.Security.Listeners[0].SASLMechanisms)
	require.Nil(t, cfg.Security.Listeners[1].TLS)
	require.Nil(t, cfg.Security.InterBrokerSASL, "INTERNAL is plaintext")
	require.Nil(t, cfg.Security.InterBrokerTLS)
	require.Equal(t, []string{"User:admin", "User:broker"}, cfg.Security.SuperUsers)
	require.True(t, cfg.Security.Authorizer)
	require.NoError(t, cfg.ValidateSettings())

	for _, bad := range [][]string{
		{"-listeners", "SSL://127.0.0.1:1"},                               // no certificate
		{"-listeners", "SASL_PLAINTEXT://127.0.0.1:1"},                    // no inter-broker user
		{"-listeners", "WEIRD://127.0.0.1:1"},                             // unknown protocol
		{"-listeners", "PLAINTEXT://nohostport"},                          // bad address
		{"-inter-broker-listener", "X"},                                   // without -listeners
		{"-listeners", "PLAINTEXT://127.0.0.1:1,PLAINTEXT://127.0.0.1:2"}, // twice
	} {
		_, _, err := applySecurityFlags(t, bad...)
		require.Error(t, err, "%v", bad)
	}
	cfg, _, err = applySecurityFlags(t, "-listeners", "SASL_PLAINTEXT://127.0.0.1:1", "-sasl-mechanisms", "PLAIN", "-inter-broker-user", "b")
	require.NoError(t, err)
	require.ErrorContains(t, cfg.ValidateSettings(), "PLAIN", "PLAIN without TLS needs -sasl-plain-without-tls")

	sasl := []string{"-listeners", "SASL_PLAINTEXT://127.0.0.1:1", "-inter-broker-user", "b", "-connections-max-reauth", "1h", "-auth-failure-limit", "5"}
	cfg, _, err = applySecurityFlags(t, sasl...)
	require.NoError(t, err)
	require.Equal(t, time.Hour, cfg.Security.MaxReauth)
	require.Equal(t, 5, cfg.Security.AuthFailureLimit)
	require.ErrorContains(t, cfg.ValidateSettings(), "-allow-sasl-without-authorizer", "SASL without ACLs needs the explicit flag")
	cfg, _, err = applySecurityFlags(t, append(sasl, "-allow-sasl-without-authorizer")...)
	require.NoError(t, err)
	require.NoError(t, cfg.ValidateSettings())
	cfg, _, err = applySecurityFlags(t, append(sasl, "-authorizer")...)
	require.NoError(t, err)
	require.NoError(t, cfg.ValidateSettings())
}

// TestServeRefusesSASLWithoutAuthorizer: serve with a SASL listener and
// no -authorizer exits with a usage error naming the flag that allows it.
func TestServeRefusesSASLWithoutAuthorizer(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"serve", "-data", t.TempDir(), "-listeners", "SASL_PLAINTEXT://127.0.0.1:0", "-inter-broker-user", "b"}, &stdout, &stderr)
	require.Equal(t, 2, code, stderr.String())
	require.Contains(t, stderr.String(), "-allow-sasl-without-authorizer")
}

// TestServeSASLSSL runs `brokerfleet serve` with a SASL_SSL listener (and
// a plaintext INTERNAL one on a port chosen at start), an admin created
// from -sasl-admin, and ACLs on.
func TestServeSASLSSL(t *testing.T) {
	ca := brokertest.NewCA(t)
	cert, key := ca.Issue(t, "broker", pkix.Name{CommonName: "broker"})
	p := startProcess(t, "serve", "-data", t.TempDir(), "-auto-create-topics",
		"-listeners", "SASL_SSL://127.0.0.1:0,INTERNAL://127.0.0.1:0", "-listener-security-protocol-map", "INTERNAL:PLAINTEXT",
		"-tls-cert", cert, "-tls-key", key,
		"-sasl-admin", "admin:admin-secret", "-inter-broker-user", "admin", "-inter-broker-password", "admin-secret",
		"-authorizer", "-super-users", "User:admin", "-auth-failure-delay", "100ms")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.addr), kgo.DialTLSConfig(ca.ClientConfig(t, "", "")),
		kgo.SASL(scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha512Mechanism()), kgo.AllowAutoTopicCreation())
	require.NoError(t, err)
	defer cl.Close()
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "served", Value: []byte("v")}).FirstErr())

	bad, err := kgo.NewClient(kgo.SeedBrokers(p.addr), kgo.DialTLSConfig(ca.ClientConfig(t, "", "")),
		kgo.SASL(scram.Auth{User: "admin", Pass: "wrong"}.AsSha512Mechanism()))
	require.NoError(t, err)
	defer bad.Close()
	err = bad.Ping(ctx)
	require.True(t, errors.Is(err, kerr.SaslAuthenticationFailed), "%v", err)

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, <-p.exited, p.stderr.String())
}

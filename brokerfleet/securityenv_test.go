package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/stratamq/strata/brokerfleet/internal/broker"
	"github.com/stratamq/strata/brokerfleet/internal/brokertest"
	"github.com/stratamq/strata/brokerfleet/internal/security"
	"github.com/stratamq/strata/pkg/metastore"
)

func TestEnvNames(t *testing.T) {
	environ := []string{"STRATA_USER_B={}", "STRATA_USER_A=x", "OTHER=1", "STRATA_USERX=2"}
	require.Equal(t, []string{"OTHER", "STRATA_USER_A", "STRATA_USER_B"}, envNames(" STRATA_USER_*, OTHER,,STRATA_USER_A", environ))
	require.Empty(t, envNames("NOPE_*", environ))
}

func TestParseEnvUser(t *testing.T) {
	u, err := parseEnvUser("V", `{"username":"app","password":"s3cret:x"}`)
	require.NoError(t, err)
	require.Equal(t, envUser{from: "V", name: "app", password: "s3cret:x"}, u)
	u, err = parseEnvUser("V", "app:pa:ss")
	require.NoError(t, err)
	require.Equal(t, "pa:ss", u.password)
	for _, bad := range []string{`{"username":"app"}`, `{"password":"hunter2"`, "app", ":hunter2", "app:"} {
		_, err := parseEnvUser("V", bad)
		require.Error(t, err, bad)
		require.NotContains(t, err.Error(), "hunter2", "errors never quote a password")
		require.Contains(t, err.Error(), "V")
	}
}

func TestParseACLSpec(t *testing.T) {
	acls, err := parseACLSpec("A", "User:app topic orders read,describe;\n User:app group:literal g read ; User:app topic:prefixed logs. write\nUser:esm cluster kafka-cluster describe_configs")
	require.NoError(t, err)
	allow := int8(kmsg.ACLPermissionTypeAllow)
	lit, pre := int8(kmsg.ACLResourcePatternTypeLiteral), int8(kmsg.ACLResourcePatternTypePrefixed)
	require.Equal(t, []metastore.ACL{
		{ResourceType: 2, ResourceName: "orders", PatternType: lit, Principal: "User:app", Host: "*", Operation: int8(kmsg.ACLOperationRead), Permission: allow},
		{ResourceType: 2, ResourceName: "orders", PatternType: lit, Principal: "User:app", Host: "*", Operation: int8(kmsg.ACLOperationDescribe), Permission: allow},
		{ResourceType: 3, ResourceName: "g", PatternType: lit, Principal: "User:app", Host: "*", Operation: int8(kmsg.ACLOperationRead), Permission: allow},
		{ResourceType: 2, ResourceName: "logs.", PatternType: pre, Principal: "User:app", Host: "*", Operation: int8(kmsg.ACLOperationWrite), Permission: allow},
		{ResourceType: 4, ResourceName: "kafka-cluster", PatternType: lit, Principal: "User:esm", Host: "*", Operation: int8(kmsg.ACLOperationDescribeConfigs), Permission: allow},
	}, acls)
	for _, bad := range []string{
		"User:app topic orders",            // no operations
		"app topic orders read",            // not User:
		"User:app table orders read",       // resource type
		"User:app topic:match orders read", // pattern
		"User:app topic orders fly",        // operation
		"User:app topic orders any",        // a filter, not an operation
		"User:app cluster other describe",  // the cluster is kafka-cluster
	} {
		_, err := parseACLSpec("A", bad)
		require.Error(t, err, bad)
		require.Contains(t, err.Error(), "acls-from-env: A")
	}
}

// TestProvisionFromEnv upserts users and owned ACLs into a metastore:
// idempotent, a changed password replaces the credential, and a principal
// that is not named keeps its entries.
func TestProvisionFromEnv(t *testing.T) {
	ctx := context.Background()
	meta := brokertest.NewMeta(t)
	other := metastore.ACL{ResourceType: 2, ResourceName: "x", PatternType: 3, Principal: "User:someone", Host: "*", Operation: 3, Permission: 3}
	stale := metastore.ACL{ResourceType: 2, ResourceName: "old", PatternType: 3, Principal: "User:app", Host: "*", Operation: 3, Permission: 3}
	require.NoError(t, meta.CreateACLs(ctx, []metastore.ACL{other, stale}))

	environ := []string{"U_APP=" + `{"username":"app","password":"p1"}`, "U_ADMIN=admin:a1", "A_APP=User:app topic orders read;User:app group g read"}
	load := func() *envSecurityFlags {
		f := &envSecurityFlags{usersFromEnv: "U_*", aclsFromEnv: "A_*", env: func() []string { return environ }}
		require.NoError(t, f.load())
		return f
	}
	require.NoError(t, load().provision(ctx, meta))
	creds := func(user string) []metastore.ScramCredential {
		c, err := meta.ScramCredentials(ctx, user)
		require.NoError(t, err)
		require.Len(t, c, 2, "SCRAM-SHA-256 and SCRAM-SHA-512")
		return c
	}
	first := creds("app")
	for _, c := range first {
		require.True(t, c.CheckPassword("p1"))
	}
	require.True(t, creds("admin")[0].CheckPassword("a1"))
	acls, err := meta.ACLs(ctx)
	require.NoError(t, err)
	require.Len(t, acls, 3)
	require.Contains(t, acls, other)
	require.NotContains(t, acls, stale)

	// Again: nothing changes (same salt).
	require.NoError(t, load().provision(ctx, meta))
	require.Equal(t, first, creds("app"))
	again, err := meta.ACLs(ctx)
	require.NoError(t, err)
	require.ElementsMatch(t, acls, again)

	// A rotated password replaces the credential.
	environ[0] = "U_APP=" + `{"username":"app","password":"p2"}`
	require.NoError(t, load().provision(ctx, meta))
	for _, c := range creds("app") {
		require.True(t, c.CheckPassword("p2"))
		require.False(t, c.CheckPassword("p1"))
	}

	// A named variable that is missing is an error naming it.
	f := &envSecurityFlags{usersFromEnv: "U_APP,U_GONE", env: func() []string { return environ }}
	require.ErrorContains(t, f.load(), "U_GONE is not set")
	f = &envSecurityFlags{usersFromEnv: "NONE_*", env: func() []string { return environ }}
	require.ErrorContains(t, f.load(), "no such variables")
}

func applyWithEnv(t *testing.T, env map[string]string, args ...string) (broker.Config, string, error) {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	var sf securityFlags
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	sf.register(fs)
	require.NoError(t, parseFlags(fs, args, io.Discard, true))
	cfg := broker.DefaultConfig()
	listen := "127.0.0.1:9092"
	err := sf.apply(&cfg, &listen)
	return cfg, listen, err
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}

// TestPEMFlags builds the listener's and the inter-broker TLS from PEM
// text (one-line "\n"-escaped PEM too), and refuses mixing with files.
func TestPEMFlags(t *testing.T) {
	ca := brokertest.NewCA(t)
	cert, key := ca.Issue(t, "b", pkix.Name{CommonName: "b"})
	env := map[string]string{
		"STRATA_TLS_CERT_PEM":            strings.ReplaceAll(readFile(t, cert), "\n", `\n`),
		"STRATA_TLS_KEY_PEM":             readFile(t, key),
		"STRATA_INTER_BROKER_TLS_CA_PEM": readFile(t, ca.CAFile),
		"STRATA_INTER_BROKER_PASSWORD":   "pw",
		"STRATA_INTER_BROKER_USER":       "broker",
		"STRATA_LISTENERS":               "SASL_SSL://127.0.0.1:9093",
		"STRATA_AUTHORIZER":              "true",
		"STRATA_SASL_MECHANISMS":         "SCRAM-SHA-512",
	}
	cfg, listen, err := applyWithEnv(t, env)
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:9093", listen)
	l := cfg.Security.Listeners[0]
	require.Len(t, l.TLS.Certificates, 1)
	require.Equal(t, []string{"SCRAM-SHA-512"}, l.SASLMechanisms)
	require.NotNil(t, cfg.Security.InterBrokerTLS.RootCAs)
	require.Equal(t, "broker", cfg.Security.InterBrokerSASL.User)

	// The two configs talk to each other: a handshake over a pipe.
	srv, cli := net.Pipe()
	done := make(chan error, 1)
	go func() { done <- tls.Server(srv, l.TLS).Handshake() }()
	cc := cfg.Security.InterBrokerTLS.Clone()
	cc.ServerName = "localhost"
	require.NoError(t, tls.Client(cli, cc).Handshake())
	require.NoError(t, <-done)

	_, _, err = applyWithEnv(t, map[string]string{"STRATA_TLS_CERT": cert})
	require.ErrorContains(t, err, "exclude each other")
	_, _, err = applyWithEnv(t, map[string]string{"STRATA_TLS_CERT": "", "STRATA_TLS_KEY_PEM": "garbage"})
	require.ErrorContains(t, err, "-tls-cert-pem and -tls-key-pem")
	_, _, err = applyWithEnv(t, map[string]string{"STRATA_TLS_KEY_PEM": readFile(t, key), "STRATA_INTER_BROKER_TLS_CA_PEM": "not pem"})
	require.ErrorContains(t, err, "inter-broker-tls-ca-pem")
}

func TestAdvertisePrivateDNS(t *testing.T) {
	fakeECS(t, `{"AvailabilityZone":"eu-west-1b","Containers":[{"Networks":[{"IPv4Addresses":["10.0.3.17"],"PrivateDNSName":"ip-10-0-3-17.eu-west-1.compute.internal"}]}]}`)
	ctx := context.Background()
	cfg := broker.DefaultConfig()
	cfg.Security.Listeners = []security.Listener{{Name: "SASL_SSL", Address: "0.0.0.0:9092"}, {Name: "INTERNAL", Address: "0.0.0.0:9093"}}
	f := &envSecurityFlags{advertiseDNS: true}
	require.NoError(t, f.advertise(ctx, &cfg, "0.0.0.0:9092"))
	require.Equal(t, "ip-10-0-3-17.eu-west-1.compute.internal:9092", cfg.Advertise)
	require.Equal(t, "ip-10-0-3-17.eu-west-1.compute.internal:9093", cfg.Security.Listeners[1].Advertise)

	cfg = broker.DefaultConfig()
	require.ErrorContains(t, f.advertise(ctx, &cfg, "0.0.0.0:0"), "no fixed port")
	cfg.Advertise = "x:1"
	require.ErrorContains(t, f.advertise(ctx, &cfg, "0.0.0.0:9092"), "exclude each other")
	fakeECS(t, `{"Containers":[{"Networks":[{"IPv4Addresses":["10.0.3.17"]}]}]}`)
	cfg = broker.DefaultConfig()
	require.ErrorContains(t, f.advertise(ctx, &cfg, "0.0.0.0:9092"), "PrivateDNSName")
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestServeSecretsFromEnv runs `brokerfleet serve` configured only
// through the environment, as the ECS task is: TLS from PEM text, users
// and ACLs from variables, the advertised host from the task metadata. The
// user with ACLs on orders may produce there and nowhere else; the broker
// principal (a super user) authenticates to itself.
func TestServeSecretsFromEnv(t *testing.T) {
	ca := brokertest.NewCA(t)
	cert, key := ca.Issue(t, "broker", pkix.Name{CommonName: "broker"})
	fakeECS(t, `{"AvailabilityZone":"local-1a","Containers":[{"Networks":[{"IPv4Addresses":["127.0.0.1"],"PrivateDNSName":"localhost"}]}]}`)
	port := freePort(t)
	for k, v := range map[string]string{
		"STRATA_LISTENERS":               fmt.Sprintf("SASL_SSL://127.0.0.1:%d", port),
		"STRATA_ADVERTISE_PRIVATE_DNS":   "true",
		"STRATA_RACK":                    "auto",
		"STRATA_TLS_CERT_PEM":            readFile(t, cert),
		"STRATA_TLS_KEY_PEM":             readFile(t, key),
		"STRATA_INTER_BROKER_TLS_CA_PEM": readFile(t, ca.CAFile),
		"STRATA_SASL_MECHANISMS":         "SCRAM-SHA-512",
		"STRATA_INTER_BROKER_USER":       "broker",
		"STRATA_INTER_BROKER_PASSWORD":   "broker-pw",
		"STRATA_AUTHORIZER":              "true",
		"STRATA_SUPER_USERS":             "User:admin;User:broker",
		"STRATA_SCRAM_USERS_FROM_ENV":    "TEST_USER_*",
		"STRATA_ACLS_FROM_ENV":           "TEST_ACL_*",
		"TEST_USER_ADMIN":                `{"username":"admin","password":"admin-pw"}`,
		"TEST_USER_BROKER":               `{"username":"broker","password":"broker-pw"}`,
		"TEST_USER_APP":                  `{"username":"app","password":"app-pw"}`,
		"TEST_ACL_APP":                   "User:app topic orders write,describe",
	} {
		t.Setenv(k, v)
	}
	p := startProcess(t, "serve", "-data", t.TempDir(), "-auth-failure-delay", "50ms")
	require.Equal(t, fmt.Sprintf("localhost:%d", port), p.addr, "advertised by the task's DNS name")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM([]byte(readFile(t, ca.CAFile))))
	client := func(user, pass string) *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(p.addr), kgo.DialTLSConfig(&tls.Config{RootCAs: pool}),
			kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()), kgo.RecordRetries(1))
		require.NoError(t, err)
		t.Cleanup(cl.Close)
		return cl
	}
	adm := kadm.NewClient(client("admin", "admin-pw"))
	_, err := adm.CreateTopic(ctx, 1, 1, nil, "orders")
	require.NoError(t, err)
	_, err = adm.CreateTopic(ctx, 1, 1, nil, "payments")
	require.NoError(t, err)

	app := client("app", "app-pw")
	require.NoError(t, app.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("v")}).FirstErr())
	err = app.ProduceSync(ctx, &kgo.Record{Topic: "payments", Value: []byte("v")}).FirstErr()
	require.True(t, errors.Is(err, kerr.TopicAuthorizationFailed), "%v", err)
	acls, err := adm.DescribeACLs(ctx, kadm.NewACLs().AnyResource().Allow("User:app").AllowHosts().Operations(kadm.OpAny).ResourcePatternType(kadm.ACLPatternAny))
	require.NoError(t, err)
	require.Len(t, acls[0].Described, 2)

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, <-p.exited, p.stderr.String())
}

package main

import (
	"context"
	"crypto/x509/pkix"
	"errors"
	"flag"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/stratamq/strata/brokerfleet/internal/broker"
	"github.com/stratamq/strata/brokerfleet/internal/brokertest"
)

// registryFlags parses serve's security and HTTP flags and resolves the
// registry's.
func registryFlags(t *testing.T, args ...string) (registrySecurity, error) {
	t.Helper()
	var sf securityFlags
	var hf httpFlags
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	sf.register(fs)
	hf.register(fs)
	require.NoError(t, fs.Parse(args))
	cfg := broker.DefaultConfig()
	listen := "127.0.0.1:9092"
	require.NoError(t, sf.apply(&cfg, &listen))
	return hf.registry(&cfg.Security, &sf, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

func TestRegistrySecurityFlags(t *testing.T) {
	ca := brokertest.NewCA(t)
	cert, key := ca.Issue(t, "b", pkix.Name{CommonName: "b"})
	rs, err := registryFlags(t)
	require.NoError(t, err)
	require.Equal(t, registrySecurity{}, rs, "open and plain without security")

	_, err = registryFlags(t, "-authorizer")
	require.ErrorContains(t, err, "in the clear", "ACLs on: basic authentication, which needs TLS")
	rs, err = registryFlags(t, "-authorizer", "-registry-tls", "off")
	require.NoError(t, err)
	require.True(t, rs.basic)
	require.Nil(t, rs.tls, "plain HTTP when asked for explicitly")

	rs, err = registryFlags(t, "-listeners", "SASL_SSL://:9093", "-tls-cert", cert, "-tls-key", key,
		"-inter-broker-user", "broker", "-inter-broker-password", "pw")
	require.NoError(t, err)
	require.True(t, rs.basic, "a SASL listener: basic authentication")
	require.NotNil(t, rs.tls, "the broker's certificate is reused")

	rs, err = registryFlags(t, "-authorizer", "-registry-auth", "none")
	require.NoError(t, err)
	require.Equal(t, registrySecurity{}, rs, "anonymous, checked against the ACLs as User:ANONYMOUS")

	rs, err = registryFlags(t, "-registry-auth", "basic", "-registry-tls-cert", cert, "-registry-tls-key", key)
	require.NoError(t, err)
	require.True(t, rs.basic)
	require.NotNil(t, rs.tls)

	for _, args := range [][]string{
		{"-registry-tls", "on"},
		{"-registry-tls-cert", cert},
		{"-registry-tls", "maybe"},
		{"-registry-auth", "digest"},
		{"-registry-tls-cert", key, "-registry-tls-key", key},
	} {
		_, err := registryFlags(t, args...)
		require.Error(t, err, "%v", args)
	}
}

func TestMetricsAuth(t *testing.T) {
	for _, bad := range []string{"user", ":pw", "user:"} {
		_, err := (&httpFlags{metricsAuth: bad}).metricsCreds()
		require.Error(t, err, bad)
	}
	creds, err := (&httpFlags{metricsAuth: "prom:s3:cret"}).metricsCreds()
	require.NoError(t, err)
	h := withMetricsAuth(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") }), creds)
	get := func(path, remote, user, pass string) int {
		req := httptest.NewRequest("GET", path, nil)
		req.RemoteAddr = remote
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code == http.StatusUnauthorized {
			require.Contains(t, rec.Header().Get("WWW-Authenticate"), "Basic realm=")
		}
		return rec.Code
	}
	const local, remote, local6 = "127.0.0.1:5000", "10.0.3.7:5000", "[::1]:5000"
	require.Equal(t, 401, get("/metrics", local, "", ""), "metrics need credentials, on loopback too")
	require.Equal(t, 401, get("/metrics", remote, "prom", "wrong"))
	require.Equal(t, 401, get("/metrics", remote, "other", "s3:cret"))
	require.Equal(t, 200, get("/metrics", remote, "prom", "s3:cret"))
	for _, p := range []string{"/healthz", "/readyz"} {
		require.Equal(t, 200, get(p, local, "", ""), "%s: the container's health check, on loopback", p)
		require.Equal(t, 200, get(p, local6, "", ""), p)
		require.Equal(t, 401, get(p, remote, "", ""), "%s: from elsewhere it needs credentials", p)
		require.Equal(t, 200, get(p, remote, "prom", "s3:cret"), p)
	}
	require.Nil(t, withMetricsAuth(nil, nil), "no credentials: the handler itself")
}

// TestRegistryACLs serves a real broker's registry the way serve does with
// -authorizer: basic authentication against the broker's SCRAM users and
// its ACL cache, kept current by CreateAcls and DeleteAcls over Kafka.
// Confluent's client settings (franz-go sr with BasicAuth) work.
func TestRegistryACLs(t *testing.T) {
	b := brokertest.Start(t, func(c *broker.Config) {
		c.Security.Authorizer = true
		c.Security.SuperUsers = []string{"User:ANONYMOUS"} // the test's plaintext admin client
	})
	srv := httptest.NewServer(registryHandler(b.Broker, registrySecurity{basic: true}, []*broker.Broker{b.Broker}))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := brokertest.Admin(t, b.Addr)
	_, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "alice-pw"},
		{User: "bob", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "bob-pw"},
	})
	require.NoError(t, err)
	client := func(opts ...sr.ClientOpt) *sr.Client {
		cl, err := sr.NewClient(append([]sr.ClientOpt{sr.URLs(srv.URL)}, opts...)...)
		require.NoError(t, err)
		return cl
	}
	alice, bob := client(sr.BasicAuth("alice", "alice-pw")), client(sr.BasicAuth("bob", "bob-pw"))
	wantCode := func(err error, status, code int) {
		t.Helper()
		var re *sr.ResponseError
		require.True(t, errors.As(err, &re), "got %v, want HTTP %d", err, status)
		require.Equal(t, status, re.StatusCode, "%s", re.Message)
		require.Equal(t, code, re.ErrorCode, "%s", re.Message)
	}
	schema := sr.Schema{Schema: `{"type":"record","name":"Order","fields":[{"name":"id","type":"long"}]}`}

	_, err = client().CreateSchema(ctx, "orders-value", schema)
	wantCode(err, http.StatusUnauthorized, 40101)
	_, err = client(sr.BasicAuth("alice", "wrong")).CreateSchema(ctx, "orders-value", schema)
	wantCode(err, http.StatusUnauthorized, 40101)
	_, err = alice.CreateSchema(ctx, "orders-value", schema)
	wantCode(err, http.StatusForbidden, 40301)

	acl := kadm.NewACLs().Allow("User:alice").AllowHosts().Topics("orders").Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternLiteral)
	res, err := adm.CreateACLs(ctx, acl)
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	s, err := alice.CreateSchema(ctx, "orders-value", schema)
	require.NoError(t, err, "WRITE on the topic registers its value schema")
	got, err := alice.SchemaByID(ctx, s.ID)
	require.NoError(t, err)
	require.Equal(t, sr.TypeAvro, got.Type)
	_, err = alice.CreateSchema(ctx, "payments-value", schema)
	wantCode(err, http.StatusForbidden, 40301)
	_, err = bob.SchemaByID(ctx, s.ID)
	wantCode(err, http.StatusForbidden, 40301)
	wantCode(bob.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatNone}, "orders-value")[0].Err, http.StatusForbidden, 40301)

	// A prefixed READ lets bob read, not change, the subjects of its topics.
	readPay := kadm.NewACLs().Allow("User:bob").AllowHosts().Topics("ord").Operations(kadm.OpRead).ResourcePatternType(kadm.ACLPatternPrefixed)
	_, err = adm.CreateACLs(ctx, readPay)
	require.NoError(t, err)
	got, err = bob.SchemaByID(ctx, s.ID)
	require.NoError(t, err, "READ on the topic of a subject using the id")
	subjects, err := bob.Subjects(ctx)
	require.NoError(t, err)
	require.Equal(t, []string{"orders-value"}, subjects)
	_, err = bob.DeleteSubject(ctx, "orders-value", sr.SoftDelete)
	wantCode(err, http.StatusForbidden, 40301)

	// Deleting the ACL takes the right away.
	_, err = adm.DeleteACLs(ctx, acl)
	require.NoError(t, err)
	_, err = alice.CreateSchema(ctx, "orders-value", sr.Schema{Schema: `"string"`})
	wantCode(err, http.StatusForbidden, 40301)

	// The lag history beside the registry: the same authentication, and
	// DESCRIBE on the group.
	get := func(path, user, pass string) int {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, "GET", srv.URL+path, nil)
		require.NoError(t, err)
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	lag := func(user, pass string) int { return get("/strata/v1/groups/billing/lag", user, pass) }
	require.Equal(t, http.StatusUnauthorized, lag("", ""))
	require.Equal(t, http.StatusUnauthorized, lag("alice", "wrong"))
	require.Equal(t, http.StatusForbidden, lag("alice", "alice-pw"))
	describe := kadm.NewACLs().Allow("User:alice").AllowHosts().Groups("billing").Operations(kadm.OpDescribe).ResourcePatternType(kadm.ACLPatternLiteral)
	_, err = adm.CreateACLs(ctx, describe)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return lag("alice", "alice-pw") == http.StatusNotFound }, 10*time.Second, 50*time.Millisecond,
		"DESCRIBE on the group: no history of a group nobody committed for")
	// Partition sizes: DESCRIBE on the topic (bob's READ on ord*).
	require.Equal(t, http.StatusUnauthorized, get("/strata/v1/topics/orders/sizes", "", ""))
	require.Equal(t, http.StatusForbidden, get("/strata/v1/topics/payments/sizes", "bob", "bob-pw"))
	require.Equal(t, http.StatusNotFound, get("/strata/v1/topics/orders/sizes", "bob", "bob-pw"), "no such topic")
	require.Equal(t, http.StatusNotFound, get("/strata/v1/nothing", "bob", "bob-pw"))
}

// TestServeRegistryTLSAndMetricsAuth runs serve with -authorizer, the
// broker's certificate and -metrics-auth: the registry answers HTTPS only,
// with basic authentication and ACLs; /metrics needs its credentials while
// the loopback health check does not; neither is on the other's port.
func TestServeRegistryTLSAndMetricsAuth(t *testing.T) {
	ca := brokertest.NewCA(t)
	cert, key := ca.Issue(t, "broker", pkix.Name{CommonName: "broker"})
	free := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer ln.Close()
		return ln.Addr().String()
	}
	regAddr, httpAddr := free(), free()
	p := startProcess(t, "serve", "-listen", "127.0.0.1:0", "-data", t.TempDir(), "-authorizer", "-super-users", "User:ANONYMOUS",
		"-tls-cert", cert, "-tls-key", key, "-registry", regAddr, "-http", httpAddr, "-metrics-auth", "prom:scrape-pw")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := brokertest.Admin(t, p.addr)
	_, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "alice-pw"}})
	require.NoError(t, err)
	_, err = adm.CreateACLs(ctx, kadm.NewACLs().Allow("User:alice").AllowHosts().Topics("orders").Operations(kadm.OpWrite).ResourcePatternType(kadm.ACLPatternLiteral))
	require.NoError(t, err)

	resp, err := http.Get("http://" + regAddr + "/subjects")
	if err == nil {
		resp.Body.Close()
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, "plain HTTP to the HTTPS registry")
	}
	tlsOpt := sr.DialTLSConfig(ca.ClientConfig(t, "", ""))
	anon, err := sr.NewClient(sr.URLs("https://"+regAddr), tlsOpt)
	require.NoError(t, err)
	_, err = anon.Subjects(ctx)
	var re *sr.ResponseError
	require.True(t, errors.As(err, &re) && re.StatusCode == 401 && re.ErrorCode == 40101, "%v", err)
	alice, err := sr.NewClient(sr.URLs("https://"+regAddr), tlsOpt, sr.BasicAuth("alice", "alice-pw"))
	require.NoError(t, err)
	_, err = alice.CreateSchema(ctx, "payments-value", sr.Schema{Schema: `"string"`})
	require.True(t, errors.As(err, &re) && re.StatusCode == 403 && re.ErrorCode == 40301, "%v", err)
	_, err = alice.CreateSchema(ctx, "orders-value", sr.Schema{Schema: `"string"`})
	require.NoError(t, err)

	get := func(url, user, pass string) (int, string) {
		req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
		require.NoError(t, err)
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	status, _ := get("http://"+httpAddr+"/metrics", "", "")
	require.Equal(t, 401, status)
	status, body := get("http://"+httpAddr+"/metrics", "prom", "scrape-pw")
	require.Equal(t, 200, status)
	require.Contains(t, body, "strata_requests_total")
	require.Eventually(t, func() bool { s, _ := get("http://"+httpAddr+"/healthz", "", ""); return s == 200 }, 10*time.Second, 50*time.Millisecond,
		"the health check on loopback needs no credentials")
	var out, errOut strings.Builder
	require.Equal(t, 0, run([]string{"health", "-http", httpAddr}, &out, &errOut), errOut.String())
	// Neither listener serves the other's paths.
	err = alice.Do(ctx, "GET", "/metrics", nil, nil)
	require.True(t, errors.As(err, &re) && re.StatusCode == 404, "the registry has no /metrics: %v", err)
	status, _ = get("http://"+httpAddr+"/subjects", "prom", "scrape-pw")
	require.Equal(t, 404, status)
}

package broker_test

import (
	"context"
	"crypto/x509/pkix"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/stratamq/strata/brokerfleet/internal/security"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/stratamq/strata/brokerfleet/internal/broker"
	"github.com/stratamq/strata/brokerfleet/internal/brokertest"
	"github.com/stratamq/strata/pkg/metastore"
)

// secureBroker is a broker whose default listener is TLS with SASL.
type secureBroker struct {
	*brokertest.Broker
	ca   *brokertest.TestCA
	meta *metastore.Meta
}

// addUser stores SCRAM-SHA-256 and -512 credentials for user.
func addUser(t testing.TB, meta *metastore.Meta, user, password string) {
	t.Helper()
	for _, mech := range []string{metastore.ScramSHA256, metastore.ScramSHA512} {
		c, err := metastore.NewScramCredential(user, mech, password, 4096)
		require.NoError(t, err)
		require.NoError(t, meta.PutScramCredential(context.Background(), c))
	}
}

// startSASLSSL runs a broker whose only listener is SASL_SSL (SCRAM and
// PLAIN), with users admin and alice; opts adjust the config.
func startSASLSSL(t *testing.T, opts ...brokertest.Option) *secureBroker {
	ca := brokertest.NewCA(t)
	certFile, keyFile := ca.Issue(t, "broker", pkix.Name{CommonName: "broker"})
	srvTLS, err := security.ServerTLS(certFile, keyFile, "")
	require.NoError(t, err)
	meta := brokertest.NewMeta(t)
	addUser(t, meta, "admin", "admin-secret")
	addUser(t, meta, "alice", "alice-secret")
	b := brokertest.Start(t, append([]brokertest.Option{func(c *broker.Config) {
		c.Meta = meta
		c.Security.Listeners = []security.Listener{{
			Name: "SASL_SSL", TLS: srvTLS,
			SASLMechanisms: []string{security.MechSCRAM512, security.MechSCRAM256, security.MechPlain},
		}}
		c.Security.AuthFailureDelay = 200 * time.Millisecond
		c.Security.AllowSASLWithoutAuthorizer = true
	}}, opts...)...)
	return &secureBroker{Broker: b, ca: ca, meta: meta}
}

func (s *secureBroker) client(t *testing.T, mech sasl.Mechanism, opts ...kgo.Opt) *kgo.Client {
	return brokertest.Client(t, s.Addr, append([]kgo.Opt{
		kgo.DialTLSConfig(s.ca.ClientConfig(t, "", "")), kgo.SASL(mech),
		kgo.RequestRetries(1), kgo.RetryTimeout(3 * time.Second),
	}, opts...)...)
}

func TestSASLSCRAMOverTLSProducesAndConsumes(t *testing.T) {
	s := startSASLSSL(t)
	for _, tc := range []struct {
		name string
		mech sasl.Mechanism
	}{
		{"SCRAM-SHA-512", scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()},
		{"SCRAM-SHA-256", scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism()},
		{"PLAIN", plain.Auth{User: "alice", Pass: "alice-secret"}.AsMechanism()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic := "secure-" + tc.name
			cl := s.client(t, tc.mech, kgo.AllowAutoTopicCreation())
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("hello")}).FirstErr())
			cons := s.client(t, tc.mech, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
			fs := cons.PollFetches(ctx)
			require.NoError(t, fs.Err())
			require.Equal(t, "hello", string(fs.Records()[0].Value))
		})
	}
}

func TestSASLWrongPasswordFails(t *testing.T) {
	s := startSASLSSL(t)
	for _, mech := range []sasl.Mechanism{
		scram.Auth{User: "alice", Pass: "wrong"}.AsSha512Mechanism(),
		scram.Auth{User: "nobody", Pass: "x"}.AsSha256Mechanism(),
		plain.Auth{User: "alice", Pass: "wrong"}.AsMechanism(),
	} {
		cl := s.client(t, mech)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		start := time.Now()
		err := cl.Ping(ctx)
		cancel()
		require.Error(t, err, mech.Name())
		require.True(t, errors.Is(err, kerr.SaslAuthenticationFailed), "%s: %v", mech.Name(), err)
		require.GreaterOrEqual(t, time.Since(start), 200*time.Millisecond, "failures are answered after the delay")
	}
}

// TestSASLRequiredBeforeOtherRequests: on a SASL listener a Metadata
// request before authentication closes the connection; ApiVersions works.
func TestSASLRequiredBeforeOtherRequests(t *testing.T) {
	b := brokertest.Start(t, func(c *broker.Config) {
		c.Security.Listeners = []security.Listener{{Name: "SASL_PLAINTEXT", SASLMechanisms: []string{security.MechSCRAM512}}}
		c.Security.AllowSASLWithoutAuthorizer = true
	})
	c := rawConn(t, b.Addr)
	_, err := c.Write(frame(18, 0, 1, nil))
	require.NoError(t, err)
	require.Equal(t, int32(1), int32(beUint32(readResponse(t, c))))
	_, err = c.Write(frame(3, 1, 2, []byte{0xff, 0xff, 0xff, 0xff}))
	require.NoError(t, err)
	requireClosed(t, c)

	// A large frame before authentication is refused unread.
	c = rawConn(t, b.Addr)
	_, err = c.Write([]byte{0, 0x10, 0, 0}) // 1 MiB
	require.NoError(t, err)
	requireClosed(t, c)
}

func beUint32(b []byte) uint32 {
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func TestPlainRequiresTLSUnlessAllowed(t *testing.T) {
	cfg := broker.DefaultConfig()
	cfg.Meta = brokertest.NewMeta(t)
	cfg.Security.Listeners = []security.Listener{{Name: "SASL_PLAINTEXT", SASLMechanisms: []string{security.MechPlain}}}
	cfg.Security.AllowSASLWithoutAuthorizer = true
	require.ErrorContains(t, cfg.Validate(), "PLAIN")
	cfg.Security.Listeners[0].AllowPlainWithoutTLS = true
	require.NoError(t, cfg.Validate())
}

// TestTLSPortRefusesPlaintextAndGarbage: a plaintext Kafka client and
// random bytes on the TLS port get a closed connection, cheaply.
func TestTLSPortRefusesPlaintextAndGarbage(t *testing.T) {
	s := startSASLSSL(t)
	for _, payload := range [][]byte{
		frame(18, 0, 1, nil),                        // plaintext ApiVersions
		{0x16, 0x03, 0x01, 0xff, 0xff, 1, 2, 3},     // a TLS record header claiming 64 KiB
		{0x7f, 0xff, 0xff, 0xff, 0xde, 0xad, 0xbe},  // a 2 GiB frame size
		[]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), // wrong protocol
	} {
		c := rawConn(t, s.Addr)
		_, err := c.Write(payload)
		require.NoError(t, err)
		requireClosedOrReset(t, c)
	}
}

func requireClosedOrReset(t *testing.T, c net.Conn) {
	t.Helper()
	buf := make([]byte, 4096)
	for {
		if _, err := c.Read(buf); err != nil {
			var ne net.Error
			require.False(t, errors.As(err, &ne) && ne.Timeout(), "connection left open: %v", err)
			return
		}
	}
}

// TestMutualTLSPrincipal: with client certificates required, a client
// without one is refused and one with a certificate is served as the
// certificate's subject.
func TestMutualTLSPrincipal(t *testing.T) {
	ca := brokertest.NewCA(t)
	certFile, keyFile := ca.Issue(t, "broker", pkix.Name{CommonName: "broker"})
	srvTLS, err := security.ServerTLS(certFile, keyFile, ca.CAFile)
	require.NoError(t, err)
	meta := brokertest.NewMeta(t)
	b := brokertest.Start(t, func(c *broker.Config) {
		c.Meta = meta
		c.Security.Listeners = []security.Listener{{Name: "SSL", TLS: srvTLS}}
		c.Security.Authorizer = true
		c.Security.SuperUsers = []string{"User:CN=admin,O=strata"}
	})
	adminCert, adminKey := ca.Issue(t, "admin", pkix.Name{CommonName: "admin", Organization: []string{"strata"}})
	bobCert, bobKey := ca.Issue(t, "bob", pkix.Name{CommonName: "bob"})

	noCert := brokertest.Client(t, b.Addr, kgo.DialTLSConfig(ca.ClientConfig(t, "", "")), kgo.RetryTimeout(2*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.Error(t, noCert.Ping(ctx))

	admin := brokertest.Client(t, b.Addr, kgo.DialTLSConfig(ca.ClientConfig(t, adminCert, adminKey)))
	createTopicOn(t, admin, "mtls", 1, 1)

	bob := brokertest.Client(t, b.Addr, kgo.DialTLSConfig(ca.ClientConfig(t, bobCert, bobKey)), kgo.RetryTimeout(2*time.Second))
	err = bob.ProduceSync(ctx, &kgo.Record{Topic: "mtls", Value: []byte("x")}).FirstErr()
	require.ErrorIs(t, err, kerr.TopicAuthorizationFailed)

	createACLs(t, admin, kmsg.CreateACLsRequestCreation{
		ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: "mtls", ResourcePatternType: kmsg.ACLResourcePatternTypeLiteral,
		Principal: "User:CN=bob", Host: "*", Operation: kmsg.ACLOperationWrite, PermissionType: kmsg.ACLPermissionTypeAllow,
	})
	require.NoError(t, bob.ProduceSync(ctx, &kgo.Record{Topic: "mtls", Value: []byte("x")}).FirstErr())
}

func createACLs(t *testing.T, cl *kgo.Client, cs ...kmsg.CreateACLsRequestCreation) {
	t.Helper()
	req := kmsg.NewPtrCreateACLsRequest()
	req.Creations = cs
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	require.NoError(t, err)
	for _, r := range resp.Results {
		require.Zero(t, r.ErrorCode, "create acl: %v", r.ErrorMessage)
	}
}

// createTopicOn creates a topic through cl (which may carry credentials).
func createTopicOn(t *testing.T, cl *kgo.Client, name string, partitions int32, rf int16) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, rf, nil, name)
	if err == nil {
		err = resp.Err
	}
	require.NoError(t, err)
}

// TestSASLHandshakeV0RawTokens: after SaslHandshake v0 the client sends a
// bare SASL token (KIP-43); PLAIN succeeds with an empty bare answer, and
// a wrong password closes the connection.
func TestSASLHandshakeV0RawTokens(t *testing.T) {
	meta := brokertest.NewMeta(t)
	addUser(t, meta, "alice", "alice-secret")
	b := brokertest.Start(t, func(c *broker.Config) {
		c.Meta = meta
		c.Security.Listeners = []security.Listener{{Name: "SASL_PLAINTEXT", SASLMechanisms: []string{security.MechPlain}, AllowPlainWithoutTLS: true}}
		c.Security.AllowSASLWithoutAuthorizer = true
		c.Security.AuthFailureDelay = 50 * time.Millisecond
	})
	login := func(password string) net.Conn {
		c := rawConn(t, b.Addr)
		mech := []byte{0, 5, 'P', 'L', 'A', 'I', 'N'}
		_, err := c.Write(frame(17, 0, 1, mech))
		require.NoError(t, err)
		resp := readResponse(t, c)
		require.Equal(t, []byte{0, 0}, resp[4:6], "handshake error code")
		token := []byte("\x00alice\x00" + password)
		_, err = c.Write(append([]byte{0, 0, 0, byte(len(token))}, token...))
		require.NoError(t, err)
		return c
	}
	c := login("alice-secret")
	require.Empty(t, readResponse(t, c), "an empty bare token answers PLAIN")
	_, err := c.Write(frame(3, 1, 2, []byte{0xff, 0xff, 0xff, 0xff})) // Metadata v1, all topics
	require.NoError(t, err)
	require.Equal(t, uint32(2), beUint32(readResponse(t, c)))

	requireClosed(t, login("wrong"))
}

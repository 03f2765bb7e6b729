package broker_test

// Authentication hardening: re-authentication (KIP-368), sessions of
// deleted users, SASL without ACLs, who may manage credentials, unknown
// users, the failed-login limiter and the credential cache.

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	xscram "github.com/xdg-go/scram"

	"github.com/stratamq/strata/brokerfleet/internal/broker"
	"github.com/stratamq/strata/brokerfleet/internal/brokertest"
	"github.com/stratamq/strata/brokerfleet/internal/security"
	kwire "github.com/stratamq/strata/brokerfleet/internal/wire"
	"github.com/stratamq/strata/pkg/metastore"
	"github.com/stratamq/strata/pkg/metastore/embedded"
)

// credStore counts the credential reads (Gets of the users partition) per
// user.
type credStore struct {
	metastore.Store
	mu    sync.Mutex
	reads map[string]int
}

func (s *credStore) Get(ctx context.Context, k metastore.Key) (metastore.Item, error) {
	if k.PK == "users" {
		user, _, _ := strings.Cut(k.SK, "/")
		s.mu.Lock()
		s.reads[user]++
		s.mu.Unlock()
	}
	return s.Store.Get(ctx, k)
}

func (s *credStore) readsOf(user string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads[user]
}

// saslBroker is a broker whose only listener is SASL_PLAINTEXT with
// SCRAM-SHA-512, ACLs off by the explicit flag, User:admin a super user.
type saslBroker struct {
	*brokertest.Broker
	meta  *metastore.Meta
	store *credStore
}

// startSASL starts a saslBroker with users admin, alice and the extra
// ones (password: name + "-secret"); opts adjust the config.
func startSASL(t *testing.T, users []string, opts ...brokertest.Option) *saslBroker {
	raw, err := embedded.Open(filepath.Join(t.TempDir(), "metastore.db"))
	require.NoError(t, err)
	t.Cleanup(func() { raw.Close() })
	store := &credStore{Store: raw, reads: map[string]int{}}
	meta := metastore.New(store)
	for _, u := range append([]string{"admin", "alice"}, users...) {
		addUser(t, meta, u, u+"-secret")
	}
	b := brokertest.Start(t, append([]brokertest.Option{func(c *broker.Config) {
		c.Meta = meta
		c.Security.Listeners = []security.Listener{{Name: "SASL_PLAINTEXT", SASLMechanisms: []string{security.MechSCRAM512}}}
		c.Security.AllowSASLWithoutAuthorizer = true
		c.Security.SuperUsers = []string{"User:admin"}
		c.Security.AuthFailureDelay = 20 * time.Millisecond
	}}, opts...)...)
	return &saslBroker{Broker: b, meta: meta, store: store}
}

func (s *saslBroker) client(t *testing.T, user, pass string, opts ...kgo.Opt) *kgo.Client {
	return brokertest.Client(t, s.Addr, append([]kgo.Opt{
		kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()),
		kgo.RequestRetries(1), kgo.RetryTimeout(3 * time.Second),
	}, opts...)...)
}

// rawLogin opens a connection to addr from local (nil: any address) and
// logs in as user with SCRAM-SHA-512; it returns the connection and the
// login's lifetime.
func rawLogin(t *testing.T, addr string, local net.Addr, user, pass string) (*kwire.Conn, time.Duration, error) {
	t.Helper()
	d := net.Dialer{LocalAddr: local, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	pc := kwire.NewConn(c, "raw", 0, 64<<10)
	lifetime, err := relogin(pc, user, pass)
	return pc, lifetime, err
}

// relogin (re-)authenticates pc as user.
func relogin(pc *kwire.Conn, user, pass string) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return security.Authenticate(ctx, pc, security.SASLCredentials{Mechanism: security.MechSCRAM512, User: user, Password: pass})
}

// metadataOn sends a Metadata request on pc: nil when answered.
func metadataOn(pc *kwire.Conn) error {
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 7
	_, err := pc.Do(req, 5*time.Second)
	return err
}

// reauthLog counts franz-go's re-authentications.
type reauthLog struct{ n atomic.Int32 }

func (l *reauthLog) Level() kgo.LogLevel { return kgo.LogLevelDebug }
func (l *reauthLog) Log(_ kgo.LogLevel, msg string, _ ...any) {
	if strings.Contains(msg, "reauthenticating") {
		l.n.Add(1)
	}
}

// connCount counts franz-go's connections.
type connCount struct{ connects, disconnects atomic.Int32 }

func (c *connCount) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if err == nil {
		c.connects.Add(1)
	}
}
func (c *connCount) OnBrokerDisconnect(kgo.BrokerMetadata, net.Conn) { c.disconnects.Add(1) }

// TestSASLReauthenticationKeepsFranzGoWorking: with
// connections.max.reauth.ms at 2 s, SaslAuthenticate answers that
// lifetime and a franz-go producer and consumer keep working for three
// lifetimes on the connections they opened, re-authenticating on them.
func TestSASLReauthenticationKeepsFranzGoWorking(t *testing.T) {
	const lifetime = 2 * time.Second
	s := startSASL(t, nil, func(c *broker.Config) { c.Security.MaxReauth = lifetime })
	_, got, err := rawLogin(t, s.Addr, nil, "alice", "alice-secret")
	require.NoError(t, err)
	require.Equal(t, lifetime, got, "SessionLifetimeMs")

	var log reauthLog
	var conns connCount
	prod := s.client(t, "alice", "alice-secret", kgo.AllowAutoTopicCreation(), kgo.WithLogger(&log), kgo.WithHooks(&conns))
	cons := s.client(t, "alice", "alice-secret", kgo.ConsumeTopics("reauth"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.WithLogger(&log), kgo.WithHooks(&conns))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, prod.ProduceSync(ctx, &kgo.Record{Topic: "reauth", Value: []byte("0")}).FirstErr())
	sent, consumed := 1, 0
	poll := func() {
		for consumed < sent {
			fs := cons.PollFetches(ctx)
			require.NoError(t, fs.Err())
			consumed += fs.NumRecords()
		}
	}
	poll()
	opened := conns.connects.Load()
	for end := time.Now().Add(3 * lifetime); time.Now().Before(end); {
		require.NoError(t, prod.ProduceSync(ctx, &kgo.Record{Topic: "reauth", Value: []byte("v")}).FirstErr())
		sent++
		poll()
		time.Sleep(100 * time.Millisecond)
	}
	require.GreaterOrEqual(t, log.n.Load(), int32(4), "franz-go re-authenticated (producer and consumer, twice each)")
	require.Equal(t, opened, conns.connects.Load(), "no new connections: the old ones were renewed")
	require.Zero(t, conns.disconnects.Load(), "no connection was closed")
}

// TestSASLExpiredLoginClosesTheConnection: a client that does not
// re-authenticate within the lifetime has its connection closed at its
// next request, whatever it is; one that re-authenticates in time keeps
// it.
func TestSASLExpiredLoginClosesTheConnection(t *testing.T) {
	s := startSASL(t, nil, func(c *broker.Config) { c.Security.MaxReauth = time.Second })
	stale, lifetime, err := rawLogin(t, s.Addr, nil, "alice", "alice-secret")
	require.NoError(t, err)
	require.Equal(t, time.Second, lifetime)
	renewed, _, err := rawLogin(t, s.Addr, nil, "alice", "alice-secret")
	require.NoError(t, err)
	versions := kmsg.NewPtrApiVersionsRequest()
	apiVersions := func(pc *kwire.Conn) error { _, err := pc.Do(versions, 5*time.Second); return err }
	stale2, _, err := rawLogin(t, s.Addr, nil, "alice", "alice-secret")
	require.NoError(t, err)
	require.NoError(t, metadataOn(stale))

	time.Sleep(600 * time.Millisecond)
	_, err = relogin(renewed, "alice", "alice-secret")
	require.NoError(t, err, "re-authentication on the connection")
	time.Sleep(600 * time.Millisecond) // past the first login's lifetime

	require.NoError(t, metadataOn(renewed), "a renewed login is served")
	require.Error(t, metadataOn(stale), "an expired login's Metadata closes the connection")
	require.Error(t, apiVersions(stale2), "so does its ApiVersions")
	_, err = relogin(stale2, "alice", "alice-secret")
	require.Error(t, err, "re-authenticating too late")
}

// TestSASLDeletedUserSessionsEnd: deleting a user's credential ends its
// sessions: through AlterUserScramCredentials at its next request; in the
// metastore by another broker or tool (a metadata change) at the next
// request after the broker sees the change; and removed behind the
// metastore's back, at its next re-authentication, which takes no cached
// credential over a second old (so within connections.max.reauth.ms).
func TestSASLDeletedUserSessionsEnd(t *testing.T) {
	s := startSASL(t, []string{"bob", "carol"}, func(c *broker.Config) { c.Security.MaxReauth = time.Minute })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(s.client(t, "admin", "admin-secret"))

	alice, _, err := rawLogin(t, s.Addr, nil, "alice", "alice-secret")
	require.NoError(t, err)
	var conns connCount
	aliceClient := s.client(t, "alice", "alice-secret", kgo.AllowAutoTopicCreation(), kgo.WithHooks(&conns))
	require.NoError(t, aliceClient.ProduceSync(ctx, &kgo.Record{Topic: "deleted", Value: []byte("v")}).FirstErr())
	require.NoError(t, metadataOn(alice))
	res, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "alice", Mechanism: 2}}, nil)
	require.NoError(t, err)
	require.NoError(t, res.Error())
	require.Error(t, metadataOn(alice), "the next request after AlterUserScramCredentials closes the connection")
	pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
	require.Error(t, aliceClient.Ping(pctx), "franz-go's connection is closed at its next request")
	require.ErrorIs(t, aliceClient.Ping(pctx), kerr.SaslAuthenticationFailed, "and it cannot log in again")
	pcancel()
	require.NotZero(t, conns.disconnects.Load())

	bob, _, err := rawLogin(t, s.Addr, nil, "bob", "bob-secret")
	require.NoError(t, err)
	require.NoError(t, metadataOn(bob))
	require.NoError(t, s.meta.DeleteScramCredential(ctx, "bob", metastore.ScramSHA512)) // as another broker would
	require.Eventually(t, func() bool { return metadataOn(bob) != nil }, 5*time.Second, 20*time.Millisecond,
		"the broker ends bob's session once it sees the change")

	carol, _, err := rawLogin(t, s.Addr, nil, "carol", "carol-secret")
	require.NoError(t, err)
	require.NoError(t, s.store.Delete(ctx, metastore.Key{PK: "users", SK: "carol/" + metastore.ScramSHA512}, metastore.Always))
	require.NoError(t, metadataOn(carol), "nothing told the broker")
	time.Sleep(time.Second) // a re-authentication takes cached credentials under a second old
	_, err = relogin(carol, "carol", "carol-secret")
	require.ErrorIs(t, err, kerr.SaslAuthenticationFailed, "re-authentication reads the credential afresh")
	require.Error(t, metadataOn(carol))
}

// scramSteps runs a SCRAM-SHA-512 login on a raw connection and reports
// the step that failed (1: client-first, 2: client-final), its error code
// and message.
func scramSteps(t *testing.T, addr, user, pass string) (step int, code int16, msg string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	pc := kwire.NewConn(c, "raw", 0, 64<<10)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, security.MechSCRAM512
	r, err := pc.Do(hs, 5*time.Second)
	require.NoError(t, err)
	require.Zero(t, r.(*kmsg.SASLHandshakeResponse).ErrorCode)
	cl, err := xscram.SHA512.NewClient(user, pass, "")
	require.NoError(t, err)
	conv := cl.NewConversation()
	msgOut, err := conv.Step("")
	require.NoError(t, err)
	for step = 1; ; step++ {
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.Version, req.SASLAuthBytes = 1, []byte(msgOut)
		r, err := pc.Do(req, 5*time.Second)
		require.NoError(t, err)
		resp := r.(*kmsg.SASLAuthenticateResponse)
		if resp.ErrorCode != 0 {
			if resp.ErrorMessage != nil {
				msg = *resp.ErrorMessage
			}
			return step, resp.ErrorCode, msg
		}
		if msgOut, err = conv.Step(string(resp.SASLAuthBytes)); err != nil || conv.Done() {
			return 0, 0, ""
		}
	}
}

// TestSASLUnknownUserFailsLikeAWrongPassword: an unknown user gets a
// server-first message and fails at the client-final message, with the
// code and message a wrong password gets.
func TestSASLUnknownUserFailsLikeAWrongPassword(t *testing.T) {
	s := startSASL(t, nil)
	wrongStep, wrongCode, wrongMsg := scramSteps(t, s.Addr, "alice", "not-her-password")
	unknownStep, unknownCode, unknownMsg := scramSteps(t, s.Addr, "mallory", "anything")
	require.Equal(t, 2, wrongStep, "a wrong password fails at the client-final message")
	require.Equal(t, wrongStep, unknownStep, "an unknown user fails at the same step")
	require.Equal(t, kerr.SaslAuthenticationFailed.Code, wrongCode)
	require.Equal(t, wrongCode, unknownCode)
	require.Equal(t, wrongMsg, unknownMsg)
	step, _, _ := scramSteps(t, s.Addr, "alice", "alice-secret")
	require.Zero(t, step, "the right password logs in")
}

// TestSASLWithoutAuthorizerRefusesToStart: a SASL listener needs
// -authorizer, or the flag that allows running without it.
func TestSASLWithoutAuthorizerRefusesToStart(t *testing.T) {
	cfg := broker.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Meta = brokertest.NewMeta(t)
	cfg.Security.Listeners = []security.Listener{{Name: "SASL_PLAINTEXT", SASLMechanisms: []string{security.MechSCRAM512}}}
	require.ErrorContains(t, cfg.Validate(), "-allow-sasl-without-authorizer")
	_, err := broker.New(cfg)
	require.ErrorContains(t, err, "-authorizer")
	cfg.Security.AllowSASLWithoutAuthorizer = true
	require.NoError(t, cfg.Validate())
	cfg.Security.AllowSASLWithoutAuthorizer, cfg.Security.Authorizer = false, true
	require.NoError(t, cfg.Validate())
}

// TestSCRAMCredentialsNeedASuperUserWithoutACLs: with SASL on and ACLs
// off, only a super user may describe or change SCRAM credentials;
// without any security (dev) anyone may.
func TestSCRAMCredentialsNeedASuperUserWithoutACLs(t *testing.T) {
	s := startSASL(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	alice := kadm.NewClient(s.client(t, "alice", "alice-secret"))
	alter := func(del []kadm.DeleteSCRAM, up []kadm.UpsertSCRAM) error {
		res, err := alice.AlterUserSCRAMs(ctx, del, up)
		if err == nil {
			err = res.Error()
		}
		return err
	}
	err := alter(nil, []kadm.UpsertSCRAM{{User: "admin", Mechanism: 2, Iterations: 4096, Password: "taken-over"}})
	require.ErrorIs(t, err, kerr.ClusterAuthorizationFailed, "alice may not change admin's password")
	err = alter([]kadm.DeleteSCRAM{{User: "admin", Mechanism: 2}}, nil)
	require.ErrorIs(t, err, kerr.ClusterAuthorizationFailed, "nor delete it")
	_, err = alice.DescribeUserSCRAMs(ctx)
	require.ErrorIs(t, err, kerr.ClusterAuthorizationFailed, "nor list the users")

	admin := kadm.NewClient(s.client(t, "admin", "admin-secret"))
	res, err := admin.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "carol", Mechanism: 2, Iterations: 4096, Password: "carol-pw"}})
	require.NoError(t, err)
	require.NoError(t, res.Error(), "the super user may")
	_, _, err = rawLogin(t, s.Addr, nil, "admin", "admin-secret")
	require.NoError(t, err, "admin's password is unchanged")
	desc, err := admin.DescribeUserSCRAMs(ctx)
	require.NoError(t, err)
	require.Contains(t, desc, "carol")

	dev := brokertest.Start(t)
	res, err = brokertest.Admin(t, dev.Addr).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "carol", Mechanism: 2, Iterations: 4096, Password: "carol-pw"}})
	require.NoError(t, err)
	require.NoError(t, res.Error(), "without security, anyone may")
}

// TestSASLFailedLoginLimiterStopsOneAddress: after the limit of failed logins
// from 127.0.0.1 even its right password is refused (without a credential
// read), while 127.0.0.2 still logs in.
func TestSASLFailedLoginLimiterStopsOneAddress(t *testing.T) {
	s := startSASL(t, nil, func(c *broker.Config) { c.Security.AuthFailureLimit = 3 })
	one := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}
	two := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}
	for i := 0; i < 3; i++ {
		_, _, err := rawLogin(t, s.Addr, one, "alice", "wrong")
		require.ErrorIs(t, err, kerr.SaslAuthenticationFailed)
	}
	reads := s.store.readsOf("alice") + s.store.readsOf("mallory")
	for i := 0; i < 20; i++ {
		_, _, err := rawLogin(t, s.Addr, one, "mallory", "guess")
		require.ErrorIs(t, err, kerr.SaslAuthenticationFailed)
	}
	_, _, err := rawLogin(t, s.Addr, one, "alice", "alice-secret")
	require.ErrorIs(t, err, kerr.SaslAuthenticationFailed, "the flooding address is refused even the right password")
	require.Equal(t, reads, s.store.readsOf("alice")+s.store.readsOf("mallory"), "refused logins read no credentials")

	pc, _, err := rawLogin(t, s.Addr, two, "alice", "alice-secret")
	require.NoError(t, err, "another address logs in")
	require.NoError(t, metadataOn(pc))
}

// TestSASLCredentialCacheIsUsedAndInvalidated: logins within a few seconds
// read the credential once; changing it through any broker drops the
// cached copy on every broker (a metadata change), so the new password
// works at once.
func TestSASLCredentialCacheIsUsedAndInvalidated(t *testing.T) {
	s := startSASL(t, nil)
	other := brokertest.Start(t, func(c *broker.Config) {
		c.Meta, c.NodeID, c.Security = s.meta, 1, s.Cfg.Security
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	login := func(addr, pass string) error {
		_, _, err := rawLogin(t, addr, nil, "alice", pass)
		return err
	}
	cached := false
	for deadline := time.Now().Add(10 * time.Second); !cached && time.Now().Before(deadline); {
		v, _ := s.meta.ChangeVersion(ctx)
		before := s.store.readsOf("alice")
		for i := 0; i < 5; i++ {
			require.NoError(t, login(s.Addr, "alice-secret"))
		}
		after, _ := s.meta.ChangeVersion(ctx)
		// A metadata change meanwhile drops the cache: try again.
		cached = s.store.readsOf("alice")-before <= 1 && after == v
	}
	require.True(t, cached, "five logins read the credential at most once")
	require.NoError(t, login(other.Addr, "alice-secret")) // cached on the other broker too

	adm := kadm.NewClient(s.client(t, "admin", "admin-secret"))
	reads := s.store.readsOf("alice")
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "alice", Mechanism: 2, Iterations: 4096, Password: "new-secret"}})
	require.NoError(t, err)
	require.NoError(t, res.Error())
	require.NoError(t, login(s.Addr, "new-secret"), "the broker that changed it forgot the old one")
	require.ErrorIs(t, login(s.Addr, "alice-secret"), kerr.SaslAuthenticationFailed)
	require.Greater(t, s.store.readsOf("alice"), reads)
	start := time.Now()
	require.Eventually(t, func() bool { return login(other.Addr, "new-secret") == nil }, 5*time.Second, 50*time.Millisecond)
	require.Less(t, time.Since(start), 2*time.Second, "the other broker dropped its copy at the change, not at the TTL")
}

// TestSASLFollowersReauthenticate: with connections.max.reauth.ms at 1 s,
// followers renew their login on the connection they fetch on (no new
// connections) and stay in the ISR, so acks=all produce keeps working.
func TestSASLFollowersReauthenticate(t *testing.T) {
	var dials atomic.Int32
	opts := func(c *broker.Config) {
		c.Security.MaxReauth = time.Second
		c.Security.InterBrokerSASL = &security.SASLCredentials{Mechanism: security.MechSCRAM512, User: "broker", Password: "broker-secret"}
		c.ReplicaLagMax = 2 * time.Second
		c.DialPeer = func(ctx context.Context, addr string) (net.Conn, error) {
			dials.Add(1)
			var d net.Dialer
			return d.DialContext(ctx, "tcp", addr)
		}
	}
	s := startSASL(t, []string{"broker"}, opts)
	brokertest.Start(t, func(c *broker.Config) {
		c.Meta, c.NodeID = s.meta, 1
		c.Security = s.Cfg.Security
		opts(c)
	})
	admin := s.client(t, "admin", "admin-secret", kgo.RequiredAcks(kgo.AllISRAcks()))
	minISR := "2"
	createTopicOnWithConfig(t, admin, "reauth-r2", 1, 2, map[string]*string{"min.insync.replicas": &minISR})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, admin.ProduceSync(ctx, &kgo.Record{Topic: "reauth-r2", Value: []byte("v")}).FirstErr())
	opened := dials.Load()
	for end := time.Now().Add(4 * time.Second); time.Now().Before(end); {
		require.NoError(t, admin.ProduceSync(ctx, &kgo.Record{Topic: "reauth-r2", Value: []byte("v")}).FirstErr())
		time.Sleep(50 * time.Millisecond)
	}
	// A fresh client: admin's metadata connection sat idle past its
	// lifetime, and such a connection is closed at its next request, the
	// re-authentication included (as in Kafka).
	pm := metadataVia(t, s.client(t, "admin", "admin-secret"), "reauth-r2").Topics[0].Partitions[0]
	require.ElementsMatch(t, pm.Replicas, pm.ISR, "the follower stayed in sync")
	require.Equal(t, opened, dials.Load(), "the follower renewed its login on its connection")
}

package broker_test

import (
	"bytes"
	"context"
	"crypto/x509/pkix"
	"math/rand/v2"
	"net"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stratamq/strata/brokerfleet/internal/security"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/stratamq/strata/brokerfleet/internal/broker"
	"github.com/stratamq/strata/brokerfleet/internal/brokertest"
)

// requester is a *kgo.Client (any broker) or a *kgo.Broker (that one).
type requester interface {
	Request(context.Context, kmsg.Request) (kmsg.Response, error)
}

// metadataVia asks for metadata through r.
func metadataVia(t *testing.T, r requester, topics ...string) *kmsg.MetadataResponse {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	for _, n := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(n)
		req.Topics = append(req.Topics, rt)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := r.Request(ctx, req)
	require.NoError(t, err)
	return resp.(*kmsg.MetadataResponse)
}

func brokerAddrs(resp *kmsg.MetadataResponse) []string {
	var out []string
	for _, b := range resp.Brokers {
		out = append(out, net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))))
	}
	return out
}

// TestSASLClusterReplicatesAndAdvertisesPerListener runs three brokers
// whose default listener is SASL_SSL (also used between brokers, with
// SCRAM-SHA-512 as User:broker) plus a plaintext INTERNAL listener each.
// A topic with min.insync.replicas=3 accepts acks=all writes only if both
// followers replicate through the authenticated listener; Metadata names
// the addresses of the listener asked.
func TestSASLClusterReplicatesAndAdvertisesPerListener(t *testing.T) {
	ca := brokertest.NewCA(t)
	certFile, keyFile := ca.Issue(t, "broker", pkix.Name{CommonName: "broker"})
	srvTLS, err := security.ServerTLS(certFile, keyFile, "")
	require.NoError(t, err)
	peerTLS, err := security.ClientTLS(ca.CAFile, "", "")
	require.NoError(t, err)
	meta := brokertest.NewMeta(t)
	addUser(t, meta, "admin", "admin-secret")
	addUser(t, meta, "broker", "broker-secret")
	addUser(t, meta, "alice", "alice-secret")

	var brokers []*brokertest.Broker
	var internal []string
	for id := 0; id < 3; id++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		internal = append(internal, ln.Addr().String())
		b := brokertest.Start(t, func(c *broker.Config) {
			c.Meta, c.NodeID, c.ReplicaLagMax = meta, int32(id), 2*time.Second
			c.Security = security.Config{
				Listeners: []security.Listener{
					{Name: "SASL_SSL", TLS: srvTLS, SASLMechanisms: []string{security.MechSCRAM512}},
					{Name: "INTERNAL", Advertise: ln.Addr().String()},
				},
				InterBrokerListener: "SASL_SSL",
				InterBrokerTLS:      peerTLS,
				InterBrokerSASL:     &security.SASLCredentials{Mechanism: security.MechSCRAM512, User: "broker", Password: "broker-secret"},
				Authorizer:          true,
				SuperUsers:          []string{"User:admin", "User:broker"},
			}
		})
		go b.ServeListener("INTERNAL", ln)
		brokers = append(brokers, b)
	}
	admin := func(addr string) *kgo.Client {
		return brokertest.Client(t, addr, kgo.DialTLSConfig(ca.ClientConfig(t, "", "")),
			kgo.SASL(scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha512Mechanism()))
	}
	cl := admin(brokers[0].Addr)
	plain := brokertest.Client(t, internal[1])
	external := []string{brokers[0].Addr, brokers[1].Addr, brokers[2].Addr}
	for id := int32(0); id < 3; id++ {
		waitFor(t, "three brokers", func() bool { return len(metadataVia(t, cl.Broker(int(id))).Brokers) == 3 })
		require.ElementsMatch(t, external, brokerAddrs(metadataVia(t, cl.Broker(int(id)))))
		waitFor(t, "three brokers on INTERNAL", func() bool { return len(metadataVia(t, plain.Broker(int(id))).Brokers) == 3 })
		require.ElementsMatch(t, internal, brokerAddrs(metadataVia(t, plain.Broker(int(id)))), "the INTERNAL listener advertises INTERNAL addresses")
	}
	// Anonymous on INTERNAL, with ACLs on: no topics visible.
	require.Empty(t, metadataVia(t, plain).Topics)

	mir := "3"
	createTopicOnWithConfig(t, cl, "sasl-r3", 1, 3, map[string]*string{"min.insync.replicas": &mir})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	prod := admin(brokers[2].Addr)
	for i := 0; i < 50; i++ {
		require.NoError(t, prod.ProduceSync(ctx, &kgo.Record{Topic: "sasl-r3", Value: []byte("v")}).FirstErr())
	}
	time.Sleep(3 * time.Second) // past ReplicaLagMax: a follower that could not fetch would have left the ISR
	pm := metadataVia(t, cl, "sasl-r3").Topics[0].Partitions[0]
	require.ElementsMatch(t, pm.Replicas, pm.ISR, "followers replicate over SASL_SSL")
	require.NoError(t, prod.ProduceSync(ctx, &kgo.Record{Topic: "sasl-r3", Value: []byte("after")}).FirstErr())

	// An ACL created through one broker holds on every broker once
	// CreateAcls has answered (read-your-writes).
	alice := brokertest.Client(t, brokers[0].Addr, kgo.DialTLSConfig(ca.ClientConfig(t, "", "")),
		kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism()))
	for id := 1; id < 3; id++ {
		require.Equal(t, kerr.TopicAuthorizationFailed.Code, metadataVia(t, alice.Broker(id), "sasl-r3").Topics[0].ErrorCode)
	}
	acl := kmsg.NewPtrCreateACLsRequest()
	acl.Creations = []kmsg.CreateACLsRequestCreation{{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: "sasl-r3", ResourcePatternType: kmsg.ACLResourcePatternTypeLiteral,
		Principal: "User:alice", Host: "*", Operation: kmsg.ACLOperationDescribe, PermissionType: kmsg.ACLPermissionTypeAllow}}
	ar, err := cl.Broker(0).Request(ctx, acl)
	require.NoError(t, err)
	require.Zero(t, ar.(*kmsg.CreateACLsResponse).Results[0].ErrorCode)
	for id := 1; id < 3; id++ {
		require.Zero(t, metadataVia(t, alice.Broker(id), "sasl-r3").Topics[0].ErrorCode, "broker %d did not apply the ACL before CreateAcls answered", id)
	}
}

func createTopicOnWithConfig(t *testing.T, cl *kgo.Client, name string, partitions int32, rf int16, configs map[string]*string) {
	t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, partitions, rf
	for k, v := range configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, v
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	req.TimeoutMillis = 10000
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.NoError(t, kerr.ErrorForCode(resp.Topics[0].ErrorCode))
}

// TestACLsEnforcedAndMetadataFiltered: alice sees and uses only what her
// ACLs grant; the admin (a super user) manages ACLs through the API.
func TestACLsEnforcedAndMetadataFiltered(t *testing.T) {
	s := startSASLSSL(t, func(c *broker.Config) {
		c.Security.Authorizer = true
		c.Security.SuperUsers = []string{"User:admin"}
	})
	admin := s.client(t, scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha512Mechanism())
	alice := s.client(t, scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism())
	createTopicOn(t, admin, "visible", 1, 1)
	createTopicOn(t, admin, "hidden", 1, 1)
	allow := func(rt kmsg.ACLResourceType, name string, op kmsg.ACLOperation) kmsg.CreateACLsRequestCreation {
		return kmsg.CreateACLsRequestCreation{ResourceType: rt, ResourceName: name, ResourcePatternType: kmsg.ACLResourcePatternTypeLiteral,
			Principal: "User:alice", Host: "*", Operation: op, PermissionType: kmsg.ACLPermissionTypeAllow}
	}
	createACLs(t, admin,
		allow(kmsg.ACLResourceTypeTopic, "visible", kmsg.ACLOperationRead),
		allow(kmsg.ACLResourceTypeTopic, "visible", kmsg.ACLOperationWrite),
		allow(kmsg.ACLResourceTypeGroup, "g-alice", kmsg.ACLOperationRead),
	)

	// Metadata: all topics lists only "visible"; asking for "hidden" is refused.
	all := metadataVia(t, alice)
	require.Len(t, all.Topics, 1)
	require.Equal(t, "visible", *all.Topics[0].Topic)
	hidden := metadataVia(t, alice, "hidden", "visible", "nonexistent")
	codes := map[string]int16{}
	for _, tp := range hidden.Topics {
		codes[*tp.Topic] = tp.ErrorCode
	}
	require.Equal(t, map[string]int16{"hidden": kerr.TopicAuthorizationFailed.Code, "visible": 0, "nonexistent": kerr.TopicAuthorizationFailed.Code}, codes)
	require.Len(t, metadataVia(t, admin).Topics, 2)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, alice.ProduceSync(ctx, &kgo.Record{Topic: "visible", Value: []byte("ok")}).FirstErr())
	require.ErrorIs(t, alice.ProduceSync(ctx, &kgo.Record{Topic: "hidden", Value: []byte("no")}).FirstErr(), kerr.TopicAuthorizationFailed)

	// Consuming in her group works; in another group it is refused.
	cons := s.client(t, scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism(),
		kgo.ConsumeTopics("visible"), kgo.ConsumerGroup("g-alice"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fs := cons.PollFetches(ctx)
	require.NoError(t, fs.Err())
	require.Equal(t, "ok", string(fs.Records()[0].Value))
	require.NoError(t, cons.CommitUncommittedOffsets(ctx))

	join := kmsg.NewPtrJoinGroupRequest()
	join.Group, join.ProtocolType, join.SessionTimeoutMillis, join.RebalanceTimeoutMillis = "g-other", "consumer", 10000, 10000
	join.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range"}}
	_, err := join.RequestWith(ctx, alice) // FindCoordinator already refuses the group
	require.ErrorIs(t, err, kerr.GroupAuthorizationFailed)

	// Cluster-level requests: refused for alice, served for the admin.
	desc := kmsg.NewPtrDescribeACLsRequest()
	desc.ResourceType, desc.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
	desc.Operation, desc.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	dr, err := desc.RequestWith(ctx, alice)
	require.NoError(t, err)
	require.Equal(t, kerr.ClusterAuthorizationFailed.Code, dr.ErrorCode)
	dr, err = desc.RequestWith(ctx, admin)
	require.NoError(t, err)
	require.Zero(t, dr.ErrorCode)
	n := 0
	for _, r := range dr.Resources {
		n += len(r.ACLs)
	}
	require.Equal(t, 3, n)

	ct := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "alice-new", 1, 1
	ct.Topics = append(ct.Topics, rt)
	ctr, err := ct.RequestWith(ctx, alice)
	require.NoError(t, err)
	require.Equal(t, kerr.TopicAuthorizationFailed.Code, ctr.Topics[0].ErrorCode)

	// Deleting her READ on the topic takes it out of her view.
	del := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourceName, f.ResourcePatternType = kmsg.ACLResourceTypeTopic, kmsg.StringPtr("visible"), kmsg.ACLResourcePatternTypeLiteral
	f.Operation, f.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	del.Filters = append(del.Filters, f)
	delr, err := del.RequestWith(ctx, admin)
	require.NoError(t, err)
	require.Zero(t, delr.Results[0].ErrorCode)
	require.Len(t, delr.Results[0].MatchingACLs, 2)
	require.Empty(t, metadataVia(t, alice).Topics)
}

// TestSCRAMUsersThroughTheAdminAPI: AlterUserScramCredentials creates a
// user who can then log in; DescribeUserScramCredentials lists it without
// secrets; deleting it stops new logins. With ACLs off the admin must be
// a super user.
func TestSCRAMUsersThroughTheAdminAPI(t *testing.T) {
	s := startSASLSSL(t, func(c *broker.Config) { c.Security.SuperUsers = []string{"User:admin"} })
	admin := s.client(t, scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha512Mechanism())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	adm := kadm.NewClient(admin)
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "carol", Mechanism: 2, Iterations: 4096, Password: "carol-pw"}})
	require.NoError(t, err)
	require.NoError(t, res.Error())
	desc, err := adm.DescribeUserSCRAMs(ctx, "carol", "nobody")
	require.NoError(t, err)
	require.Len(t, desc["carol"].CredInfos, 1)
	require.Equal(t, int32(4096), desc["carol"].CredInfos[0].Iterations)
	require.ErrorIs(t, desc["nobody"].Err, kerr.ResourceNotFound)

	carol := s.client(t, scram.Auth{User: "carol", Pass: "carol-pw"}.AsSha512Mechanism())
	require.NoError(t, carol.Ping(ctx))

	bad, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "dave", Mechanism: 2, Iterations: 100, Password: "x"}})
	if err == nil {
		err = bad.Error()
	}
	require.Error(t, err, "too few iterations")

	res, err = adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "carol", Mechanism: 2}}, nil)
	require.NoError(t, err)
	require.NoError(t, res.Error())
	late := s.client(t, scram.Auth{User: "carol", Pass: "carol-pw"}.AsSha512Mechanism())
	require.ErrorIs(t, late.Ping(ctx), kerr.SaslAuthenticationFailed)
}

// TestKcatSCRAMOverTLS: librdkafka produces and consumes with
// SCRAM-SHA-512 over TLS.
func TestKcatSCRAMOverTLS(t *testing.T) {
	kcat := brokertest.RequireTool(t, "kcat")
	s := startSASLSSL(t)
	admin := s.client(t, scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha512Mechanism())
	createTopicOn(t, admin, "kcat-secure", 1, 1)
	args := func(user, pass string, more ...string) []string {
		return append([]string{"-b", s.Addr, "-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=SCRAM-SHA-512",
			"-X", "sasl.username=" + user, "-X", "sasl.password=" + pass, "-X", "ssl.ca.location=" + s.ca.CAFile, "-t", "kcat-secure"}, more...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p := exec.CommandContext(ctx, kcat, args("alice", "alice-secret", "-P")...)
	p.Stdin = strings.NewReader("one\ntwo\nthree\n")
	out, err := p.CombinedOutput()
	require.NoError(t, err, "kcat -P: %s", out)
	c := exec.CommandContext(ctx, kcat, args("alice", "alice-secret", "-C", "-o", "beginning", "-e", "-c", "3")...)
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	require.NoError(t, c.Run(), "kcat -C: %s", stderr.String())
	require.Equal(t, "one\ntwo\nthree\n", stdout.String())

	w := exec.CommandContext(ctx, kcat, args("alice", "wrong", "-L", "-m", "5")...)
	out, err = w.CombinedOutput()
	require.Error(t, err, "wrong password: %s", out)
	require.Contains(t, strings.ToLower(string(out)), "authentication")
}

// TestGarbageOnEveryListenerIsCheap: random bytes, and a frame claiming
// 100 MiB, on a plaintext, a SASL and a TLS listener get the connection
// closed without the broker allocating anything like the claimed size.
func TestGarbageOnEveryListenerIsCheap(t *testing.T) {
	s := startSASLSSL(t) // default listener: SASL_SSL
	plainLn, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	saslLn, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	b2 := brokertest.Start(t, func(c *broker.Config) {
		c.Meta = s.meta
		c.NodeID = 1
		c.Security.Listeners = []security.Listener{
			{Name: "PLAINTEXT"},
			{Name: "SASL_PLAINTEXT", Advertise: saslLn.Addr().String(), SASLMechanisms: []string{security.MechSCRAM256}},
			{Name: "OTHER", Advertise: plainLn.Addr().String()},
		}
		c.Security.AllowSASLWithoutAuthorizer = true
	})
	go b2.ServeListener("SASL_PLAINTEXT", saslLn)
	go b2.ServeListener("OTHER", plainLn)

	rng := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 8192)
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	huge := append([]byte{0x06, 0x40, 0, 0}, random[:4096]...) // claims 100 MiB
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for _, addr := range []string{s.Addr, b2.Addr, saslLn.Addr().String(), plainLn.Addr().String()} {
		for _, payload := range [][]byte{random, huge} {
			c, err := net.Dial("tcp", addr)
			require.NoError(t, err)
			require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
			_, _ = c.Write(payload)
			_ = c.(*net.TCPConn).CloseWrite() // the sender is done: a broker waiting for more sees EOF
			requireClosedOrReset(t, c)
			c.Close()
		}
	}
	runtime.ReadMemStats(&after)
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(24<<20), "allocated while refusing garbage")
}

// TestSecondListenerAnswersWithItsAddresses: a consumer group on a
// second listener is sent to that listener's addresses by Metadata,
// FindCoordinator and DescribeCluster, and works.
func TestSecondListenerAnswersWithItsAddresses(t *testing.T) {
	other, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	b := brokertest.Start(t, func(c *broker.Config) {
		c.Security.Listeners = []security.Listener{{Name: "PLAINTEXT"}, {Name: "OTHER", Advertise: other.Addr().String()}}
	})
	go b.ServeListener("OTHER", other)
	addr := other.Addr().String()
	cl := brokertest.Client(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	require.Equal(t, []string{addr}, brokerAddrs(metadataVia(t, cl)))
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKeys = []string{"grp"}
	fr, err := fc.RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Zero(t, fr.Coordinators[0].ErrorCode)
	require.Equal(t, addr, net.JoinHostPort(fr.Coordinators[0].Host, strconv.Itoa(int(fr.Coordinators[0].Port))))
	// FindCoordinator v2 (one key, answered in the top-level fields), raw.
	fc2 := kmsg.NewPtrFindCoordinatorRequest()
	fc2.Version, fc2.CoordinatorKey = 2, "grp"
	raw := rawConn(t, addr)
	_, err = raw.Write(frame(10, 2, 9, fc2.AppendTo(nil)))
	require.NoError(t, err)
	r2 := kmsg.NewPtrFindCoordinatorResponse()
	r2.Version = 2
	require.NoError(t, r2.ReadFrom(readResponse(t, raw)[4:]))
	require.Zero(t, r2.ErrorCode)
	require.Equal(t, addr, net.JoinHostPort(r2.Host, strconv.Itoa(int(r2.Port))))
	dc, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Equal(t, addr, net.JoinHostPort(dc.Brokers[0].Host, strconv.Itoa(int(dc.Brokers[0].Port))))
	// The default listener still names its own address.
	require.Equal(t, []string{b.Addr}, brokerAddrs(metadataVia(t, brokertest.Client(t, b.Addr))))

	prod := brokertest.Client(t, addr, kgo.AllowAutoTopicCreation())
	require.NoError(t, prod.ProduceSync(ctx, &kgo.Record{Topic: "other-l", Value: []byte("x")}).FirstErr())
	cons := brokertest.Client(t, addr, kgo.ConsumeTopics("other-l"), kgo.ConsumerGroup("grp"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fs := cons.PollFetches(ctx)
	require.NoError(t, fs.Err())
	require.Equal(t, 1, fs.NumRecords())
}

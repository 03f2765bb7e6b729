package broker_test

import (
	"context"
	"fmt"
	"net"
	"sync"
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
	"github.com/stratamq/strata/pkg/segment"
)

// fetchConn sends Fetch requests (v12 unless version is set) over one raw
// connection and reports the bytes of each frame, both ways.
type fetchConn struct {
	t       *testing.T
	c       net.Conn
	corr    int32
	version int16
}

func newFetchConn(t *testing.T, addr string) *fetchConn {
	return &fetchConn{t: t, c: rawConn(t, addr)}
}

func (fc *fetchConn) do(req *kmsg.FetchRequest) (resp *kmsg.FetchResponse, sent, got int) {
	fc.t.Helper()
	fc.corr++
	req.Version = max(fc.version, 12)
	f := flexFrame(1, req.Version, fc.corr, req.AppendTo(nil))
	require.NoError(fc.t, fc.c.SetDeadline(time.Now().Add(time.Duration(req.MaxWaitMillis)*time.Millisecond+10*time.Second)))
	_, err := fc.c.Write(f)
	require.NoError(fc.t, err)
	raw := readResponse(fc.t, fc.c)
	resp = kmsg.NewPtrFetchResponse()
	resp.Version = req.Version
	require.NoError(fc.t, resp.ReadFrom(raw[5:]))
	return resp, len(f), len(raw) + 4
}

// sessionFetch is a fetch of session id at epoch with maxWait, listing
// parts of topicName at their offsets.
func sessionFetch(id, epoch int32, maxWait int32, topicName string, parts map[int32]int64) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.SessionID, req.SessionEpoch = id, epoch
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = maxWait, 1, 50<<20
	if len(parts) > 0 {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topicName
		for p := int32(0); p < 10000 && len(rt.Partitions) < len(parts); p++ {
			if off, ok := parts[p]; ok {
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, off, 1<<20
				rt.Partitions = append(rt.Partitions, rp)
			}
		}
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// answered lists the partitions of resp with their record batch counts.
func answered(t *testing.T, resp *kmsg.FetchResponse) map[int32]int {
	t.Helper()
	out := map[int32]int{}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			require.Zero(t, rp.ErrorCode, "partition %d: %v", rp.Partition, kerr.ErrorForCode(rp.ErrorCode))
			out[rp.Partition] = batchCount(t, rp.RecordBatches)
		}
	}
	return out
}

// TestFetchSessionsIdleBytes: a consumer's fetch over 1,000 idle
// partitions costs bytes in proportion to the partition count without a
// session and a constant few dozen with one (KIP-227); incremental
// answers carry only what changed, and franz-go, which uses sessions by
// default, gets the same saving.
func TestFetchSessionsIdleBytes(t *testing.T) {
	b := brokertest.Start(t, func(c *broker.Config) { c.FS = segment.NewMemFS() })
	const parts = 1000
	brokertest.CreateTopic(t, b.Addr, "idle", parts, nil)
	all := map[int32]int64{}
	for p := int32(0); p < parts; p++ {
		all[p] = 0
	}
	fc := newFetchConn(t, b.Addr)

	// Before: a sessionless full fetch (what every fetch was).
	resp, fullReq, fullResp := fc.do(sessionFetch(0, -1, 0, "idle", all))
	require.Zero(t, resp.SessionID)
	require.Len(t, answered(t, resp), parts)

	// A full fetch with epoch 0 creates a session, answered whole.
	resp, _, _ = fc.do(sessionFetch(0, 0, 0, "idle", all))
	id := resp.SessionID
	require.NotZero(t, id, "a session was created")
	require.Len(t, answered(t, resp), parts)

	// After: an idle incremental fetch lists nothing and gets nothing.
	resp, incReq, incResp := fc.do(sessionFetch(id, 1, 0, "idle", nil))
	require.Zero(t, resp.ErrorCode)
	require.Equal(t, id, resp.SessionID)
	require.Empty(t, resp.Topics)
	t.Logf("idle fetch of %d partitions (consumer, v12): sessionless %d B request / %d B response; incremental %d B / %d B",
		parts, fullReq, fullResp, incReq, incResp)
	require.Greater(t, fullReq, 10*parts)
	require.Greater(t, fullResp, 20*parts)
	require.Less(t, incReq, 80)
	require.Less(t, incResp, 40)

	// A produce: only that partition is answered, with its records.
	cl := brokertest.Client(t, b.Addr, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	produceTo := func(p int32, n int) {
		t.Helper()
		var rs []*kgo.Record
		for i := 0; i < n; i++ {
			rs = append(rs, &kgo.Record{Topic: "idle", Partition: p, Value: []byte(fmt.Sprint(i))})
		}
		require.NoError(t, cl.ProduceSync(context.Background(), rs...).FirstErr())
	}
	produceTo(7, 3)
	resp, _, _ = fc.do(sessionFetch(id, 2, 0, "idle", nil))
	require.Equal(t, map[int32]int{7: 1}, answered(t, resp))
	require.EqualValues(t, 3, resp.Topics[0].Partitions[0].HighWatermark)
	// The client tells its new offset; nothing is new.
	resp, _, _ = fc.do(sessionFetch(id, 3, 0, "idle", map[int32]int64{7: 3}))
	require.Empty(t, resp.Topics)

	// A waiting incremental fetch wakes for a produce anywhere in the
	// session and answers that partition only.
	done := make(chan *kmsg.FetchResponse, 1)
	go func() {
		resp, _, _ := fc.do(sessionFetch(id, 4, 10_000, "idle", nil))
		done <- resp
	}()
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	produceTo(500, 1)
	resp = <-done
	require.Less(t, time.Since(start), 5*time.Second, "woken, not timed out")
	require.Equal(t, map[int32]int{500: 1}, answered(t, resp))

	// A large record set (written from its own buffer, uncopied) in an
	// incremental answer.
	require.NoError(t, cl.ProduceSync(context.Background(), &kgo.Record{Topic: "idle", Partition: 3, Value: make([]byte, 20<<10)}).FirstErr())
	resp, _, _ = fc.do(sessionFetch(id, 5, 0, "idle", map[int32]int64{500: 1}))
	require.Equal(t, map[int32]int{3: 1}, answered(t, resp))
	require.Greater(t, len(resp.Topics[0].Partitions[0].RecordBatches), 20<<10)

	// Forgotten partitions are no longer read: a produce to one is not
	// answered.
	forget := sessionFetch(id, 6, 0, "idle", map[int32]int64{3: 1})
	forget.ForgottenTopics = []kmsg.FetchRequestForgottenTopic{{Topic: "idle", Partitions: []int32{9}}}
	resp, _, _ = fc.do(forget)
	require.Empty(t, resp.Topics)
	produceTo(9, 1)
	resp, _, _ = fc.do(sessionFetch(id, 7, 0, "idle", nil))
	require.Empty(t, resp.Topics)

	// Session errors: top-level, no partitions.
	resp, _, _ = fc.do(sessionFetch(id, 7, 0, "idle", nil))
	require.Equal(t, kerr.InvalidFetchSessionEpoch.Code, resp.ErrorCode)
	require.Empty(t, resp.Topics)
	require.Zero(t, resp.SessionID)
	resp, _, _ = fc.do(sessionFetch(id+1, 1, 0, "idle", nil))
	require.Equal(t, kerr.FetchSessionIDNotFound.Code, resp.ErrorCode)
	// Epoch -1 closes it.
	resp, _, _ = fc.do(sessionFetch(id, -1, 0, "idle", map[int32]int64{0: 0}))
	require.Zero(t, resp.ErrorCode)
	require.Zero(t, resp.SessionID)
	resp, _, _ = fc.do(sessionFetch(id, 8, 0, "idle", nil))
	require.Equal(t, kerr.FetchSessionIDNotFound.Code, resp.ErrorCode)

	// franz-go: bytes per fetch once it has caught up and idles, with its
	// default (sessions) and with sessions disabled. Both read the six
	// records exactly once.
	for _, tc := range []struct {
		name string
		opts []kgo.Opt
	}{{"sessions", nil}, {"no sessions", []kgo.Opt{kgo.DisableFetchSessions()}}} {
		h := &fetchBytes{}
		cons := brokertest.Client(t, b.Addr, append(tc.opts, kgo.ConsumeTopics("idle"), kgo.WithHooks(h),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))...)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		got := 0
		for got < 6 {
			fs := cons.PollFetches(ctx)
			require.NoError(t, ctx.Err())
			require.NoError(t, fs.Err())
			got += len(fs.Records())
		}
		require.Equal(t, 6, got)
		time.Sleep(300 * time.Millisecond) // past the first fetches
		h.reset()
		time.Sleep(time.Second)
		pctx, pcancel := context.WithTimeout(ctx, 10*time.Millisecond)
		require.Empty(t, cons.PollFetches(pctx).Records(), "nothing read twice")
		pcancel()
		cancel()
		n, w, r := h.totals()
		require.Greater(t, n, 3, "idle fetches in a second")
		t.Logf("franz-go idle fetch of %d partitions, %s: %d B request / %d B response (average of %d)", parts, tc.name, w/n, r/n, n)
		if tc.opts == nil {
			require.Less(t, w/n, 200)
			require.Less(t, r/n, 200)
		} else {
			require.Greater(t, w/n, 10*parts)
		}
	}
}

// fetchBytes counts a franz-go client's Fetch bytes through its hooks.
type fetchBytes struct {
	mu           sync.Mutex
	n, w, r      int
	byNodeFetchB map[int32]int // response bytes by broker
}

func (h *fetchBytes) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, n int, _, _ time.Duration, err error) {
	if key != 1 || err != nil {
		return
	}
	h.mu.Lock()
	h.n++
	h.w += n
	h.mu.Unlock()
}

func (h *fetchBytes) OnBrokerRead(meta kgo.BrokerMetadata, key int16, n int, _, _ time.Duration, err error) {
	if key != 1 || err != nil {
		return
	}
	h.mu.Lock()
	h.r += n
	if h.byNodeFetchB == nil {
		h.byNodeFetchB = map[int32]int{}
	}
	h.byNodeFetchB[meta.NodeID] += n
	h.mu.Unlock()
}

func (h *fetchBytes) reset() {
	h.mu.Lock()
	h.n, h.w, h.r, h.byNodeFetchB = 0, 0, 0, nil
	h.mu.Unlock()
}

func (h *fetchBytes) totals() (n, written, read int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n, h.w, h.r
}

func (h *fetchBytes) byNode() map[int32]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[int32]int{}
	for k, v := range h.byNodeFetchB {
		out[k] = v
	}
	return out
}

// countingDialer dials peers and records, per connection, the bytes of
// each request written and of the answer read before the next one (a
// wire.Conn writes each request with one Write and waits for its answer).
type countingDialer struct {
	mu    sync.Mutex
	conns []*countingConn
}

type exchange struct{ sent, got int }

type countingConn struct {
	net.Conn
	mu  sync.Mutex
	log []exchange
}

func (d *countingDialer) dial(ctx context.Context, addr string) (net.Conn, error) {
	var nd net.Dialer
	c, err := nd.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	cc := &countingConn{Conn: c}
	d.mu.Lock()
	d.conns = append(d.conns, cc)
	d.mu.Unlock()
	return cc, nil
}

// cut closes every connection dialed so far.
func (d *countingDialer) cut() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, c := range d.conns {
		c.Close()
	}
}

func (d *countingDialer) last() *countingConn {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.conns) == 0 {
		return nil
	}
	return d.conns[len(d.conns)-1]
}

func (c *countingConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.mu.Lock()
	c.log = append(c.log, exchange{sent: n})
	c.mu.Unlock()
	return n, err
}

func (c *countingConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.mu.Lock()
	if len(c.log) > 0 {
		c.log[len(c.log)-1].got += n
	}
	c.mu.Unlock()
	return n, err
}

func (c *countingConn) exchanges() []exchange {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]exchange(nil), c.log...)
}

// TestFollowerFetchSessionBytes: a follower replicating 1,000 idle
// partitions from one leader sends one full fetch after connecting, then
// incremental ones whose size does not depend on the partition count;
// records produced meanwhile still replicate, and a follower whose
// session the leader lost starts over with a full fetch.
func TestFollowerFetchSessionBytes(t *testing.T) {
	if testing.Short() {
		t.Skip("replicates 2,000 partitions")
	}
	meta := brokertest.NewMeta(t)
	dialers := []*countingDialer{{}, {}}
	var bs []*brokertest.Broker
	for id := 0; id < 2; id++ {
		bs = append(bs, brokertest.Start(t, func(c *broker.Config) {
			c.Meta, c.NodeID, c.FS = meta, int32(id), segment.NewMemFS()
			c.ReplicaLagMax = 2 * time.Second                          // fetches wait 500 ms at the leader
			c.ReplicaBalanceInterval, c.LeaderRebalanceInterval = 0, 0 // leaders stay put
			c.DialPeer = dialers[id].dial
		}))
	}
	waitFor(t, "both brokers registered", func() bool { return len(metadataOnConn(t, bs[0].Addr).Brokers) == 2 })
	// 2,000 partitions over two brokers: each leads 1,000 the other follows.
	const parts = 2000
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := brokertest.Admin(t, bs[0].Addr).CreateTopic(ctx, parts, 2, nil, "followed")
	require.NoError(t, err)
	t.Logf("created %d partitions in %v", parts, time.Since(start))
	waitFor(t, "every partition in sync", func() bool {
		for _, tp := range metadataOnConn(t, bs[1].Addr).Topics {
			if *tp.Topic == "followed" {
				for _, p := range tp.Partitions {
					if len(p.ISR) != 2 {
						return false
					}
				}
				return len(tp.Partitions) == parts
			}
		}
		return false
	})
	led := 0
	for _, tp := range metadataOnConn(t, bs[1].Addr).Topics {
		for _, p := range tp.Partitions {
			if p.Leader == 0 {
				led++
			}
		}
	}
	time.Sleep(time.Second) // the follower loops settle

	// Broker 1 reconnects to its leader: one full fetch, then idle ones.
	dialers[1].cut()
	waitFor(t, "a new connection with a few idle fetches", func() bool {
		c := dialers[1].last()
		return c != nil && len(c.exchanges()) >= 7
	})
	ex := dialers[1].last().exchanges()
	full := ex[0]
	for i, e := range ex[1:3] {
		t.Logf("incremental fetch %d after reconnecting: %d B request / %d B response", i+1, e.sent, e.got)
	}
	// The first incremental answers may repeat partitions whose answer
	// to the full fetch was an error (the follower's new connection can
	// race its partitions' reconciliation on a loaded machine): the
	// steady state is what must not grow with the partitions.
	var idle exchange
	for _, e := range ex[3:6] {
		idle.sent, idle.got = max(idle.sent, e.sent), max(idle.got, e.got)
	}
	t.Logf("follower idle fetch of %d partitions from one leader: full %d B request / %d B response; incremental at most %d B / %d B",
		led, full.sent, full.got, idle.sent, idle.got)
	require.Greater(t, led, 900)
	require.Greater(t, full.sent, 10*led)
	require.Greater(t, full.got, 20*led)
	require.Less(t, idle.sent, 100)
	require.Less(t, idle.got, 60)

	// Records still replicate, and only their partitions are answered.
	cl := brokertest.Client(t, bs[0].Addr, kgo.DefaultProduceTopic("followed"), kgo.RequiredAcks(kgo.AllISRAcks()))
	for i := 0; i < 20; i++ {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte("v")}).FirstErr())
	}
	// acks=all needed both replicas: the incremental fetches carried the
	// followers' new offsets.
	adm := brokertest.Admin(t, bs[0].Addr)
	ends, err := adm.ListEndOffsets(ctx, "followed")
	require.NoError(t, err)
	total := int64(0)
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	require.EqualValues(t, 20, total)

	// Idle past ReplicaLagMax: the idle fetches skip their quiet
	// partitions without touching them (quietskip.go), and the session's
	// clock alone keeps each follower in sync.
	time.Sleep(3 * time.Second)
	inSync := 0
	for _, tp := range metadataOnConn(t, bs[1].Addr).Topics {
		for _, p := range tp.Partitions {
			if *tp.Topic == "followed" && len(p.ISR) == 2 {
				inSync++
			}
		}
	}
	require.Equal(t, parts, inSync, "partitions with both replicas in sync after idling past the lag")
}

// TestFetchSessionsKeepACLs: a fetch session never lets a principal read
// a topic it may not. Denied topics never enter a session; a READ revoked
// while a session holds the topic takes effect at the next fetch (the
// partition stays in the session, answered TOPIC_AUTHORIZATION_FAILED,
// and is answered again once allowed); another principal cannot use or
// close the session.
func TestFetchSessionsKeepACLs(t *testing.T) {
	s := startSASLSSL(t, func(c *broker.Config) {
		c.Security.Authorizer = true
		c.Security.SuperUsers = []string{"User:admin"}
	})
	addUser(t, s.meta, "bob", "bob-secret")
	admin := s.client(t, scram.Auth{User: "admin", Pass: "admin-secret"}.AsSha512Mechanism())
	alice := s.client(t, scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha512Mechanism(), namedFetches())
	bob := s.client(t, scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha512Mechanism(), namedFetches())
	for _, name := range []string{"sa", "sb", "sc"} {
		createTopicOn(t, admin, name, 1, 1)
	}
	read := func(topic string) kmsg.CreateACLsRequestCreation {
		return kmsg.CreateACLsRequestCreation{ResourceType: kmsg.ACLResourceTypeTopic, ResourceName: topic,
			ResourcePatternType: kmsg.ACLResourcePatternTypeLiteral, Principal: "User:alice", Host: "*",
			Operation: kmsg.ACLOperationRead, PermissionType: kmsg.ACLPermissionTypeAllow}
	}
	createACLs(t, admin, read("sa"), read("sb"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	produce := func(topic string) {
		t.Helper()
		require.NoError(t, admin.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("secret")}).FirstErr())
	}
	fetch := func(cl *kgo.Client, id, epoch int32, topics ...string) *kmsg.FetchResponse {
		t.Helper()
		req := kmsg.NewPtrFetchRequest()
		req.SessionID, req.SessionEpoch, req.MaxBytes = id, epoch, 1<<20
		for _, tp := range topics {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = tp
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.PartitionMaxBytes = 1 << 20
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
		}
		resp, err := cl.Broker(0).RetriableRequest(ctx, req)
		require.NoError(t, err)
		return resp.(*kmsg.FetchResponse)
	}
	codes := func(resp *kmsg.FetchResponse) map[string]int16 {
		out := map[string]int16{}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				out[rt.Topic] = rp.ErrorCode
				if rp.ErrorCode != 0 {
					require.Empty(t, rp.RecordBatches, "no records with an error")
				}
			}
		}
		return out
	}
	authz := kerr.TopicAuthorizationFailed.Code

	// A session over sa, sb and sc: sc is denied and stays out of it.
	resp := fetch(alice, 0, 0, "sa", "sb", "sc")
	id := resp.SessionID
	require.NotZero(t, id)
	require.Equal(t, map[string]int16{"sa": 0, "sb": 0, "sc": authz}, codes(resp))
	produce("sc")
	resp = fetch(alice, id, 1)
	require.Empty(t, resp.Topics, "sc is not in the session: its record is not read")
	produce("sb")
	resp = fetch(alice, id, 2)
	require.Equal(t, map[string]int16{"sb": 0}, codes(resp))
	require.NotEmpty(t, resp.Topics[0].Partitions[0].RecordBatches)

	// Another principal gets nothing from the session, nor can close it.
	require.Equal(t, kerr.FetchSessionIDNotFound.Code, fetch(bob, id, 3).ErrorCode)
	require.Zero(t, fetch(bob, id, -1).SessionID)
	require.Zero(t, fetch(alice, id, 3).ErrorCode, "alice's session survived")

	// Alice loses READ on sb: her next fetches of the session answer it
	// denied, without its records.
	del := kmsg.NewPtrDeleteACLsRequest()
	f := kmsg.NewDeleteACLsRequestFilter()
	f.ResourceType, f.ResourceName, f.ResourcePatternType = kmsg.ACLResourceTypeTopic, kmsg.StringPtr("sb"), kmsg.ACLResourcePatternTypeLiteral
	f.Operation, f.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	del.Filters = append(del.Filters, f)
	delr, err := del.RequestWith(ctx, admin)
	require.NoError(t, err)
	require.Len(t, delr.Results[0].MatchingACLs, 1)
	epoch := int32(4)
	waitFor(t, "the revoked READ to apply", func() bool {
		resp = fetch(alice, id, epoch)
		epoch++
		return codes(resp)["sb"] == authz
	})
	produce("sb")
	resp = fetch(alice, id, epoch)
	epoch++
	require.Equal(t, map[string]int16{"sb": authz}, codes(resp), "denied at every fetch, never read")

	// Allowed again: answered again, with what it missed.
	createACLs(t, admin, read("sb"))
	waitFor(t, "the READ to apply again", func() bool {
		resp = fetch(alice, id, epoch)
		epoch++
		return codes(resp)["sb"] == 0
	})
	require.Equal(t, 2, batchCount(t, resp.Topics[0].Partitions[0].RecordBatches), "both records of sb, from the offset the session holds")

	// A replica fetch needs CLUSTER_ACTION, in a session too.
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.SessionEpoch, req.MaxBytes = 1, 0, 1<<20
	req.Topics = []kmsg.FetchRequestTopic{{Topic: "sa", Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 0, PartitionMaxBytes: 1 << 20, CurrentLeaderEpoch: -1, LogStartOffset: -1}}}}
	raw, err := alice.Broker(0).RetriableRequest(ctx, req)
	require.NoError(t, err)
	rr := raw.(*kmsg.FetchResponse)
	require.Equal(t, map[string]int16{"sa": authz}, codes(rr))
	if rr.SessionID != 0 {
		req.SessionID, req.SessionEpoch, req.Topics = rr.SessionID, 1, nil
		raw, err = alice.Broker(0).RetriableRequest(ctx, req)
		require.NoError(t, err)
		require.Empty(t, raw.(*kmsg.FetchResponse).Topics)
	}
}

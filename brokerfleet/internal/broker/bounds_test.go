package broker_test

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"net"
	"net/http/httptest"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/stratamq/strata/brokerfleet/internal/broker"
	"github.com/stratamq/strata/brokerfleet/internal/brokertest"
	"github.com/stratamq/strata/brokerfleet/internal/security"
)

// apiVersionsFrame is an ApiVersions v0 request.
func apiVersionsFrame(corr int32) []byte { return frame(18, 0, corr, nil) }

// answersApiVersions reports whether c answers an ApiVersions within d.
func answersApiVersions(c net.Conn, d time.Duration) bool {
	if _, err := c.Write(apiVersionsFrame(1)); err != nil {
		return false
	}
	_ = c.SetReadDeadline(time.Now().Add(d))
	var sz [4]byte
	_, err := c.Read(sz[:])
	return err == nil
}

func TestConnectionLimits(t *testing.T) {
	b := brokertest.Start(t, func(c *broker.Config) { c.MaxConnections, c.MaxConnectionsPerIP = 6, 3 })
	dial := func(local string) net.Conn {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
		c, err := d.Dial("tcp", b.Addr)
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		return c
	}
	var mine []net.Conn
	for range 3 {
		c := dial("127.0.0.1")
		require.True(t, answersApiVersions(c, 5*time.Second))
		mine = append(mine, c)
	}
	// max.connections.per.ip: a fourth from 127.0.0.1 is closed at once.
	fourth := dial("127.0.0.1")
	_ = fourth.SetReadDeadline(time.Now().Add(5 * time.Second))
	var one [1]byte
	_, err := fourth.Read(one[:])
	require.Error(t, err, "the broker closes it")
	var ne net.Error
	require.False(t, errors.As(err, &ne) && ne.Timeout(), "closed, not left open: %v", err)

	// max.connections: three more from other loopback addresses fill the
	// broker; the next one waits, unanswered, until one closes (Kafka's
	// acceptor waits for a slot too).
	for _, ip := range []string{"127.0.0.2", "127.0.0.3", "127.0.0.4"} {
		require.True(t, answersApiVersions(dial(ip), 5*time.Second))
	}
	waiting := dial("127.0.0.5")
	require.False(t, answersApiVersions(waiting, 300*time.Millisecond), "served past max.connections")
	mine[0].Close()
	_ = waiting.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp := kmsg.NewPtrApiVersionsResponse()
	require.NoError(t, resp.ReadFrom(readResponse(t, waiting)[4:]), "answered once a slot freed")
	require.NotEmpty(t, resp.ApiKeys)
}

// TestIdleConnectionsClose: connections.max.idle.ms closes a silent
// connection on a plaintext listener, but not one whose request is still
// being answered (a parked Fetch).
func TestIdleConnectionsClose(t *testing.T) {
	b := brokertest.Start(t, func(c *broker.Config) { c.ConnectionsMaxIdle = 300 * time.Millisecond })
	brokertest.CreateTopic(t, b.Addr, "quiet", 1, nil)
	silent := rawConn(t, b.Addr)
	start := time.Now()
	requireClosed(t, silent)
	require.Less(t, time.Since(start), 5*time.Second)

	// A Fetch long poll of 1.5 s outlasts the idle timeout: the connection
	// stays until it is answered.
	cl := brokertest.Client(t, b.Addr, namedFetches())
	ctx := context.Background()
	start = time.Now()
	resp, err := fetchReq("quiet", []int32{0}, 0, 1500, 1, 1<<20, 1<<20).RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Zero(t, resp.Topics[0].Partitions[0].ErrorCode)
	require.GreaterOrEqual(t, time.Since(start), 1400*time.Millisecond, "answered at MaxWait, not cut at the idle timeout")
}

// TestDisconnectEndsParkedRequests: Fetch long polls and a JoinGroup
// parked for a rebalance end when their client disconnects, not at their
// timeouts: the goroutines they hold are gone at once.
func TestDisconnectEndsParkedRequests(t *testing.T) {
	b := brokertest.Start(t)
	brokertest.CreateTopic(t, b.Addr, "parked", 1, nil)
	cl := brokertest.Client(t, b.Addr, namedFetches())
	ctx := context.Background()
	// A member that stays in the group, so a second member's join parks
	// until the first rejoins (which it never does) or the rebalance
	// timeout (a minute) passes.
	join := func(member string) *kmsg.JoinGroupRequest {
		req := kmsg.NewPtrJoinGroupRequest()
		req.Group, req.MemberID, req.ProtocolType = "g-parked", member, "consumer"
		req.SessionTimeoutMillis, req.RebalanceTimeoutMillis = 60_000, 60_000
		req.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{0, 1}}}
		return req
	}
	first, err := join("").RequestWith(ctx, cl)
	require.NoError(t, err)
	if first.ErrorCode == kerr.MemberIDRequired.Code {
		first, err = join(first.MemberID).RequestWith(ctx, cl)
		require.NoError(t, err)
	}
	require.Zero(t, first.ErrorCode)

	time.Sleep(200 * time.Millisecond)
	runtime.GC()
	before := runtime.NumGoroutine()
	const n = 40
	var conns []net.Conn
	for i := range n {
		c := rawConn(t, b.Addr)
		req := fetchReq("parked", []int32{0}, 0, 30_000, 1, 1<<20, 1<<20)
		req.Version = 11
		f := frame(1, 11, int32(i), req.AppendTo(nil))
		if i == 0 {
			j := join("")
			j.Version = 3 // no member id round trip before v4
			f = frame(11, 3, 0, j.AppendTo(nil))
		}
		_, err := c.Write(f)
		require.NoError(t, err)
		conns = append(conns, c)
	}
	// And one connection with 40 long polls pipelined: its reader waits
	// for room in the response queue (32), not on the socket.
	piped := rawConn(t, b.Addr)
	for i := range 40 {
		req := fetchReq("parked", []int32{0}, 0, 30_000, 1, 1<<20, 1<<20)
		req.Version = 11
		_, err := piped.Write(frame(1, 11, int32(i), req.AppendTo(nil)))
		require.NoError(t, err)
	}
	conns = append(conns, piped)
	time.Sleep(500 * time.Millisecond)
	parked := runtime.NumGoroutine()
	require.GreaterOrEqual(t, parked, before+2*n, "each parked connection holds its reader and writer")
	start := time.Now()
	for _, c := range conns {
		c.Close()
	}
	waitFor(t, "the parked requests to end", func() bool { return runtime.NumGoroutine() <= before+5 })
	t.Logf("goroutines: %d before, %d with %d parked connections, back to %d in %v (the fetches wait up to 30 s, the join a minute)",
		before, parked, n+1, runtime.NumGoroutine(), time.Since(start))
	require.Less(t, time.Since(start), 5*time.Second)
}

// flakyListener fails Accept with errors that are not timeouts.
type flakyListener struct {
	net.Listener
	mu    sync.Mutex
	fails int
}

func (l *flakyListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	if l.fails > 0 {
		l.fails--
		l.mu.Unlock()
		return nil, errors.New("accept: too many open files")
	}
	l.mu.Unlock()
	return l.Listener.Accept()
}

// TestAcceptErrorsAreRetried: accept errors (a full file table) back off
// and retry as net/http does; the broker keeps serving.
func TestAcceptErrorsAreRetried(t *testing.T) {
	b := brokertest.Start(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	fl := &flakyListener{Listener: ln, fails: 8}
	served := make(chan error, 1)
	go func() { served <- b.Serve(fl) }()
	c := rawConn(t, ln.Addr().String())
	require.True(t, answersApiVersions(c, 10*time.Second), "served after the errors")
	select {
	case err := <-served:
		t.Fatalf("Serve returned %v", err)
	default:
	}
}

// TestRequestBytesBudget: with queued.max.request.bytes at 512 KiB, a
// connection whose frame would pass it waits (its frame is not read)
// until the bytes held are released; nothing stays held afterwards.
func TestRequestBytesBudget(t *testing.T) {
	b := brokertest.Start(t, func(c *broker.Config) { c.QueuedMaxRequestBytes = 512 << 10 })
	brokertest.CreateTopic(t, b.Addr, "budget", 1, nil)
	// A: a 900 KiB Produce whose body trickles: its bytes are held (the
	// budget admits a request while anything is left) until it is read.
	big := produceFrame(t, "budget", batch(-1, -1, -1, 1, 900<<10))
	a := rawConn(t, b.Addr)
	_, err := a.Write(big[:len(big)/2])
	require.NoError(t, err)
	waitFor(t, "A's bytes to be held", func() bool { return broker.HeldRequestBytes(b.Broker) > 512<<10 })

	// B: a small request waits for the budget.
	c := rawConn(t, b.Addr)
	require.False(t, answersApiVersions(c, 300*time.Millisecond), "served past the budget")
	_, err = a.Write(big[len(big)/2:])
	require.NoError(t, err)
	require.Zero(t, produceAnswer(t, a).ErrorCode)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	readResponse(t, c)
	waitFor(t, "nothing held", func() bool { return broker.HeldRequestBytes(b.Broker) == 0 })
}

// produceFrame is a Produce v7 frame (acks=all) of one batch.
func produceFrame(t *testing.T, topicName string, records []byte) []byte {
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 7, -1, 5000
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: topicName, Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: records}}}}
	return frame(0, 7, 1, req.AppendTo(nil))
}

func produceAnswer(t *testing.T, c net.Conn) kmsg.ProduceResponseTopicPartition {
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = 7
	require.NoError(t, resp.ReadFrom(readResponse(t, c)[4:]))
	return resp.Topics[0].Partitions[0]
}

// TestFetchMaxBytesCapsEveryFetch: a Fetch asking for 2 GiB (and 2 GiB per
// partition) gets at most fetch.max.bytes of records, plus at most one
// batch (a first batch larger than the cap still goes alone).
func TestFetchMaxBytesCapsEveryFetch(t *testing.T) {
	const limit = 256 << 10
	b := brokertest.Start(t, func(c *broker.Config) { c.FetchMaxBytes = limit })
	brokertest.CreateTopic(t, b.Addr, "big", 2, nil)
	cl := brokertest.Client(t, b.Addr, kgo.ProducerBatchMaxBytes(64<<10), kgo.ProducerLinger(0), namedFetches())
	ctx := context.Background()
	value := make([]byte, 16<<10)
	for i := range 128 {
		cl.Produce(ctx, &kgo.Record{Topic: "big", Partition: int32(i % 2), Value: value}, nil)
	}
	require.NoError(t, cl.Flush(ctx))
	for _, partMax := range []int32{math.MaxInt32, -1, 0} {
		resp, err := fetchReq("big", []int32{0, 1}, 0, 0, 1, math.MaxInt32, partMax).RequestWith(ctx, cl)
		require.NoError(t, err)
		total, largest := 0, 0
		for _, p := range resp.Topics[0].Partitions {
			require.Zero(t, p.ErrorCode)
			total += len(p.RecordBatches)
			largest = max(largest, len(p.RecordBatches))
		}
		require.Positive(t, total, "partition max %d", partMax)
		require.LessOrEqual(t, total, limit+(64<<10)+1024, "partition max %d: %d bytes", partMax, total)
	}
}

// TestReplicaFetchChecks: a Fetch with a replica id is honoured only from
// a replica of the partition, at an offset within the leader's log: a
// fake follower cannot move the high watermark.
func TestReplicaFetchChecks(t *testing.T) {
	meta := brokertest.NewMeta(t)
	links := brokertest.NewLinks()
	var brokers []*brokertest.Broker
	for id := int32(0); id < 2; id++ {
		brokers = append(brokers, brokertest.Start(t, func(c *broker.Config) {
			c.Meta, c.NodeID, c.DialPeer = meta, id, links.Dialer(strconv.Itoa(int(id)))
		}))
	}
	cl := brokertest.Client(t, brokers[0].Addr, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(), namedFetches())
	createTopicOn(t, cl, "checked", 1, 2)
	ctx := context.Background()
	produce := func(n int) {
		for i := range n {
			require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "checked", Value: []byte(strconv.Itoa(i))}).FirstErr())
		}
	}
	produce(10)
	pm := metadataVia(t, cl, "checked").Topics[0].Partitions[0]
	leader := brokers[pm.Leader]
	follower := 1 - pm.Leader
	leaderHWM := func() int64 { _, hwm, _, _ := broker.LocalLog(leader.Broker, "checked", 0); return hwm }
	waitFor(t, "the follower to catch up", func() bool { return leaderHWM() == 10 })

	lb := cl.Broker(int(pm.Leader))
	fetch := func(replica int32, offset int64, epoch int32) kmsg.FetchResponseTopicPartition {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxBytes, req.SessionEpoch = replica, 1<<20, -1
		req.Topics = []kmsg.FetchRequestTopic{{Topic: "checked", Partitions: []kmsg.FetchRequestTopicPartition{
			{Partition: 0, FetchOffset: offset, PartitionMaxBytes: 1 << 20, CurrentLeaderEpoch: epoch, LogStartOffset: -1}}}}
		raw, err := lb.RetriableRequest(ctx, req)
		require.NoError(t, err)
		return raw.(*kmsg.FetchResponse).Topics[0].Partitions[0]
	}
	require.Equal(t, kerr.NotLeaderForPartition.Code, fetch(7, 5, -1).ErrorCode, "not a replica")
	require.Equal(t, kerr.UnknownLeaderEpoch.Code, fetch(7, 5, pm.LeaderEpoch).ErrorCode, "not a replica, current epoch")
	require.Equal(t, kerr.NotLeaderForPartition.Code, fetch(pm.Leader, 10, -1).ErrorCode, "the leader itself")

	// The follower cut off, the leader appends 10 more: the high watermark
	// stays at what the follower holds, whatever a fake follower with its
	// id reports past the leader's log end.
	links.Cut(strconv.Itoa(int(follower)), leader.Addr)
	produce(10)
	leo, _, _, _ := broker.LocalLog(brokers[follower].Broker, "checked", 0)
	require.EqualValues(t, 10, leo)
	for _, off := range []int64{1 << 62, 21, 1 << 40} {
		sp := fetch(follower, off, pm.LeaderEpoch)
		require.Equal(t, kerr.OffsetOutOfRange.Code, sp.ErrorCode, "offset %d past the leader's log end", off)
		require.Empty(t, sp.RecordBatches)
		require.EqualValues(t, 10, sp.HighWatermark)
	}
	require.EqualValues(t, 10, leaderHWM(), "a fake follower moved the high watermark past what the follower holds")
	links.Restore(strconv.Itoa(int(follower)), leader.Addr)
	waitFor(t, "the follower back", func() bool { return leaderHWM() == 20 })
}

// TestReplicaFetchNeedsAnAuthenticatedConnection: followers authenticate
// (SASL on the inter-broker listener), so a replica fetch from an
// anonymous connection (a plaintext listener) is refused, with ACLs off;
// consumers on that listener are served.
func TestReplicaFetchNeedsAnAuthenticatedConnection(t *testing.T) {
	meta := brokertest.NewMeta(t)
	addUser(t, meta, "broker", "broker-secret")
	internal, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	b := brokertest.Start(t, func(c *broker.Config) {
		c.Meta = meta
		c.Security = security.Config{
			Listeners: []security.Listener{
				{Name: "SASL_PLAINTEXT", SASLMechanisms: []string{security.MechSCRAM512}},
				{Name: "INTERNAL", Advertise: internal.Addr().String()},
			},
			InterBrokerListener: "SASL_PLAINTEXT",
			InterBrokerSASL:     &security.SASLCredentials{Mechanism: security.MechSCRAM512, User: "broker", Password: "broker-secret"},
			// ACLs off on purpose: the replica check holds without them.
			AllowSASLWithoutAuthorizer: true,
		}
	})
	go b.ServeListener("INTERNAL", internal)
	plain := brokertest.Client(t, internal.Addr().String(), namedFetches())
	createTopicOn(t, plain, "guarded", 1, 1)
	ctx := context.Background()
	require.NoError(t, plain.ProduceSync(ctx, &kgo.Record{Topic: "guarded", Value: []byte("v")}).FirstErr())

	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxBytes, req.SessionEpoch = 0, 1<<20, 0
	req.Topics = []kmsg.FetchRequestTopic{{Topic: "guarded", Partitions: []kmsg.FetchRequestTopicPartition{
		{Partition: 0, FetchOffset: 0, PartitionMaxBytes: 1 << 20, CurrentLeaderEpoch: -1, LogStartOffset: -1}}}}
	raw, err := plain.Broker(0).RetriableRequest(ctx, req)
	require.NoError(t, err)
	rr := raw.(*kmsg.FetchResponse)
	require.Zero(t, rr.SessionID, "no session for it")
	require.Equal(t, kerr.TopicAuthorizationFailed.Code, rr.Topics[0].Partitions[0].ErrorCode)
	require.Empty(t, rr.Topics[0].Partitions[0].RecordBatches)

	resp, err := fetchReq("guarded", []int32{0}, 0, 0, 1, 1<<20, 1<<20).RequestWith(ctx, plain)
	require.NoError(t, err)
	require.Zero(t, resp.Topics[0].Partitions[0].ErrorCode, "a consumer on the plaintext listener is served")
	require.Equal(t, 1, batchCount(t, resp.Topics[0].Partitions[0].RecordBatches))
}

// zstdBomb is a RecordBatch of zstd records of a 1 MiB value each, about
// 50 bytes per record (each record's fields and the schema registry header
// naming schemaID in a raw block, then RLE blocks of zeros for the rest of
// its value): about size bytes that inflate to 20 GiB per MiB. Its records
// are stamped now, its batch now+1000.
func zstdBomb(size int, now int64, schemaID int) []byte {
	z := binary.LittleEndian.AppendUint32(nil, 0xFD2FB528)
	z = append(z, 0x00, 7<<3) // no content size; a 128 KiB window
	block := func(typ, n uint32, last bool) {
		h := n<<3 | typ<<1
		if last {
			h |= 1
		}
		z = append(z, byte(h), byte(h>>8), byte(h>>16))
	}
	const value = 1<<20 + 4 // the header, then zeros (and a zero: no headers)
	n := 0
	for len(z)+60 < size {
		var fields []byte
		fields = append(fields, 0, 0) // attributes, timestamp delta
		fields = binary.AppendVarint(fields, int64(n))
		fields = binary.AppendVarint(fields, -1) // null key
		fields = binary.AppendVarint(fields, value)
		fields = binary.BigEndian.AppendUint32(append(fields, 0), uint32(schemaID))
		rec := append(binary.AppendVarint(nil, int64(len(fields)-5+value+1)), fields...)
		block(0, uint32(len(rec)), false)
		z = append(z, rec...)
		for j := range 8 {
			block(1, 128<<10, len(z)+60+60 >= size && j == 7)
			z = append(z, 0)
		}
		n++
	}
	rb := kmsg.RecordBatch{Magic: 2, Attributes: 4, FirstTimestamp: now, MaxTimestamp: now + 1000, LastOffsetDelta: int32(n - 1),
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: int32(n), Records: z}
	raw := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

// TestDecompressionBombs: a 1 MiB zstd batch inflating to 20 GiB is
// refused with INVALID_RECORD on a schema-validated topic; stored in a
// topic without validation, ListOffsets by time over it answers
// INVALID_RECORD too; neither allocates more than a few MiB.
func TestDecompressionBombs(t *testing.T) {
	b := brokertest.Start(t)
	on := "true"
	brokertest.CreateTopic(t, b.Addr, "validated", 1, map[string]*string{"strata.schema.validation": &on})
	brokertest.CreateTopic(t, b.Addr, "plain", 1, nil)
	cl := brokertest.Client(t, b.Addr)
	now := time.Now().UnixMilli()
	bomb := zstdBomb(1<<20-100, now, registerSchema(t, b, "validated-value")) // just under max.message.bytes
	var got kmsg.ProduceResponseTopicPartition
	alloc := allocatedBy(func() { got = produceRaw(t, cl, "validated", bomb) })
	require.Equal(t, kerr.InvalidRecord.Code, got.ErrorCode, "%v", kerr.ErrorForCode(got.ErrorCode))
	require.Less(t, alloc, uint64(24<<20), "the request, its frame and codec state: %d bytes", alloc)
	t.Logf("bomb to a validated topic: %s; %d MiB allocated", *got.ErrorMessage, alloc>>20)

	require.Zero(t, produceRaw(t, cl, "plain", bomb).ErrorCode, "stored verbatim without validation")
	req := kmsg.NewPtrListOffsetsRequest()
	req.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: "plain", Partitions: []kmsg.ListOffsetsRequestTopicPartition{{Partition: 0, Timestamp: now + 500, CurrentLeaderEpoch: -1}}}}
	var lr *kmsg.ListOffsetsResponse
	alloc = allocatedBy(func() {
		resp, err := req.RequestWith(context.Background(), cl)
		require.NoError(t, err)
		lr = resp
	})
	code := lr.Topics[0].Partitions[0].ErrorCode
	require.Equal(t, kerr.InvalidRecord.Code, code, "%v", kerr.ErrorForCode(code))
	require.Less(t, alloc, uint64(24<<20), "%d bytes", alloc)
}

// registerSchema registers a string schema under subject and returns its id.
func registerSchema(t *testing.T, b *brokertest.Broker, subject string) int {
	reg := httptest.NewServer(b.Registry())
	t.Cleanup(reg.Close)
	src, err := sr.NewClient(sr.URLs(reg.URL))
	require.NoError(t, err)
	s, err := src.CreateSchema(context.Background(), subject, sr.Schema{Schema: `"string"`})
	require.NoError(t, err)
	return s.ID
}

func allocatedBy(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

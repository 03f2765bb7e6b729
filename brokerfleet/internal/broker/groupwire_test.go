package broker_test

// A raw group-protocol client for the tests in groupproto_test.go: each
// request goes at exactly the version it carries, over its own connection
// to one broker, with no client routing, retries or version negotiation.

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/brokertest"
	"github.com/stratamq/strata/pkg/metastore"
)

// wire is one connection to one broker. Responses come back in request
// order, so a JoinGroup or SyncGroup that waits for other members holds up
// its connection: give each member its own.
type wire struct {
	mu   sync.Mutex
	conn net.Conn
	fmt  *kmsg.RequestFormatter
	corr int32
}

func dialWire(t *testing.T, addr, clientID string) *wire {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return &wire{conn: c, fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID))}
}

// roundTrip sends req at req's version and decodes the response. It does
// not touch a testing.T, so goroutines may call it.
func (w *wire) roundTrip(req kmsg.Request) (kmsg.Response, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.corr++
	name := kmsg.NameForKey(req.Key())
	if err := w.conn.SetDeadline(time.Now().Add(20 * time.Second)); err != nil {
		return nil, err
	}
	if _, err := w.conn.Write(w.fmt.AppendRequest(nil, req, w.corr)); err != nil {
		return nil, fmt.Errorf("write %s: %w", name, err)
	}
	var size [4]byte
	if _, err := io.ReadFull(w.conn, size[:]); err != nil {
		return nil, fmt.Errorf("read %s response: %w", name, err)
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	if _, err := io.ReadFull(w.conn, body); err != nil {
		return nil, fmt.Errorf("read %s response: %w", name, err)
	}
	if len(body) < 4 || int32(binary.BigEndian.Uint32(body)) != w.corr {
		return nil, fmt.Errorf("%s response: bad correlation id", name)
	}
	body = body[4:]
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() { // response header v1: an (empty) tag section
		if len(body) == 0 || body[0] != 0 {
			return nil, fmt.Errorf("%s response: unexpected header tags", name)
		}
		body = body[1:]
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decode %s v%d response: %w", name, req.GetVersion(), err)
	}
	return resp, nil
}

// inflight is a request whose response may wait (JoinGroup, SyncGroup).
type inflight[R kmsg.Response] struct {
	done chan struct{}
	resp R
	err  error
}

func sendAsync[R kmsg.Response](w *wire, req kmsg.Request) *inflight[R] {
	f := &inflight[R]{done: make(chan struct{})}
	go func() {
		defer close(f.done)
		resp, err := w.roundTrip(req)
		if err == nil {
			var ok bool
			if f.resp, ok = resp.(R); !ok {
				err = fmt.Errorf("unexpected response type %T", resp)
			}
		}
		f.err = err
	}()
	return f
}

func (f *inflight[R]) wait(t *testing.T) R {
	t.Helper()
	select {
	case <-f.done:
	case <-time.After(30 * time.Second):
		t.Fatal("no response within 30s")
	}
	require.NoError(t, f.err)
	return f.resp
}

func (f *inflight[R]) answered() bool {
	select {
	case <-f.done:
		return true
	default:
		return false
	}
}

// requireWaiting checks that no response arrives for d.
func (f *inflight[R]) requireWaiting(t *testing.T, d time.Duration, what string) {
	t.Helper()
	select {
	case <-f.done:
		t.Fatalf("%s: answered early (err %v, response %+v)", what, f.err, f.resp)
	case <-time.After(d):
	}
}

func sendReq[R kmsg.Response](t *testing.T, w *wire, req kmsg.Request) R {
	t.Helper()
	return sendAsync[R](w, req).wait(t)
}

// requireCode compares Kafka error codes, naming them on failure.
func requireCode(t *testing.T, want, got int16, msgAndArgs ...any) {
	t.Helper()
	if want != got {
		name := func(c int16) string {
			if c == 0 {
				return "NONE"
			}
			return kerr.ErrorForCode(c).Error()
		}
		require.Fail(t, fmt.Sprintf("error code %d (%s), want %d (%s)", got, name(got), want, name(want)), msgAndArgs...)
	}
}

// startGroupBroker starts a broker and waits until it coordinates every
// group shard (the controller assigns them shortly after start).
func startGroupBroker(t *testing.T, topics map[string]int32) *brokertest.Broker {
	t.Helper()
	b := brokertest.Start(t)
	probes := shardProbes()
	w := dialWire(t, b.Addr, "probe")
	waitFor(t, "the broker to coordinate every group shard", func() bool {
		for _, g := range describeGroups(t, w, probes...) {
			if g.ErrorCode != 0 {
				return false
			}
		}
		return true
	})
	for name, n := range topics {
		brokertest.CreateTopic(t, b.Addr, name, n, nil)
	}
	return b
}

// shardProbes returns one group name per coordinator shard.
func shardProbes() []string {
	seen := map[int32]bool{}
	var out []string
	for i := 0; len(seen) < metastore.GroupShards; i++ {
		name := fmt.Sprintf("probe-%d", i)
		if s := metastore.GroupShard(name); !seen[s] {
			seen[s] = true
			out = append(out, name)
		}
	}
	return out
}

// consumerProtocol is a protocol whose metadata is a real
// ConsumerMemberMetadata subscribing to topics; its UserData names owner
// and protocol, so a test can tell whose metadata came back.
func consumerProtocol(name, owner string, topics ...string) kmsg.JoinGroupRequestProtocol {
	md := kmsg.NewConsumerMemberMetadata()
	md.Topics = topics
	md.UserData = []byte(owner + "/" + name)
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = name, md.AppendTo(nil)
	return p
}

func joinReq(version int16, group string, session, rebalance time.Duration, protocols ...kmsg.JoinGroupRequestProtocol) *kmsg.JoinGroupRequest {
	req := kmsg.NewPtrJoinGroupRequest()
	req.Version, req.Group = version, group
	req.SessionTimeoutMillis = int32(session.Milliseconds())
	req.RebalanceTimeoutMillis = int32(rebalance.Milliseconds())
	req.ProtocolType, req.Protocols = "consumer", protocols
	return req
}

// rawMember is a group member speaking the protocol by hand.
type rawMember struct {
	name string
	join *kmsg.JoinGroupRequest // its join; MemberID is filled in per send
	gw   *wire                  // JoinGroup and SyncGroup, which may wait
	cw   *wire                  // everything else

	id, leader, protocol string
	gen                  int32
	members              []kmsg.JoinGroupResponseMember // as leader

	inJoin *inflight[*kmsg.JoinGroupResponse] // sent by beginJoin, awaited by joinAll
}

// newMember makes a member with session and rebalance timeouts and one
// protocol, "range", subscribing to topic "t". Tests adjust m.join.
func newMember(t *testing.T, addr, group, name string, version int16, session, rebalance time.Duration) *rawMember {
	return &rawMember{
		name: name,
		join: joinReq(version, group, session, rebalance, consumerProtocol("range", name, "t")),
		gw:   dialWire(t, addr, name),
		cw:   dialWire(t, addr, name),
	}
}

func (m *rawMember) instance() *string { return m.join.InstanceID }

func (m *rawMember) joinWith(memberID string) *kmsg.JoinGroupRequest {
	req := *m.join
	req.MemberID = memberID
	return &req
}

// requireID is the KIP-394 round trip: a first join without a member id
// gets MEMBER_ID_REQUIRED and the id to join with.
func (m *rawMember) requireID(t *testing.T) {
	t.Helper()
	resp := sendReq[*kmsg.JoinGroupResponse](t, m.gw, m.joinWith(""))
	requireCode(t, kerr.MemberIDRequired.Code, resp.ErrorCode, "%s: first join", m.name)
	require.NotEmpty(t, resp.MemberID)
	m.id = resp.MemberID
}

func (m *rawMember) startJoin() *inflight[*kmsg.JoinGroupResponse] {
	return sendAsync[*kmsg.JoinGroupResponse](m.gw, m.joinWith(m.id))
}

// beginJoin sends the member's join for a later joinAll to wait for.
func (m *rawMember) beginJoin() { m.inJoin = m.startJoin() }

// joined records a successful join response.
func (m *rawMember) joined(t *testing.T, resp *kmsg.JoinGroupResponse) {
	t.Helper()
	requireCode(t, 0, resp.ErrorCode, "%s: join", m.name)
	require.NotEmpty(t, resp.MemberID)
	require.NotNil(t, resp.Protocol)
	if m.join.Version >= 7 { // v7+ echo the protocol type
		require.NotNil(t, resp.ProtocolType)
		require.Equal(t, m.join.ProtocolType, *resp.ProtocolType)
	}
	m.id, m.gen, m.leader, m.protocol, m.members = resp.MemberID, resp.Generation, resp.LeaderID, *resp.Protocol, resp.Members
}

func (m *rawMember) syncReq(assign map[string][]byte) *kmsg.SyncGroupRequest {
	req := kmsg.NewPtrSyncGroupRequest()
	req.Version, req.Group, req.Generation, req.MemberID = 5, m.join.Group, m.gen, m.id
	req.InstanceID = m.instance()
	req.ProtocolType, req.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr(m.protocol)
	for id, a := range assign {
		ga := kmsg.NewSyncGroupRequestGroupAssignment()
		ga.MemberID, ga.MemberAssignment = id, a
		req.GroupAssignment = append(req.GroupAssignment, ga)
	}
	return req
}

func (m *rawMember) startSync(assign map[string][]byte) *inflight[*kmsg.SyncGroupResponse] {
	return sendAsync[*kmsg.SyncGroupResponse](m.gw, m.syncReq(assign))
}

func (m *rawMember) heartbeat(t *testing.T) int16 {
	t.Helper()
	return m.heartbeatAs(t, m.id, m.gen)
}

func (m *rawMember) heartbeatAs(t *testing.T, memberID string, gen int32) int16 {
	t.Helper()
	code, err := m.tryHeartbeat(memberID, gen)
	require.NoError(t, err)
	return code
}

func (m *rawMember) tryHeartbeat(memberID string, gen int32) (int16, error) {
	req := kmsg.NewPtrHeartbeatRequest()
	req.Version, req.Group, req.Generation, req.MemberID, req.InstanceID = 4, m.join.Group, gen, memberID, m.instance()
	resp, err := m.cw.roundTrip(req)
	if err != nil {
		return 0, err
	}
	return resp.(*kmsg.HeartbeatResponse).ErrorCode, nil
}

// heartbeatEvery heartbeats from a goroutine until stop returns, and
// returns the codes it got.
func (m *rawMember) heartbeatEvery(every time.Duration) (stop func() []int16) {
	quit, done := make(chan struct{}), make(chan struct{})
	var codes []int16
	id, gen := m.id, m.gen
	go func() {
		defer close(done)
		for {
			if code, err := m.tryHeartbeat(id, gen); err == nil {
				codes = append(codes, code)
			} else {
				codes = append(codes, -999)
			}
			select {
			case <-quit:
				return
			case <-time.After(every):
			}
		}
	}()
	return func() []int16 {
		close(quit)
		<-done
		return codes
	}
}

// assignmentFor is what the leader hands each member in these tests.
func assignmentFor(memberID string) []byte { return []byte("assignment-of-" + memberID) }

// joinAll sends the joins of ms at once (but for those sent already by
// beginJoin) and checks they form one generation with one leader who
// learns exactly ms.
func joinAll(t *testing.T, ms ...*rawMember) {
	t.Helper()
	for _, m := range ms {
		if m.inJoin == nil {
			m.beginJoin()
		}
	}
	for _, m := range ms {
		f := m.inJoin
		m.inJoin = nil
		m.joined(t, f.wait(t))
	}
	var ids []string
	var leader *rawMember
	for _, m := range ms {
		require.Equal(t, ms[0].gen, m.gen, "%s: generation", m.name)
		require.Equal(t, ms[0].leader, m.leader, "%s: leader", m.name)
		require.Equal(t, ms[0].protocol, m.protocol, "%s: protocol", m.name)
		ids = append(ids, m.id)
		if m.id == m.leader {
			leader = m
		} else {
			require.Empty(t, m.members, "%s: only the leader learns the members", m.name)
		}
	}
	require.NotNil(t, leader, "the leader is one of the members")
	var got []string
	for _, jm := range leader.members {
		got = append(got, jm.MemberID)
	}
	require.ElementsMatch(t, ids, got, "the leader learns every member")
}

// syncAll runs the SyncGroup round: the leader assigns assignmentFor(id)
// to every member, and every member gets its own.
func syncAll(t *testing.T, ms ...*rawMember) {
	t.Helper()
	var fs []*inflight[*kmsg.SyncGroupResponse]
	for _, m := range ms {
		var assign map[string][]byte
		if m.id == m.leader {
			assign = map[string][]byte{}
			for _, jm := range m.members {
				assign[jm.MemberID] = assignmentFor(jm.MemberID)
			}
		}
		fs = append(fs, m.startSync(assign))
	}
	for i, m := range ms {
		resp := fs[i].wait(t)
		requireCode(t, 0, resp.ErrorCode, "%s: sync", m.name)
		require.Equal(t, assignmentFor(m.id), resp.MemberAssignment, "%s: assignment", m.name)
		require.Equal(t, m.protocol, *resp.Protocol)
	}
}

// formGroup forms the first generation of dynamic v4+ members
// deterministically: every member first gets its id (KIP-394), and pending
// ids hold the rebalance open until each has joined.
func formGroup(t *testing.T, ms ...*rawMember) {
	t.Helper()
	for _, m := range ms {
		m.requireID(t)
	}
	joinAll(t, ms...)
	syncAll(t, ms...)
}

// waitRebalancing waits until a member's heartbeat says a rebalance began.
func waitRebalancing(t *testing.T, m *rawMember) {
	t.Helper()
	waitFor(t, m.name+"'s heartbeat to report the rebalance", func() bool {
		code := m.heartbeat(t)
		if code != 0 && code != kerr.RebalanceInProgress.Code {
			requireCode(t, kerr.RebalanceInProgress.Code, code, "%s: heartbeat", m.name)
		}
		return code == kerr.RebalanceInProgress.Code
	})
}

func describeGroups(t *testing.T, w *wire, groups ...string) []kmsg.DescribeGroupsResponseGroup {
	t.Helper()
	req := kmsg.NewPtrDescribeGroupsRequest()
	req.Version, req.Groups = 5, groups
	resp := sendReq[*kmsg.DescribeGroupsResponse](t, w, req)
	require.Len(t, resp.Groups, len(groups))
	return resp.Groups
}

func describeGroupOne(t *testing.T, w *wire, group string) kmsg.DescribeGroupsResponseGroup {
	t.Helper()
	g := describeGroups(t, w, group)[0]
	requireCode(t, 0, g.ErrorCode, "describe %s", group)
	require.Equal(t, group, g.Group)
	return g
}

func memberIDs(g kmsg.DescribeGroupsResponseGroup) []string {
	var out []string
	for _, m := range g.Members {
		out = append(out, m.MemberID)
	}
	return out
}

type commitPart struct {
	topic     string
	partition int32
	offset    int64
	epoch     int32
	metadata  *string
}

func commitReq(group string, gen int32, memberID string, instance *string, parts ...commitPart) *kmsg.OffsetCommitRequest {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Version, req.Group, req.Generation, req.MemberID, req.InstanceID = 8, group, gen, memberID, instance
	for _, p := range parts {
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = p.topic
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = p.partition, p.offset, p.epoch, p.metadata
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
	}
	return req
}

// commit returns the error code of every partition, in request order.
func commit(t *testing.T, w *wire, req *kmsg.OffsetCommitRequest) []int16 {
	t.Helper()
	resp := sendReq[*kmsg.OffsetCommitResponse](t, w, req)
	var codes []int16
	require.Len(t, resp.Topics, len(req.Topics))
	for i, rt := range resp.Topics {
		require.Equal(t, req.Topics[i].Topic, rt.Topic)
		require.Len(t, rt.Partitions, len(req.Topics[i].Partitions))
		for _, rp := range rt.Partitions {
			codes = append(codes, rp.ErrorCode)
		}
	}
	return codes
}

// simpleCommit commits as an admin tool or a consumer without group
// management does: generation -1, no member id.
func simpleCommit(t *testing.T, w *wire, group string, parts ...commitPart) {
	t.Helper()
	for i, code := range commit(t, w, commitReq(group, -1, "", nil, parts...)) {
		requireCode(t, 0, code, "simple commit of %s/%d", parts[i].topic, parts[i].partition)
	}
}

// fetched is one committed offset as OffsetFetch v8 reports it.
type fetched struct {
	offset   int64
	epoch    int32
	metadata string
}

// fetchOffsets fetches a group's offsets for some partitions of one topic.
func fetchOffsets(t *testing.T, w *wire, group, topic string, partitions ...int32) []fetched {
	t.Helper()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 8
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = group
	rt := kmsg.NewOffsetFetchRequestGroupTopic()
	rt.Topic, rt.Partitions = topic, partitions
	rg.Topics = append(rg.Topics, rt)
	req.Groups = append(req.Groups, rg)
	resp := sendReq[*kmsg.OffsetFetchResponse](t, w, req)
	require.Len(t, resp.Groups, 1)
	g := resp.Groups[0]
	requireCode(t, 0, g.ErrorCode, "fetch offsets of %s", group)
	require.Len(t, g.Topics, 1)
	require.Len(t, g.Topics[0].Partitions, len(partitions))
	var out []fetched
	for i, p := range g.Topics[0].Partitions {
		require.Equal(t, partitions[i], p.Partition)
		requireCode(t, 0, p.ErrorCode)
		f := fetched{offset: p.Offset, epoch: p.LeaderEpoch}
		if p.Metadata != nil {
			f.metadata = *p.Metadata
		}
		out = append(out, f)
	}
	return out
}

func listGroups(t *testing.T, w *wire, version int16, states, types []string) map[string]kmsg.ListGroupsResponseGroup {
	t.Helper()
	req := kmsg.NewPtrListGroupsRequest()
	req.Version, req.StatesFilter, req.TypesFilter = version, states, types
	resp := sendReq[*kmsg.ListGroupsResponse](t, w, req)
	requireCode(t, 0, resp.ErrorCode, "list groups")
	out := map[string]kmsg.ListGroupsResponseGroup{}
	for _, g := range resp.Groups {
		if !strings.HasPrefix(g.Group, "probe-") {
			out[g.Group] = g
		}
	}
	return out
}

func leaveReq(version int16, group string, members ...kmsg.LeaveGroupRequestMember) *kmsg.LeaveGroupRequest {
	req := kmsg.NewPtrLeaveGroupRequest()
	req.Version, req.Group = version, group
	if version < 3 {
		req.MemberID = members[0].MemberID
	} else {
		req.Members = members
	}
	return req
}

func leaving(memberID string, instance *string) kmsg.LeaveGroupRequestMember {
	lm := kmsg.NewLeaveGroupRequestMember()
	lm.MemberID, lm.InstanceID = memberID, instance
	return lm
}

package group

// The test harness: coordinators over the embedded metastore, driven by a
// fake clock. Time-based behaviour moves only through harness.advance,
// which waits (a bounded real-time wait) for every coordinator's run loop
// to have checked its deadlines at the new time.

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/pkg/clock"
	"github.com/stratamq/strata/pkg/metastore"
	"github.com/stratamq/strata/pkg/metastore/embedded"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

const (
	sessionMs   = 10_000 // the members' session timeout
	rebalanceMs = 30_000 // the members' rebalance timeout
	session     = sessionMs * time.Millisecond
	rebalance   = rebalanceMs * time.Millisecond
	// realWait bounds how long a test waits, in real time, for a goroutine
	// (a run loop, a parked request) to reach a state. It is no timing.
	realWait = 10 * time.Second
)

type harness struct {
	t    *testing.T
	clk  *clock.Fake
	meta *metastore.Meta
	ctx  context.Context
	c    *Coordinator // the first coordinator
	runs []*runLoop
}

// runLoop follows one coordinator's deadline checks.
type runLoop struct {
	mu     sync.Mutex
	last   time.Time     // when the latest check began
	ticked chan struct{} // closed (and replaced) after each check
}

// allShards is every shard, at epoch 1.
func allShards() map[int32]int64 {
	m := make(map[int32]int64, metastore.GroupShards)
	for s := range int32(metastore.GroupShards) {
		m[s] = 1
	}
	return m
}

// newHarness starts a coordinator owning every shard, with Kafka's
// default session bounds and no initial rebalance delay unless opts say
// otherwise.
func newHarness(t *testing.T, opts ...func(*Options)) *harness {
	t.Helper()
	store, err := embedded.Open(filepath.Join(t.TempDir(), "meta.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h := &harness{t: t, clk: clock.NewFake(epoch), meta: metastore.New(store), ctx: ctx}
	h.c = h.addCoordinator(opts...)
	h.c.SetShards(allShards())
	return h
}

// addCoordinator starts another coordinator on the same metastore and
// clock (another broker), owning no shards.
func (h *harness) addCoordinator(opts ...func(*Options)) *Coordinator {
	h.t.Helper()
	o := Options{Meta: h.meta, Clock: h.clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, f := range opts {
		f(&o)
	}
	c := newCoordinator(o)
	rl := &runLoop{ticked: make(chan struct{})}
	c.afterTick = func(now time.Time) {
		rl.mu.Lock()
		rl.last = now
		close(rl.ticked)
		rl.ticked = make(chan struct{})
		rl.mu.Unlock()
	}
	waiting := h.clk.Pending()
	c.start()
	h.t.Cleanup(c.Close)
	h.runs = append(h.runs, rl)
	ctx, cancel := context.WithTimeout(context.Background(), realWait)
	defer cancel()
	if !h.clk.WaitForPending(ctx, waiting+1) {
		h.t.Fatal("the run loop never made its ticker")
	}
	return c
}

// advance moves the fake clock by d (a whole number of ticks, so a check
// falls due at the new time) and waits until every run loop has checked
// its deadlines at that time.
func (h *harness) advance(d time.Duration) {
	h.t.Helper()
	if d <= 0 || d%tickInterval != 0 {
		h.t.Fatalf("advance(%v): not a whole number of %v ticks", d, tickInterval)
	}
	h.clk.Advance(d)
	target := h.clk.Now()
	timeout := time.NewTimer(realWait)
	defer timeout.Stop()
	for _, rl := range h.runs {
		for {
			rl.mu.Lock()
			last, ch := rl.last, rl.ticked
			rl.mu.Unlock()
			if !last.Before(target) {
				break
			}
			select {
			case <-ch:
			case <-timeout.C:
				h.t.Fatalf("no deadline check at %v (last at %v)", target.Sub(epoch), last.Sub(epoch))
			}
		}
	}
}

// elapsed is the fake time since the start.
func (h *harness) elapsed() time.Duration { return h.clk.Now().Sub(epoch) }

// wantCode fails unless code is want (nil: no error).
func wantCode(t *testing.T, what string, code int16, want *kerr.Error) {
	t.Helper()
	if (want == nil && code == 0) || (want != nil && code == want.Code) {
		return
	}
	wantName := "none"
	if want != nil {
		wantName = want.Message
	}
	gotName := "none"
	if err := kerr.ErrorForCode(code); err != nil {
		gotName = err.Error()
	}
	t.Fatalf("%s: error %s, want %s", what, gotName, wantName)
}

func str(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// --- JoinGroup ---

// joinReq is a consumer's JoinGroup (v9 unless changed) with one "range"
// protocol whose metadata names the client.
func joinReq(group, memberID, instance, client string) *kmsg.JoinGroupRequest {
	r := kmsg.NewPtrJoinGroupRequest()
	r.Version = 9
	r.Group, r.MemberID, r.InstanceID = group, memberID, str(instance)
	r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = sessionMs, rebalanceMs
	r.ProtocolType = "consumer"
	p := kmsg.NewJoinGroupRequestProtocol()
	p.Name, p.Metadata = "range", []byte("subscription of "+client)
	r.Protocols = []kmsg.JoinGroupRequestProtocol{p}
	return r
}

// pendingJoin is a JoinGroup whose answer may not have come yet.
type pendingJoin struct {
	t  *testing.T
	ch chan *kmsg.JoinGroupResponse
}

// joinAsync sends a JoinGroup: the coordinator handles it at once (in this
// goroutine); a goroutine waits for the answer.
func (h *harness) joinAsync(c *Coordinator, req *kmsg.JoinGroupRequest, client string) *pendingJoin {
	wait := c.Join(h.ctx, req, client, "/10.0.0.1")
	p := &pendingJoin{t: h.t, ch: make(chan *kmsg.JoinGroupResponse, 1)}
	go func() { p.ch <- wait() }()
	return p
}

// get returns the answer, waiting for it a bounded real time.
func (p *pendingJoin) get() *kmsg.JoinGroupResponse {
	p.t.Helper()
	select {
	case r := <-p.ch:
		return r
	case <-time.After(realWait):
		p.t.Fatal("JoinGroup was never answered")
		return nil
	}
}

// join sends a JoinGroup expected to be answered without waiting on the
// group.
func (h *harness) join(req *kmsg.JoinGroupRequest, client string) *kmsg.JoinGroupResponse {
	h.t.Helper()
	return h.joinAsync(h.c, req, client).get()
}

// memberID does the KIP-394 round trip: a first join without a member id
// is answered MEMBER_ID_REQUIRED with the id to join with.
func (h *harness) memberID(group, client string) string {
	h.t.Helper()
	resp := h.join(joinReq(group, "", "", client), client)
	wantCode(h.t, "first join of "+client, resp.ErrorCode, kerr.MemberIDRequired)
	if resp.MemberID == "" {
		h.t.Fatalf("MEMBER_ID_REQUIRED without a member id")
	}
	return resp.MemberID
}

// --- SyncGroup ---

func syncReq(group, memberID, instance string, gen int32) *kmsg.SyncGroupRequest {
	r := kmsg.NewPtrSyncGroupRequest()
	r.Version = 5
	r.Group, r.MemberID, r.InstanceID, r.Generation = group, memberID, str(instance), gen
	r.ProtocolType, r.Protocol = str("consumer"), str("range")
	return r
}

type pendingSync struct {
	t  *testing.T
	ch chan *kmsg.SyncGroupResponse
}

func (h *harness) syncAsync(c *Coordinator, req *kmsg.SyncGroupRequest) *pendingSync {
	wait := c.Sync(h.ctx, req)
	p := &pendingSync{t: h.t, ch: make(chan *kmsg.SyncGroupResponse, 1)}
	go func() { p.ch <- wait() }()
	return p
}

func (p *pendingSync) get() *kmsg.SyncGroupResponse {
	p.t.Helper()
	select {
	case r := <-p.ch:
		return r
	case <-time.After(realWait):
		p.t.Fatal("SyncGroup was never answered")
		return nil
	}
}

func (h *harness) sync(req *kmsg.SyncGroupRequest) *kmsg.SyncGroupResponse {
	h.t.Helper()
	return h.syncAsync(h.c, req).get()
}

// assignmentFor is what formed groups' leaders assign a member.
func assignmentFor(memberID string) []byte { return []byte("partitions of " + memberID) }

// leaderSync is the leader's SyncGroup assigning every member.
func leaderSync(group, leader, instance string, gen int32, members []string) *kmsg.SyncGroupRequest {
	r := syncReq(group, leader, instance, gen)
	for _, id := range members {
		a := kmsg.NewSyncGroupRequestGroupAssignment()
		a.MemberID, a.MemberAssignment = id, assignmentFor(id)
		r.GroupAssignment = append(r.GroupAssignment, a)
	}
	return r
}

// --- forming groups ---

// formed is a group whose join phase completed.
type formed struct {
	group     string
	gen       int32
	leader    string
	instances []string                  // as given; "" for dynamic members
	ids       []string                  // member ids, in the order given
	joins     []*kmsg.JoinGroupResponse // in the order given
}

// joinAll forms a generation of one member per instance ("" for a dynamic
// member) and returns the join answers. Members join in the order given,
// so the first is the leader.
func (h *harness) joinAll(group string, instances ...string) *formed {
	h.t.Helper()
	client := func(i int) string { return fmt.Sprintf("client-%d", i) }
	// Dynamic members take their ids first, and a spare id holds the
	// rebalance open until everyone has joined.
	ids := make([]string, len(instances))
	for i, inst := range instances {
		if inst == "" {
			ids[i] = h.memberID(group, client(i))
		}
	}
	spare := h.memberID(group, "spare")
	waits := make([]*pendingJoin, len(instances))
	for i, inst := range instances {
		waits[i] = h.joinAsync(h.c, joinReq(group, ids[i], inst, client(i)), client(i))
	}
	leave := kmsg.NewPtrLeaveGroupRequest()
	leave.Version = 5
	leave.Group = group
	leave.Members = []kmsg.LeaveGroupRequestMember{{MemberID: spare}}
	resp := h.c.Leave(h.ctx, leave)
	wantCode(h.t, "spare member leaves", resp.Members[0].ErrorCode, nil)

	f := &formed{group: group, instances: instances, ids: ids}
	for i, w := range waits {
		r := w.get()
		wantCode(h.t, "join of "+client(i), r.ErrorCode, nil)
		f.ids[i] = r.MemberID
		f.joins = append(f.joins, r)
		if i == 0 {
			f.gen, f.leader = r.Generation, r.LeaderID
		} else if r.Generation != f.gen || r.LeaderID != f.leader {
			h.t.Fatalf("member %d joined generation %d led by %s, member 0 generation %d led by %s", i, r.Generation, r.LeaderID, f.gen, f.leader)
		}
	}
	return f
}

// syncAll has the followers and then the leader sync, and returns the
// assignments by member id.
func (h *harness) syncAll(f *formed) map[string][]byte {
	h.t.Helper()
	var waits []*pendingSync
	var followers []string
	leaderInstance := ""
	for i, id := range f.ids {
		if id == f.leader {
			leaderInstance = f.instances[i]
			continue
		}
		followers = append(followers, id)
		waits = append(waits, h.syncAsync(h.c, syncReq(f.group, id, f.instances[i], f.gen)))
	}
	got := map[string][]byte{}
	lr := h.sync(leaderSync(f.group, f.leader, leaderInstance, f.gen, f.ids))
	wantCode(h.t, "leader sync", lr.ErrorCode, nil)
	got[f.leader] = lr.MemberAssignment
	for i, w := range waits {
		r := w.get()
		wantCode(h.t, "follower sync", r.ErrorCode, nil)
		got[followers[i]] = r.MemberAssignment
	}
	return got
}

// form forms a stable group: joinAll, then syncAll.
func (h *harness) form(group string, instances ...string) *formed {
	h.t.Helper()
	f := h.joinAll(group, instances...)
	h.syncAll(f)
	return f
}

// --- other requests ---

func (h *harness) heartbeat(group, memberID, instance string, gen int32) int16 {
	r := kmsg.NewPtrHeartbeatRequest()
	r.Version = 4
	r.Group, r.MemberID, r.InstanceID, r.Generation = group, memberID, str(instance), gen
	return h.c.Heartbeat(h.ctx, r).ErrorCode
}

// leave sends a LeaveGroup v5 for the members.
func (h *harness) leave(group string, members ...kmsg.LeaveGroupRequestMember) *kmsg.LeaveGroupResponse {
	r := kmsg.NewPtrLeaveGroupRequest()
	r.Version = 5
	r.Group, r.Members = group, members
	return h.c.Leave(h.ctx, r)
}

// offset is one partition's offset to commit.
type offset struct {
	partition int32
	offset    int64
	epoch     int32
	metadata  string
}

func commitReq(group, memberID, instance string, gen int32, topic string, offs ...offset) *kmsg.OffsetCommitRequest {
	r := kmsg.NewPtrOffsetCommitRequest()
	r.Version = 8
	r.Group, r.MemberID, r.InstanceID, r.Generation = group, memberID, str(instance), gen
	t := kmsg.NewOffsetCommitRequestTopic()
	t.Topic = topic
	for _, o := range offs {
		p := kmsg.NewOffsetCommitRequestTopicPartition()
		p.Partition, p.Offset, p.LeaderEpoch, p.Metadata = o.partition, o.offset, o.epoch, str(o.metadata)
		t.Partitions = append(t.Partitions, p)
	}
	r.Topics = []kmsg.OffsetCommitRequestTopic{t}
	return r
}

// commit commits one offset of topic "t" and returns its error code.
func (h *harness) commit(group, memberID, instance string, gen int32, off int64) int16 {
	h.t.Helper()
	resp := h.c.Commit(h.ctx, commitReq(group, memberID, instance, gen, "t", offset{partition: 0, offset: off, epoch: -1}))
	return resp.Topics[0].Partitions[0].ErrorCode
}

// committed returns the committed offset of t/0 (-1: none).
func (h *harness) committed(c *Coordinator, group string) int64 {
	h.t.Helper()
	r := kmsg.NewPtrOffsetFetchRequest()
	r.Version = 8
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = group
	g.Topics = []kmsg.OffsetFetchRequestGroupTopic{{Topic: "t", Partitions: []int32{0}}}
	r.Groups = []kmsg.OffsetFetchRequestGroup{g}
	resp := c.FetchOffsets(h.ctx, r)
	wantCode(h.t, "offset fetch", resp.Groups[0].ErrorCode, nil)
	return resp.Groups[0].Topics[0].Partitions[0].Offset
}

func (h *harness) describe(group string) kmsg.DescribeGroupsResponseGroup {
	h.t.Helper()
	r := kmsg.NewPtrDescribeGroupsRequest()
	r.Version = 5
	r.Groups = []string{group}
	return h.c.Describe(h.ctx, r).Groups[0]
}

// wantState fails unless the group is in state with n members.
func (h *harness) wantState(group, state string, n int) {
	h.t.Helper()
	d := h.describe(group)
	if d.ErrorCode != 0 || d.State != state || len(d.Members) != n {
		h.t.Fatalf("at +%v group %s: %s with %d members (error %d), want %s with %d", h.elapsed(), group, d.State, len(d.Members), d.ErrorCode, state, n)
	}
}

package group

import (
	"bytes"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestJoinSyncOneMember(t *testing.T) {
	h := newHarness(t)
	id := h.memberID("solo", "c")
	resp := h.join(joinReq("solo", id, "", "c"), "c")
	wantCode(t, "join", resp.ErrorCode, nil)
	if resp.MemberID != id || resp.LeaderID != id || resp.Generation < 1 {
		t.Fatalf("join: member %q leader %q generation %d, want member and leader %q, generation >= 1", resp.MemberID, resp.LeaderID, resp.Generation, id)
	}
	if resp.Protocol == nil || *resp.Protocol != "range" || resp.ProtocolType == nil || *resp.ProtocolType != "consumer" {
		t.Fatalf("join: protocol %v type %v, want range/consumer", resp.Protocol, resp.ProtocolType)
	}
	if len(resp.Members) != 1 || resp.Members[0].MemberID != id || string(resp.Members[0].ProtocolMetadata) != "subscription of c" {
		t.Fatalf("the leader's join lists %+v, want itself with its metadata", resp.Members)
	}
	h.wantState("solo", "CompletingRebalance", 1)
	sr := h.sync(leaderSync("solo", id, "", resp.Generation, []string{id}))
	wantCode(t, "sync", sr.ErrorCode, nil)
	if !bytes.Equal(sr.MemberAssignment, assignmentFor(id)) {
		t.Fatalf("sync: assignment %q", sr.MemberAssignment)
	}
	h.wantState("solo", "Stable", 1)
	wantCode(t, "heartbeat", h.heartbeat("solo", id, "", resp.Generation), nil)
}

func TestJoinSyncSeveralMembers(t *testing.T) {
	h := newHarness(t)
	f := h.joinAll("trio", "", "", "")
	if f.leader != f.ids[0] {
		t.Fatalf("leader %s, want the first to join, %s", f.leader, f.ids[0])
	}
	for i, r := range f.joins {
		if i == 0 {
			if len(r.Members) != 3 {
				t.Fatalf("leader got %d members, want 3", len(r.Members))
			}
			for j, m := range r.Members {
				want := "subscription of client-" + string(rune('0'+j))
				if m.MemberID != f.ids[j] || string(m.ProtocolMetadata) != want {
					t.Fatalf("leader's member %d: %s %q, want %s %q", j, m.MemberID, m.ProtocolMetadata, f.ids[j], want)
				}
			}
		} else if len(r.Members) != 0 {
			t.Fatalf("follower %d got the member list", i)
		}
	}
	// A member may heartbeat between its join and its sync.
	wantCode(t, "heartbeat in CompletingRebalance", h.heartbeat("trio", f.ids[2], "", f.gen), nil)
	// Kafka's checks before the assignment: member, generation, state.
	wantCode(t, "sync of a stranger", h.sync(syncReq("trio", "stranger", "", f.gen)).ErrorCode, kerr.UnknownMemberID)
	wantCode(t, "sync of another generation", h.sync(syncReq("trio", f.ids[1], "", f.gen+1)).ErrorCode, kerr.IllegalGeneration)
	bad := syncReq("trio", f.ids[1], "", f.gen)
	bad.Protocol = str("roundrobin")
	wantCode(t, "sync of another protocol", h.sync(bad).ErrorCode, kerr.InconsistentGroupProtocol)

	// Member 1 syncs before the leader and waits; member 2 after.
	early := h.syncAsync(h.c, syncReq("trio", f.ids[1], "", f.gen))
	lr := h.sync(leaderSync("trio", f.leader, "", f.gen, f.ids))
	wantCode(t, "leader sync", lr.ErrorCode, nil)
	er := early.get()
	wantCode(t, "early follower sync", er.ErrorCode, nil)
	late := h.sync(syncReq("trio", f.ids[2], "", f.gen))
	wantCode(t, "late follower sync", late.ErrorCode, nil)
	for _, c := range []struct {
		id  string
		got []byte
	}{{f.ids[0], lr.MemberAssignment}, {f.ids[1], er.MemberAssignment}, {f.ids[2], late.MemberAssignment}} {
		if !bytes.Equal(c.got, assignmentFor(c.id)) {
			t.Fatalf("%s was assigned %q, want %q", c.id, c.got, assignmentFor(c.id))
		}
	}
	h.wantState("trio", "Stable", 3)
	// A follower rejoining a stable group with the same protocols is
	// answered at once, without a rebalance (Kafka).
	r := h.join(joinReq("trio", f.ids[1], "", "client-1"), "client-1")
	wantCode(t, "follower rejoin", r.ErrorCode, nil)
	if r.Generation != f.gen {
		t.Fatalf("follower rejoin: generation %d, want %d", r.Generation, f.gen)
	}
	h.wantState("trio", "Stable", 3)
}

// A follower waiting for its assignment when a new member joins is told
// REBALANCE_IN_PROGRESS, and rejoins.
func TestSyncAbandonedByRebalance(t *testing.T) {
	h := newHarness(t)
	f := h.joinAll("g", "", "")
	waiting := h.syncAsync(h.c, syncReq("g", f.ids[1], "", f.gen))
	newcomer := h.memberID("g", "new")
	nj := h.joinAsync(h.c, joinReq("g", newcomer, "", "new"), "new")
	wantCode(t, "waiting sync", waiting.get().ErrorCode, kerr.RebalanceInProgress)
	h.wantState("g", "PreparingRebalance", 3)
	wantCode(t, "sync while preparing", h.sync(syncReq("g", f.ids[0], "", f.gen)).ErrorCode, kerr.RebalanceInProgress)
	j0 := h.joinAsync(h.c, joinReq("g", f.ids[0], "", "client-0"), "client-0")
	j1 := h.joinAsync(h.c, joinReq("g", f.ids[1], "", "client-1"), "client-1")
	for _, j := range []*pendingJoin{j0, j1, nj} {
		r := j.get()
		wantCode(t, "rejoin", r.ErrorCode, nil)
		if r.Generation <= f.gen {
			t.Fatalf("rejoined generation %d, not after %d", r.Generation, f.gen)
		}
	}
	h.wantState("g", "CompletingRebalance", 3)
}

func TestFirstJoinRequiresMemberID(t *testing.T) {
	h := newHarness(t)
	resp := h.join(joinReq("g", "", "", "c"), "c")
	wantCode(t, "first join v9", resp.ErrorCode, kerr.MemberIDRequired)
	if resp.MemberID == "" || resp.Generation != -1 {
		t.Fatalf("MEMBER_ID_REQUIRED with member %q generation %d", resp.MemberID, resp.Generation)
	}
	h.wantState("g", "Dead", 0) // a handed-out id is no member yet

	v4 := joinReq("v4", "", "", "c")
	v4.Version = 4
	wantCode(t, "first join v4", h.join(v4, "c").ErrorCode, kerr.MemberIDRequired)

	// Before v4 there is no round trip: the member joins at once.
	v3 := joinReq("v3", "", "", "c")
	v3.Version = 3
	r3 := h.join(v3, "c")
	wantCode(t, "first join v3", r3.ErrorCode, nil)
	if r3.MemberID == "" || r3.LeaderID != r3.MemberID {
		t.Fatalf("v3 join: member %q leader %q", r3.MemberID, r3.LeaderID)
	}

	wantCode(t, "join with an id never handed out", h.join(joinReq("g", "made-up", "", "c"), "c").ErrorCode, kerr.UnknownMemberID)
	r := h.join(joinReq("g", resp.MemberID, "", "c"), "c")
	wantCode(t, "join with the handed-out id", r.ErrorCode, nil)
	if r.MemberID != resp.MemberID {
		t.Fatalf("joined as %s, was handed %s", r.MemberID, resp.MemberID)
	}
}

// A handed-out member id holds a rebalance open (Kafka counts pending
// members as not joined) until its session timeout expires it.
func TestHandedOutMemberIDExpires(t *testing.T) {
	h := newHarness(t)
	f := h.form("g", "")
	ghost := h.memberID("g", "ghost")
	// The leader rejoining a stable group starts a rebalance.
	lj := h.joinAsync(h.c, joinReq("g", f.ids[0], "", "client-0"), "client-0")
	h.wantState("g", "PreparingRebalance", 1)
	h.advance(session - tickInterval)
	h.wantState("g", "PreparingRebalance", 1)
	h.advance(2 * tickInterval)
	r := lj.get()
	wantCode(t, "leader rejoin", r.ErrorCode, nil)
	if r.Generation <= f.gen || len(r.Members) != 1 {
		t.Fatalf("rebalanced to generation %d with %d members, want one member after generation %d", r.Generation, len(r.Members), f.gen)
	}
	wantCode(t, "join with the expired id", h.join(joinReq("g", ghost, "", "ghost"), "ghost").ErrorCode, kerr.UnknownMemberID)
}

func TestJoinValidation(t *testing.T) {
	h := newHarness(t)
	short := joinReq("g", "", "", "c")
	short.SessionTimeoutMillis = 1000 // below group.min.session.timeout.ms
	wantCode(t, "short session", h.join(short, "c").ErrorCode, kerr.InvalidSessionTimeout)
	noProto := joinReq("g", "", "", "c")
	noProto.Protocols = nil
	wantCode(t, "no protocols", h.join(noProto, "c").ErrorCode, kerr.InconsistentGroupProtocol)
	wantCode(t, "empty group id", h.join(joinReq("", "", "", "c"), "c").ErrorCode, kerr.InvalidGroupID)

	h.form("g", "")
	other := joinReq("g", "", "", "c")
	other.Version = 3
	other.Protocols[0].Name = "roundrobin"
	wantCode(t, "no protocol in common", h.join(other, "c").ErrorCode, kerr.InconsistentGroupProtocol)
	connect := joinReq("g", "", "", "c")
	connect.Version = 3
	connect.ProtocolType = "connect"
	wantCode(t, "another protocol type", h.join(connect, "c").ErrorCode, kerr.InconsistentGroupProtocol)
}

// The first rebalance of an empty group waits
// group.initial.rebalance.delay.ms for more members, and longer when more
// come; later rebalances do not wait.
func TestInitialRebalanceDelay(t *testing.T) {
	const delay = 3 * time.Second
	h := newHarness(t, func(o *Options) { o.InitialRebalanceDelay = delay })

	a := h.memberID("alone", "a")
	aj := h.joinAsync(h.c, joinReq("alone", a, "", "a"), "a")
	h.advance(delay - tickInterval)
	h.wantState("alone", "PreparingRebalance", 1)
	h.advance(tickInterval)
	wantCode(t, "join after the delay", aj.get().ErrorCode, nil)
	h.wantState("alone", "CompletingRebalance", 1)

	start := h.elapsed()
	x := h.memberID("pair", "x")
	xj := h.joinAsync(h.c, joinReq("pair", x, "", "x"), "x")
	h.advance(time.Second)
	y := h.memberID("pair", "y")
	yj := h.joinAsync(h.c, joinReq("pair", y, "", "y"), "y")
	// Kafka extends the delay when a member joins during it (by a whole
	// delay from its first expiry); the group must still be waiting when
	// the first delay is up, and done within two.
	h.advance(start + delay - h.elapsed())
	h.wantState("pair", "PreparingRebalance", 2)
	h.advance(start + 2*delay - h.elapsed())
	xr, yr := xj.get(), yj.get()
	wantCode(t, "x", xr.ErrorCode, nil)
	wantCode(t, "y", yr.ErrorCode, nil)
	if xr.Generation != yr.Generation || len(xr.Members) != 2 {
		t.Fatalf("x in generation %d with %d members, y in %d: want one generation of both", xr.Generation, len(xr.Members), yr.Generation)
	}
	h.syncAll(&formed{group: "pair", gen: xr.Generation, leader: x, instances: []string{"", ""}, ids: []string{x, y}})

	// A rebalance of a group that has members is not delayed: once both
	// rejoin it completes.
	xj = h.joinAsync(h.c, joinReq("pair", x, "", "x"), "x")
	h.wantState("pair", "PreparingRebalance", 2)
	yj = h.joinAsync(h.c, joinReq("pair", y, "", "y"), "y")
	wantCode(t, "x rejoin", xj.get().ErrorCode, nil)
	wantCode(t, "y rejoin", yj.get().ErrorCode, nil)
}

// Members that do not rejoin within the rebalance timeout leave the group;
// the generation forms with those that did.
func TestRebalanceTimeoutRemovesMembersThatDoNotRejoin(t *testing.T) {
	h := newHarness(t)
	f := h.form("g", "", "")
	a, b := f.ids[0], f.ids[1]
	h.advance(time.Second)
	c := h.memberID("g", "c")
	cj := h.joinAsync(h.c, joinReq("g", c, "", "c"), "c")
	start := h.elapsed()
	wantCode(t, "a heartbeat", h.heartbeat("g", a, "", f.gen), kerr.RebalanceInProgress)
	aj := h.joinAsync(h.c, joinReq("g", a, "", "client-0"), "client-0")
	// b keeps its session alive but never rejoins.
	for h.elapsed()+5*time.Second < start+rebalance {
		h.advance(5 * time.Second)
		wantCode(t, "b heartbeat", h.heartbeat("g", b, "", f.gen), kerr.RebalanceInProgress)
	}
	h.advance(start + rebalance - tickInterval - h.elapsed())
	h.wantState("g", "PreparingRebalance", 3)
	h.advance(2 * tickInterval)
	ar, cr := aj.get(), cj.get()
	wantCode(t, "a join", ar.ErrorCode, nil)
	wantCode(t, "c join", cr.ErrorCode, nil)
	if ar.LeaderID != a || len(ar.Members) != 2 || ar.Generation <= f.gen || cr.Generation != ar.Generation {
		t.Fatalf("a: leader %s generation %d with %d members; c: generation %d", ar.LeaderID, ar.Generation, len(ar.Members), cr.Generation)
	}
	for _, m := range ar.Members {
		if m.MemberID == b {
			t.Fatal("b is in the new generation")
		}
	}
	wantCode(t, "b heartbeat after", h.heartbeat("g", b, "", f.gen), kerr.UnknownMemberID)
	h.wantState("g", "CompletingRebalance", 2)
}

// Members that join but never sync are removed after the rebalance
// timeout, and the rest rebalance (Kafka's pending-sync timeout).
func TestMembersThatNeverSyncAreRemoved(t *testing.T) {
	h := newHarness(t)
	f := h.joinAll("g", "", "")
	a, b := f.ids[0], f.ids[1]
	wantCode(t, "leader sync", h.sync(leaderSync("g", a, "", f.gen, f.ids)).ErrorCode, nil)
	for h.elapsed()+5*time.Second < rebalance {
		h.advance(5 * time.Second)
		wantCode(t, "a heartbeat", h.heartbeat("g", a, "", f.gen), nil)
		wantCode(t, "b heartbeat", h.heartbeat("g", b, "", f.gen), nil)
	}
	h.advance(rebalance - tickInterval - h.elapsed())
	h.wantState("g", "Stable", 2)
	h.advance(2 * tickInterval)
	h.wantState("g", "PreparingRebalance", 1)
	wantCode(t, "a heartbeat", h.heartbeat("g", a, "", f.gen), kerr.RebalanceInProgress)
	wantCode(t, "b heartbeat", h.heartbeat("g", b, "", f.gen), kerr.UnknownMemberID)
}

func TestStaticMemberRejoinsWithoutRebalance(t *testing.T) {
	h := newHarness(t)
	// A static member's first join needs no member id round trip.
	f := h.form("g", "inst-a", "inst-b", "")
	a, b, c := f.ids[0], f.ids[1], f.ids[2]
	if f.leader != a {
		t.Fatalf("leader %s, want %s", f.leader, a)
	}
	h.advance(time.Second)

	// inst-b restarts: it joins without a member id and takes b's place.
	r := h.join(joinReq("g", "", "inst-b", "client-1"), "client-1")
	wantCode(t, "restarted inst-b", r.ErrorCode, nil)
	b2 := r.MemberID
	if b2 == "" || b2 == b || r.Generation != f.gen || r.LeaderID != a || len(r.Members) != 0 || r.SkipAssignment {
		t.Fatalf("restarted follower: member %q (was %q) generation %d (was %d) leader %q members %d skip %v", b2, b, r.Generation, f.gen, r.LeaderID, len(r.Members), r.SkipAssignment)
	}
	h.wantState("g", "Stable", 3)
	wantCode(t, "c heartbeat", h.heartbeat("g", c, "", f.gen), nil)
	sr := h.sync(syncReq("g", b2, "inst-b", f.gen))
	wantCode(t, "new inst-b sync", sr.ErrorCode, nil)
	if !bytes.Equal(sr.MemberAssignment, assignmentFor(b)) {
		t.Fatalf("new inst-b assigned %q, want b's %q", sr.MemberAssignment, assignmentFor(b))
	}
	wantCode(t, "new inst-b heartbeat", h.heartbeat("g", b2, "inst-b", f.gen), nil)
	wantCode(t, "new inst-b commit", h.commit("g", b2, "inst-b", f.gen, 7), nil)

	// The old member id is fenced.
	wantCode(t, "old b heartbeat", h.heartbeat("g", b, "inst-b", f.gen), kerr.FencedInstanceID)
	wantCode(t, "old b commit", h.commit("g", b, "inst-b", f.gen, 8), kerr.FencedInstanceID)
	wantCode(t, "old b sync", h.sync(syncReq("g", b, "inst-b", f.gen)).ErrorCode, kerr.FencedInstanceID)
	wantCode(t, "old b join", h.join(joinReq("g", b, "inst-b", "client-1"), "client-1").ErrorCode, kerr.FencedInstanceID)
	wantCode(t, "old b heartbeat without instance", h.heartbeat("g", b, "", f.gen), kerr.UnknownMemberID)
	if got := h.committed(h.c, "g"); got != 7 {
		t.Fatalf("committed %d, want 7 (the fenced member's commit must not land)", got)
	}

	// The leader restarts. v9: it learns the members but keeps the
	// assignment (KIP-814).
	r = h.join(joinReq("g", "", "inst-a", "client-0"), "client-0")
	wantCode(t, "restarted leader", r.ErrorCode, nil)
	a2 := r.MemberID
	if a2 == a || r.LeaderID != a2 || !r.SkipAssignment || len(r.Members) != 3 || r.Generation != f.gen {
		t.Fatalf("restarted leader v9: member %q leader %q skip %v members %d generation %d", a2, r.LeaderID, r.SkipAssignment, len(r.Members), r.Generation)
	}
	h.wantState("g", "Stable", 3)
	wantCode(t, "old leader heartbeat", h.heartbeat("g", a, "inst-a", f.gen), kerr.FencedInstanceID)
	// Before v9 the restarted leader is not told it leads, so it does not
	// compute an assignment the stable group would ignore.
	v5 := joinReq("g", "", "inst-a", "client-0")
	v5.Version = 5
	r = h.join(v5, "client-0")
	wantCode(t, "restarted leader v5", r.ErrorCode, nil)
	if r.LeaderID == r.MemberID || r.Generation != f.gen {
		t.Fatalf("restarted leader v5: member %q told it leads (leader %q), generation %d", r.MemberID, r.LeaderID, r.Generation)
	}
	sr = h.sync(syncReq("g", r.MemberID, "inst-a", f.gen))
	wantCode(t, "restarted leader sync", sr.ErrorCode, nil)
	if !bytes.Equal(sr.MemberAssignment, assignmentFor(a)) {
		t.Fatalf("restarted leader assigned %q, want %q", sr.MemberAssignment, assignmentFor(a))
	}
	h.wantState("g", "Stable", 3)
	wantCode(t, "c heartbeat at the end", h.heartbeat("g", c, "", f.gen), nil)
}

// A static member parked in a rebalance is fenced when its instance
// restarts; the new member id takes part in the rebalance.
func TestStaticMemberReplacedDuringRebalance(t *testing.T) {
	h := newHarness(t)
	f := h.form("g", "inst-a", "")
	a, b := f.ids[0], f.ids[1]
	aj := h.joinAsync(h.c, joinReq("g", a, "inst-a", "client-0"), "client-0") // the leader rejoins: rebalance
	h.wantState("g", "PreparingRebalance", 2)
	a2j := h.joinAsync(h.c, joinReq("g", "", "inst-a", "client-0"), "client-0")
	wantCode(t, "parked old inst-a", aj.get().ErrorCode, kerr.FencedInstanceID)
	bj := h.joinAsync(h.c, joinReq("g", b, "", "client-1"), "client-1")
	ar, br := a2j.get(), bj.get()
	wantCode(t, "new inst-a", ar.ErrorCode, nil)
	wantCode(t, "b", br.ErrorCode, nil)
	if ar.MemberID == a || ar.Generation <= f.gen || br.Generation != ar.Generation || ar.LeaderID != ar.MemberID {
		t.Fatalf("new inst-a %q generation %d leader %q; b generation %d", ar.MemberID, ar.Generation, ar.LeaderID, br.Generation)
	}
}

func TestLeaveGroup(t *testing.T) {
	h := newHarness(t)
	f := h.form("g", "", "inst-s", "")
	a, s, c := f.ids[0], f.ids[1], f.ids[2]
	resp := h.leave("g",
		kmsg.LeaveGroupRequestMember{MemberID: "wrong", InstanceID: str("inst-s")},
		kmsg.LeaveGroupRequestMember{MemberID: a, Reason: str("shutting down")},
		kmsg.LeaveGroupRequestMember{InstanceID: str("inst-s")},
		kmsg.LeaveGroupRequestMember{MemberID: "ghost"},
		kmsg.LeaveGroupRequestMember{InstanceID: str("inst-none")},
	)
	wantCode(t, "batch leave", resp.ErrorCode, nil)
	want := []*kerr.Error{kerr.FencedInstanceID, nil, nil, kerr.UnknownMemberID, kerr.UnknownMemberID}
	if len(resp.Members) != len(want) {
		t.Fatalf("%d member answers, want %d", len(resp.Members), len(want))
	}
	for i, w := range want {
		wantCode(t, "leaving member "+string(rune('0'+i)), resp.Members[i].ErrorCode, w)
	}
	h.wantState("g", "PreparingRebalance", 1)
	wantCode(t, "left a heartbeat", h.heartbeat("g", a, "", f.gen), kerr.UnknownMemberID)
	wantCode(t, "left s heartbeat", h.heartbeat("g", s, "inst-s", f.gen), kerr.UnknownMemberID)
	wantCode(t, "c heartbeat", h.heartbeat("g", c, "", f.gen), kerr.RebalanceInProgress)
	r := h.join(joinReq("g", c, "", "client-2"), "client-2")
	wantCode(t, "c rejoin", r.ErrorCode, nil)
	if r.LeaderID != c || r.Generation <= f.gen || len(r.Members) != 1 {
		t.Fatalf("c rejoined generation %d led by %s with %d members", r.Generation, r.LeaderID, len(r.Members))
	}

	// v0-2: one member, answered at the top level.
	v0 := kmsg.NewPtrLeaveGroupRequest()
	v0.Version, v0.Group, v0.MemberID = 0, "g", c
	wantCode(t, "v0 leave", h.c.Leave(h.ctx, v0).ErrorCode, nil)
	h.wantState("g", "Empty", 0)
	wantCode(t, "v0 leave again", h.c.Leave(h.ctx, v0).ErrorCode, kerr.UnknownMemberID)
}

// A static member that does not rejoin within the rebalance timeout keeps
// its place (KIP-345; Kafka removes only the dynamic members that did not
// rejoin): the generation forms with it, led by a member that did rejoin,
// and the instance can still take its place without another rebalance.
func TestRebalanceTimeoutKeepsStaticMembers(t *testing.T) {
	h := newHarness(t)
	f := h.form("g", "inst-s", "")
	s, d := f.ids[0], f.ids[1] // s leads
	n := h.memberID("g", "n")
	nj := h.joinAsync(h.c, joinReq("g", n, "", "n"), "n")
	start := h.elapsed()
	dj := h.joinAsync(h.c, joinReq("g", d, "", "client-1"), "client-1")
	for h.elapsed()+5*time.Second < start+rebalance {
		h.advance(5 * time.Second) // s is alive (it heartbeats) but slow to rejoin
		wantCode(t, "s heartbeat", h.heartbeat("g", s, "inst-s", f.gen), kerr.RebalanceInProgress)
	}
	h.advance(start + rebalance - h.elapsed())
	dr, nr := dj.get(), nj.get()
	wantCode(t, "d join", dr.ErrorCode, nil)
	wantCode(t, "n join", nr.ErrorCode, nil)
	if dr.LeaderID != d || len(dr.Members) != 3 || nr.Generation != dr.Generation || dr.Generation <= f.gen {
		t.Fatalf("d: leader %s generation %d with %d members; n: generation %d; want d leading all three", dr.LeaderID, dr.Generation, len(dr.Members), nr.Generation)
	}
	h.wantState("g", "CompletingRebalance", 3)
	gen := dr.Generation
	wantCode(t, "s heartbeat with its old generation", h.heartbeat("g", s, "inst-s", f.gen), kerr.IllegalGeneration)

	// d assigns all three; the instance restarts and takes its place and
	// its assignment without another rebalance.
	nw := h.syncAsync(h.c, syncReq("g", n, "", gen))
	wantCode(t, "d sync", h.sync(leaderSync("g", d, "", gen, []string{s, d, n})).ErrorCode, nil)
	wantCode(t, "n sync", nw.get().ErrorCode, nil)
	h.wantState("g", "Stable", 3)
	sr := h.join(joinReq("g", "", "inst-s", "client-0"), "client-0")
	wantCode(t, "restarted s", sr.ErrorCode, nil)
	if sr.Generation != gen || sr.LeaderID != d {
		t.Fatalf("restarted s: generation %d led by %s, want %d led by %s", sr.Generation, sr.LeaderID, gen, d)
	}
	ss := h.sync(syncReq("g", sr.MemberID, "inst-s", gen))
	wantCode(t, "restarted s sync", ss.ErrorCode, nil)
	if !bytes.Equal(ss.MemberAssignment, assignmentFor(s)) {
		t.Fatalf("restarted s assigned %q, want %q", ss.MemberAssignment, assignmentFor(s))
	}
	h.wantState("g", "Stable", 3)
	wantCode(t, "d heartbeat", h.heartbeat("g", d, "", gen), nil)
}

// With no member rejoined when the rebalance timeout runs out (the static
// ones are slow), the rebalance waits another timeout for one, as Kafka's
// does.
func TestRebalanceWaitsForAStaticMemberToRejoin(t *testing.T) {
	h := newHarness(t)
	f := h.form("g", "inst-1", "inst-2", "")
	s1, s2, d := f.ids[0], f.ids[1], f.ids[2]
	wantCode(t, "d leaves", h.leave("g", kmsg.LeaveGroupRequestMember{MemberID: d}).Members[0].ErrorCode, nil)
	start := h.elapsed()
	for h.elapsed()+5*time.Second <= start+rebalance+5*time.Second {
		h.advance(5 * time.Second)
		wantCode(t, "s1 heartbeat", h.heartbeat("g", s1, "inst-1", f.gen), kerr.RebalanceInProgress)
		wantCode(t, "s2 heartbeat", h.heartbeat("g", s2, "inst-2", f.gen), kerr.RebalanceInProgress)
	}
	h.wantState("g", "PreparingRebalance", 2)
	j1 := h.joinAsync(h.c, joinReq("g", s1, "inst-1", "client-0"), "client-0")
	j2 := h.joinAsync(h.c, joinReq("g", s2, "inst-2", "client-1"), "client-1")
	r1, r2 := j1.get(), j2.get()
	wantCode(t, "s1 rejoin", r1.ErrorCode, nil)
	wantCode(t, "s2 rejoin", r2.ErrorCode, nil)
	if r1.Generation <= f.gen || r2.Generation != r1.Generation || len(r1.Members) != 2 {
		t.Fatalf("s1: generation %d with %d members; s2: generation %d", r1.Generation, len(r1.Members), r2.Generation)
	}
}

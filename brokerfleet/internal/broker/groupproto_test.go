package broker_test

// Protocol-level tests of the group coordinator: raw kmsg requests, each
// sent at exactly the version it carries over its own connection to one
// broker (no client routing, retries or version negotiation), checked
// against Apache Kafka's classic group coordinator (GroupCoordinator.scala
// and its Java successor; KIP-345 static membership, KIP-394
// MEMBER_ID_REQUIRED, KIP-814 SkipAssignment). The raw client they use
// (wire, rawMember, formGroup, ...) is in groupwire_test.go.

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	longSession   = 10 * time.Second
	longRebalance = 10 * time.Second
)

// TestGroupProtoMemberIDRequired: KIP-394. A JoinGroup v4+ without a
// member id is answered at once with MEMBER_ID_REQUIRED and an id; the
// join with that id forms the generation. v3 joins directly.
func TestGroupProtoMemberIDRequired(t *testing.T) {
	b := startGroupBroker(t, nil)
	a := newMember(t, b.Addr, "kip394", "client-a", 4, longSession, longRebalance)

	resp := sendReq[*kmsg.JoinGroupResponse](t, a.gw, a.joinWith(""))
	requireCode(t, kerr.MemberIDRequired.Code, resp.ErrorCode)
	require.True(t, strings.HasPrefix(resp.MemberID, "client-a-"), "member id %q starts with the client id (as Kafka's do)", resp.MemberID)
	require.Equal(t, int32(-1), resp.Generation)
	handed := resp.MemberID
	// Asking again hands out another id: nothing was registered under
	// the first but a pending id.
	again := sendReq[*kmsg.JoinGroupResponse](t, a.gw, a.joinWith(""))
	requireCode(t, kerr.MemberIDRequired.Code, again.ErrorCode)
	require.NotEqual(t, handed, again.MemberID)
	// An id the coordinator never handed out is unknown.
	requireCode(t, kerr.UnknownMemberID.Code, sendReq[*kmsg.JoinGroupResponse](t, a.gw, a.joinWith("client-a-made-up")).ErrorCode)

	// A pending id holds the rebalance open until it joins or expires
	// (after its session timeout), so drop the second one with LeaveGroup
	// and join under the first.
	lv := sendReq[*kmsg.LeaveGroupResponse](t, a.cw, leaveReq(3, "kip394", leaving(again.MemberID, nil)))
	requireCode(t, 0, lv.ErrorCode)
	requireCode(t, 0, lv.Members[0].ErrorCode)
	a.id = handed
	jr := a.startJoin().wait(t)
	a.joined(t, jr)
	require.Equal(t, handed, a.id, "the member joins under the id it was handed")
	require.Positive(t, a.gen)
	require.Equal(t, a.id, a.leader, "the only member leads")
	require.Equal(t, "range", a.protocol)
	require.Len(t, a.members, 1)
	syncAll(t, a)
	g := describeGroupOne(t, a.cw, "kip394")
	require.Equal(t, "Stable", g.State)
	require.Equal(t, []string{handed}, memberIDs(g))
	require.Equal(t, "client-a", g.Members[0].ClientID)
	require.Equal(t, "/127.0.0.1", g.Members[0].ClientHost)

	// JoinGroup v3 predates KIP-394: an empty member id joins at once.
	old := newMember(t, b.Addr, "v3-group", "old-client", 3, longSession, longRebalance)
	jr = old.startJoin().wait(t)
	old.joined(t, jr)
	require.True(t, strings.HasPrefix(old.id, "old-client-"), old.id)
	require.Positive(t, old.gen)
	require.Equal(t, old.id, old.leader)
	syncAll(t, old)
	oldGen := old.gen

	// A v3 member joining a stable group starts a rebalance right away;
	// a v4 member's first join (still without an id) does not.
	late := newMember(t, b.Addr, "kip394", "client-late", 4, longSession, longRebalance)
	late.requireID(t)
	requireCode(t, 0, a.heartbeat(t), "a pending member id does not rebalance the group")
	late3 := newMember(t, b.Addr, "v3-group", "old-late", 3, longSession, longRebalance)
	lateJoin := late3.startJoin()
	waitRebalancing(t, old)
	oldJoin := old.startJoin()
	late3.joined(t, lateJoin.wait(t))
	old.joined(t, oldJoin.wait(t))
	require.Equal(t, oldGen+1, old.gen)
	require.Equal(t, old.gen, late3.gen)
}

// TestGroupProtoProtocolSelection: the coordinator picks, among the
// protocols every member supports, the one most members list first (each
// member votes for its first common protocol); a member sharing no
// protocol, type or any protocol at all with the group is refused.
func TestGroupProtoProtocolSelection(t *testing.T) {
	b := startGroupBroker(t, nil)

	// Three members, three preference orders. Common to all: range and
	// roundrobin. Votes: a -> range, b -> roundrobin, c -> roundrobin
	// (c's first choice, sticky, is not common). roundrobin wins two to
	// one.
	a := newMember(t, b.Addr, "select", "a", 5, longSession, longRebalance)
	a.join.Protocols = []kmsg.JoinGroupRequestProtocol{consumerProtocol("range", "a", "t"), consumerProtocol("roundrobin", "a", "t")}
	bm := newMember(t, b.Addr, "select", "b", 5, longSession, longRebalance)
	bm.join.Protocols = []kmsg.JoinGroupRequestProtocol{consumerProtocol("roundrobin", "b", "t"), consumerProtocol("sticky", "b", "t"), consumerProtocol("range", "b", "t")}
	c := newMember(t, b.Addr, "select", "c", 5, longSession, longRebalance)
	c.join.Protocols = []kmsg.JoinGroupRequestProtocol{consumerProtocol("sticky", "c", "t"), consumerProtocol("roundrobin", "c", "t"), consumerProtocol("range", "c", "t")}
	formGroup(t, a, bm, c)
	require.Equal(t, "roundrobin", a.protocol)
	leader := a
	for _, m := range []*rawMember{bm, c} {
		if m.id == m.leader {
			leader = m
		}
	}
	// The leader gets every member's metadata for the chosen protocol.
	byID := map[string]string{a.id: "a", bm.id: "b", c.id: "c"}
	for _, jm := range leader.members {
		var md kmsg.ConsumerMemberMetadata
		require.NoError(t, md.ReadFrom(jm.ProtocolMetadata))
		require.Equal(t, byID[jm.MemberID]+"/roundrobin", string(md.UserData))
	}
	g := describeGroupOne(t, a.cw, "select")
	require.Equal(t, "roundrobin", g.Protocol)

	// Two members with opposite orders over the same two protocols tie
	// one vote each. Kafka breaks ties arbitrarily; Strata documents the
	// earliest joiner's order, so x joins (and waits) before y.
	x := newMember(t, b.Addr, "tie", "x", 5, longSession, longRebalance)
	x.join.Protocols = []kmsg.JoinGroupRequestProtocol{consumerProtocol("range", "x", "t"), consumerProtocol("roundrobin", "x", "t")}
	y := newMember(t, b.Addr, "tie", "y", 5, longSession, longRebalance)
	y.join.Protocols = []kmsg.JoinGroupRequestProtocol{consumerProtocol("roundrobin", "y", "t"), consumerProtocol("range", "y", "t")}
	x.requireID(t)
	y.requireID(t)
	xj := x.startJoin()
	waitFor(t, "x to be a member", func() bool { return len(describeGroupOne(t, x.cw, "tie").Members) == 1 })
	xj.requireWaiting(t, 50*time.Millisecond, "x's join while y's id is pending")
	yj := y.startJoin()
	x.joined(t, xj.wait(t))
	y.joined(t, yj.wait(t))
	require.Equal(t, x.gen, y.gen)
	require.Equal(t, "range", x.protocol)
	require.Equal(t, "range", y.protocol)
	require.Equal(t, x.id, x.leader)

	// INCONSISTENT_GROUP_PROTOCOL, checked on the very first join (before
	// any MEMBER_ID_REQUIRED), leaves the group as it was.
	for _, tc := range []struct {
		name         string
		protocolType string
		protocols    []kmsg.JoinGroupRequestProtocol
	}{
		{"no common protocol", "consumer", []kmsg.JoinGroupRequestProtocol{consumerProtocol("sticky", "d", "t")}},
		{"another protocol type", "connect", []kmsg.JoinGroupRequestProtocol{consumerProtocol("range", "d", "t")}},
		{"no protocols", "consumer", nil},
		{"no protocol type", "", []kmsg.JoinGroupRequestProtocol{consumerProtocol("range", "d", "t")}},
	} {
		for _, v := range []int16{3, 9} {
			d := newMember(t, b.Addr, "select", "d", v, longSession, longRebalance)
			d.join.ProtocolType, d.join.Protocols = tc.protocolType, tc.protocols
			resp := sendReq[*kmsg.JoinGroupResponse](t, d.gw, d.joinWith(""))
			requireCode(t, kerr.InconsistentGroupProtocol.Code, resp.ErrorCode, "%s (v%d)", tc.name, v)
		}
	}
	requireCode(t, 0, a.heartbeat(t), "refused joins do not rebalance the group")
	require.Len(t, describeGroupOne(t, a.cw, "select").Members, 3)

	// On an empty group an empty protocol list or type is refused too.
	e := newMember(t, b.Addr, "fresh", "e", 9, longSession, longRebalance)
	e.join.Protocols = nil
	requireCode(t, kerr.InconsistentGroupProtocol.Code, sendReq[*kmsg.JoinGroupResponse](t, e.gw, e.joinWith("")).ErrorCode)
	e.join.Protocols, e.join.ProtocolType = []kmsg.JoinGroupRequestProtocol{consumerProtocol("range", "e")}, ""
	requireCode(t, kerr.InconsistentGroupProtocol.Code, sendReq[*kmsg.JoinGroupResponse](t, e.gw, e.joinWith("")).ErrorCode)
}

// TestGroupProtoInvalidJoins: session timeouts outside the broker's bounds
// and empty group ids are refused on every group API that needs a group.
func TestGroupProtoInvalidJoins(t *testing.T) {
	b := startGroupBroker(t, nil)
	m := newMember(t, b.Addr, "invalid", "m", 5, 499*time.Millisecond, longRebalance)
	resp := sendReq[*kmsg.JoinGroupResponse](t, m.gw, m.joinWith(""))
	requireCode(t, kerr.InvalidSessionTimeout.Code, resp.ErrorCode, "below group.min.session.timeout.ms (500ms in tests)")
	m.join.SessionTimeoutMillis = int32((30*time.Minute + time.Millisecond).Milliseconds())
	resp = sendReq[*kmsg.JoinGroupResponse](t, m.gw, m.joinWith(""))
	requireCode(t, kerr.InvalidSessionTimeout.Code, resp.ErrorCode, "above group.max.session.timeout.ms (30 min)")
	m.join.SessionTimeoutMillis = 500
	resp = sendReq[*kmsg.JoinGroupResponse](t, m.gw, m.joinWith(""))
	requireCode(t, kerr.MemberIDRequired.Code, resp.ErrorCode, "exactly the minimum is allowed")

	m.join.Group = ""
	resp = sendReq[*kmsg.JoinGroupResponse](t, m.gw, m.joinWith(""))
	requireCode(t, kerr.InvalidGroupID.Code, resp.ErrorCode, "join")
	requireCode(t, kerr.InvalidGroupID.Code, m.heartbeatAs(t, "x", 1), "heartbeat")
	requireCode(t, kerr.InvalidGroupID.Code, sendReq[*kmsg.SyncGroupResponse](t, m.gw, m.syncReq(nil)).ErrorCode, "sync")
	requireCode(t, kerr.InvalidGroupID.Code, sendReq[*kmsg.LeaveGroupResponse](t, m.cw, leaveReq(1, "", leaving("x", nil))).ErrorCode, "leave")
	require.Empty(t, listGroups(t, m.cw, 4, nil, nil), "refused joins create no group")
}

// TestGroupProtoRebalance: a second member's join makes the first's
// heartbeat answer REBALANCE_IN_PROGRESS; once it rejoins both are in the
// next generation, and the leader's assignment reaches the follower.
func TestGroupProtoRebalance(t *testing.T) {
	b := startGroupBroker(t, map[string]int32{"t": 1})
	m1 := newMember(t, b.Addr, "flow", "m1", 9, longSession, longRebalance)
	formGroup(t, m1)
	gen1 := m1.gen
	requireCode(t, 0, m1.heartbeat(t))
	require.Equal(t, "Stable", describeGroupOne(t, m1.cw, "flow").State)

	m2 := newMember(t, b.Addr, "flow", "m2", 9, longSession, longRebalance)
	m2.requireID(t)
	requireCode(t, 0, m1.heartbeat(t), "a pending id alone does not rebalance")
	j2 := m2.startJoin()
	waitRebalancing(t, m1)
	j2.requireWaiting(t, 200*time.Millisecond, "m2's join while m1 has not rejoined")
	require.Equal(t, "PreparingRebalance", describeGroupOne(t, m1.cw, "flow").State)
	// The generation being replaced is still the group's: its members'
	// commits are taken while the group prepares (as in Kafka, which
	// tells them of the rebalance through heartbeats only).
	codes := commit(t, m1.cw, commitReq("flow", gen1, m1.id, nil, commitPart{topic: "t", partition: 0, offset: 7, epoch: -1}))
	requireCode(t, 0, codes[0], "commit while PreparingRebalance")
	require.Equal(t, int64(7), fetchOffsets(t, m1.cw, "flow", "t", 0)[0].offset)

	j1 := m1.startJoin()
	m1.joined(t, j1.wait(t))
	m2.joined(t, j2.wait(t))
	require.Equal(t, gen1+1, m1.gen, "the next generation")
	require.Equal(t, m1.gen, m2.gen)
	require.Equal(t, m1.id, m1.leader, "the leader stays leader")
	require.Equal(t, m1.id, m2.leader)
	require.Len(t, m1.members, 2)
	require.Empty(t, m2.members)
	require.Equal(t, "CompletingRebalance", describeGroupOne(t, m1.cw, "flow").State)
	requireCode(t, 0, m2.heartbeat(t), "heartbeats are fine while the leader assigns")

	// The follower syncs first and waits for the leader's assignment.
	s2 := m2.startSync(nil)
	s2.requireWaiting(t, 200*time.Millisecond, "the follower's sync before the leader's")
	s1 := m1.startSync(map[string][]byte{m1.id: []byte("p0,p1"), m2.id: []byte("p2,p3")})
	r1, r2 := s1.wait(t), s2.wait(t)
	requireCode(t, 0, r1.ErrorCode)
	requireCode(t, 0, r2.ErrorCode)
	require.Equal(t, []byte("p0,p1"), r1.MemberAssignment)
	require.Equal(t, []byte("p2,p3"), r2.MemberAssignment)
	require.Equal(t, "range", *r2.Protocol)
	require.Equal(t, "consumer", *r2.ProtocolType)
	requireCode(t, 0, m1.heartbeat(t))
	requireCode(t, 0, m2.heartbeat(t))
	requireCode(t, kerr.IllegalGeneration.Code, m1.heartbeatAs(t, m1.id, gen1), "a heartbeat of the old generation")

	// A SyncGroup resent in the stable generation gets the same answer.
	again := sendReq[*kmsg.SyncGroupResponse](t, m2.gw, m2.syncReq(nil))
	requireCode(t, 0, again.ErrorCode)
	require.Equal(t, []byte("p2,p3"), again.MemberAssignment)
	// A sync of the wrong generation or protocol is refused.
	bad := m2.syncReq(nil)
	bad.Generation = gen1
	requireCode(t, kerr.IllegalGeneration.Code, sendReq[*kmsg.SyncGroupResponse](t, m2.gw, bad).ErrorCode)
	bad = m2.syncReq(nil)
	bad.Protocol = kmsg.StringPtr("roundrobin")
	requireCode(t, kerr.InconsistentGroupProtocol.Code, sendReq[*kmsg.SyncGroupResponse](t, m2.gw, bad).ErrorCode)
	// A follower's join with unchanged metadata in a stable group is
	// answered at once with the current generation; no rebalance.
	m2.joined(t, m2.startJoin().wait(t))
	require.Equal(t, m1.gen, m2.gen)
	requireCode(t, 0, m1.heartbeat(t))
}

// TestGroupProtoCommitFencing: only current members commit, under the
// current generation; an admin-style commit (generation -1, no member)
// only while the group has no members.
func TestGroupProtoCommitFencing(t *testing.T) {
	b := startGroupBroker(t, map[string]int32{"t": 2})
	a := newMember(t, b.Addr, "fence", "a", 9, longSession, longRebalance)
	bm := newMember(t, b.Addr, "fence", "b", 9, longSession, longRebalance)
	formGroup(t, a, bm)
	gen1 := a.gen
	at := func(offset int64, md string) commitPart {
		return commitPart{topic: "t", partition: 0, offset: offset, epoch: 4, metadata: &md}
	}

	// A member's commit, with metadata and leader epoch, round-trips.
	codes := commit(t, a.cw, commitReq("fence", gen1, a.id, nil, at(5, "checkpoint-5")))
	requireCode(t, 0, codes[0])
	require.Equal(t, []fetched{{5, 4, "checkpoint-5"}}, fetchOffsets(t, a.cw, "fence", "t", 0))

	// Metadata is capped at offset.metadata.max.bytes (4096), per
	// partition; unknown topics and partitions are refused per partition.
	big, limit := strings.Repeat("m", 4097), strings.Repeat("m", 4096)
	codes = commit(t, a.cw, commitReq("fence", gen1, a.id, nil,
		commitPart{topic: "t", partition: 0, offset: 6, metadata: &big},
		commitPart{topic: "t", partition: 1, offset: 9, epoch: -1, metadata: &limit},
		commitPart{topic: "no-such-topic", partition: 0, offset: 1},
		commitPart{topic: "t", partition: 2, offset: 1}))
	requireCode(t, kerr.OffsetMetadataTooLarge.Code, codes[0], "4097 bytes of metadata")
	requireCode(t, 0, codes[1], "4096 bytes of metadata")
	requireCode(t, kerr.UnknownTopicOrPartition.Code, codes[2], "unknown topic")
	requireCode(t, kerr.UnknownTopicOrPartition.Code, codes[3], "partition past the topic's end")
	require.Equal(t, []fetched{{5, 4, "checkpoint-5"}, {9, -1, limit}}, fetchOffsets(t, a.cw, "fence", "t", 0, 1))

	// Not a member, or not one at all.
	codes = commit(t, a.cw, commitReq("fence", gen1, "ghost", nil, at(6, "")))
	requireCode(t, kerr.UnknownMemberID.Code, codes[0], "unknown member id")
	codes = commit(t, a.cw, commitReq("fence", -1, "", nil, at(6, "")))
	requireCode(t, kerr.UnknownMemberID.Code, codes[0], "a simple commit while the group has members")
	codes = commit(t, a.cw, commitReq("fence", gen1+1, a.id, nil, at(6, "")))
	requireCode(t, kerr.IllegalGeneration.Code, codes[0], "a generation from the future")

	// A third member makes a new generation; the leader has not synced
	// yet, so the group is CompletingRebalance.
	c := newMember(t, b.Addr, "fence", "c", 9, longSession, longRebalance)
	c.requireID(t)
	c.beginJoin()
	waitRebalancing(t, a)
	joinAll(t, a, bm, c)
	gen2 := a.gen
	require.Equal(t, gen1+1, gen2)
	require.Equal(t, "CompletingRebalance", describeGroupOne(t, a.cw, "fence").State)
	codes = commit(t, a.cw, commitReq("fence", gen2, a.id, nil, at(6, "")))
	requireCode(t, kerr.RebalanceInProgress.Code, codes[0], "a current member's commit before the assignment")
	// Kafka validates the member and generation first: non-members and
	// old generations learn that, not that a rebalance is under way.
	codes = commit(t, a.cw, commitReq("fence", -1, "", nil, at(6, "")))
	requireCode(t, kerr.UnknownMemberID.Code, codes[0], "a simple commit while CompletingRebalance")
	codes = commit(t, a.cw, commitReq("fence", gen1, a.id, nil, at(6, "")))
	requireCode(t, kerr.IllegalGeneration.Code, codes[0], "an old generation's commit while CompletingRebalance")

	syncAll(t, a, bm, c)
	// The member is still in the group, but its old generation cannot
	// move the offset.
	codes = commit(t, a.cw, commitReq("fence", gen1, a.id, nil, at(6, "stale")))
	requireCode(t, kerr.IllegalGeneration.Code, codes[0], "old generation")
	require.Equal(t, []fetched{{5, 4, "checkpoint-5"}}, fetchOffsets(t, a.cw, "fence", "t", 0), "unchanged by the refused commit")
	codes = commit(t, c.cw, commitReq("fence", gen2, c.id, nil, at(6, "by-c")))
	requireCode(t, 0, codes[0])
	require.Equal(t, []fetched{{6, 4, "by-c"}}, fetchOffsets(t, a.cw, "fence", "t", 0))

	// Once every member left, simple commits are accepted again.
	for _, m := range []*rawMember{a, bm, c} {
		requireCode(t, 0, sendReq[*kmsg.LeaveGroupResponse](t, m.cw, leaveReq(2, "fence", leaving(m.id, nil))).ErrorCode)
	}
	require.Equal(t, "Empty", describeGroupOne(t, a.cw, "fence").State)
	simpleCommit(t, a.cw, "fence", at(42, "reset"))
	require.Equal(t, []fetched{{42, 4, "reset"}}, fetchOffsets(t, a.cw, "fence", "t", 0))
	codes = commit(t, a.cw, commitReq("fence", gen2, a.id, nil, at(43, "")))
	requireCode(t, kerr.UnknownMemberID.Code, codes[0], "a member that left")
}

// TestGroupProtoSessionTimeout: a member that stops heartbeating is removed
// once its session timeout passes, and the others rebalance without it.
func TestGroupProtoSessionTimeout(t *testing.T) {
	b := startGroupBroker(t, nil)
	a := newMember(t, b.Addr, "expire", "a", 9, longSession, longRebalance)
	quiet := newMember(t, b.Addr, "expire", "quiet", 9, time.Second, longRebalance)
	formGroup(t, a, quiet)
	gen := a.gen
	lastHeard := time.Now() // quiet's SyncGroup was answered before this

	time.Sleep(400 * time.Millisecond)
	require.ElementsMatch(t, []string{a.id, quiet.id}, memberIDs(describeGroupOne(t, a.cw, "expire")), "not expired before its session timeout")
	requireCode(t, 0, a.heartbeat(t))
	waitRebalancing(t, a)
	require.GreaterOrEqual(t, time.Since(lastHeard), 900*time.Millisecond, "expired no earlier than its 1s session timeout")

	g := describeGroupOne(t, a.cw, "expire")
	require.Equal(t, "PreparingRebalance", g.State)
	require.Equal(t, []string{a.id}, memberIDs(g))
	requireCode(t, kerr.UnknownMemberID.Code, quiet.heartbeat(t), "the expired member is told it is unknown")
	a.joined(t, a.startJoin().wait(t))
	require.Equal(t, gen+1, a.gen)
	require.Equal(t, a.id, a.leader)
	require.Len(t, a.members, 1)
	syncAll(t, a)
	require.Equal(t, "Stable", describeGroupOne(t, a.cw, "expire").State)
}

// TestGroupProtoParkedJoinDoesNotExpire: a member waiting in JoinGroup for
// the others is alive however long it waits, and its session restarts
// when the generation forms (Kafka's onCompleteJoin does the same), so a
// leader may take a while to assign.
func TestGroupProtoParkedJoinDoesNotExpire(t *testing.T) {
	const session = 600 * time.Millisecond
	b := startGroupBroker(t, nil)
	a := newMember(t, b.Addr, "parked", "a", 9, session, longRebalance)
	bm := newMember(t, b.Addr, "parked", "b", 9, session, longRebalance)
	formGroup(t, a, bm)
	gen := a.gen
	leader, follower := a, bm
	if bm.id == bm.leader {
		leader, follower = bm, a
	}

	// The leader's rejoin starts a rebalance and parks it; the follower
	// keeps heartbeating but does not rejoin for 2.5 session timeouts.
	stopBeats := follower.heartbeatEvery(100 * time.Millisecond)
	lj := leader.startJoin()
	lj.requireWaiting(t, 5*session/2, "the leader's join while the follower has not rejoined")
	for _, code := range stopBeats() {
		if code != 0 {
			requireCode(t, kerr.RebalanceInProgress.Code, code, "the follower's heartbeats during the rebalance")
		}
	}
	g := describeGroupOne(t, leader.cw, "parked")
	require.Equal(t, "PreparingRebalance", g.State)
	require.ElementsMatch(t, []string{a.id, bm.id}, memberIDs(g), "the parked leader did not expire")

	fj := follower.startJoin()
	leader.joined(t, lj.wait(t))
	follower.joined(t, fj.wait(t))
	require.Equal(t, gen+1, leader.gen)
	require.Len(t, leader.members, 2)

	// The follower waits for its assignment; the leader takes half a
	// session to compute it. Its session counts from the join response,
	// not from the join it sent long ago.
	fs := follower.startSync(nil)
	time.Sleep(session / 2)
	ls := leader.startSync(map[string][]byte{leader.id: assignmentFor(leader.id), follower.id: assignmentFor(follower.id)})
	requireCode(t, 0, ls.wait(t).ErrorCode, "the leader's sync")
	fr := fs.wait(t)
	requireCode(t, 0, fr.ErrorCode, "the follower's sync")
	require.Equal(t, assignmentFor(follower.id), fr.MemberAssignment)
	g = describeGroupOne(t, leader.cw, "parked")
	require.Equal(t, "Stable", g.State)
	require.Len(t, g.Members, 2)
}

// TestGroupProtoRebalanceTimeout: a member that does not rejoin within the
// rebalance timeout is dropped (heartbeats do not save it) and the
// generation forms without it.
func TestGroupProtoRebalanceTimeout(t *testing.T) {
	const rebalance = time.Second
	b := startGroupBroker(t, nil)
	a := newMember(t, b.Addr, "slow", "a", 9, longSession, rebalance)
	slow := newMember(t, b.Addr, "slow", "slow", 9, longSession, rebalance)
	formGroup(t, a, slow)
	gen := a.gen

	c := newMember(t, b.Addr, "slow", "c", 9, longSession, rebalance)
	c.requireID(t)
	started := time.Now()
	cj := c.startJoin()
	waitRebalancing(t, a)
	aj := a.startJoin()
	time.Sleep(rebalance / 2)
	requireCode(t, kerr.RebalanceInProgress.Code, slow.heartbeat(t), "the slow member is alive and told to rejoin")
	require.False(t, aj.answered() || cj.answered(), "the generation waits for the slow member")
	a.joined(t, aj.wait(t))
	c.joined(t, cj.wait(t))
	require.GreaterOrEqual(t, time.Since(started), rebalance, "completed at the rebalance timeout")
	require.Equal(t, gen+1, a.gen)
	require.Equal(t, a.gen, c.gen)
	leader := a
	if c.id == c.leader {
		leader = c
	}
	got := []string{}
	for _, jm := range leader.members {
		got = append(got, jm.MemberID)
	}
	require.ElementsMatch(t, []string{a.id, c.id}, got, "the slow member is not in the generation")
	requireCode(t, kerr.UnknownMemberID.Code, slow.heartbeat(t))
	requireCode(t, kerr.UnknownMemberID.Code, slow.startJoin().wait(t).ErrorCode, "its rejoin under the old id")
	syncAll(t, a, c)
}

// TestGroupProtoStaticMembership: KIP-345 and KIP-814.
func TestGroupProtoStaticMembership(t *testing.T) {
	b := startGroupBroker(t, map[string]int32{"t": 1})
	static := func(name, instance string, version int16) *rawMember {
		m := newMember(t, b.Addr, "static", name, version, longSession, longRebalance)
		m.join.InstanceID = kmsg.StringPtr(instance)
		return m
	}
	// A static member joins with an empty member id directly.
	a := static("a", "ia", 9)
	a.joined(t, a.startJoin().wait(t))
	syncAll(t, a)
	bm := static("b", "ib", 9)
	bm.beginJoin()
	waitRebalancing(t, a)
	joinAll(t, a, bm)
	syncAll(t, a, bm)
	gen := a.gen
	require.Equal(t, a.id, a.leader)

	// The follower restarts: same instance id, no member id, while the
	// group is Stable. It gets a new member id and the same generation at
	// once, and keeps its assignment; nobody rebalances.
	b2 := static("b2", "ib", 9)
	r := b2.startJoin().wait(t)
	b2.joined(t, r)
	require.NotEqual(t, bm.id, b2.id)
	require.Equal(t, gen, b2.gen)
	require.Equal(t, a.id, b2.leader)
	require.Empty(t, r.Members)
	require.False(t, r.SkipAssignment)
	requireCode(t, 0, a.heartbeat(t), "no rebalance for the other member")
	sr := sendReq[*kmsg.SyncGroupResponse](t, b2.gw, b2.syncReq(nil))
	requireCode(t, 0, sr.ErrorCode)
	require.Equal(t, assignmentFor(bm.id), sr.MemberAssignment, "the new id takes over the old assignment")
	g := describeGroupOne(t, a.cw, "static")
	require.Equal(t, "Stable", g.State)
	require.ElementsMatch(t, []string{a.id, b2.id}, memberIDs(g))
	for _, dm := range g.Members {
		require.NotNil(t, dm.InstanceID)
	}

	// The old member id is fenced wherever it shows up with its instance.
	requireCode(t, kerr.FencedInstanceID.Code, bm.heartbeat(t), "heartbeat")
	codes := commit(t, bm.cw, commitReq("static", gen, bm.id, bm.instance(), commitPart{topic: "t", offset: 1, epoch: -1}))
	requireCode(t, kerr.FencedInstanceID.Code, codes[0], "commit")
	requireCode(t, kerr.FencedInstanceID.Code, sendReq[*kmsg.SyncGroupResponse](t, bm.gw, bm.syncReq(nil)).ErrorCode, "sync")
	requireCode(t, kerr.FencedInstanceID.Code, bm.startJoin().wait(t).ErrorCode, "join")
	requireCode(t, 0, b2.heartbeat(t))

	// The leader restarts with JoinGroup v9: it learns the members but is
	// told to keep the current assignment (KIP-814).
	a2 := static("a2", "ia", 9)
	r = a2.startJoin().wait(t)
	a2.joined(t, r)
	require.Equal(t, gen, a2.gen)
	require.Equal(t, a2.id, a2.leader)
	require.True(t, r.SkipAssignment)
	var got []string
	for _, jm := range r.Members {
		got = append(got, jm.MemberID)
		require.NotNil(t, jm.InstanceID)
		require.NotEmpty(t, jm.ProtocolMetadata)
	}
	require.ElementsMatch(t, []string{a2.id, b2.id}, got)
	requireCode(t, 0, b2.heartbeat(t), "no rebalance for the other member")
	sr = sendReq[*kmsg.SyncGroupResponse](t, a2.gw, a2.syncReq(map[string][]byte{a2.id: []byte("ignored")}))
	requireCode(t, 0, sr.ErrorCode)
	require.Equal(t, assignmentFor(a.id), sr.MemberAssignment, "the leader keeps its assignment")

	// Before v9 there is no SkipAssignment: Kafka answers a restarted
	// leader with the previous leader id and no members, so it does not
	// compute an assignment the stable group would ignore.
	a3 := static("a3", "ia", 7)
	r = a3.startJoin().wait(t)
	a3.joined(t, r)
	require.Equal(t, gen, a3.gen)
	require.Equal(t, a2.id, r.LeaderID, "the previous leader id")
	require.NotEqual(t, a3.id, r.LeaderID)
	require.Empty(t, r.Members)
	requireCode(t, 0, b2.heartbeat(t))
	requireCode(t, kerr.FencedInstanceID.Code, a2.heartbeat(t))

	// LeaveGroup by instance id: a wrong member id for the instance is
	// fenced; the instance id alone removes the member.
	lv := sendReq[*kmsg.LeaveGroupResponse](t, b2.cw, leaveReq(4, "static", leaving(bm.id, kmsg.StringPtr("ib"))))
	requireCode(t, 0, lv.ErrorCode)
	requireCode(t, kerr.FencedInstanceID.Code, lv.Members[0].ErrorCode)
	lv = sendReq[*kmsg.LeaveGroupResponse](t, b2.cw, leaveReq(4, "static", leaving("", kmsg.StringPtr("ib"))))
	requireCode(t, 0, lv.ErrorCode)
	require.Len(t, lv.Members, 1)
	requireCode(t, 0, lv.Members[0].ErrorCode)
	require.Equal(t, "ib", *lv.Members[0].InstanceID)
	requireCode(t, kerr.RebalanceInProgress.Code, a3.heartbeat(t), "a member left: the rest rebalance")
	require.Equal(t, []string{a3.id}, memberIDs(describeGroupOne(t, a.cw, "static")))
	requireCode(t, kerr.UnknownMemberID.Code, b2.heartbeat(t))
}

// TestGroupProtoLeaveGroup: v3+ leave several members at once with an
// error per member; v0-2 leave one with a top-level error.
func TestGroupProtoLeaveGroup(t *testing.T) {
	b := startGroupBroker(t, nil)
	a := newMember(t, b.Addr, "leavers", "a", 9, longSession, longRebalance)
	bm := newMember(t, b.Addr, "leavers", "b", 9, longSession, longRebalance)
	c := newMember(t, b.Addr, "leavers", "c", 9, longSession, longRebalance)
	formGroup(t, a, bm, c)

	reason := "shutting down"
	req := leaveReq(5, "leavers", leaving(a.id, nil), leaving("ghost", nil))
	req.Members[0].Reason = &reason
	lv := sendReq[*kmsg.LeaveGroupResponse](t, a.cw, req)
	requireCode(t, 0, lv.ErrorCode, "the batch as a whole")
	require.Len(t, lv.Members, 2)
	require.Equal(t, a.id, lv.Members[0].MemberID)
	requireCode(t, 0, lv.Members[0].ErrorCode, "a member")
	require.Equal(t, "ghost", lv.Members[1].MemberID)
	requireCode(t, kerr.UnknownMemberID.Code, lv.Members[1].ErrorCode, "not a member")
	require.ElementsMatch(t, []string{bm.id, c.id}, memberIDs(describeGroupOne(t, a.cw, "leavers")))
	requireCode(t, kerr.RebalanceInProgress.Code, bm.heartbeat(t))
	requireCode(t, kerr.UnknownMemberID.Code, a.heartbeat(t))

	for _, v := range []int16{0, 1, 2} {
		lv = sendReq[*kmsg.LeaveGroupResponse](t, a.cw, leaveReq(v, "leavers", leaving("ghost", nil)))
		requireCode(t, kerr.UnknownMemberID.Code, lv.ErrorCode, "v%d: not a member", v)
	}
	lv = sendReq[*kmsg.LeaveGroupResponse](t, a.cw, leaveReq(1, "leavers", leaving(bm.id, nil)))
	requireCode(t, 0, lv.ErrorCode, "v1: a member")
	lv = sendReq[*kmsg.LeaveGroupResponse](t, a.cw, leaveReq(0, "leavers", leaving(c.id, nil)))
	requireCode(t, 0, lv.ErrorCode, "v0: the last member")
	g := describeGroupOne(t, a.cw, "leavers")
	require.Equal(t, "Empty", g.State)
	require.Empty(t, g.Members)
}

// TestGroupProtoOffsetFetch: v8+ fetch several groups at once, unknown
// groups get -1 offsets, and null topics mean every committed offset;
// v1-7 fetch one group.
func TestGroupProtoOffsetFetch(t *testing.T) {
	b := startGroupBroker(t, map[string]int32{"t": 3, "u": 1})
	w := dialWire(t, b.Addr, "fetcher")
	md := "m0"
	simpleCommit(t, w, "g1", commitPart{topic: "t", partition: 0, offset: 10, epoch: 3, metadata: &md}, commitPart{topic: "t", partition: 1, offset: 11, epoch: -1})
	simpleCommit(t, w, "g2", commitPart{topic: "u", partition: 0, offset: 20, epoch: -1}, commitPart{topic: "t", partition: 2, offset: 22, epoch: -1})

	req := kmsg.NewPtrOffsetFetchRequest()
	req.Version = 8
	group := func(name string, topics ...kmsg.OffsetFetchRequestGroupTopic) {
		rg := kmsg.NewOffsetFetchRequestGroup()
		rg.Group, rg.Topics = name, topics
		req.Groups = append(req.Groups, rg)
	}
	topic := func(name string, ps ...int32) kmsg.OffsetFetchRequestGroupTopic {
		rt := kmsg.NewOffsetFetchRequestGroupTopic()
		rt.Topic, rt.Partitions = name, ps
		return rt
	}
	group("g1", topic("t", 0, 1, 2))
	group("g2") // null topics: everything committed
	group("unknown", topic("t", 0))
	group("unknown-all") // null topics of a group with nothing
	resp := sendReq[*kmsg.OffsetFetchResponse](t, w, req)
	requireCode(t, 0, resp.ErrorCode)
	require.Len(t, resp.Groups, 4)
	type row struct {
		topic     string
		partition int32
		offset    int64
		epoch     int32
		metadata  string
	}
	rows := func(g kmsg.OffsetFetchResponseGroup) []row {
		requireCode(t, 0, g.ErrorCode, "group %s", g.Group)
		out := []row{}
		for _, rt := range g.Topics {
			for _, rp := range rt.Partitions {
				requireCode(t, 0, rp.ErrorCode)
				require.NotNil(t, rp.Metadata)
				out = append(out, row{rt.Topic, rp.Partition, rp.Offset, rp.LeaderEpoch, *rp.Metadata})
			}
		}
		return out
	}
	require.Equal(t, "g1", resp.Groups[0].Group)
	require.Equal(t, []row{{"t", 0, 10, 3, "m0"}, {"t", 1, 11, -1, ""}, {"t", 2, -1, -1, ""}}, rows(resp.Groups[0]))
	require.Equal(t, "g2", resp.Groups[1].Group)
	require.ElementsMatch(t, []row{{"u", 0, 20, -1, ""}, {"t", 2, 22, -1, ""}}, rows(resp.Groups[1]))
	require.Equal(t, "unknown", resp.Groups[2].Group)
	require.Equal(t, []row{{"t", 0, -1, -1, ""}}, rows(resp.Groups[2]))
	require.Equal(t, "unknown-all", resp.Groups[3].Group)
	require.Empty(t, rows(resp.Groups[3]))

	// v1-7: one group, top-level topics; v2+ may ask for all (null).
	for _, v := range []int16{1, 5, 7} {
		old := kmsg.NewPtrOffsetFetchRequest()
		old.Version, old.Group = v, "g1"
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic, rt.Partitions = "t", []int32{1, 0}
		old.Topics = append(old.Topics, rt)
		or := sendReq[*kmsg.OffsetFetchResponse](t, w, old)
		requireCode(t, 0, or.ErrorCode, "v%d", v)
		require.Len(t, or.Topics, 1)
		require.Len(t, or.Topics[0].Partitions, 2)
		p1, p0 := or.Topics[0].Partitions[0], or.Topics[0].Partitions[1]
		require.Equal(t, int32(1), p1.Partition)
		require.Equal(t, int64(11), p1.Offset)
		require.Equal(t, int64(10), p0.Offset)
		require.Equal(t, "m0", *p0.Metadata)
		if v >= 5 {
			require.Equal(t, int32(3), p0.LeaderEpoch, "v%d carries the leader epoch", v)
		}
	}
	all := kmsg.NewPtrOffsetFetchRequest()
	all.Version, all.Group = 7, "g2"
	or := sendReq[*kmsg.OffsetFetchResponse](t, w, all)
	requireCode(t, 0, or.ErrorCode)
	got := map[string]int64{}
	for _, rt := range or.Topics {
		for _, rp := range rt.Partitions {
			got[fmt.Sprintf("%s/%d", rt.Topic, rp.Partition)] = rp.Offset
		}
	}
	require.Equal(t, map[string]int64{"u/0": 20, "t/2": 22}, got)
}

// TestGroupProtoDescribeGroups: the state of each rebalance step, and the
// members' metadata and assignments once Stable (only then, as in Kafka).
func TestGroupProtoDescribeGroups(t *testing.T) {
	b := startGroupBroker(t, map[string]int32{"t": 1})
	a := newMember(t, b.Addr, "described", "a", 9, longSession, longRebalance)
	bm := newMember(t, b.Addr, "described", "b", 9, longSession, longRebalance)
	formGroup(t, a, bm)

	g := describeGroupOne(t, a.cw, "described")
	require.Equal(t, "Stable", g.State)
	require.Equal(t, "consumer", g.ProtocolType)
	require.Equal(t, "range", g.Protocol)
	require.Len(t, g.Members, 2)
	for _, dm := range g.Members {
		m := a
		if dm.MemberID == bm.id {
			m = bm
		}
		require.Equal(t, m.id, dm.MemberID)
		require.Equal(t, m.name, dm.ClientID)
		require.Equal(t, "/127.0.0.1", dm.ClientHost)
		require.Nil(t, dm.InstanceID)
		require.Equal(t, m.join.Protocols[0].Metadata, dm.ProtocolMetadata)
		require.Equal(t, assignmentFor(m.id), dm.MemberAssignment)
	}

	// A third member: PreparingRebalance until the others rejoin, then
	// CompletingRebalance until the leader syncs; no metadata or
	// assignments meanwhile.
	c := newMember(t, b.Addr, "described", "c", 9, longSession, longRebalance)
	c.requireID(t)
	c.beginJoin()
	waitRebalancing(t, a)
	g = describeGroupOne(t, a.cw, "described")
	require.Equal(t, "PreparingRebalance", g.State)
	require.Empty(t, g.Protocol)
	require.ElementsMatch(t, []string{a.id, bm.id, c.id}, memberIDs(g))
	for _, dm := range g.Members {
		require.Empty(t, dm.ProtocolMetadata)
		require.Empty(t, dm.MemberAssignment)
	}
	joinAll(t, a, bm, c)
	g = describeGroupOne(t, a.cw, "described")
	require.Equal(t, "CompletingRebalance", g.State)
	require.Empty(t, g.Protocol)
	require.Len(t, g.Members, 3)
	for _, dm := range g.Members {
		require.Empty(t, dm.MemberAssignment)
	}
	syncAll(t, a, bm, c)
	g = describeGroupOne(t, a.cw, "described")
	require.Equal(t, "Stable", g.State)
	for _, dm := range g.Members {
		require.Equal(t, assignmentFor(dm.MemberID), dm.MemberAssignment)
	}

	// Everyone leaves: Empty, the protocol type kept. A group nobody
	// used is Dead, with no error (DescribeGroups v0-5).
	lv := sendReq[*kmsg.LeaveGroupResponse](t, a.cw, leaveReq(3, "described", leaving(a.id, nil), leaving(bm.id, nil), leaving(c.id, nil)))
	for _, m := range lv.Members {
		requireCode(t, 0, m.ErrorCode)
	}
	simpleCommit(t, a.cw, "offsets-only", commitPart{topic: "t", offset: 3, epoch: -1})
	gs := describeGroups(t, a.cw, "described", "never-used", "offsets-only")
	requireCode(t, 0, gs[0].ErrorCode)
	require.Equal(t, "Empty", gs[0].State)
	require.Equal(t, "consumer", gs[0].ProtocolType)
	require.Empty(t, gs[0].Members)
	requireCode(t, 0, gs[1].ErrorCode)
	require.Equal(t, "never-used", gs[1].Group)
	require.Equal(t, "Dead", gs[1].State)
	require.Empty(t, gs[1].ProtocolType)
	require.Equal(t, "Empty", gs[2].State)
	require.Empty(t, gs[2].Members)
}

// TestGroupProtoListGroups: the state (v4) and type (v5) filters, and a
// group with only committed offsets listed as Empty.
func TestGroupProtoListGroups(t *testing.T) {
	b := startGroupBroker(t, map[string]int32{"t": 1})
	stable := newMember(t, b.Addr, "lg-stable", "s", 9, longSession, longRebalance)
	formGroup(t, stable)
	left := newMember(t, b.Addr, "lg-left", "l", 9, longSession, longRebalance)
	formGroup(t, left)
	requireCode(t, 0, sendReq[*kmsg.LeaveGroupResponse](t, left.cw, leaveReq(1, "lg-left", leaving(left.id, nil))).ErrorCode)
	simpleCommit(t, stable.cw, "lg-offsets", commitPart{topic: "t", offset: 1, epoch: -1})
	describeGroups(t, stable.cw, "lg-described-only") // known to be Dead: not listed

	w := stable.cw
	all := listGroups(t, w, 5, nil, nil)
	require.Len(t, all, 3)
	require.Equal(t, kmsg.ListGroupsResponseGroup{Group: "lg-stable", ProtocolType: "consumer", GroupState: "Stable", GroupType: "classic"}, all["lg-stable"])
	require.Equal(t, kmsg.ListGroupsResponseGroup{Group: "lg-left", ProtocolType: "consumer", GroupState: "Empty", GroupType: "classic"}, all["lg-left"])
	require.Equal(t, kmsg.ListGroupsResponseGroup{Group: "lg-offsets", ProtocolType: "", GroupState: "Empty", GroupType: "classic"}, all["lg-offsets"])

	keys := func(m map[string]kmsg.ListGroupsResponseGroup) []string { return slices.Sorted(maps.Keys(m)) }
	require.Equal(t, []string{"lg-stable"}, keys(listGroups(t, w, 4, []string{"Stable"}, nil)))
	require.Equal(t, []string{"lg-left", "lg-offsets"}, keys(listGroups(t, w, 4, []string{"empty"}, nil)), "state names match case-insensitively")
	require.Equal(t, []string{"lg-left", "lg-offsets", "lg-stable"}, keys(listGroups(t, w, 4, []string{"Empty", "Stable"}, nil)))
	require.Empty(t, listGroups(t, w, 4, []string{"Dead", "PreparingRebalance"}, nil))
	require.Len(t, listGroups(t, w, 5, nil, []string{"Classic"}), 3, "every group here is a classic group")
	require.Empty(t, listGroups(t, w, 5, nil, []string{"consumer"}), "no KIP-848 consumer groups")
	require.Equal(t, []string{"lg-stable"}, keys(listGroups(t, w, 5, []string{"stable"}, []string{"classic", "consumer"})))
	old := listGroups(t, w, 0, nil, nil)
	require.Equal(t, []string{"lg-left", "lg-offsets", "lg-stable"}, keys(old))
	require.Empty(t, old["lg-stable"].GroupState, "v0-3 carry no state")
}

// TestGroupProtoDeleteGroups: only groups without members are deleted; a
// deleted group's offsets are gone and it is no longer listed.
func TestGroupProtoDeleteGroups(t *testing.T) {
	b := startGroupBroker(t, map[string]int32{"t": 1})
	live := newMember(t, b.Addr, "dg-live", "m", 9, longSession, longRebalance)
	formGroup(t, live)
	w := live.cw
	simpleCommit(t, w, "dg-offsets", commitPart{topic: "t", offset: 5, epoch: -1})

	del := func(groups ...string) []int16 {
		t.Helper()
		req := kmsg.NewPtrDeleteGroupsRequest()
		req.Version, req.Groups = 2, groups
		resp := sendReq[*kmsg.DeleteGroupsResponse](t, w, req)
		require.Len(t, resp.Groups, len(groups))
		var codes []int16
		for i, g := range resp.Groups {
			require.Equal(t, groups[i], g.Group)
			codes = append(codes, g.ErrorCode)
		}
		return codes
	}
	codes := del("dg-live", "dg-offsets", "dg-unknown")
	requireCode(t, kerr.NonEmptyGroup.Code, codes[0], "a group with members")
	requireCode(t, 0, codes[1], "a group with only offsets")
	requireCode(t, kerr.GroupIDNotFound.Code, codes[2], "an unknown group")
	requireCode(t, kerr.GroupIDNotFound.Code, del("dg-offsets")[0], "deleted already")

	require.Equal(t, []fetched{{-1, -1, ""}}, fetchOffsets(t, w, "dg-offsets", "t", 0))
	require.Equal(t, "Dead", describeGroupOne(t, w, "dg-offsets").State)
	listed := listGroups(t, w, 4, nil, nil)
	require.NotContains(t, listed, "dg-offsets")
	require.Contains(t, listed, "dg-live")
	requireCode(t, 0, live.heartbeat(t), "the refused deletion left the live group alone")

	// Once its member leaves, the live group can go too, offsets and all.
	codesC := commit(t, w, commitReq("dg-live", live.gen, live.id, nil, commitPart{topic: "t", offset: 9, epoch: -1}))
	requireCode(t, 0, codesC[0])
	requireCode(t, 0, sendReq[*kmsg.LeaveGroupResponse](t, w, leaveReq(3, "dg-live", leaving(live.id, nil))).Members[0].ErrorCode)
	requireCode(t, 0, del("dg-live")[0])
	require.Equal(t, []fetched{{-1, -1, ""}}, fetchOffsets(t, w, "dg-live", "t", 0))
	require.Empty(t, listGroups(t, w, 4, nil, nil))

	// The name can be used again; generations continue past the old ones
	// (the metastore keeps the generation record), so nothing of the old
	// group can pass for the new one.
	again := newMember(t, b.Addr, "dg-live", "again", 9, longSession, longRebalance)
	formGroup(t, again)
	require.Greater(t, again.gen, live.gen)
	require.Equal(t, []fetched{{-1, -1, ""}}, fetchOffsets(t, w, "dg-live", "t", 0))
}

// TestGroupProtoOffsetDelete: offsets of topics the group consumes are
// kept (GROUP_SUBSCRIBED_TO_TOPIC); the rest can be deleted.
func TestGroupProtoOffsetDelete(t *testing.T) {
	b := startGroupBroker(t, map[string]int32{"sub": 2, "other": 1})
	w := dialWire(t, b.Addr, "admin")
	simpleCommit(t, w, "od",
		commitPart{topic: "sub", partition: 0, offset: 1, epoch: -1},
		commitPart{topic: "sub", partition: 1, offset: 2, epoch: -1},
		commitPart{topic: "other", partition: 0, offset: 3, epoch: -1})
	m := newMember(t, b.Addr, "od", "m", 9, longSession, longRebalance)
	m.join.Protocols = []kmsg.JoinGroupRequestProtocol{consumerProtocol("range", "m", "sub")}
	formGroup(t, m)

	odel := func(group string, parts map[string][]int32) (int16, map[string]int16) {
		t.Helper()
		req := kmsg.NewPtrOffsetDeleteRequest()
		req.Group = group
		for _, name := range slices.Sorted(maps.Keys(parts)) {
			rt := kmsg.NewOffsetDeleteRequestTopic()
			rt.Topic = name
			for _, p := range parts[name] {
				rp := kmsg.NewOffsetDeleteRequestTopicPartition()
				rp.Partition = p
				rt.Partitions = append(rt.Partitions, rp)
			}
			req.Topics = append(req.Topics, rt)
		}
		resp := sendReq[*kmsg.OffsetDeleteResponse](t, w, req)
		codes := map[string]int16{}
		for _, rt := range resp.Topics {
			for _, rp := range rt.Partitions {
				codes[fmt.Sprintf("%s/%d", rt.Topic, rp.Partition)] = rp.ErrorCode
			}
		}
		return resp.ErrorCode, codes
	}
	top, codes := odel("od", map[string][]int32{"sub": {0}, "other": {0}, "no-such-topic": {0}})
	requireCode(t, 0, top)
	requireCode(t, kerr.GroupSubscribedToTopic.Code, codes["sub/0"], "a topic the member subscribes to")
	requireCode(t, 0, codes["other/0"], "a topic nobody subscribes to")
	requireCode(t, kerr.UnknownTopicOrPartition.Code, codes["no-such-topic/0"])
	require.Equal(t, []fetched{{1, -1, ""}, {2, -1, ""}}, fetchOffsets(t, w, "od", "sub", 0, 1))
	require.Equal(t, []fetched{{-1, -1, ""}}, fetchOffsets(t, w, "od", "other", 0))
	requireCode(t, 0, m.heartbeat(t), "deleting offsets does not disturb the group")

	top, _ = odel("od-unknown", map[string][]int32{"other": {0}})
	requireCode(t, kerr.GroupIDNotFound.Code, top, "an unknown group")

	// Without members, nothing is subscribed.
	requireCode(t, 0, sendReq[*kmsg.LeaveGroupResponse](t, w, leaveReq(3, "od", leaving(m.id, nil))).Members[0].ErrorCode)
	top, codes = odel("od", map[string][]int32{"sub": {1}})
	requireCode(t, 0, top)
	requireCode(t, 0, codes["sub/1"])
	require.Equal(t, []fetched{{1, -1, ""}, {-1, -1, ""}}, fetchOffsets(t, w, "od", "sub", 0, 1))
}

// TestGroupProtoFindCoordinator: every broker of a cluster names the same
// coordinator for a key, keys spread over the brokers, and that broker
// (only) serves the group.
func TestGroupProtoFindCoordinator(t *testing.T) {
	brokers := startCluster(t, 3)
	probes := shardProbes() // one key per shard
	keys := slices.Clone(probes)
	for i := range 40 {
		keys = append(keys, fmt.Sprintf("fc-%d", i))
	}
	wires := map[int32]*wire{}
	for _, br := range brokers {
		wires[br.Cfg.NodeID] = dialWire(t, br.Addr, "finder")
	}
	batch := func(w *wire, keyType int8, keys ...string) []kmsg.FindCoordinatorResponseCoordinator {
		t.Helper()
		req := kmsg.NewPtrFindCoordinatorRequest()
		req.Version, req.CoordinatorType, req.CoordinatorKeys = 4, keyType, keys
		resp := sendReq[*kmsg.FindCoordinatorResponse](t, w, req)
		require.Len(t, resp.Coordinators, len(keys))
		return resp.Coordinators
	}
	addrOf := map[int32]string{}
	for _, br := range brokers {
		addrOf[br.Cfg.NodeID] = br.Addr
	}
	// The controller evens out the shards as brokers join: wait until
	// every broker names a coordinator for every key, they agree, and the
	// 16 shards are spread 6/5/5 (after which nothing moves).
	owner := map[string]int32{}
	waitFor(t, "the shards spread evenly, agreed by every broker", func() bool {
		clear(owner)
		for _, br := range brokers {
			for i, c := range batch(wires[br.Cfg.NodeID], 0, keys...) {
				if c.ErrorCode != 0 {
					return false
				}
				require.Equal(t, keys[i], c.Key)
				if prev, ok := owner[c.Key]; ok && prev != c.NodeID {
					return false
				}
				owner[c.Key] = c.NodeID
			}
		}
		shards := map[int32]int{}
		for _, key := range probes {
			shards[owner[key]]++
		}
		return len(shards) == 3 && slices.Max(slices.Collect(maps.Values(shards)))-slices.Min(slices.Collect(maps.Values(shards))) <= 1
	})
	perBroker := map[int32]int{}
	for _, n := range owner {
		perBroker[n]++
	}
	require.Len(t, perBroker, 3, "keys of every broker")
	for _, br := range brokers {
		for _, c := range batch(wires[br.Cfg.NodeID], 0, keys...) {
			requireCode(t, 0, c.ErrorCode)
			require.Equal(t, owner[c.Key], c.NodeID, "broker %d on %s", br.Cfg.NodeID, c.Key)
			require.Equal(t, addrOf[c.NodeID], fmt.Sprintf("%s:%d", c.Host, c.Port))
		}
		// v3: one key, answered at the top level; transactional ids map
		// the same way.
		for _, key := range keys[:5] {
			for _, keyType := range []int8{0, 1} {
				req := kmsg.NewPtrFindCoordinatorRequest()
				req.Version, req.CoordinatorKey, req.CoordinatorType = 3, key, keyType
				resp := sendReq[*kmsg.FindCoordinatorResponse](t, wires[br.Cfg.NodeID], req)
				requireCode(t, 0, resp.ErrorCode)
				require.Equal(t, owner[key], resp.NodeID)
				require.Equal(t, addrOf[resp.NodeID], fmt.Sprintf("%s:%d", resp.Host, resp.Port))
			}
		}
	}

	// The named coordinator serves the group; the others refuse it (each
	// broker applies its shards just after it learns of them).
	for _, key := range probes {
		for id, w := range wires {
			want := kerr.NotCoordinator.Code
			if id == owner[key] {
				want = 0
			}
			waitFor(t, fmt.Sprintf("broker %d to answer %s with %d (coordinator %d)", id, key, want, owner[key]), func() bool {
				return describeGroups(t, w, key)[0].ErrorCode == want
			})
		}
	}

	// An unknown coordinator type is an invalid request, per key in v4.
	for _, c := range batch(wires[0], 2, keys[:2]...) {
		requireCode(t, kerr.InvalidRequest.Code, c.ErrorCode)
		require.Equal(t, int32(-1), c.NodeID)
	}
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.Version, req.CoordinatorKey, req.CoordinatorType = 3, keys[0], 7
	resp := sendReq[*kmsg.FindCoordinatorResponse](t, wires[1], req)
	requireCode(t, kerr.InvalidRequest.Code, resp.ErrorCode)
	require.Equal(t, int32(-1), resp.NodeID)
}

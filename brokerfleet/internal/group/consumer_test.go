package group

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/pkg/metastore"
)

func TestHeartbeatValidation(t *testing.T) {
	topics := newTestTopics()
	topics.set("t", 4)
	h := newCGHarness(t, topics)
	m := h.newMember(h.c, "g", "m1", "t")
	base := m.request
	cases := []struct {
		name   string
		change func(*kmsg.ConsumerGroupHeartbeatRequest)
		want   *kerr.Error
	}{
		{"blank member id on v1", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberID = " " }, kerr.InvalidRequest},
		{"blank group", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Group = "" }, kerr.InvalidRequest},
		{"blank instance id", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.InstanceID = str(" ") }, kerr.InvalidRequest},
		{"blank rack", func(r *kmsg.ConsumerGroupHeartbeatRequest) { s := ""; r.RackID = &s }, kerr.InvalidRequest},
		{"no rebalance timeout on join", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.RebalanceTimeoutMillis = -1 }, kerr.InvalidRequest},
		{"owned partitions on join", func(r *kmsg.ConsumerGroupHeartbeatRequest) {
			r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{TopicID: topics.id("t"), Partitions: []int32{0}}}
		}, kerr.InvalidRequest},
		{"null owned partitions on join", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Topics = nil }, kerr.InvalidRequest},
		{"no subscription on join", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.SubscribedTopicNames = nil }, kerr.InvalidRequest},
		{"epoch -3", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = -3 }, kerr.InvalidRequest},
		{"unknown assignor", func(r *kmsg.ConsumerGroupHeartbeatRequest) { s := "sticky"; r.ServerAssignor = &s }, kerr.UnsupportedAssignor},
		{"bad regex", func(r *kmsg.ConsumerGroupHeartbeatRequest) {
			s := "("
			r.SubscribedTopicNames, r.SubscribedTopicRegex = nil, &s
		}, kerr.InvalidRegularExpression},
		{"heartbeat to a missing group", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = 3 }, kerr.GroupIDNotFound},
		{"leave from a missing group", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = -1 }, kerr.GroupIDNotFound},
	}
	for _, tc := range cases {
		r := base()
		tc.change(r)
		resp := h.c.ConsumerHeartbeat(h.ctx, r, Client{})
		wantErr(t, tc.name, resp, tc.want)
		if resp.MemberID != nil || resp.Assignment != nil || resp.HeartbeatIntervalMillis != 0 {
			t.Fatalf("%s: an error answer carries %+v", tc.name, resp)
		}
	}
	// None of these created the group.
	if d := h.cgDescribe(h.c, "g"); d.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("describe after bad requests: %v", kerr.ErrorForCode(d.ErrorCode))
	}
	// v0 may let the coordinator name the member.
	r := base()
	r.Version, r.MemberID = 0, ""
	resp := h.c.ConsumerHeartbeat(h.ctx, r, Client{})
	wantErr(t, "v0 join without id", resp, nil)
	if resp.MemberID == nil || *resp.MemberID == "" || resp.MemberEpoch != 1 {
		t.Fatalf("v0 join: %+v", resp)
	}
	// Names [] is a valid (empty) subscription.
	e := h.newMember(h.c, "g", "empty")
	resp = e.beat()
	if resp.Assignment == nil || len(resp.Assignment.Topics) != 0 || resp.HeartbeatIntervalMillis != cgHeartbeatMs {
		t.Fatalf("empty subscription: %+v", resp)
	}
}

// The worked example of the KIP: a second member gets its partitions
// only after the first revoked them.
func TestReconciliationHandsOverAfterRevocation(t *testing.T) {
	topics := newTestTopics()
	tid := topics.set("t", 4)
	h := newCGHarness(t, topics)
	a := h.newMember(h.c, "g", "a", "t")
	resp := a.beat()
	if resp.MemberEpoch != 1 || a.count() != 4 {
		t.Fatalf("first member: epoch %d, %d partitions", resp.MemberEpoch, a.count())
	}
	h.wantCGState(h.c, "g", "Stable", 1)

	b := h.newMember(h.c, "g", "b", "t")
	resp = b.beat()
	if resp.MemberEpoch != 2 || b.count() != 0 || resp.Assignment == nil {
		t.Fatalf("second member: epoch %d, %d partitions, assignment %v", resp.MemberEpoch, b.count(), resp.Assignment)
	}
	h.wantCGState(h.c, "g", "Reconciling", 2)
	// a keeps heartbeating without reporting (keepalives): nothing moves.
	resp = a.keepalive()
	if resp.MemberEpoch != 1 {
		t.Fatalf("a at epoch %d while revoking", resp.MemberEpoch)
	}
	// The keepalive's answer tells a what it keeps: two partitions.
	if a.count() != 2 {
		t.Fatalf("a told to keep %d partitions", a.count())
	}
	b.beat()
	if b.count() != 0 {
		t.Fatalf("b got %d partitions before a confirmed the revocation", b.count())
	}
	// a confirms (its full heartbeat no longer lists them): epoch 2.
	resp = a.beat()
	if resp.MemberEpoch != 2 || a.count() != 2 {
		t.Fatalf("a after revoking: epoch %d, %d partitions", resp.MemberEpoch, a.count())
	}
	b.beat()
	if b.count() != 2 {
		t.Fatalf("b after a released: %d partitions", b.count())
	}
	noDoubleOwners(t, a, b)
	h.wantCGState(h.c, "g", "Stable", 2)
	// Heartbeats that change nothing carry no assignment.
	if resp := a.keepalive(); resp.Assignment != nil {
		t.Fatalf("a keepalive carries an assignment: %+v", resp.Assignment)
	}
	// The previous epoch is accepted with what it owns (a lost answer).
	r := a.request()
	r.MemberEpoch = 1
	wantErr(t, "previous epoch, owning a subset", a.c.ConsumerHeartbeat(h.ctx, r, Client{}), nil)
	r = a.request()
	r.MemberEpoch = 1
	r.Topics = append(r.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: tid, Partitions: []int32{0, 1, 2, 3}})
	wantErr(t, "previous epoch, owning more", a.c.ConsumerHeartbeat(h.ctx, r, Client{}), kerr.FencedMemberEpoch)
	r = a.request()
	r.MemberEpoch = 1
	r.Topics = nil
	wantErr(t, "previous epoch without owned partitions", a.c.ConsumerHeartbeat(h.ctx, r, Client{}), kerr.FencedMemberEpoch)
	r = a.request()
	r.MemberEpoch = 7
	wantErr(t, "future epoch", a.c.ConsumerHeartbeat(h.ctx, r, Client{}), kerr.FencedMemberEpoch)
	r = a.request()
	r.MemberID = "nobody"
	wantErr(t, "unknown member", a.c.ConsumerHeartbeat(h.ctx, r, Client{}), kerr.UnknownMemberID)
	// After FENCED, a rejoin with the same id is taken back in place.
	a.epoch = 0
	resp = a.beat()
	if resp.MemberEpoch != 2 || a.count() != 2 {
		t.Fatalf("rejoin in place: epoch %d, %d partitions", resp.MemberEpoch, a.count())
	}
}

// Members come and go one by one; ownership never overlaps and every
// partition is owned once the group settles.
func TestMembersJoinAndLeaveOneByOne(t *testing.T) {
	topics := newTestTopics()
	topics.set("t", 12)
	h := newCGHarness(t, topics)
	var ms []*cgMember
	for i := range 6 {
		ms = append(ms, h.newMember(h.c, "g", fmt.Sprintf("m%d", i), "t"))
		settle(t, ms...)
		total := 0
		for _, m := range ms {
			total += m.count()
			if n := m.count(); n < 12/len(ms) || n > (12+len(ms)-1)/len(ms) {
				t.Fatalf("%d members: %s has %d partitions", len(ms), m.id, n)
			}
		}
		if total != 12 {
			t.Fatalf("%d members own %d partitions", len(ms), total)
		}
	}
	for len(ms) > 1 {
		ms[0].leave()
		ms = ms[1:]
		settle(t, ms...)
		total := 0
		for _, m := range ms {
			total += m.count()
		}
		if total != 12 {
			t.Fatalf("%d members own %d partitions", len(ms), total)
		}
	}
	ms[0].leave()
	d := h.cgDescribe(h.c, "g")
	if d.State != "Empty" || d.Epoch != d.AssignmentEpoch || len(d.Members) != 0 {
		t.Fatalf("after the last left: %s, epoch %d/%d, %d members", d.State, d.Epoch, d.AssignmentEpoch, len(d.Members))
	}
}

func TestSessionAndRebalanceTimeouts(t *testing.T) {
	topics := newTestTopics()
	topics.set("t", 4)
	h := newCGHarness(t, topics, func(o *Options) { o.ConsumerSessionTimeout = 10 * time.Second })
	a, b := h.newMember(h.c, "g", "a", "t"), h.newMember(h.c, "g", "b", "t")
	settle(t, a, b)
	// b goes silent: after the session timeout it is fenced, a gets all.
	for range 3 {
		h.advance(4 * time.Second)
		a.beat()
	}
	settle(t, a)
	if a.count() != 4 {
		t.Fatalf("a owns %d after b's session ran out", a.count())
	}
	wantErr(t, "fenced member's heartbeat", b.send(b.request()), kerr.UnknownMemberID)

	// A member that keeps heartbeating but never revokes is fenced after
	// its rebalance timeout (60 s in these requests).
	c := h.newMember(h.c, "g", "c", "t")
	c.beat()
	stubborn := func() {
		r := a.request()
		r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{TopicID: topics.id("t"), Partitions: []int32{0, 1, 2, 3}}}
		resp := a.c.ConsumerHeartbeat(h.ctx, r, Client{})
		wantErr(t, "a still owning all", resp, nil)
	}
	stubborn()
	for range 6 {
		h.advance(9 * time.Second)
		stubborn()
		c.beat()
	}
	h.advance(9 * time.Second)
	wantErr(t, "a after its rebalance timeout", a.send(a.request()), kerr.UnknownMemberID)
	settle(t, c)
	if c.count() != 4 {
		t.Fatalf("c owns %d after a was fenced", c.count())
	}
}

func TestStaticMembership(t *testing.T) {
	topics := newTestTopics()
	topics.set("t", 6)
	h := newCGHarness(t, topics, func(o *Options) { o.ConsumerSessionTimeout = 10 * time.Second })
	a, b := h.newMember(h.c, "g", "a1", "t"), h.newMember(h.c, "g", "b", "t")
	a.instance = "inst-a"
	settle(t, a, b)
	epoch := h.cgDescribe(h.c, "g").Epoch
	had := maps.Clone(a.owned)

	// A second process with the same instance id while the first lives.
	dup := h.newMember(h.c, "g", "a2", "t")
	dup.instance = "inst-a"
	wantErr(t, "second process of the instance", dup.send(dup.request()), kerr.UnreleasedInstanceID)
	// A heartbeat naming the instance under another id is fenced.
	r := b.request()
	r.InstanceID = str("inst-a")
	wantErr(t, "wrong member for the instance", b.c.ConsumerHeartbeat(h.ctx, r, Client{}), kerr.FencedInstanceID)

	// a leaves for a restart (-2, without its instance id, as kgo does).
	lr := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	lr.Version, lr.Group, lr.MemberID, lr.MemberEpoch = 1, "g", a.id, -2
	resp := h.c.ConsumerHeartbeat(h.ctx, lr, Client{})
	wantErr(t, "static leave", resp, nil)
	if resp.MemberEpoch != -2 {
		t.Fatalf("static leave answered epoch %d", resp.MemberEpoch)
	}
	// Its partitions stay reserved; the group is not empty.
	settle(t, b)
	if b.count() != 3 {
		t.Fatalf("b took a's partitions while a restarts: %d", b.count())
	}
	dr := kmsg.NewPtrDeleteGroupsRequest()
	dr.Groups = []string{"g"}
	wantCode(t, "delete with a parked member", h.c.Delete(h.ctx, dr).Groups[0].ErrorCode, kerr.NonEmptyGroup)
	// The new process takes its place: same partitions, no epoch bump.
	h.advance(5 * time.Second)
	resp = dup.beat()
	if !maps.Equal(dup.owned, had) || resp.MemberEpoch != epoch || h.cgDescribe(h.c, "g").Epoch != epoch {
		t.Fatalf("replacement: epoch %d (group %d, want %d), owns %v, had %v", resp.MemberEpoch, h.cgDescribe(h.c, "g").Epoch, epoch, dup.owned, had)
	}
	// A static member that does not come back is fenced at its session.
	lr.MemberID = dup.id
	wantErr(t, "second static leave", h.c.ConsumerHeartbeat(h.ctx, lr, Client{}), nil)
	for range 3 {
		h.advance(4 * time.Second)
		b.beat()
	}
	settle(t, b)
	if b.count() != 6 {
		t.Fatalf("b owns %d after the static member's session ran out", b.count())
	}
	gone := h.newMember(h.c, "g", "x", "t")
	gone.instance, gone.epoch = "inst-a", 3
	wantErr(t, "unknown instance", gone.send(gone.request()), kerr.UnknownMemberID)
}

func TestRegexAndTopicChanges(t *testing.T) {
	topics := newTestTopics()
	topics.set("orders-eu", 2)
	topics.set("xorders-eu", 2)
	h := newCGHarness(t, topics)
	a := h.newMember(h.c, "g", "a")
	re := "orders-.*"
	a.regex = &re
	a.beat()
	settle(t, a)
	if a.count() != 2 {
		t.Fatalf("regex matches %d partitions, want the 2 of orders-eu", a.count())
	}
	for p := range a.owned {
		if p.topic != topics.id("orders-eu") {
			t.Fatal("regex matched inside a name")
		}
	}
	// kgo's form of the same regex works the same way.
	k := ".*(?:(?:^orders-))"
	b := h.newMember(h.c, "g2", "b")
	b.regex = &k
	settle(t, b)
	if b.count() != 0 {
		t.Fatalf("anchored inner pattern matched %d", b.count())
	}
	// A topic created later that matches is assigned.
	epoch := h.cgDescribe(h.c, "g").Epoch
	topics.set("orders-us", 3)
	settle(t, a)
	if a.count() != 5 || h.cgDescribe(h.c, "g").Epoch != epoch+1 {
		t.Fatalf("after orders-us: %d partitions, epoch %d", a.count(), h.cgDescribe(h.c, "g").Epoch)
	}
	// Partitions added to a subscribed topic are assigned; a topic
	// deleted leaves the assignment.
	topics.set("orders-eu", 4)
	settle(t, a)
	if a.count() != 7 {
		t.Fatalf("after growing orders-eu: %d", a.count())
	}
	topics.remove("orders-us")
	settle(t, a)
	if a.count() != 4 {
		t.Fatalf("after deleting orders-us: %d", a.count())
	}
	// A topic unrelated to the group moves no epoch.
	epoch = h.cgDescribe(h.c, "g").Epoch
	topics.set("unrelated", 1)
	settle(t, a)
	if got := h.cgDescribe(h.c, "g").Epoch; got != epoch {
		t.Fatalf("an unrelated topic moved the epoch %d -> %d", epoch, got)
	}
	// Names and a regex together: the union.
	a.topics = []string{"xorders-eu"}
	r := a.request()
	r.SubscribedTopicNames = []string{"xorders-eu"}
	a.send(r)
	settle(t, a)
	if a.count() != 6 {
		t.Fatalf("names and regex: %d", a.count())
	}
}

// Subscription changes move partitions through revocation.
func TestSubscriptionChange(t *testing.T) {
	topics := newTestTopics()
	topics.set("a", 2)
	topics.set("b", 2)
	h := newCGHarness(t, topics)
	m := h.newMember(h.c, "g", "m", "a", "b")
	settle(t, m)
	if m.count() != 4 {
		t.Fatal(m.count())
	}
	m.topics = []string{"a"}
	settle(t, m)
	if m.count() != 2 {
		t.Fatalf("after dropping b: %d", m.count())
	}
}

func TestRangeAssignorChosenByMembers(t *testing.T) {
	topics := newTestTopics()
	topics.set("x", 4)
	topics.set("y", 4)
	h := newCGHarness(t, topics)
	a, b := h.newMember(h.c, "g", "a", "x", "y"), h.newMember(h.c, "g", "b", "x", "y")
	a.assignor, b.assignor = "range", "range"
	settle(t, a, b)
	if d := h.cgDescribe(h.c, "g"); d.AssignorName != "range" {
		t.Fatalf("assignor %q", d.AssignorName)
	}
	// Range co-partitions: a has 0,1 of both topics.
	want := map[partKey]bool{{topics.id("x"), 0}: true, {topics.id("x"), 1}: true, {topics.id("y"), 0}: true, {topics.id("y"), 1}: true}
	if !maps.Equal(a.owned, want) {
		t.Fatalf("range: a owns %v", a.owned)
	}
}

func TestMaxSize(t *testing.T) {
	topics := newTestTopics()
	topics.set("t", 2)
	h := newCGHarness(t, topics, func(o *Options) { o.ConsumerMaxSize = 1 })
	a := h.newMember(h.c, "g", "a", "t")
	a.instance = "i"
	a.beat()
	b := h.newMember(h.c, "g", "b", "t")
	wantErr(t, "second member", b.send(b.request()), kerr.GroupMaxSizeReached)
	a.epoch = 0
	a.instance = ""
	wantErr(t, "a rejoins in place", a.send(a.request()), nil)
}

func TestConsumerOffsets(t *testing.T) {
	topics := newTestTopics()
	topics.set("t", 2)
	h := newCGHarness(t, topics)
	a, b := h.newMember(h.c, "g", "a", "t"), h.newMember(h.c, "g", "b", "t")
	a.beat() // epoch 1, both partitions
	commit := func(member string, epoch int32, version int16, parts ...int32) []int16 {
		r := commitReq("g", member, "", epoch, "t")
		r.Version = version
		for _, p := range parts {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = p, 5
			r.Topics[0].Partitions = append(r.Topics[0].Partitions, rp)
		}
		var codes []int16
		for _, p := range h.c.Commit(h.ctx, r).Topics[0].Partitions {
			codes = append(codes, p.ErrorCode)
		}
		return codes
	}
	want := func(what string, got []int16, e *kerr.Error) {
		t.Helper()
		for _, c := range got {
			wantCode(t, what, c, e)
		}
	}
	want("commit at the epoch", commit(a.id, 1, 9, 0, 1), nil)
	want("commit at a future epoch", commit(a.id, 2, 9, 0), kerr.StaleMemberEpoch)
	want("commit of an unknown member", commit("nobody", 1, 9, 0), kerr.UnknownMemberID)
	want("commit with no member id", commit("", 1, 9, 0), kerr.UnknownMemberID)
	want("commit v8 from a consumer member", commit(a.id, 1, 8, 0), kerr.UnsupportedVersion)
	want("admin commit to a group with members", commit("", -1, 9, 0), kerr.UnknownMemberID)
	// b joins: a stays at epoch 1 while it revokes, then moves to 2
	// keeping one partition (held since epoch 1).
	settle(t, a, b)
	if a.epoch != 2 || a.count() != 1 {
		t.Fatalf("a at %d with %d", a.epoch, a.count())
	}
	var kept, lost int32
	for p := range a.owned {
		kept = p.partition
	}
	lost = 1 - kept
	// KIP-1251: a commit at the older epoch is accepted for a partition
	// a has held since, refused for one it gave up.
	got := commit(a.id, 1, 9, kept, lost)
	wantCode(t, "old epoch, partition kept", got[0], nil)
	wantCode(t, "old epoch, partition given up", got[1], kerr.StaleMemberEpoch)
	// b got its partition at epoch 2: a commit at 1 is refused.
	wantCode(t, "b at an epoch before it got it", commit(b.id, 1, 9, lost)[0], kerr.StaleMemberEpoch)
	wantCode(t, "b at its epoch", commit(b.id, b.epoch, 9, lost)[0], nil)

	fetch := func(member *string, epoch int32) kmsg.OffsetFetchResponseGroup {
		r := kmsg.NewPtrOffsetFetchRequest()
		r.Version = 9
		g := fetchGroupReq("g", map[string][]int32{"t": {0, 1}})
		g.MemberID, g.MemberEpoch = member, epoch
		r.Groups = []kmsg.OffsetFetchRequestGroup{g}
		return h.c.FetchOffsets(h.ctx, r).Groups[0]
	}
	wantCode(t, "fetch without member", fetch(nil, -1).ErrorCode, nil)
	wantCode(t, "fetch at the epoch", fetch(&a.id, a.epoch).ErrorCode, nil)
	wantCode(t, "fetch at another epoch", fetch(&a.id, 1).ErrorCode, kerr.StaleMemberEpoch)
	nobody := "nobody"
	wantCode(t, "fetch of an unknown member", fetch(&nobody, 3).ErrorCode, kerr.UnknownMemberID)
	if g := fetch(nil, -1); g.Topics[0].Partitions[0].Offset != 5 || g.Topics[0].Partitions[1].Offset != 5 {
		t.Fatalf("fetched %+v", g.Topics)
	}
	// Once every member left, an admin commit is accepted.
	a.leave()
	b.leave()
	want("admin commit to an empty group", commit("", -1, 9, 0), nil)
	// v9 commit with an epoch to a group that does not exist.
	r := commitReq("nothing", "m", "", 3, "t", offset{partition: 0, offset: 1, epoch: -1})
	r.Version = 9
	wantCode(t, "v9 commit to a missing group", h.c.Commit(h.ctx, r).Topics[0].Partitions[0].ErrorCode, kerr.GroupIDNotFound)
}

// The group survives a coordinator move: members continue at their
// epochs with their assignments, commits are accepted by the new
// coordinator and refused from the old one.
func TestConsumerGroupSurvivesCoordinatorMove(t *testing.T) {
	topics := newTestTopics()
	topics.set("t", 6)
	h := newCGHarness(t, topics)
	a, b := h.newMember(h.c, "g", "a", "t"), h.newMember(h.c, "g", "b", "t")
	b.instance = "static-b"
	settle(t, a, b)
	c := h.newMember(h.c, "g", "c", "t")
	c.beat() // c waits for partitions; a and b have not revoked yet
	before := h.cgDescribe(h.c, "g")
	aEpoch, aOwned := a.epoch, maps.Clone(a.owned)

	c2 := cgAddCoordinator(h, topics)
	c2.SetShards(allShards()) // h.c has not heard yet
	after := h.cgDescribe(c2, "g")
	if after.Epoch != before.Epoch || after.AssignmentEpoch != before.AssignmentEpoch || len(after.Members) != 3 || after.State != before.State {
		t.Fatalf("after the move: %+v, before %+v", after, before)
	}
	for _, m := range []*cgMember{a, b, c} {
		m.c = c2
	}
	// Keepalives at the same epochs are accepted: nobody rejoins.
	for _, m := range []*cgMember{a, b, c} {
		epoch := m.epoch
		if resp := m.keepalive(); resp.MemberEpoch < epoch {
			t.Fatalf("%s went back from epoch %d to %d", m.id, epoch, resp.MemberEpoch)
		}
	}
	settle(t, a, b, c)
	for _, m := range []*cgMember{a, b, c} {
		if m.count() != 2 {
			t.Fatalf("%s owns %d after the move", m.id, m.count())
		}
	}
	// The new coordinator accepts commits; the old one is fenced.
	r := commitReq("g", a.id, "", a.epoch, "t")
	for p := range a.owned {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = p.partition, 9
		r.Topics[0].Partitions = append(r.Topics[0].Partitions, rp)
	}
	r.Version = 9
	wantCode(t, "commit at the new coordinator", c2.Commit(h.ctx, r).Topics[0].Partitions[0].ErrorCode, nil)
	// The old coordinator still has a at its old epoch: the metastore
	// refuses what it would write.
	old := commitReq("g", a.id, "", aEpoch, "t")
	for p := range aOwned {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = p.partition, 1
		old.Topics[0].Partitions = append(old.Topics[0].Partitions, rp)
	}
	old.Version = 9
	wantCode(t, "commit at the old coordinator", h.c.Commit(h.ctx, old).Topics[0].Partitions[0].ErrorCode, kerr.NotCoordinator)
}

// A coordinator that missed the move cannot store a change.
func TestStaleCoordinatorHeartbeatIsFenced(t *testing.T) {
	topics := newTestTopics()
	topics.set("t", 2)
	h := newCGHarness(t, topics)
	a := h.newMember(h.c, "g", "a", "t")
	settle(t, a)
	c2 := cgAddCoordinator(h, topics)
	c2.SetShards(allShards())
	a.c = c2
	a.topics = []string{}
	settle(t, a) // the new coordinator moved the group on
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Version, r.Group, r.MemberID, r.MemberEpoch = 1, "g", "a", 1
	r.SubscribedTopicNames = []string{"t", "other"} // a change to store
	resp := h.c.ConsumerHeartbeat(h.ctx, r, Client{})
	wantErr(t, "stale coordinator", resp, kerr.NotCoordinator)
}

func TestConsumerGroupListDescribeDelete(t *testing.T) {
	topics := newTestTopics()
	topics.set("t", 3)
	h := newCGHarness(t, topics)
	a := h.newMember(h.c, "g", "a", "t")
	a.instance = "i-a"
	rack := "az1"
	r := a.request()
	r.RackID = &rack
	a.send(r)
	settle(t, a)
	d := h.cgDescribe(h.c, "g")
	if d.State != "Stable" || len(d.Members) != 1 || d.AssignorName != "uniform" {
		t.Fatalf("describe: %+v", d)
	}
	dm := d.Members[0]
	if dm.MemberID != "a" || deref(dm.InstanceID) != "i-a" || deref(dm.RackID) != "az1" || dm.MemberEpoch != 1 || dm.MemberType != 1 ||
		dm.ClientID != "client-a" || len(dm.Assignment.TopicPartitions) != 1 || dm.Assignment.TopicPartitions[0].Topic != "t" ||
		len(dm.TargetAssignment.TopicPartitions[0].Partitions) != 3 || !slices.Equal(dm.SubscribedTopics, []string{"t"}) {
		t.Fatalf("member: %+v", dm)
	}
	// Classic describe says Dead, list says consumer.
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Version = 5
	dg.Groups = []string{"g"}
	if g := h.c.Describe(h.ctx, dg).Groups[0]; g.State != "Dead" || g.ProtocolType != "consumer" {
		t.Fatalf("DescribeGroups: %+v", g)
	}
	h.form("classic", "")
	list := func(types ...string) map[string]kmsg.ListGroupsResponseGroup {
		r := kmsg.NewPtrListGroupsRequest()
		r.Version = 5
		r.TypesFilter = types
		out := map[string]kmsg.ListGroupsResponseGroup{}
		for _, g := range h.c.List(h.ctx, r).Groups {
			out[g.Group] = g
		}
		return out
	}
	all := list()
	if all["g"].GroupType != "consumer" || all["g"].ProtocolType != "consumer" || all["g"].GroupState != "Stable" || all["classic"].GroupType != "classic" {
		t.Fatalf("list: %+v", all)
	}
	if l := list("Consumer"); len(l) != 1 || l["g"].Group != "g" {
		t.Fatalf("consumer filter: %+v", l)
	}
	if l := list("classic"); len(l) != 1 || l["classic"].Group != "classic" {
		t.Fatalf("classic filter: %+v", l)
	}
	// A classic group is no consumer group.
	if d := h.cgDescribe(h.c, "classic"); d.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("describe a classic group: %v", kerr.ErrorForCode(d.ErrorCode))
	}
	// Delete: refused with members, then accepted.
	wantCode(t, "commit", h.c.Commit(h.ctx, func() *kmsg.OffsetCommitRequest {
		r := commitReq("g", "a", "", a.epoch, "t", offset{partition: 0, offset: 3, epoch: -1})
		r.Version = 9
		return r
	}()).Topics[0].Partitions[0].ErrorCode, nil)
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{"g"}
	wantCode(t, "delete with members", h.c.Delete(h.ctx, del).Groups[0].ErrorCode, kerr.NonEmptyGroup)
	a.leave()
	wantCode(t, "delete once empty", h.c.Delete(h.ctx, del).Groups[0].ErrorCode, nil)
	if got := h.committed(h.c, "g"); got != -1 {
		t.Fatalf("offset %d after delete", got)
	}
	if d := h.cgDescribe(h.c, "g"); d.ErrorCode != kerr.GroupIDNotFound.Code {
		t.Fatalf("describe after delete: %v", kerr.ErrorForCode(d.ErrorCode))
	}
}

// OffsetDelete refuses the topics a consumer group subscribes to.
func TestConsumerOffsetDelete(t *testing.T) {
	topics := newTestTopics()
	topics.set("t", 1)
	topics.set("old", 1)
	h := newCGHarness(t, topics)
	a := h.newMember(h.c, "g", "a", "t")
	settle(t, a)
	r := commitReq("g", "", "", -1, "old", offset{partition: 0, offset: 1, epoch: -1})
	r.Version = 9
	r.Generation = a.epoch
	r.MemberID = "a"
	h.c.Commit(h.ctx, r)
	del := func(topic string) int16 {
		r := kmsg.NewPtrOffsetDeleteRequest()
		r.Group = "g"
		r.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: topic, Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
		return h.c.DeleteOffsets(h.ctx, r).Topics[0].Partitions[0].ErrorCode
	}
	wantCode(t, "delete a subscribed topic's offsets", del("t"), kerr.GroupSubscribedToTopic)
	wantCode(t, "delete an unsubscribed topic's offsets", del("old"), nil)
}

var _ = metastore.GroupTypeConsumer

package group

import (
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// classicSim is a cooperative classic consumer of topic "t".
type classicSim struct {
	h     *harness
	group string
	id    string
	gen   int32
	owned []int32 // partitions of "t"
}

func (s *classicSim) joinReq() *kmsg.JoinGroupRequest {
	r := joinReq(s.group, s.id, "", "classic")
	md := kmsg.NewConsumerMemberMetadata()
	md.Version = 1
	md.Topics = []string{"t"}
	if len(s.owned) > 0 {
		md.OwnedPartitions = []kmsg.ConsumerMemberMetadataOwnedPartition{{Topic: "t", Partitions: slices.Clone(s.owned)}}
	}
	r.Protocols[0].Name = "cooperative-sticky"
	r.Protocols[0].Metadata = md.AppendTo(nil)
	return r
}

// coopSync is a SyncGroup of the cooperative-sticky protocol.
func coopSync(group, id string, gen int32) *kmsg.SyncGroupRequest {
	r := syncReq(group, id, "", gen)
	r.Protocol = str("cooperative-sticky")
	return r
}

func decodeOwned(t *testing.T, b []byte) []int32 {
	t.Helper()
	if len(b) == 0 {
		return nil
	}
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(b); err != nil {
		t.Fatalf("assignment: %v", err)
	}
	var out []int32
	for _, at := range a.Topics {
		if at.Topic == "t" {
			out = append(out, at.Partitions...)
		}
	}
	slices.Sort(out)
	return out
}

func encodeOwned(ps ...int32) []byte {
	a := kmsg.NewConsumerMemberAssignment()
	a.Topics = []kmsg.ConsumerMemberAssignmentTopic{{Topic: "t", Partitions: ps}}
	return a.AppendTo(nil)
}

// step runs the classic member's loop once inside a consumer group:
// heartbeat, and on REBALANCE_IN_PROGRESS rejoin and sync, giving up at
// once what the new assignment leaves out (a cooperative consumer).
func (s *classicSim) step() bool {
	s.h.t.Helper()
	code := s.h.heartbeat(s.group, s.id, "", s.gen)
	if code == 0 {
		return false
	}
	if code != kerr.RebalanceInProgress.Code && code != kerr.IllegalGeneration.Code {
		s.h.t.Fatalf("classic heartbeat of %s: %v", s.id, kerr.ErrorForCode(code))
	}
	jr := s.h.join(s.joinReq(), "classic")
	wantCode(s.h.t, "classic rejoin", jr.ErrorCode, nil)
	if jr.LeaderID == s.id {
		s.h.t.Fatal("a classic member of a consumer group was made leader")
	}
	s.gen = jr.Generation
	sr := s.h.sync(coopSync(s.group, s.id, s.gen))
	if sr.ErrorCode == kerr.RebalanceInProgress.Code {
		return true
	}
	wantCode(s.h.t, "classic sync", sr.ErrorCode, nil)
	s.owned = decodeOwned(s.h.t, sr.MemberAssignment)
	return true
}

// noOverlap fails if a partition of "t" is owned twice.
func noOverlap(t *testing.T, topics *testTopics, classics []*classicSim, consumers []*cgMember) {
	t.Helper()
	seen := map[int32]string{}
	for _, s := range classics {
		for _, p := range s.owned {
			if o, dup := seen[p]; dup {
				t.Fatalf("partition %d owned by %s and %s", p, o, s.id)
			}
			seen[p] = s.id
		}
	}
	for _, m := range consumers {
		for p := range m.owned {
			if o, dup := seen[p.partition]; dup {
				t.Fatalf("partition %d owned by %s and %s", p.partition, o, m.id)
			}
			seen[p.partition] = m.id
		}
	}
}

func TestOnlineMigrationUpgradeAndDowngrade(t *testing.T) {
	topics := newTestTopics()
	topics.set("t", 4)
	h := newCGHarness(t, topics)
	// A classic group of two cooperative consumers, partitions 0,1 and 2,3.
	a, b := &classicSim{h: h, group: "g"}, &classicSim{h: h, group: "g"}
	a.id, b.id = h.memberID("g", "classic"), h.memberID("g", "classic")
	ja, jb := h.joinAsync(h.c, a.joinReq(), "classic"), h.joinAsync(h.c, b.joinReq(), "classic")
	ra, rb := ja.get(), jb.get()
	wantCode(t, "classic join", ra.ErrorCode, nil)
	wantCode(t, "classic join", rb.ErrorCode, nil)
	leader, follower := a, b
	if ra.LeaderID != a.id {
		leader, follower = b, a
	}
	leader.gen, follower.gen = ra.Generation, ra.Generation
	fs := h.syncAsync(h.c, coopSync("g", follower.id, follower.gen))
	ls := coopSync("g", leader.id, leader.gen)
	ls.GroupAssignment = []kmsg.SyncGroupRequestGroupAssignment{{MemberID: leader.id, MemberAssignment: encodeOwned(0, 1)}, {MemberID: follower.id, MemberAssignment: encodeOwned(2, 3)}}
	lsr := h.sync(ls)
	wantCode(t, "leader sync", lsr.ErrorCode, nil)
	fsr := fs.get()
	wantCode(t, "follower sync", fsr.ErrorCode, nil)
	leader.owned, follower.owned = decodeOwned(t, lsr.MemberAssignment), decodeOwned(t, fsr.MemberAssignment)
	classicGen := leader.gen
	wantCode(t, "classic commit", h.commit("g", leader.id, "", leader.gen, 10), nil)

	// A consumer-protocol member joins: the group becomes a consumer
	// group at the classic generation, members keep their partitions.
	n := h.newMember(h.c, "g", "n", "t")
	resp := n.beat()
	if resp.MemberEpoch != classicGen+1 || n.count() != 0 {
		t.Fatalf("upgrading member: epoch %d, %d partitions", resp.MemberEpoch, n.count())
	}
	if d := h.cgDescribe(h.c, "g"); len(d.Members) != 3 || d.Members[0].MemberType+d.Members[1].MemberType+d.Members[2].MemberType != 1 {
		t.Fatalf("after the upgrade: %+v", d)
	}
	// A classic member commits under its generation (its member epoch).
	wantCode(t, "classic member's commit in the consumer group", h.commit("g", leader.id, "", leader.gen, 11), nil)
	classics := []*classicSim{a, b}
	for range 10 {
		moved := false
		for _, s := range classics {
			moved = s.step() || moved
			noOverlap(t, topics, classics, []*cgMember{n})
		}
		before := n.count()
		n.beat()
		noOverlap(t, topics, classics, []*cgMember{n})
		moved = moved || before != n.count()
		if !moved {
			break
		}
	}
	if n.count() < 1 || len(a.owned)+len(b.owned)+n.count() != 4 {
		t.Fatalf("after reconciling: a %v, b %v, n %d", a.owned, b.owned, n.count())
	}
	h.wantCGState(h.c, "g", "Stable", classicGen+1)
	// ListGroups says consumer.
	lr := kmsg.NewPtrListGroupsRequest()
	lr.Version = 5
	if g := h.c.List(h.ctx, lr).Groups; len(g) != 1 || g[0].GroupType != "consumer" {
		t.Fatalf("listed %+v", g)
	}

	// The consumer member leaves: the classic members are left, the group
	// is classic again and rebalances.
	n.leave()
	wantCode(t, "classic heartbeat after the downgrade", h.heartbeat("g", a.id, "", a.gen), kerr.RebalanceInProgress)
	ja, jb = h.joinAsync(h.c, a.joinReq(), "classic"), h.joinAsync(h.c, b.joinReq(), "classic")
	ra, rb = ja.get(), jb.get()
	wantCode(t, "rejoin after the downgrade", ra.ErrorCode, nil)
	wantCode(t, "rejoin after the downgrade", rb.ErrorCode, nil)
	if ra.Generation <= classicGen+1 || ra.LeaderID == "" {
		t.Fatalf("classic generation %d led by %q after the downgrade", ra.Generation, ra.LeaderID)
	}
	if g := h.c.List(h.ctx, lr).Groups; len(g) != 1 || g[0].GroupType != "classic" {
		t.Fatalf("listed %+v", g)
	}
	if got := h.committed(h.c, "g"); got != 11 {
		t.Fatalf("committed %d across the migrations, want 11", got)
	}
}

// The policy decides which migrations happen.
func TestMigrationPolicy(t *testing.T) {
	topics := newTestTopics()
	topics.set("t", 2)
	h := newCGHarness(t, topics, func(o *Options) { o.MigrationPolicy = "disabled" })
	h.form("g", "")
	n := h.newMember(h.c, "g", "n", "t")
	wantErr(t, "upgrade with the policy disabled", n.send(n.request()), kerr.GroupIDNotFound)
	// A consumer group with members refuses classic joins.
	m := h.newMember(h.c, "cg", "m", "t")
	m.beat()
	wantCode(t, "classic join to a consumer group", h.join(joinReq("cg", "x", "", "c"), "c").ErrorCode, kerr.InconsistentGroupProtocol)
	// An empty group converts whatever the policy: classic offsets only.
	m.leave()
	r := h.join(joinReq("cg", h.memberID("cg", "c"), "", "c"), "c")
	wantCode(t, "classic join to an empty consumer group", r.ErrorCode, nil)
}

// With the policy "upgrade" a consumer group left with classic members
// only stays a consumer group, and its classic members take over what
// the consumer members had.
func TestClassicMembersLeftInAConsumerGroup(t *testing.T) {
	topics := newTestTopics()
	topics.set("t", 4)
	h := newCGHarness(t, topics, func(o *Options) { o.MigrationPolicy = "upgrade" })
	n := h.newMember(h.c, "g", "n", "t")
	n.beat()
	a := &classicSim{h: h, group: "g", id: "classic-a"}
	jr := h.join(a.joinReq(), "classic")
	wantCode(t, "classic join into the consumer group", jr.ErrorCode, nil)
	a.gen = jr.Generation
	sr := h.sync(coopSync("g", a.id, a.gen))
	wantCode(t, "classic sync in the consumer group", sr.ErrorCode, nil)
	a.owned = decodeOwned(t, sr.MemberAssignment)
	step := func() {
		for range 10 {
			a.step()
			if n.epoch > 0 {
				n.beat()
			}
			noOverlap(t, topics, []*classicSim{a}, []*cgMember{n})
		}
	}
	step()
	if len(a.owned)+n.count() != 4 || len(a.owned) == 0 {
		t.Fatalf("a %v, n %d", a.owned, n.count())
	}
	n.leave()
	n.epoch = -1
	for range 5 {
		a.step()
	}
	if len(a.owned) != 4 {
		t.Fatalf("the classic member owns %v after the consumer member left", a.owned)
	}
	if d := h.cgDescribe(h.c, "g"); d.ErrorCode != 0 || len(d.Members) != 1 || d.Members[0].MemberType != 0 {
		t.Fatalf("still a consumer group with its classic member: %+v", d)
	}
	_ = kerr.RebalanceInProgress
}

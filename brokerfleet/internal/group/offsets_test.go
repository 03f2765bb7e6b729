package group

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Kafka's OffsetCommit checks (ClassicGroup.validateOffsetCommit): a
// commit with generation -1 to an empty group is a simple (or admin)
// commit; otherwise the member, then the generation, then the state.
func TestOffsetCommitFencing(t *testing.T) {
	h := newHarness(t)
	wantCode(t, "simple commit to a new group", h.commit("g", "", "", -1, 10), nil)
	wantCode(t, "generation >= 0 to an empty group", h.commit("g", "someone", "", 1, 11), kerr.UnknownMemberID)

	f := h.form("g", "", "")
	a, b := f.ids[0], f.ids[1]
	wantCode(t, "member commit", h.commit("g", a, "", f.gen, 20), nil)
	wantCode(t, "unknown member", h.commit("g", "ghost", "", f.gen, 21), kerr.UnknownMemberID)
	wantCode(t, "simple commit to a group with members", h.commit("g", "", "", -1, 22), kerr.UnknownMemberID)
	wantCode(t, "member with generation -1", h.commit("g", a, "", -1, 23), kerr.IllegalGeneration)
	wantCode(t, "member with a future generation", h.commit("g", a, "", f.gen+1, 24), kerr.IllegalGeneration)

	// A rebalance: while preparing, members of the current generation may
	// still commit (Kafka).
	aj := h.joinAsync(h.c, joinReq("g", a, "", "client-0"), "client-0")
	h.wantState("g", "PreparingRebalance", 2)
	wantCode(t, "commit while preparing", h.commit("g", b, "", f.gen, 30), nil)
	bj := h.joinAsync(h.c, joinReq("g", b, "", "client-1"), "client-1")
	ar, br := aj.get(), bj.get()
	gen2 := ar.Generation
	if gen2 <= f.gen || br.Generation != gen2 {
		t.Fatalf("second generation %d/%d after %d", gen2, br.Generation, f.gen)
	}
	h.wantState("g", "CompletingRebalance", 2)
	// While completing, the generation is checked first: a stale commit
	// learns it is stale, a current one is told to wait for the rebalance.
	wantCode(t, "stale commit while completing", h.commit("g", b, "", f.gen, 31), kerr.IllegalGeneration)
	wantCode(t, "current commit while completing", h.commit("g", b, "", gen2, 32), kerr.RebalanceInProgress)
	h.syncAll(&formed{group: "g", gen: gen2, leader: a, instances: []string{"", ""}, ids: []string{a, b}})
	wantCode(t, "stale generation", h.commit("g", b, "", f.gen, 33), kerr.IllegalGeneration)
	wantCode(t, "current generation", h.commit("g", b, "", gen2, 34), nil)
	if got := h.committed(h.c, "g"); got != 34 {
		t.Fatalf("committed %d, want 34", got)
	}

	// Once everyone left, the group is empty: simple commits are allowed
	// again, and the old members are unknown.
	resp := h.leave("g", kmsg.LeaveGroupRequestMember{MemberID: a}, kmsg.LeaveGroupRequestMember{MemberID: b})
	wantCode(t, "leave a", resp.Members[0].ErrorCode, nil)
	wantCode(t, "leave b", resp.Members[1].ErrorCode, nil)
	h.wantState("g", "Empty", 0)
	wantCode(t, "old member of an empty group", h.commit("g", a, "", gen2, 40), kerr.UnknownMemberID)
	wantCode(t, "admin commit to the empty group", h.commit("g", "", "", -1, 41), nil)
	// v0 has no generation or member id: a simple commit.
	v0 := commitReq("g", "", "", 0, "t", offset{partition: 0, offset: 42})
	v0.Version = 0
	wantCode(t, "v0 commit", h.c.Commit(h.ctx, v0).Topics[0].Partitions[0].ErrorCode, nil)
	if got := h.committed(h.c, "g"); got != 42 {
		t.Fatalf("committed %d, want 42", got)
	}
}

func TestOffsetCommitPartitionChecks(t *testing.T) {
	h := newHarness(t, func(o *Options) {
		o.PartitionExists = func(topic string, p int32) bool { return topic == "t" && p < 2 }
		o.MaxMetadataBytes = 8
	})
	resp := h.c.Commit(h.ctx, commitReq("g", "", "", -1, "t",
		offset{partition: 0, offset: 1, epoch: -1, metadata: "short"},
		offset{partition: 1, offset: 2, epoch: -1, metadata: strings.Repeat("x", 9)},
		offset{partition: 2, offset: 3, epoch: -1},
	))
	for i, want := range []*kerr.Error{nil, kerr.OffsetMetadataTooLarge, kerr.UnknownTopicOrPartition} {
		if resp.Topics[0].Partitions[i].Partition != int32(i) {
			t.Fatalf("answer %d is for partition %d", i, resp.Topics[0].Partitions[i].Partition)
		}
		wantCode(t, "partition", resp.Topics[0].Partitions[i].ErrorCode, want)
	}
	wantCode(t, "empty group id", h.commit("", "", "", -1, 1), kerr.InvalidGroupID)
}

func fetchGroupReq(group string, topics map[string][]int32) kmsg.OffsetFetchRequestGroup {
	g := kmsg.NewOffsetFetchRequestGroup()
	g.Group = group
	if topics == nil {
		return g // every committed offset
	}
	for topic, ps := range topics {
		g.Topics = append(g.Topics, kmsg.OffsetFetchRequestGroupTopic{Topic: topic, Partitions: ps})
	}
	return g
}

type fetched struct {
	topic     string
	partition int32
	offset    int64
	epoch     int32
	metadata  string
}

func flatten(topics []kmsg.OffsetFetchResponseGroupTopic) []fetched {
	var out []fetched
	for _, t := range topics {
		for _, p := range t.Partitions {
			md := "<nil>"
			if p.Metadata != nil {
				md = *p.Metadata
			}
			if p.ErrorCode != 0 {
				md = "error " + kerr.ErrorForCode(p.ErrorCode).Error()
			}
			out = append(out, fetched{t.Topic, p.Partition, p.Offset, p.LeaderEpoch, md})
		}
	}
	return out
}

func TestOffsetFetchRoundTrip(t *testing.T) {
	h := newHarness(t)
	f := h.form("g", "")
	req := commitReq("g", f.ids[0], "", f.gen, "t1",
		offset{partition: 0, offset: 10, epoch: 3, metadata: "m0"},
		offset{partition: 1, offset: 20, epoch: -1},
	)
	t2 := kmsg.NewOffsetCommitRequestTopic()
	t2.Topic = "t2"
	p := kmsg.NewOffsetCommitRequestTopicPartition()
	p.Partition, p.Offset, p.LeaderEpoch = 4, 5, 1
	t2.Partitions = append(t2.Partitions, p)
	req.Topics = append(req.Topics, t2)
	resp := h.c.Commit(h.ctx, req)
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			wantCode(t, "commit "+rt.Topic, rp.ErrorCode, nil)
		}
	}
	// v5 (before leader epochs were committed) stores epoch -1.
	old := commitReq("g", f.ids[0], "", f.gen, "t3", offset{partition: 0, offset: 7, epoch: 9})
	old.Version = 5
	wantCode(t, "v5 commit", h.c.Commit(h.ctx, old).Topics[0].Partitions[0].ErrorCode, nil)

	fetch := func(c *Coordinator, groups ...kmsg.OffsetFetchRequestGroup) *kmsg.OffsetFetchResponse {
		r := kmsg.NewPtrOffsetFetchRequest()
		r.Version = 8
		r.Groups = groups
		return c.FetchOffsets(h.ctx, r)
	}
	check := func(what string, got []fetched, want ...fetched) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %+v, want %+v", what, got, want)
		}
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("%s: %+v, want %+v", what, got[i], want[i])
			}
		}
	}
	r := fetch(h.c, fetchGroupReq("g", map[string][]int32{"t1": {0, 1, 7}}), fetchGroupReq("nobody", map[string][]int32{"t1": {0}}))
	wantCode(t, "fetch g", r.Groups[0].ErrorCode, nil)
	check("fetch t1", flatten(r.Groups[0].Topics),
		fetched{"t1", 0, 10, 3, "m0"}, fetched{"t1", 1, 20, -1, ""}, fetched{"t1", 7, -1, -1, ""})
	wantCode(t, "fetch of a group that does not exist", r.Groups[1].ErrorCode, nil)
	check("fetch nobody", flatten(r.Groups[1].Topics), fetched{"t1", 0, -1, -1, ""})

	all := []fetched{{"t1", 0, 10, 3, "m0"}, {"t1", 1, 20, -1, ""}, {"t2", 4, 5, 1, ""}, {"t3", 0, 7, -1, ""}}
	r = fetch(h.c, fetchGroupReq("g", nil))
	check("fetch all", flatten(r.Groups[0].Topics), all...)

	// v1-7 ask for one group at the top level.
	v5 := kmsg.NewPtrOffsetFetchRequest()
	v5.Version = 5
	v5.Group = "g"
	v5.Topics = []kmsg.OffsetFetchRequestTopic{{Topic: "t2", Partitions: []int32{4}}}
	r5 := h.c.FetchOffsets(h.ctx, v5)
	wantCode(t, "v5 fetch", r5.ErrorCode, nil)
	if len(r5.Topics) != 1 || len(r5.Topics[0].Partitions) != 1 || r5.Topics[0].Partitions[0].Offset != 5 || r5.Topics[0].Partitions[0].LeaderEpoch != 1 {
		t.Fatalf("v5 fetch: %+v", r5.Topics)
	}

	// The offsets live in the metastore: a coordinator the shard moves to
	// serves the same ones.
	c2 := h.addCoordinator()
	h.c.SetShards(nil)
	c2.SetShards(allShards())
	r = fetch(c2, fetchGroupReq("g", nil))
	check("fetch all from the next coordinator", flatten(r.Groups[0].Topics), all...)
}

// A coordinator that still thinks it owns a shard after another formed a
// newer generation cannot move a committed offset: the metastore fences
// the commit and the member is sent to find its coordinator.
func TestStaleCoordinatorCommitIsFenced(t *testing.T) {
	h := newHarness(t)
	f := h.form("g", "")
	wantCode(t, "commit", h.commit("g", f.ids[0], "", f.gen, 1), nil)

	c2 := h.addCoordinator()
	c2.SetShards(allShards()) // h.c has not heard yet
	// The member (its leader) rejoins at the new coordinator, which
	// loaded its membership: a new generation.
	r := h.joinAsync(c2, joinReq("g", f.ids[0], "", "x"), "x").get()
	wantCode(t, "join at the new coordinator", r.ErrorCode, nil)
	if r.Generation <= f.gen {
		t.Fatalf("new coordinator's generation %d, not after %d", r.Generation, f.gen)
	}

	wantCode(t, "zombie commit", h.commit("g", f.ids[0], "", f.gen, 2), kerr.NotCoordinator)
	if got := h.committed(c2, "g"); got != 1 {
		t.Fatalf("committed %d after the zombie's commit, want 1", got)
	}
	// The stale coordinator forgot the group: it reads it again, with
	// the generation formed since.
	wantCode(t, "zombie heartbeat", h.heartbeat("g", f.ids[0], "", f.gen), kerr.IllegalGeneration)
}

func TestOffsetDelete(t *testing.T) {
	h := newHarness(t)
	del := func(group string, partitions ...int32) *kmsg.OffsetDeleteResponse {
		r := kmsg.NewPtrOffsetDeleteRequest()
		r.Group = group
		rt := kmsg.NewOffsetDeleteRequestTopic()
		rt.Topic = "t"
		for _, p := range partitions {
			rt.Partitions = append(rt.Partitions, kmsg.OffsetDeleteRequestTopicPartition{Partition: p})
		}
		r.Topics = []kmsg.OffsetDeleteRequestTopic{rt}
		return h.c.DeleteOffsets(h.ctx, r)
	}
	wantCode(t, "unknown group", del("nobody", 0).ErrorCode, kerr.GroupIDNotFound)

	// A consumer subscribed to "t" keeps its offsets.
	id := h.memberID("g", "c")
	jr := joinReq("g", id, "", "c")
	var md kmsg.ConsumerMemberMetadata
	md.Topics = []string{"t"}
	jr.Protocols[0].Metadata = md.AppendTo(nil)
	r := h.join(jr, "c")
	wantCode(t, "join", r.ErrorCode, nil)
	wantCode(t, "sync", h.sync(leaderSync("g", id, "", r.Generation, []string{id})).ErrorCode, nil)
	wantCode(t, "commit", h.commit("g", id, "", r.Generation, 5), nil)
	resp := del("g", 0)
	wantCode(t, "delete while subscribed", resp.ErrorCode, nil)
	wantCode(t, "delete while subscribed", resp.Topics[0].Partitions[0].ErrorCode, kerr.GroupSubscribedToTopic)

	wantCode(t, "leave", h.leave("g", kmsg.LeaveGroupRequestMember{MemberID: id}).Members[0].ErrorCode, nil)
	resp = del("g", 0)
	wantCode(t, "delete when empty", resp.Topics[0].Partitions[0].ErrorCode, nil)
	if got := h.committed(h.c, "g"); got != -1 {
		t.Fatalf("committed %d after OffsetDelete, want -1", got)
	}
}

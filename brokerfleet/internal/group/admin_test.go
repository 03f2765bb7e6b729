package group

import (
	"bytes"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/pkg/metastore"
)

func (h *harness) list(c *Coordinator, states ...string) map[string]string {
	h.t.Helper()
	r := kmsg.NewPtrListGroupsRequest()
	r.Version = 5
	r.StatesFilter = states
	resp := c.List(h.ctx, r)
	wantCode(h.t, "list", resp.ErrorCode, nil)
	out := map[string]string{}
	for _, g := range resp.Groups {
		if g.GroupType != "classic" {
			h.t.Fatalf("group %s of type %q", g.Group, g.GroupType)
		}
		out[g.Group] = g.GroupState + "/" + g.ProtocolType
	}
	return out
}

func wantGroups(t *testing.T, what string, got map[string]string, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %v, want %v", what, got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("%s: %v, want %v", what, got, want)
		}
	}
}

func TestDescribeAndListGroupStates(t *testing.T) {
	h := newHarness(t)
	d := h.describe("never")
	wantCode(t, "describe an unknown group", d.ErrorCode, nil) // v0-5: no error, state Dead
	if d.State != "Dead" || len(d.Members) != 0 {
		t.Fatalf("unknown group: %s with %d members", d.State, len(d.Members))
	}
	wantCode(t, "describe an empty id", h.describe("").ErrorCode, kerr.InvalidGroupID)

	wantCode(t, "simple commit", h.commit("simple", "", "", -1, 1), nil)
	h.wantState("simple", "Empty", 0)

	a := h.memberID("g", "a")
	b := h.memberID("g", "b")
	aj := h.joinAsync(h.c, joinReq("g", a, "", "a"), "a")
	h.wantState("g", "PreparingRebalance", 1) // b's id is handed out, not a member
	wantGroups(t, "list while preparing", h.list(h.c), map[string]string{"simple": "Empty/", "g": "PreparingRebalance/consumer"})

	bj := h.joinAsync(h.c, joinReq("g", b, "", "b"), "b")
	ar, br := aj.get(), bj.get()
	h.wantState("g", "CompletingRebalance", 2)
	d = h.describe("g")
	if d.Protocol != "" || d.ProtocolType != "consumer" {
		t.Fatalf("completing: protocol %q type %q, want no protocol yet", d.Protocol, d.ProtocolType)
	}
	for _, m := range d.Members {
		if m.ProtocolMetadata != nil || m.MemberAssignment != nil {
			t.Fatalf("completing: member %s shows metadata or an assignment", m.MemberID)
		}
	}

	if br.Generation != ar.Generation || ar.LeaderID != a {
		t.Fatalf("a: generation %d led by %s; b: generation %d", ar.Generation, ar.LeaderID, br.Generation)
	}
	h.syncAll(&formed{group: "g", gen: ar.Generation, leader: a, instances: []string{"", ""}, ids: []string{a, b}})
	h.wantState("g", "Stable", 2)
	d = h.describe("g")
	if d.Protocol != "range" || d.ProtocolType != "consumer" {
		t.Fatalf("stable: protocol %q type %q", d.Protocol, d.ProtocolType)
	}
	for i, m := range d.Members {
		id, client := []string{a, b}[i], []string{"a", "b"}[i]
		if m.MemberID != id || m.ClientID != client || m.ClientHost != "/10.0.0.1" ||
			string(m.ProtocolMetadata) != "subscription of "+client || !bytes.Equal(m.MemberAssignment, assignmentFor(id)) {
			t.Fatalf("stable member %d: %+v", i, m)
		}
	}
	wantGroups(t, "list", h.list(h.c), map[string]string{"simple": "Empty/", "g": "Stable/consumer"})
	wantGroups(t, "list stable", h.list(h.c, "stable"), map[string]string{"g": "Stable/consumer"})
	wantGroups(t, "list empty", h.list(h.c, "Empty"), map[string]string{"simple": "Empty/"})
	types := kmsg.NewPtrListGroupsRequest()
	types.Version = 5
	types.TypesFilter = []string{"consumer"} // KIP-848 groups: none here
	if n := len(h.c.List(h.ctx, types).Groups); n != 0 {
		t.Fatalf("%d groups of type consumer, want none", n)
	}

	resp := h.leave("g", kmsg.LeaveGroupRequestMember{MemberID: a}, kmsg.LeaveGroupRequestMember{MemberID: b})
	wantCode(t, "leave", resp.Members[1].ErrorCode, nil)
	h.wantState("g", "Empty", 0)

	// Membership is memory only: another coordinator lists the groups from
	// the metastore, empty.
	c2 := h.addCoordinator()
	c2.SetShards(allShards())
	wantGroups(t, "list at another coordinator", h.list(c2), map[string]string{"simple": "Empty/", "g": "Empty/consumer"})
}

func TestDeleteGroups(t *testing.T) {
	h := newHarness(t)
	f := h.form("busy", "")
	wantCode(t, "commit", h.commit("busy", f.ids[0], "", f.gen, 3), nil)
	wantCode(t, "simple commit", h.commit("idle", "", "", -1, 4), nil)
	del := func(groups ...string) []int16 {
		r := kmsg.NewPtrDeleteGroupsRequest()
		r.Version = 2
		r.Groups = groups
		var out []int16
		for i, g := range h.c.Delete(h.ctx, r).Groups {
			if g.Group != groups[i] {
				t.Fatalf("answer %d is for %q", i, g.Group)
			}
			out = append(out, g.ErrorCode)
		}
		return out
	}
	codes := del("busy", "idle", "never", "")
	for i, want := range []*kerr.Error{kerr.NonEmptyGroup, nil, kerr.GroupIDNotFound, kerr.InvalidGroupID} {
		wantCode(t, "delete", codes[i], want)
	}
	h.wantState("busy", "Stable", 1)
	h.wantState("idle", "Dead", 0)
	if got := h.committed(h.c, "idle"); got != -1 {
		t.Fatalf("deleted group's offset %d, want -1", got)
	}
	if _, ok := h.list(h.c)["idle"]; ok {
		t.Fatal("a deleted group is listed")
	}
	wantCode(t, "delete again", del("idle")[0], kerr.GroupIDNotFound)

	// A rebalancing group has members too.
	aj := h.joinAsync(h.c, joinReq("busy", f.ids[0], "", "client-0"), "client-0")
	h.wantState("busy", "CompletingRebalance", 1)
	wantCode(t, "delete while completing", del("busy")[0], kerr.NonEmptyGroup)
	gen := aj.get().Generation
	wantCode(t, "leave", h.leave("busy", kmsg.LeaveGroupRequestMember{MemberID: f.ids[0]}).Members[0].ErrorCode, nil)
	wantCode(t, "delete once empty", del("busy")[0], nil)
	if got := h.committed(h.c, "busy"); got != -1 {
		t.Fatalf("deleted group's offset %d, want -1", got)
	}
	// Generations continue after a delete, so no old member id or
	// generation matches the group created again under the name.
	f2 := h.form("busy", "")
	if f2.gen <= gen {
		t.Fatalf("recreated group's generation %d, not after %d", f2.gen, gen)
	}
}

// groupOnOtherShard returns a group name whose shard differs from name's.
func groupOnOtherShard(name string) string {
	for i := 0; ; i++ {
		other := name + "-" + string(rune('a'+i%26)) + string(rune('a'+i/26))
		if metastore.GroupShard(other) != metastore.GroupShard(name) {
			return other
		}
	}
}

func TestLosingShardAnswersNotCoordinator(t *testing.T) {
	h := newHarness(t)
	f := h.form("g", "", "")
	a, b := f.ids[0], f.ids[1]
	wantCode(t, "commit", h.commit("g", a, "", f.gen, 9), nil)
	other := groupOnOtherShard("g")
	of := h.form(other, "")

	aj := h.joinAsync(h.c, joinReq("g", a, "", "client-0"), "client-0") // parked in a rebalance
	h.wantState("g", "PreparingRebalance", 2)
	shards := allShards()
	delete(shards, metastore.GroupShard("g"))
	h.c.SetShards(shards)

	wantCode(t, "parked join", aj.get().ErrorCode, kerr.NotCoordinator)
	if h.c.Owns("g") || !h.c.Owns(other) {
		t.Fatalf("owns g %v, %s %v", h.c.Owns("g"), other, h.c.Owns(other))
	}
	wantCode(t, "heartbeat", h.heartbeat("g", b, "", f.gen), kerr.NotCoordinator)
	wantCode(t, "commit", h.commit("g", b, "", f.gen, 10), kerr.NotCoordinator)
	wantCode(t, "join", h.join(joinReq("g", b, "", "client-1"), "client-1").ErrorCode, kerr.NotCoordinator)
	wantCode(t, "sync", h.sync(syncReq("g", b, "", f.gen)).ErrorCode, kerr.NotCoordinator)
	wantCode(t, "leave", h.leave("g", kmsg.LeaveGroupRequestMember{MemberID: b}).ErrorCode, kerr.NotCoordinator)
	wantCode(t, "describe", h.describe("g").ErrorCode, kerr.NotCoordinator)
	fr := kmsg.NewPtrOffsetFetchRequest()
	fr.Version = 8
	fr.Groups = []kmsg.OffsetFetchRequestGroup{fetchGroupReq("g", nil)}
	wantCode(t, "offset fetch", h.c.FetchOffsets(h.ctx, fr).Groups[0].ErrorCode, kerr.NotCoordinator)
	dr := kmsg.NewPtrDeleteGroupsRequest()
	dr.Groups = []string{"g"}
	wantCode(t, "delete", h.c.Delete(h.ctx, dr).Groups[0].ErrorCode, kerr.NotCoordinator)
	if _, ok := h.list(h.c)["g"]; ok {
		t.Fatal("a group of a lost shard is listed")
	}
	// The groups of the shards kept are untouched; so is a shard set again
	// at the same epoch.
	h.c.SetShards(shards)
	wantCode(t, "heartbeat in a kept shard", h.heartbeat(other, of.ids[0], "", of.gen), nil)

	// The shard comes back at a new epoch: the group is read again from
	// the metastore: its generation and members as stored when it last
	// became Stable (a's rejoin began a rebalance never completed), and
	// the committed offsets.
	shards[metastore.GroupShard("g")] = 2
	h.c.SetShards(shards)
	wantCode(t, "heartbeat after the shard came back", h.heartbeat("g", a, "", f.gen), nil)
	wantCode(t, "heartbeat after the shard came back", h.heartbeat("g", b, "", f.gen), nil)
	wantCode(t, "commit after the shard came back", h.commit("g", b, "", f.gen, 11), nil)
	if got := h.committed(h.c, "g"); got != 11 {
		t.Fatalf("committed %d, want 11", got)
	}
	h.wantState("g", "Stable", 2)
	// A shard reassigned meanwhile (its epoch moved) is read again too.
	shards[metastore.GroupShard(other)]++
	h.c.SetShards(shards)
	wantCode(t, "heartbeat after a reassignment", h.heartbeat(other, of.ids[0], "", of.gen), nil)
}

// A broker whose registration lease is not valid serves no group.
func TestInvalidBrokerAnswersNotCoordinator(t *testing.T) {
	var invalid atomic.Bool
	h := newHarness(t, func(o *Options) { o.Valid = func() bool { return !invalid.Load() } })
	f := h.form("g", "")
	invalid.Store(true)
	wantCode(t, "heartbeat", h.heartbeat("g", f.ids[0], "", f.gen), kerr.NotCoordinator)
	wantCode(t, "commit", h.commit("g", f.ids[0], "", f.gen, 1), kerr.NotCoordinator)
	wantCode(t, "join", h.join(joinReq("g", "", "", "c"), "c").ErrorCode, kerr.NotCoordinator)
	if h.c.Owns("g") {
		t.Fatal("an invalid broker owns a group")
	}
	lr := kmsg.NewPtrListGroupsRequest()
	wantCode(t, "list", h.c.List(h.ctx, lr).ErrorCode, kerr.CoordinatorNotAvailable)
	invalid.Store(false)
	wantCode(t, "heartbeat once valid", h.heartbeat("g", f.ids[0], "", f.gen), nil)
}

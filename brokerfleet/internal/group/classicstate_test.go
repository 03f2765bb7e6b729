package group

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A Stable classic group continues on the coordinator its shard moves
// to: same generation, members and assignments; a generation whose
// assignment was never handed out makes its members rejoin there.
func TestClassicMembershipSurvivesMove(t *testing.T) {
	h := newHarness(t)
	f := h.form("g", "", "i-b")
	wantCode(t, "commit", h.commit("g", f.ids[0], "", f.gen, 5), nil)
	c2 := h.addCoordinator()
	h.c.SetShards(nil)
	c2.SetShards(allShards())
	hb := func(c *Coordinator, id, instance string, gen int32) int16 {
		r := kmsg.NewPtrHeartbeatRequest()
		r.Group, r.MemberID, r.InstanceID, r.Generation = "g", id, str(instance), gen
		return c.Heartbeat(h.ctx, r).ErrorCode
	}
	wantCode(t, "heartbeat at the new coordinator", hb(c2, f.ids[0], "", f.gen), nil)
	wantCode(t, "static member's heartbeat", hb(c2, f.ids[1], "i-b", f.gen), nil)
	wantCode(t, "a member of no generation", hb(c2, "nobody", "", f.gen), kerr.UnknownMemberID)
	r := commitReq("g", f.ids[1], "i-b", f.gen, "t", offset{partition: 0, offset: 9, epoch: -1})
	wantCode(t, "commit at the new coordinator", c2.Commit(h.ctx, r).Topics[0].Partitions[0].ErrorCode, nil)
	// The follower's SyncGroup (a retry) gets its stored assignment.
	s := h.syncAsync(c2, syncReq("g", f.ids[1], "i-b", f.gen)).get()
	wantCode(t, "sync at the new coordinator", s.ErrorCode, nil)
	if string(s.MemberAssignment) != string(assignmentFor(f.ids[1])) {
		t.Fatalf("stored assignment %q, want %q", s.MemberAssignment, assignmentFor(f.ids[1]))
	}
	dr := kmsg.NewPtrDescribeGroupsRequest()
	dr.Groups = []string{"g"}
	if d := c2.Describe(h.ctx, dr).Groups[0]; d.State != "Stable" || len(d.Members) != 2 {
		t.Fatalf("described at the new coordinator: %s with %d members", d.State, len(d.Members))
	}

	// A rebalance that forms a generation and moves before its sync: the
	// next coordinator has the members rejoin.
	a := h.joinAsync(c2, joinReq("g", f.ids[0], "", "client-0"), "client-0")
	b := h.joinAsync(c2, joinReq("g", f.ids[1], "i-b", "client-1"), "client-1")
	ra, rb := a.get(), b.get()
	wantCode(t, "rejoin", ra.ErrorCode, nil)
	wantCode(t, "rejoin", rb.ErrorCode, nil)
	c3 := h.addCoordinator()
	c2.SetShards(nil)
	c3.SetShards(allShards())
	wantCode(t, "heartbeat of a generation never synced", hb(c3, f.ids[0], "", ra.Generation), kerr.RebalanceInProgress)
}

package group

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// A member that stops heartbeating is removed when its session timeout
// runs out, and the others are told REBALANCE_IN_PROGRESS.
func TestHeartbeatExpiryRebalances(t *testing.T) {
	h := newHarness(t)
	f := h.form("g", "", "")
	a, b := f.ids[0], f.ids[1]
	h.advance(5 * time.Second)
	wantCode(t, "a heartbeat", h.heartbeat("g", a, "", f.gen), nil)
	wantCode(t, "b heartbeat", h.heartbeat("g", b, "", f.gen), nil) // b's last
	bLast := h.elapsed()
	for h.elapsed()+5*time.Second < bLast+session {
		h.advance(5 * time.Second)
		wantCode(t, "a heartbeat", h.heartbeat("g", a, "", f.gen), nil)
	}
	h.advance(bLast + session - tickInterval - h.elapsed())
	h.wantState("g", "Stable", 2)
	wantCode(t, "a heartbeat", h.heartbeat("g", a, "", f.gen), nil)
	h.advance(2 * tickInterval)
	h.wantState("g", "PreparingRebalance", 1)
	wantCode(t, "a heartbeat after b expired", h.heartbeat("g", a, "", f.gen), kerr.RebalanceInProgress)
	wantCode(t, "b heartbeat after it expired", h.heartbeat("g", b, "", f.gen), kerr.UnknownMemberID)
	wantCode(t, "b commit after it expired", h.commit("g", b, "", f.gen, 1), kerr.UnknownMemberID)

	r := h.join(joinReq("g", a, "", "client-0"), "client-0")
	wantCode(t, "a rejoin", r.ErrorCode, nil)
	if r.Generation <= f.gen || r.LeaderID != a || len(r.Members) != 1 {
		t.Fatalf("a rejoined generation %d led by %s with %d members", r.Generation, r.LeaderID, len(r.Members))
	}
	wantCode(t, "a heartbeat with the old generation", h.heartbeat("g", a, "", f.gen), kerr.IllegalGeneration)
	wantCode(t, "a heartbeat with the new generation", h.heartbeat("g", a, "", r.Generation), nil)
}

// Heartbeats, commits and syncs all keep a session alive; a member that
// only waits in JoinGroup is alive however long it waits.
func TestSessionKeptAlive(t *testing.T) {
	h := newHarness(t)
	f := h.form("g", "", "")
	a, b := f.ids[0], f.ids[1]
	for range 4 { // 4 × 6 s: far past one session timeout
		h.advance(6 * time.Second)
		wantCode(t, "a heartbeat", h.heartbeat("g", a, "", f.gen), nil)
		wantCode(t, "b commit", h.commit("g", b, "", f.gen, int64(h.elapsed()/time.Second)), nil)
	}
	h.wantState("g", "Stable", 2)

	// b rejoins with a new subscription and waits; a does not rejoin and
	// keeps heartbeating.
	bj := h.joinAsync(h.c, joinReq("g", b, "", "client-1 (resubscribed)"), "client-1")
	for range 4 { // 24 s < the 30 s rebalance timeout, > b's session
		h.advance(6 * time.Second)
		wantCode(t, "a heartbeat", h.heartbeat("g", a, "", f.gen), kerr.RebalanceInProgress)
	}
	h.wantState("g", "PreparingRebalance", 2)
	aj := h.joinAsync(h.c, joinReq("g", a, "", "client-0"), "client-0")
	wantCode(t, "a rejoin", aj.get().ErrorCode, nil)
	wantCode(t, "b rejoin", bj.get().ErrorCode, nil)
}

func TestHeartbeatChecks(t *testing.T) {
	h := newHarness(t)
	f := h.form("g", "inst-a")
	a := f.ids[0]
	wantCode(t, "stranger", h.heartbeat("g", "stranger", "", f.gen), kerr.UnknownMemberID)
	wantCode(t, "wrong generation", h.heartbeat("g", a, "", f.gen+1), kerr.IllegalGeneration)
	wantCode(t, "instance of another member", h.heartbeat("g", "stranger", "inst-a", f.gen), kerr.FencedInstanceID)
	wantCode(t, "empty group id", h.heartbeat("", a, "", f.gen), kerr.InvalidGroupID)
	wantCode(t, "unknown group", h.heartbeat("nobody", a, "", f.gen), kerr.UnknownMemberID)
	wantCode(t, "a", h.heartbeat("g", a, "inst-a", f.gen), nil)
}

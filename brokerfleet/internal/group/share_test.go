package group

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/share"
)

func shareHB(group, member string, epoch int32, topics ...string) *kmsg.ShareGroupHeartbeatRequest {
	r := kmsg.NewPtrShareGroupHeartbeatRequest()
	r.GroupID, r.MemberID, r.MemberEpoch = group, member, epoch
	if topics != nil {
		r.SubscribedTopicNames = topics
	}
	return r
}

func assigned(r *kmsg.ShareGroupHeartbeatResponse) []int32 {
	if r.Assignment == nil {
		return nil
	}
	var out []int32
	for _, tp := range r.Assignment.TopicPartitions {
		out = append(out, tp.Partitions...)
	}
	return out
}

// Share members share partitions, keep their epochs across a coordinator
// move (the membership is stored), and are fenced after the group's
// share.session.timeout.ms without a heartbeat.
func TestShareGroupMembership(t *testing.T) {
	topics := newTestTopics()
	topics.set("t", 2)
	cfg := share.DefaultConfig()
	cfg.SessionTimeout = 10 * time.Second
	withCfg := func(o *Options) { o.ShareConfig = func(string) share.Config { return cfg } }
	h := newCGHarness(t, topics, withCfg)

	a := h.c.ShareHeartbeat(h.ctx, shareHB("sg", "a", 0, "t"), Client{ID: "ca"})
	wantCode(t, "a joins", a.ErrorCode, nil)
	require2(t, []int32{0, 1}, assigned(a))
	var bs []*kmsg.ShareGroupHeartbeatResponse
	for _, m := range []string{"b", "c"} {
		bs = append(bs, h.c.ShareHeartbeat(h.ctx, shareHB("sg", m, 0, "t"), Client{ID: "c" + m}))
	}
	for i, r := range bs {
		wantCode(t, "join", r.ErrorCode, nil)
		if len(assigned(r)) != 1 {
			t.Fatalf("member %d of 3 on 2 partitions: %v", i, assigned(r))
		}
	}
	// a learns its new assignment at its next heartbeat, at the new epoch.
	a2 := h.c.ShareHeartbeat(h.ctx, shareHB("sg", "a", a.MemberEpoch), Client{ID: "ca"})
	wantCode(t, "a heartbeats", a2.ErrorCode, nil)
	if a2.MemberEpoch <= a.MemberEpoch || len(assigned(a2)) != 1 {
		t.Fatalf("a after two joins: epoch %d -> %d, %v", a.MemberEpoch, a2.MemberEpoch, assigned(a2))
	}
	// A stale epoch is fenced.
	wantCode(t, "stale epoch", h.c.ShareHeartbeat(h.ctx, shareHB("sg", "a", a.MemberEpoch), Client{}).ErrorCode, kerr.FencedMemberEpoch)

	// Another coordinator takes the shards over: members keep their epochs.
	c2 := h.addCoordinator(func(o *Options) {
		o.Topics = func() TopicView { return topics }
		withCfg(o)
	})
	h.c.SetShards(map[int32]int64{})
	c2.SetShards(allShards())
	r := c2.ShareHeartbeat(h.ctx, shareHB("sg", "a", a2.MemberEpoch), Client{ID: "ca"})
	wantCode(t, "a at the new coordinator", r.ErrorCode, nil)
	d := c2.ShareDescribe(h.ctx, &kmsg.ShareGroupDescribeRequest{GroupIDs: []string{"sg"}})
	if len(d.Groups) != 1 || len(d.Groups[0].Members) != 3 || d.Groups[0].GroupState != "Stable" {
		t.Fatalf("described after the move: %+v", d.Groups)
	}

	// Only a keeps heartbeating: b and c are fenced after the timeout and
	// a gets both partitions again.
	var last []int32
	for range 12 {
		h.advance(time.Second)
		r = c2.ShareHeartbeat(h.ctx, shareHB("sg", "a", r.MemberEpoch), Client{ID: "ca"})
		wantCode(t, "a heartbeats", r.ErrorCode, nil)
		if r.Assignment != nil {
			last = assigned(r)
		}
	}
	require2(t, []int32{0, 1}, last)
	d = c2.ShareDescribe(h.ctx, &kmsg.ShareGroupDescribeRequest{GroupIDs: []string{"sg"}})
	if len(d.Groups[0].Members) != 1 {
		t.Fatalf("after b and c timed out: %+v", d.Groups[0].Members)
	}
	// The group is a share group: a consumer-protocol heartbeat is refused.
	cg := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	cg.Group, cg.MemberID, cg.RebalanceTimeoutMillis, cg.SubscribedTopicNames = "sg", "x", 1000, []string{"t"}
	cg.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	wantCode(t, "consumer heartbeat to a share group", c2.ConsumerHeartbeat(h.ctx, cg, Client{}).ErrorCode, kerr.GroupIDNotFound)
}

func require2(t *testing.T, want, got []int32) {
	t.Helper()
	if len(want) != len(got) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if want[i] != got[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

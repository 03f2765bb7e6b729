package group

// Heartbeat and LeaveGroup: members keep their session alive, learn of a
// rebalance, and leave.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Heartbeat handles Heartbeat.
func (c *Coordinator) Heartbeat(ctx context.Context, req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	g, code := c.enter(ctx, req.Group)
	if code != 0 {
		resp.ErrorCode = code
		return resp
	}
	defer g.mu.Unlock()
	if g.cg != nil {
		resp.ErrorCode = g.classicHeartbeatConsumer(req)
		return resp
	}
	m, code := g.checkMember(req.MemberID, req.InstanceID)
	switch {
	case code != 0:
		resp.ErrorCode = code
	case !g.generationOK(m, req.Generation):
		resp.ErrorCode = codeIllegalGeneration
	case g.state == stateEmpty:
		resp.ErrorCode = codeUnknownMember
	case g.state == statePreparingRebalance:
		g.touch(m)
		resp.ErrorCode = codeRebalanceInProgress
	default:
		g.touch(m)
	}
	return resp
}

// Leave handles LeaveGroup: one member (v0-2) or a batch (v3+), by member
// id or, for static members, by instance id.
func (c *Coordinator) Leave(ctx context.Context, req *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	leaving := req.Members
	if req.Version < 3 {
		leaving = []kmsg.LeaveGroupRequestMember{{MemberID: req.MemberID}}
	}
	g, code := c.enter(ctx, req.Group)
	if code != 0 {
		resp.ErrorCode = code
		return resp
	}
	defer g.mu.Unlock()
	g.touch(nil)
	if g.cg != nil {
		return g.classicLeaveConsumer(req, leaving)
	}
	removed := false
	for _, lm := range leaving {
		code := int16(0)
		instance := deref(lm.InstanceID)
		id := lm.MemberID
		if instance != "" {
			cur, ok := g.statics[instance]
			switch {
			case !ok:
				code = codeUnknownMember
			case id != "" && id != cur:
				code = codeFencedInstance
			default:
				id = cur
			}
		}
		if code == 0 {
			if _, ok := g.pending[id]; ok {
				delete(g.pending, id)
			} else if g.members[id] == nil {
				code = codeUnknownMember
			} else {
				reason := "left the group"
				if lm.Reason != nil {
					reason += ": " + *lm.Reason
				}
				g.removeMember(id, reason)
				removed = true
			}
		}
		if req.Version < 3 {
			resp.ErrorCode = code
			continue
		}
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID, rm.ErrorCode = lm.MemberID, lm.InstanceID, code
		resp.Members = append(resp.Members, rm)
	}
	if removed {
		g.memberLeft(c.clock.Now(), "members left")
	} else {
		g.maybeCompleteJoin(c.clock.Now()) // a pending member id went away
	}
	return resp
}

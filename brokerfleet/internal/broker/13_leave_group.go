package broker

// LeaveGroup, versions 0-5: one member (v0-2) or a batch by member or
// instance id (v3+).

import "github.com/twmb/franz-go/pkg/kmsg"

func init() { register(13, 0, 5, answer(handleLeaveGroup), authorizeLeaveGroup) }

func handleLeaveGroup(b *Broker, cc *clientConn, req *kmsg.LeaveGroupRequest) kmsg.Response {
	return b.coord.Leave(cc.ctx, req)
}

// authorizeLeaveGroup is the ACL rule of LeaveGroup.
func authorizeLeaveGroup(a access, r *kmsg.LeaveGroupRequest) (kmsg.Response, func(kmsg.Response)) {
	if !a.can(opRead, resGroup, r.Group) {
		resp := r.ResponseKind().(*kmsg.LeaveGroupResponse)
		resp.ErrorCode = errGroupAuthz
		return resp, nil
	}
	return nil, nil
}

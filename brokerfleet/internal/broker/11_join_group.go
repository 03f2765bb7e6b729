package broker

// JoinGroup, versions 0-9: v4+ get MEMBER_ID_REQUIRED on their first join
// (KIP-394), v5+ carry group.instance.id (KIP-345), v6+ are flexible, v9
// tells a rejoining static leader to keep the assignment (KIP-814). The
// response waits for the rebalance to complete.

import (
	"net"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(11, 0, 9, later(handleJoinGroup), authorizeJoinGroup) }

func handleJoinGroup(b *Broker, cc *clientConn, req *kmsg.JoinGroupRequest) func() kmsg.Response {
	host, _, err := net.SplitHostPort(cc.remote)
	if err != nil {
		host = cc.remote
	}
	wait := b.coord.Join(cc.ctx, req, cc.clientID, "/"+host)
	return func() kmsg.Response { return wait() }
}

// authorizeJoinGroup is the ACL rule of JoinGroup.
func authorizeJoinGroup(a access, r *kmsg.JoinGroupRequest) (kmsg.Response, func(kmsg.Response)) {
	if !a.can(opRead, resGroup, r.Group) {
		resp := r.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode, resp.Generation = errGroupAuthz, -1
		return resp, nil
	}
	return nil, nil
}

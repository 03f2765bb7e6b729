package broker

// Heartbeat, versions 0-4.

import "github.com/twmb/franz-go/pkg/kmsg"

func init() { register(12, 0, 4, answer(handleHeartbeat), authorizeHeartbeat) }

func handleHeartbeat(b *Broker, cc *clientConn, req *kmsg.HeartbeatRequest) kmsg.Response {
	return b.coord.Heartbeat(cc.ctx, req)
}

// authorizeHeartbeat is the ACL rule of Heartbeat.
func authorizeHeartbeat(a access, r *kmsg.HeartbeatRequest) (kmsg.Response, func(kmsg.Response)) {
	if !a.can(opRead, resGroup, r.Group) {
		resp := r.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = errGroupAuthz
		return resp, nil
	}
	return nil, nil
}

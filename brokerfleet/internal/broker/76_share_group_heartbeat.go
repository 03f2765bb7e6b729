package broker

// ShareGroupHeartbeat, version 1 (KIP-932 as Kafka 4.1+ serves it): share
// group members join (epoch 0, with their subscription), heartbeat and
// leave (-1); the coordinator answers each with its assignment when it
// changed (group.Coordinator.ShareHeartbeat).

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/group"
)

func init() {
	register(76, 1, 1, answer(handleShareGroupHeartbeat), authorizeShareGroupHeartbeat)
}

func handleShareGroupHeartbeat(b *Broker, cc *clientConn, req *kmsg.ShareGroupHeartbeatRequest) kmsg.Response {
	return b.coord.ShareHeartbeat(cc.ctx, req, group.Client{ID: cc.clientID, Host: "/" + clientHost(cc)})
}

// authorizeShareGroupHeartbeat is the ACL rule of ShareGroupHeartbeat:
// READ on the group, DESCRIBE on every subscribed topic.
func authorizeShareGroupHeartbeat(a access, r *kmsg.ShareGroupHeartbeatRequest) (kmsg.Response, func(kmsg.Response)) {
	deny := func(code int16) (kmsg.Response, func(kmsg.Response)) {
		resp := r.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
		resp.ErrorCode = code
		return resp, nil
	}
	if !a.can(opRead, resGroup, r.GroupID) {
		return deny(errGroupAuthz)
	}
	for _, t := range r.SubscribedTopicNames {
		if !a.can(opDescribe, resTopic, t) {
			return deny(errTopicAuthz)
		}
	}
	return nil, nil
}

package broker

// ConsumerGroupHeartbeat, versions 0-1 (KIP-848, the consumer group
// protocol): members join, heartbeat, learn their assignment and leave;
// v1 adds the regex subscription and member ids chosen by the client.
// The group coordinator does the work (group.Coordinator.ConsumerHeartbeat).

import (
	"net"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/group"
)

func init() {
	register(68, 0, 1, answer(handleConsumerGroupHeartbeat), authorizeConsumerGroupHeartbeat)
}

func handleConsumerGroupHeartbeat(b *Broker, cc *clientConn, req *kmsg.ConsumerGroupHeartbeatRequest) kmsg.Response {
	cl := group.Client{ID: cc.clientID, Host: "/" + clientHost(cc)}
	if b.authz != nil {
		// A regex subscription resolves to the topics the member's
		// principal may describe.
		a := access{b, cc}
		cl.MayDescribe = func(topic string) bool { return a.can(opDescribe, resTopic, topic) }
	}
	return b.coord.ConsumerHeartbeat(cc.ctx, req, cl)
}

// clientHost is the client's address without its port.
func clientHost(cc *clientConn) string {
	host, _, err := net.SplitHostPort(cc.remote)
	if err != nil {
		return cc.remote
	}
	return host
}

// authorizeConsumerGroupHeartbeat is the ACL rule of ConsumerGroupHeartbeat:
// READ on the group, and DESCRIBE on every topic subscribed by name
// (TOPIC_AUTHORIZATION_FAILED otherwise, as Kafka 4.1+ answers).
func authorizeConsumerGroupHeartbeat(a access, r *kmsg.ConsumerGroupHeartbeatRequest) (kmsg.Response, func(kmsg.Response)) {
	deny := func(code int16) (kmsg.Response, func(kmsg.Response)) {
		resp := r.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
		resp.ErrorCode = code
		return resp, nil
	}
	if !a.can(opRead, resGroup, r.Group) {
		return deny(errGroupAuthz)
	}
	for _, t := range r.SubscribedTopicNames {
		if !a.can(opDescribe, resTopic, t) {
			return deny(errTopicAuthz)
		}
	}
	return nil, nil
}

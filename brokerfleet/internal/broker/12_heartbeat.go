package broker

// Heartbeat, versions 0-4.

import "github.com/twmb/franz-go/pkg/kmsg"

func (b *Broker) handleHeartbeat(cc *clientConn, req *kmsg.HeartbeatRequest) kmsg.Response {
	return b.coord.Heartbeat(cc.ctx, req)
}

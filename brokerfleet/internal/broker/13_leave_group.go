package broker

// LeaveGroup, versions 0-5: one member (v0-2) or a batch by member or
// instance id (v3+).

import "github.com/twmb/franz-go/pkg/kmsg"

func (b *Broker) handleLeaveGroup(cc *clientConn, req *kmsg.LeaveGroupRequest) kmsg.Response {
	return b.coord.Leave(cc.ctx, req)
}

package broker

// OffsetDelete, version 0: removes committed offsets of topics the group
// is not subscribed to (GROUP_SUBSCRIBED_TO_TOPIC otherwise).

import "github.com/twmb/franz-go/pkg/kmsg"

func (b *Broker) handleOffsetDelete(cc *clientConn, req *kmsg.OffsetDeleteRequest) kmsg.Response {
	return b.coord.DeleteOffsets(cc.ctx, req)
}

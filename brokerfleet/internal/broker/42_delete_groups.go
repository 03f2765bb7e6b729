package broker

// DeleteGroups, versions 0-2: groups without members lose their committed
// offsets; others get NON_EMPTY_GROUP.

import "github.com/twmb/franz-go/pkg/kmsg"

func (b *Broker) handleDeleteGroups(cc *clientConn, req *kmsg.DeleteGroupsRequest) kmsg.Response {
	return b.coord.Delete(cc.ctx, req)
}

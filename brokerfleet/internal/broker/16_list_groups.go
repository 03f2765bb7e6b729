package broker

// ListGroups, versions 0-5: the groups this broker coordinates (clients
// ask every broker); v4 filters by state, v5 by type (all are "classic").

import "github.com/twmb/franz-go/pkg/kmsg"

func (b *Broker) handleListGroups(cc *clientConn, req *kmsg.ListGroupsRequest) kmsg.Response {
	return b.coord.List(cc.ctx, req)
}

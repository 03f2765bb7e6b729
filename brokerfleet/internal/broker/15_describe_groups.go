package broker

// DescribeGroups, versions 0-5.

import "github.com/twmb/franz-go/pkg/kmsg"

func (b *Broker) handleDescribeGroups(cc *clientConn, req *kmsg.DescribeGroupsRequest) kmsg.Response {
	return b.coord.Describe(cc.ctx, req)
}

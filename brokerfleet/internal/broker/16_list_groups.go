package broker

// ListGroups, versions 0-5: the groups this broker coordinates (clients
// ask every broker); v4 filters by state, v5 by type (all are "classic").

import "github.com/twmb/franz-go/pkg/kmsg"

func init() { register(16, 0, 5, answer(handleListGroups), authorizeListGroups) }

func handleListGroups(b *Broker, cc *clientConn, req *kmsg.ListGroupsRequest) kmsg.Response {
	return b.coord.List(cc.ctx, req)
}

// authorizeListGroups is the ACL rule of ListGroups.
func authorizeListGroups(a access, r *kmsg.ListGroupsRequest) (kmsg.Response, func(kmsg.Response)) {
	if a.cluster(opDescribe) {
		return nil, nil
	}
	return nil, func(resp kmsg.Response) {
		rr := resp.(*kmsg.ListGroupsResponse)
		filter(&rr.Groups, func(g *kmsg.ListGroupsResponseGroup) bool { return a.can(opDescribe, resGroup, g.Group) })
	}
}

package broker

// DeleteGroups, versions 0-2: groups without members lose their committed
// offsets; others get NON_EMPTY_GROUP.

import "github.com/twmb/franz-go/pkg/kmsg"

func init() { register(42, 0, 2, answer(handleDeleteGroups), authorizeDeleteGroups) }

func handleDeleteGroups(b *Broker, cc *clientConn, req *kmsg.DeleteGroupsRequest) kmsg.Response {
	return b.coord.Delete(cc.ctx, req)
}

// authorizeDeleteGroups is the ACL rule of DeleteGroups.
func authorizeDeleteGroups(a access, r *kmsg.DeleteGroupsRequest) (kmsg.Response, func(kmsg.Response)) {
	denied := filter(&r.Groups, func(g *string) bool { return a.can(opDelete, resGroup, *g) })
	if len(denied) == 0 {
		return nil, nil
	}
	return nil, func(resp kmsg.Response) {
		rr := resp.(*kmsg.DeleteGroupsResponse)
		for _, g := range denied {
			rr.Groups = append(rr.Groups, kmsg.DeleteGroupsResponseGroup{Group: g, ErrorCode: errGroupAuthz})
		}
	}
}

package broker

// DescribeGroups, versions 0-5.

import "github.com/twmb/franz-go/pkg/kmsg"

func init() { register(15, 0, 5, answer(handleDescribeGroups), authorizeDescribeGroups) }

func handleDescribeGroups(b *Broker, cc *clientConn, req *kmsg.DescribeGroupsRequest) kmsg.Response {
	return b.coord.Describe(cc.ctx, req)
}

// authorizeDescribeGroups is the ACL rule of DescribeGroups.
func authorizeDescribeGroups(a access, r *kmsg.DescribeGroupsRequest) (kmsg.Response, func(kmsg.Response)) {
	denied := filter(&r.Groups, func(g *string) bool { return a.can(opDescribe, resGroup, *g) })
	if len(denied) == 0 {
		return nil, nil
	}
	return nil, func(resp kmsg.Response) {
		rr := resp.(*kmsg.DescribeGroupsResponse)
		for _, g := range denied {
			rg := kmsg.NewDescribeGroupsResponseGroup()
			rg.Group, rg.ErrorCode = g, errGroupAuthz
			rr.Groups = append(rr.Groups, rg)
		}
	}
}

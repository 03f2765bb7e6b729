package broker

// ShareGroupDescribe, version 1 (KIP-932): share groups' epochs, members,
// subscriptions and assignments (group.Coordinator.ShareDescribe).

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() {
	register(77, 1, 1, answer(handleShareGroupDescribe), authorizeShareGroupDescribe)
}

func handleShareGroupDescribe(b *Broker, cc *clientConn, req *kmsg.ShareGroupDescribeRequest) kmsg.Response {
	return b.coord.ShareDescribe(cc.ctx, req)
}

// authorizeShareGroupDescribe is the ACL rule of ShareGroupDescribe:
// DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED for the others).
func authorizeShareGroupDescribe(a access, r *kmsg.ShareGroupDescribeRequest) (kmsg.Response, func(kmsg.Response)) {
	denied := filter(&r.GroupIDs, func(g *string) bool { return a.can(opDescribe, resGroup, *g) })
	if len(denied) == 0 {
		return nil, nil
	}
	return nil, func(resp kmsg.Response) {
		rr := resp.(*kmsg.ShareGroupDescribeResponse)
		for _, g := range denied {
			dg := kmsg.NewShareGroupDescribeResponseGroup()
			dg.GroupID, dg.ErrorCode, dg.AuthorizedOperations = g, errGroupAuthz, -2147483648
			rr.Groups = append(rr.Groups, dg)
		}
	}
}

package broker

// ConsumerGroupDescribe, versions 0-1 (KIP-848): consumer groups' epochs,
// members, assignments and targets; v1 adds each member's type (consumer
// or classic protocol).

import "github.com/twmb/franz-go/pkg/kmsg"

func init() { register(69, 0, 1, answer(handleConsumerGroupDescribe), authorizeConsumerGroupDescribe) }

func handleConsumerGroupDescribe(b *Broker, cc *clientConn, req *kmsg.ConsumerGroupDescribeRequest) kmsg.Response {
	return b.coord.ConsumerDescribe(cc.ctx, req)
}

// authorizeConsumerGroupDescribe is the ACL rule of ConsumerGroupDescribe:
// DESCRIBE on each group, and on every topic its members are assigned or
// targeted (otherwise the group is answered TOPIC_AUTHORIZATION_FAILED,
// without members, as Kafka does).
func authorizeConsumerGroupDescribe(a access, r *kmsg.ConsumerGroupDescribeRequest) (kmsg.Response, func(kmsg.Response)) {
	denied := filter(&r.Groups, func(g *string) bool { return a.can(opDescribe, resGroup, *g) })
	return nil, func(resp kmsg.Response) {
		rr := resp.(*kmsg.ConsumerGroupDescribeResponse)
		for i := range rr.Groups {
			g := &rr.Groups[i]
			if !topicsDescribable(a, g.Members) {
				msg := "The group has assigned topic partitions that the principal is not authorized to describe."
				*g = kmsg.ConsumerGroupDescribeResponseGroup{Group: g.Group, ErrorCode: errTopicAuthz, ErrorMessage: &msg, AuthorizedOperations: g.AuthorizedOperations}
			}
		}
		for _, name := range denied {
			g := kmsg.NewConsumerGroupDescribeResponseGroup()
			g.Group, g.ErrorCode = name, errGroupAuthz
			rr.Groups = append(rr.Groups, g)
		}
	}
}

func topicsDescribable(a access, ms []kmsg.ConsumerGroupDescribeResponseGroupMember) bool {
	for _, m := range ms {
		for _, as := range [][]kmsg.AssignmentTopicPartition{m.Assignment.TopicPartitions, m.TargetAssignment.TopicPartitions} {
			for _, t := range as {
				if !a.can(opDescribe, resTopic, t.Topic) {
					return false
				}
			}
		}
	}
	return true
}

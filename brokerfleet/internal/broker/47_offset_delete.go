package broker

// OffsetDelete, version 0: removes committed offsets of topics the group
// is not subscribed to (GROUP_SUBSCRIBED_TO_TOPIC otherwise).

import "github.com/twmb/franz-go/pkg/kmsg"

func init() { register(47, 0, 0, answer(handleOffsetDelete), authorizeOffsetDelete) }

func handleOffsetDelete(b *Broker, cc *clientConn, req *kmsg.OffsetDeleteRequest) kmsg.Response {
	return b.coord.DeleteOffsets(cc.ctx, req)
}

// authorizeOffsetDelete is the ACL rule of OffsetDelete.
func authorizeOffsetDelete(a access, r *kmsg.OffsetDeleteRequest) (kmsg.Response, func(kmsg.Response)) {
	if !a.can(opDelete, resGroup, r.Group) {
		resp := r.ResponseKind().(*kmsg.OffsetDeleteResponse)
		resp.ErrorCode = errGroupAuthz
		return resp, nil
	}
	denied := filter(&r.Topics, func(t *kmsg.OffsetDeleteRequestTopic) bool { return a.can(opRead, resTopic, t.Topic) })
	if len(denied) == 0 {
		return nil, nil
	}
	return nil, func(resp kmsg.Response) {
		rr := resp.(*kmsg.OffsetDeleteResponse)
		for _, t := range denied {
			rt := kmsg.NewOffsetDeleteResponseTopic()
			rt.Topic = t.Topic
			for _, tp := range t.Partitions {
				rt.Partitions = append(rt.Partitions, kmsg.OffsetDeleteResponseTopicPartition{Partition: tp.Partition, ErrorCode: errTopicAuthz})
			}
			rr.Topics = append(rr.Topics, rt)
		}
	}
}

package broker

// OffsetCommit, versions 2-9: fenced by generation and member (and
// instance id, v7+); v8+ are flexible; v9 is the first a consumer-protocol
// member (KIP-848) may use, its generation being its member epoch, and a
// commit of a generation to a group that does not exist is
// GROUP_ID_NOT_FOUND. The group coordinator does the work.

import "github.com/twmb/franz-go/pkg/kmsg"

func init() { register(8, 2, 9, answer(handleOffsetCommit), authorizeOffsetCommit) }

func handleOffsetCommit(b *Broker, cc *clientConn, req *kmsg.OffsetCommitRequest) kmsg.Response {
	return b.coord.Commit(cc.ctx, req)
}

// authorizeOffsetCommit is the ACL rule of OffsetCommit.
func authorizeOffsetCommit(a access, r *kmsg.OffsetCommitRequest) (kmsg.Response, func(kmsg.Response)) {
	if !a.can(opRead, resGroup, r.Group) {
		resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, t := range r.Topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, tp := range t.Partitions {
				rt.Partitions = append(rt.Partitions, kmsg.OffsetCommitResponseTopicPartition{Partition: tp.Partition, ErrorCode: errGroupAuthz})
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	}
	denied := filter(&r.Topics, func(t *kmsg.OffsetCommitRequestTopic) bool { return a.can(opRead, resTopic, t.Topic) })
	if len(denied) == 0 {
		return nil, nil
	}
	return nil, func(resp kmsg.Response) {
		rr := resp.(*kmsg.OffsetCommitResponse)
		for _, t := range denied {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, tp := range t.Partitions {
				rt.Partitions = append(rt.Partitions, kmsg.OffsetCommitResponseTopicPartition{Partition: tp.Partition, ErrorCode: errTopicAuthz})
			}
			rr.Topics = append(rr.Topics, rt)
		}
	}
}

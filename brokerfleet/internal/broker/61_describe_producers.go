package broker

// DescribeProducers, version 0: the producers a partition's leader knows
// (id, epoch, last sequence and timestamp, the coordinator epoch of their
// last marker, the first offset of their open transaction), for Kafka's
// hanging-transaction tools. A partition this broker does not lead is
// NOT_LEADER_OR_FOLLOWER.
//
// ACLs: READ on each topic (denied topics TOPIC_AUTHORIZATION_FAILED).

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(61, 0, 0, answer(handleDescribeProducers), authorizeDescribeProducers) }

func handleDescribeProducers(b *Broker, cc *clientConn, req *kmsg.DescribeProducersRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	s := b.cat.Snapshot()
	for _, rt := range req.Topics {
		st := kmsg.NewDescribeProducersResponseTopic()
		st.Topic = rt.Topic
		for _, idx := range rt.Partitions {
			sp := kmsg.NewDescribeProducersResponseTopicPartition()
			sp.Partition = idx
			p, code := leaderOf(s, rt.Topic, idx)
			if p == nil {
				sp.ErrorCode = code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			for _, pi := range p.Producers() {
				ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				ap.ProducerID, ap.ProducerEpoch, ap.LastSequence = pi.ProducerID, int32(pi.Epoch), pi.LastSequence
				ap.LastTimestamp, ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = pi.LastTimestamp, pi.CoordinatorEpoch, pi.TxnStartOffset
				sp.ActiveProducers = append(sp.ActiveProducers, ap)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// authorizeDescribeProducers is the ACL rule of DescribeProducers.
func authorizeDescribeProducers(a access, r *kmsg.DescribeProducersRequest) (kmsg.Response, func(kmsg.Response)) {
	denied := filter(&r.Topics, func(t *kmsg.DescribeProducersRequestTopic) bool { return a.can(opRead, resTopic, t.Topic) })
	if len(denied) == 0 {
		return nil, nil
	}
	return nil, func(resp kmsg.Response) {
		rr := resp.(*kmsg.DescribeProducersResponse)
		for _, t := range denied {
			rt := kmsg.NewDescribeProducersResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewDescribeProducersResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, errTopicAuthz
				rt.Partitions = append(rt.Partitions, rp)
			}
			rr.Topics = append(rr.Topics, rt)
		}
	}
}

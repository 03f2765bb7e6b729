package broker

// DeleteRecords, versions 0-2. v2 is flexible. An offset of -1 means the
// high watermark. With the S3 tier the manifest's start moves too.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/partition"
)

func init() { register(21, 0, 2, answer(handleDeleteRecords), authorizeDeleteRecords) }

func handleDeleteRecords(b *Broker, cc *clientConn, req *kmsg.DeleteRecordsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition = rp.Partition
			if p, code := leaderOf(b.cat.Snapshot(), rt.Topic, rp.Partition); p == nil {
				sp.ErrorCode = code
			} else if low, err := deleteRecords(b, rt.Topic, rp.Partition, p, rp.Offset); err != nil {
				sp.ErrorCode = errorCode(err)
			} else {
				sp.LowWatermark = low
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// deleteRecords applies DeleteRecords to a led partition: the local log,
// and with the tier its manifest's start offset, so the tier's records
// below offset are gone for readers at once. It returns the new log start.
func deleteRecords(b *Broker, name string, idx int32, p *partition.Partition, offset int64) (int64, error) {
	if offset == -1 {
		offset = p.HighWatermark()
	}
	t := b.cat.Snapshot().Topic(name)
	if b.tier == nil || t == nil {
		return p.DeleteRecords(offset)
	}
	ctx, cancel := context.WithTimeout(b.ctx, metaTimeout)
	defer cancel()
	return b.tier.DeleteRecords(ctx, t.Meta.ID, idx, p, offset)
}

// authorizeDeleteRecords is the ACL rule of DeleteRecords.
func authorizeDeleteRecords(a access, r *kmsg.DeleteRecordsRequest) (kmsg.Response, func(kmsg.Response)) {
	denied := filter(&r.Topics, func(t *kmsg.DeleteRecordsRequestTopic) bool { return a.can(opDelete, resTopic, t.Topic) })
	if len(denied) == 0 {
		return nil, nil
	}
	return nil, func(resp kmsg.Response) {
		rr := resp.(*kmsg.DeleteRecordsResponse)
		for _, t := range denied {
			rt := kmsg.NewDeleteRecordsResponseTopic()
			rt.Topic = t.Topic
			for _, tp := range t.Partitions {
				rt.Partitions = append(rt.Partitions, kmsg.DeleteRecordsResponseTopicPartition{Partition: tp.Partition, LowWatermark: -1, ErrorCode: errTopicAuthz})
			}
			rr.Topics = append(rr.Topics, rt)
		}
	}
}

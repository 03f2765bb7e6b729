package broker

// DeleteRecords, versions 0-2. v2 is flexible. An offset of -1 means the
// high watermark. With the S3 tier the manifest's start moves too.

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (b *Broker) handleDeleteRecords(req *kmsg.DeleteRecordsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition = rp.Partition
			if p, code := b.leaderPartition(rt.Topic, rp.Partition); p == nil {
				sp.ErrorCode = code
			} else if low, err := b.deleteRecords(rt.Topic, rp.Partition, p, rp.Offset); err != nil {
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

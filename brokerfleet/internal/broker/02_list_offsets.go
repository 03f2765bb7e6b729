package broker

// ListOffsets, versions 0-8. v0 (which Kafka 4 no longer serves) is
// served for older clients that still send it, such as Burrow 1.2's
// (Debian's) broker offset requests: it asks for up to max_num_offsets
// offsets and is answered with one, the offset v1 would give (latest,
// earliest, or the first at the timestamp), or none when there is none;
// Kafka 3 answered latest with the segment start offsets after it too,
// which nobody reads. v1 answers one offset and its timestamp; v2 adds the
// isolation level (read_committed: the latest offset is the last stable
// offset, and lookups by time find nothing at or past it); v4 the current
// leader epoch and the leader epoch of the answer; v6 is flexible; v7 adds
// timestamp -3 (the record with the largest timestamp); v8 adds -4 (the
// earliest local offset: with the S3 tier, where local disk starts).

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/partition"
)

func init() { register(2, 0, 8, answer(handleListOffsets), authorizeListOffsets) }

// Special timestamps of ListOffsets.
const (
	listLatest       = -1
	listEarliest     = -2
	listMaxTimestamp = -3
	listEarliestLoc  = -4
)

func handleListOffsets(b *Broker, cc *clientConn, req *kmsg.ListOffsetsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			listOffset(b, rt.Topic, rp, req.IsolationLevel == 1, &sp)
			if req.Version == 0 && sp.ErrorCode == 0 && sp.Offset >= 0 && rp.MaxNumOffsets > 0 {
				sp.OldStyleOffsets = []int64{sp.Offset}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// With committed (read_committed), the latest offset is the last stable
// offset, and a record at or past it is not an answer.
func listOffset(b *Broker, topicName string, rp kmsg.ListOffsetsRequestTopicPartition, committed bool, sp *kmsg.ListOffsetsResponseTopicPartition) {
	p, code := leaderOf(b.cat.Snapshot(), topicName, rp.Partition)
	switch {
	case p == nil:
		sp.ErrorCode = code
		return
	case rp.CurrentLeaderEpoch > p.LeaderEpoch():
		sp.ErrorCode = kerr.UnknownLeaderEpoch.Code
		return
	case rp.CurrentLeaderEpoch >= 0 && rp.CurrentLeaderEpoch < p.LeaderEpoch():
		sp.ErrorCode = kerr.FencedLeaderEpoch.Code
		return
	}
	epoch := p.LeaderEpoch()
	limit := p.HighWatermark()
	if committed {
		limit = min(limit, p.LastStableOffset())
	}
	defer func() {
		byTime := rp.Timestamp >= 0 || rp.Timestamp == listMaxTimestamp
		if committed && byTime && sp.ErrorCode == 0 && sp.Offset >= limit {
			sp.Offset, sp.Timestamp = -1, -1 // not visible at this isolation level
		}
	}()
	switch ts := rp.Timestamp; {
	case ts == listLatest:
		sp.Offset, sp.LeaderEpoch = limit, epoch
	case ts == listEarliest:
		sp.Offset, sp.LeaderEpoch = p.LogStartOffset(), epoch
	case ts == listEarliestLoc:
		sp.Offset, sp.LeaderEpoch = p.LocalLogStartOffset(), epoch // KIP-405: the first offset on local disk
	case ts == listMaxTimestamp:
		off, rts, ok, err := p.MaxTimestamp()
		if err != nil {
			sp.ErrorCode = errorCode(err)
		} else if ok {
			sp.Offset, sp.Timestamp, sp.LeaderEpoch = off, rts, epoch
		}
	case ts >= 0:
		if off, rts, ok, err := tierOffsetForTimestamp(b, topicName, rp.Partition, p, ts); err != nil || ok {
			if err != nil {
				sp.ErrorCode = errorCode(err)
			} else {
				sp.Offset, sp.Timestamp, sp.LeaderEpoch = off, rts, epoch
			}
			return
		}
		off, rts, ok, err := p.OffsetForTimestamp(ts)
		if err != nil {
			sp.ErrorCode = errorCode(err)
		} else if ok {
			sp.Offset, sp.Timestamp, sp.LeaderEpoch = off, rts, epoch
		}
	default:
		sp.ErrorCode = kerr.InvalidRequest.Code
	}
}

// tierOffsetForTimestamp answers ListOffsets by time from the tier when the
// first record at or after ts lies below the local log.
func tierOffsetForTimestamp(b *Broker, name string, idx int32, p *partition.Partition, ts int64) (int64, int64, bool, error) {
	t := b.cat.Snapshot().Topic(name)
	if b.tier == nil || t == nil {
		return 0, 0, false, nil
	}
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	return b.tier.OffsetForTimestamp(ctx, t.Meta.ID, idx, p, ts)
}

// authorizeListOffsets is the ACL rule of ListOffsets.
func authorizeListOffsets(a access, r *kmsg.ListOffsetsRequest) (kmsg.Response, func(kmsg.Response)) {
	denied := filter(&r.Topics, func(t *kmsg.ListOffsetsRequestTopic) bool { return a.can(opDescribe, resTopic, t.Topic) })
	if len(denied) == 0 {
		return nil, nil
	}
	return nil, func(resp kmsg.Response) {
		rr := resp.(*kmsg.ListOffsetsResponse)
		for _, t := range denied {
			rt := kmsg.NewListOffsetsResponseTopic()
			rt.Topic = t.Topic
			for _, tp := range t.Partitions {
				rp := kmsg.NewListOffsetsResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.Offset, rp.Timestamp = tp.Partition, errTopicAuthz, -1, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			rr.Topics = append(rr.Topics, rt)
		}
	}
}

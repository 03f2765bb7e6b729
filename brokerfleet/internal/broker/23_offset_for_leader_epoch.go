package broker

// OffsetForLeaderEpoch, versions 0-4 (KIP-101, KIP-279, KIP-320). For a
// requested leader epoch the leader answers the largest epoch it has at
// most that one, and the offset where that epoch ends in its log; a
// follower truncates its log there before fetching, and a consumer uses it
// to detect truncation after a leader change. v1 adds the epoch to the
// answer; v2 the current leader epoch (fencing); v3 the replica id; v4 is
// flexible.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (b *Broker) handleOffsetForLeaderEpoch(req *kmsg.OffsetForLeaderEpochRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition = rp.Partition
			p, code := leaderOf(b.cat.Snapshot(), rt.Topic, rp.Partition)
			switch {
			case p == nil:
				sp.ErrorCode = code
			case rp.CurrentLeaderEpoch > p.LeaderEpoch():
				sp.ErrorCode = kerr.UnknownLeaderEpoch.Code
			case rp.CurrentLeaderEpoch >= 0 && rp.CurrentLeaderEpoch < p.LeaderEpoch():
				sp.ErrorCode = kerr.FencedLeaderEpoch.Code
			default:
				sp.LeaderEpoch, sp.EndOffset = p.EndOffsetForEpoch(rp.LeaderEpoch)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

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

func init() { register(23, 0, 4, answer(handleOffsetForLeaderEpoch), authorizeOffsetForLeaderEpoch) }

func handleOffsetForLeaderEpoch(b *Broker, cc *clientConn, req *kmsg.OffsetForLeaderEpochRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	// A follower of a leader just elected asks under the new epoch before
	// the leader may have applied it: catch up instead of answering
	// UNKNOWN_LEADER_EPOCH or NOT_LEADER.
	s := b.cat.Snapshot()
	ahead := false
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			ahead = ahead || aheadOfView(s, rt.Topic, rp.Partition, rp.CurrentLeaderEpoch, true)
		}
	}
	catchUpIf(b, cc.ctx, ahead)
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

// authorizeOffsetForLeaderEpoch is the ACL rule of OffsetForLeaderEpoch.
func authorizeOffsetForLeaderEpoch(a access, r *kmsg.OffsetForLeaderEpochRequest) (kmsg.Response, func(kmsg.Response)) {
	var denied []kmsg.OffsetForLeaderEpochRequestTopic
	if r.ReplicaID >= 0 {
		if !a.cluster(opClusterAction) {
			denied, r.Topics = r.Topics, nil
		}
	} else {
		denied = filter(&r.Topics, func(t *kmsg.OffsetForLeaderEpochRequestTopic) bool { return a.can(opDescribe, resTopic, t.Topic) })
	}
	if len(denied) == 0 {
		return nil, nil
	}
	return nil, func(resp kmsg.Response) {
		rr := resp.(*kmsg.OffsetForLeaderEpochResponse)
		for _, t := range denied {
			rt := kmsg.NewOffsetForLeaderEpochResponseTopic()
			rt.Topic = t.Topic
			for _, tp := range t.Partitions {
				rp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.LeaderEpoch, rp.EndOffset = tp.Partition, errTopicAuthz, -1, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			rr.Topics = append(rr.Topics, rt)
		}
	}
}

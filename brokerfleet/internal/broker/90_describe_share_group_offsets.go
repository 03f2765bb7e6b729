package broker

// DescribeShareGroupOffsets, versions 0-1 (KIP-932; v1 adds the lag): a
// share group's start offset per partition, from the share partition
// states in the metastore, asked of the group's coordinator. A partition
// without state answers start offset -1. The lag is computed only where
// this broker leads the partition (-1 elsewhere).

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/pkg/metastore"
)

func init() {
	register(90, 0, 1, answer(handleDescribeShareGroupOffsets), authorizeDescribeShareGroupOffsets)
}

func handleDescribeShareGroupOffsets(b *Broker, cc *clientConn, req *kmsg.DescribeShareGroupOffsetsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeShareGroupOffsetsResponse)
	for _, rg := range req.Groups {
		resp.Groups = append(resp.Groups, shareAPI{b}.describeShareOffsets(cc.ctx, rg))
	}
	return resp
}

func (b shareAPI) describeShareOffsets(ctx context.Context, rg kmsg.DescribeShareGroupOffsetsRequestGroup) kmsg.DescribeShareGroupOffsetsResponseGroup {
	g := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
	g.GroupID = rg.GroupID
	subscribed, code := b.coord.ShareSubscribed(ctx, rg.GroupID)
	if code != 0 {
		g.ErrorCode = code
		return g
	}
	mctx, cancel := context.WithTimeout(ctx, metaTimeout)
	defer cancel()
	states, err := b.meta.ShareStates(mctx, rg.GroupID)
	if err != nil {
		g.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return g
	}
	s := b.cat.Snapshot()
	want := rg.Topics
	if want == nil {
		// Every topic with state or subscribed.
		names := slices.Clone(subscribed)
		for k, st := range states {
			if t := s.TopicByID(k.Topic); t != nil && st.Initialized {
				names = append(names, t.Meta.Name)
			}
		}
		slices.Sort(names)
		for _, n := range slices.Compact(names) {
			t := s.Topic(n)
			if t == nil {
				continue
			}
			rt := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
			rt.Topic = n
			for i := range t.States {
				rt.Partitions = append(rt.Partitions, int32(i))
			}
			want = append(want, rt)
		}
	}
	for _, rt := range want {
		gt := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopic()
		gt.Topic = rt.Topic
		t := s.Topic(rt.Topic)
		if t != nil {
			gt.TopicID = t.Meta.ID
		}
		for _, p := range rt.Partitions {
			gp := kmsg.NewDescribeShareGroupOffsetsResponseGroupTopicPartition()
			gp.Partition, gp.StartOffset, gp.LeaderEpoch, gp.Lag = p, -1, -1, -1
			switch {
			case t == nil || p < 0 || int(p) >= len(t.States):
				gp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			default:
				if st, ok := states[metastore.ShareKey{Group: rg.GroupID, Topic: t.Meta.ID, Partition: p}]; ok && st.Initialized {
					gp.StartOffset, gp.LeaderEpoch = st.StartOffset, st.LeaderEpoch
					if lp, code := leaderOf(s, t.Meta.Name, p); code == 0 {
						gp.Lag = max(lp.HighWatermark()-st.StartOffset-doneIn(st), 0)
					}
				}
			}
			gt.Partitions = append(gt.Partitions, gp)
		}
		g.Topics = append(g.Topics, gt)
	}
	return g
}

// doneIn counts the acknowledged and archived offsets past the start.
func doneIn(st metastore.ShareState) int64 {
	var n int64
	for _, r := range st.Runs {
		if r.State == metastore.ShareAcknowledged || r.State == metastore.ShareArchived {
			n += r.Last - r.First + 1
		}
	}
	return n
}

// authorizeDescribeShareGroupOffsets is the ACL rule of
// DescribeShareGroupOffsets: DESCRIBE on the group (its entry answers
// GROUP_AUTHORIZATION_FAILED otherwise) and on each topic named.
func authorizeDescribeShareGroupOffsets(a access, r *kmsg.DescribeShareGroupOffsetsRequest) (kmsg.Response, func(kmsg.Response)) {
	denied := filter(&r.Groups, func(g *kmsg.DescribeShareGroupOffsetsRequestGroup) bool {
		if !a.can(opDescribe, resGroup, g.GroupID) {
			return false
		}
		for _, t := range g.Topics {
			if !a.can(opDescribe, resTopic, t.Topic) {
				return false
			}
		}
		return true
	})
	if len(denied) == 0 {
		return nil, nil
	}
	return nil, func(resp kmsg.Response) {
		rr := resp.(*kmsg.DescribeShareGroupOffsetsResponse)
		for _, g := range denied {
			dg := kmsg.NewDescribeShareGroupOffsetsResponseGroup()
			dg.GroupID = g.GroupID
			dg.ErrorCode = errGroupAuthz
			if a.can(opDescribe, resGroup, g.GroupID) {
				dg.ErrorCode = errTopicAuthz
			}
			rr.Groups = append(rr.Groups, dg)
		}
	}
}

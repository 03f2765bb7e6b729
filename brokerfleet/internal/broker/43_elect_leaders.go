package broker

// ElectLeaders, versions 0-2 (KIP-183, KIP-460): election type 0 moves
// leadership to the preferred replica (the first in the replica list) when
// it is live and in sync; type 1 (v1+) elects any live replica of a
// partition that has no live leader. A null topic list means every
// partition. v2 is flexible.

import (
	"context"
	"errors"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/pkg/metastore"
)

func (b *Broker) handleElectLeaders(cc *clientConn, req *kmsg.ElectLeadersRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	unclean := req.Version >= 1 && req.ElectionType == 1
	if req.Version >= 1 && req.ElectionType != 0 && req.ElectionType != 1 {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp
	}
	want := map[string][]int32{}
	b.mu.RLock()
	if req.Topics == nil {
		for name, ts := range b.topics {
			for i := range ts.states {
				want[name] = append(want[name], int32(i))
			}
		}
	} else {
		for _, rt := range req.Topics {
			want[rt.Topic] = append(want[rt.Topic], rt.Partitions...)
		}
	}
	b.mu.RUnlock()
	ctx, cancel := context.WithTimeout(cc.ctx, metaTimeout)
	defer cancel()
	changed := false
	names := make([]string, 0, len(want))
	for name := range want {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		st := kmsg.NewElectLeadersResponseTopic()
		st.Topic = name
		for _, idx := range want[name] {
			sp := kmsg.NewElectLeadersResponseTopicPartition()
			sp.Partition = idx
			code, msg, moved := b.electOne(ctx, name, idx, unclean)
			sp.ErrorCode = code
			if msg != "" {
				sp.ErrorMessage = &msg
			}
			changed = changed || moved
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if changed {
		if err := b.reconcile(ctx); err != nil {
			b.log.Warn("apply elected leaders", "err", err)
		}
	}
	return resp
}

// electOne runs one partition's election; it reports the error code, a
// message, and whether the partition state changed.
func (b *Broker) electOne(ctx context.Context, name string, idx int32, unclean bool) (int16, string, bool) {
	for attempt := 0; attempt < updateRetries; attempt++ {
		ts := b.lookup(name)
		if ts == nil || idx < 0 || int(idx) >= len(ts.states) {
			return kerr.UnknownTopicOrPartition.Code, "", false
		}
		st := ts.states[idx]
		if attempt > 0 {
			states, err := b.meta.Partitions(ctx, ts.meta.ID)
			if err != nil || int(idx) >= len(states) {
				return kerr.RequestTimedOut.Code, "read partition state", false
			}
			st = states[idx]
		}
		b.mu.RLock()
		live := func(id int32) bool { _, ok := b.peers[id]; return ok }
		leaderLive := st.Leader >= 0 && live(st.Leader)
		next := st
		var code int16
		var msg string
		switch {
		case !unclean && len(st.Replicas) == 0:
			code = kerr.PreferredLeaderNotAvailable.Code
		case !unclean && st.Leader == st.Replicas[0]:
			code, msg = kerr.ElectionNotNeeded.Code, "the preferred replica leads already"
		case !unclean && (!live(st.Replicas[0]) || !slices.Contains(st.ISR, st.Replicas[0])):
			code, msg = kerr.PreferredLeaderNotAvailable.Code, "the preferred replica is not live and in sync"
		case !unclean:
			next.Leader = st.Replicas[0]
		case leaderLive:
			code, msg = kerr.ElectionNotNeeded.Code, "the partition has a live leader"
		default:
			next.Leader = -1
			for _, r := range st.Replicas {
				if live(r) {
					next.Leader = r
					break
				}
			}
			if next.Leader < 0 {
				code, msg = kerr.EligibleLeadersNotAvailable.Code, "no replica is live"
			} else if !slices.Contains(st.ISR, next.Leader) {
				next.ISR = []int32{next.Leader} // unclean: what the old ISR had beyond its log is lost
			}
		}
		b.mu.RUnlock()
		if code != 0 {
			return code, msg, false
		}
		next.LeaderEpoch = st.LeaderEpoch + 1
		_, err := b.meta.UpdatePartition(ctx, next)
		if errors.Is(err, metastore.ErrConditionFailed) {
			continue // changed meanwhile: decide again on the new state
		}
		if err != nil {
			return errorCode(err), err.Error(), false
		}
		b.log.Info("leader elected by request", "topic", name, "partition", idx, "leader", next.Leader, "leaderEpoch", next.LeaderEpoch, "unclean", unclean)
		return 0, "", true
	}
	return kerr.RequestTimedOut.Code, "the partition kept changing", false
}

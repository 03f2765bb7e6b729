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

func init() { register(43, 0, 2, answer(handleElectLeaders), authorizeElectLeaders) }

func handleElectLeaders(b *Broker, cc *clientConn, req *kmsg.ElectLeadersRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	unclean := req.Version >= 1 && req.ElectionType == 1
	if req.Version >= 1 && req.ElectionType != 0 && req.ElectionType != 1 {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp
	}
	want := map[string][]int32{}
	if req.Topics == nil {
		for _, ts := range b.cat.Snapshot().Topics() {
			for i := range ts.States {
				want[ts.Meta.Name] = append(want[ts.Meta.Name], int32(i))
			}
		}
	} else {
		for _, rt := range req.Topics {
			want[rt.Topic] = append(want[rt.Topic], rt.Partitions...)
		}
	}
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
			code, msg, moved := electOne(b, ctx, name, idx, unclean)
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
		if err := b.cat.Reconcile(ctx); err != nil {
			b.log.Warn("apply elected leaders", "err", err)
		}
	}
	return resp
}

// electOne runs one partition's election; it reports the error code, a
// message, and whether the partition state changed.
func electOne(b *Broker, ctx context.Context, name string, idx int32, unclean bool) (int16, string, bool) {
	for attempt := 0; attempt < updateRetries; attempt++ {
		ts := b.cat.Snapshot().Topic(name)
		if ts == nil || idx < 0 || int(idx) >= len(ts.States) {
			return kerr.UnknownTopicOrPartition.Code, "", false
		}
		st := ts.States[idx]
		if attempt > 0 {
			states, err := b.meta.Partitions(ctx, ts.Meta.ID)
			if err != nil || int(idx) >= len(states) {
				return kerr.RequestTimedOut.Code, "read partition state", false
			}
			st = states[idx]
		}
		live := b.cat.Snapshot().Live
		var next metastore.PartitionState
		var err error
		if unclean {
			next, err = st.UncleanElection(live)
		} else {
			next, err = st.PreferredElection(live)
		}
		if err != nil {
			return errorCode(err), err.Error(), false
		}
		_, err = b.meta.UpdatePartition(ctx, next)
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

// authorizeElectLeaders is the ACL rule of ElectLeaders.
func authorizeElectLeaders(a access, r *kmsg.ElectLeadersRequest) (kmsg.Response, func(kmsg.Response)) {
	if !a.cluster(opAlter) {
		resp := r.ResponseKind().(*kmsg.ElectLeadersResponse)
		resp.ErrorCode = errClusterAuthz
		for _, t := range r.Topics {
			rt := kmsg.NewElectLeadersResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewElectLeadersResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p, errClusterAuthz
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil
	}
	return nil, nil
}

package broker

// AlterPartitionReassignments, versions 0-1 (KIP-455; v1 adds
// AllowReplicationFactorChange, KIP-860). Both are flexible. A list of
// replicas starts (or replaces) a partition's reassignment; a null list
// cancels it. See reassign.go for how a reassignment runs.

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/pkg/metastore"
)

func init() {
	register(45, 0, 1, answer(handleAlterPartitionReassignments), authorizeAlterPartitionAssignments)
}

func handleAlterPartitionReassignments(b *Broker, cc *clientConn, req *kmsg.AlterPartitionAssignmentsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	allowRF := req.Version < 1 || req.AllowReplicationFactorChange
	resp.AllowReplicationFactorChange = allowRF
	ctx, cancel := context.WithTimeout(cc.ctx, metaTimeout)
	defer cancel()
	changed := false
	for _, rt := range req.Topics {
		st := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			sp.Partition = rp.Partition
			moved, err := reassignOne(b, ctx, rt.Topic, rp.Partition, rp.Replicas, allowRF)
			if err != nil {
				sp.ErrorCode, sp.ErrorMessage = errCodeOf(err), errorMessage(err)
			}
			changed = changed || moved
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if changed {
		if err := b.cat.Reconcile(ctx); err != nil {
			b.log.Warn("apply reassignments", "err", err)
		}
	}
	return resp
}

// reassignOne starts, replaces or (target nil) cancels one partition's
// reassignment with a compare-and-set, re-reading on conflicts.
func reassignOne(b *Broker, ctx context.Context, name string, idx int32, target []int32, allowRF bool) (bool, error) {
	for attempt := 0; attempt < updateRetries; attempt++ {
		ts := b.cat.Snapshot().Topic(name)
		if ts == nil || idx < 0 || int(idx) >= len(ts.States) {
			return false, coded(kerr.UnknownTopicOrPartition, "unknown topic or partition %s-%d", name, idx)
		}
		states, err := b.meta.Partitions(ctx, ts.Meta.ID)
		if err != nil {
			return false, err
		}
		if int(idx) >= len(states) {
			return false, coded(kerr.UnknownTopicOrPartition, "unknown partition %s-%d", name, idx)
		}
		st := states[idx]
		var next metastore.PartitionState
		if target == nil {
			next, err = st.CancelReassignment()
		} else {
			if !allowRF && len(target) != len(st.OriginalReplicas()) {
				return false, coded(kerr.InvalidReplicationFactor, "the target changes the replication factor from %d to %d", len(st.OriginalReplicas()), len(target))
			}
			registered, rerr := b.meta.Brokers(ctx)
			if rerr != nil {
				return false, rerr
			}
			known := func(id int32) bool {
				for _, br := range registered {
					if br.ID == id {
						return true
					}
				}
				return false
			}
			next, err = st.StartReassignment(target, known)
		}
		if err != nil {
			return false, err
		}
		_, err = b.meta.UpdatePartition(ctx, next)
		if errors.Is(err, metastore.ErrConditionFailed) {
			continue
		}
		if err != nil {
			return false, err
		}
		b.log.Info("partition reassignment", "topic", name, "partition", idx, "replicas", next.Replicas,
			"adding", next.AddingReplicas, "removing", next.RemovingReplicas, "leader", next.Leader, "cancel", target == nil)
		return true, nil
	}
	return false, coded(kerr.RequestTimedOut, "the partition kept changing")
}

// authorizeAlterPartitionAssignments is the ACL rule of AlterPartitionAssignments.
func authorizeAlterPartitionAssignments(a access, r *kmsg.AlterPartitionAssignmentsRequest) (kmsg.Response, func(kmsg.Response)) {
	if !a.cluster(opAlter) {
		resp := r.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
		resp.ErrorCode = errClusterAuthz
		return resp, nil
	}
	return nil, nil
}

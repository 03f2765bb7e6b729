package broker

// Partition reassignment (KIP-455). A reassignment is recorded in the
// partition's state: Replicas becomes the target followed by the original
// replicas not in it, with AddingReplicas and RemovingReplicas beside. The
// newcomers host the partition like any follower (hosts() looks at
// Replicas), catch up from the leader and join the ISR; the leader then
// completes the reassignment in the same compare-and-set as the ISR change
// that made the whole target in sync. Nothing else is needed to move data:
// a reassignment survives any broker's restart because it lives only in
// the metastore.

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/stratamq/strata/pkg/metastore"
)

// originalReplicas returns the replicas a partition had before its current
// reassignment (all of them when none is in progress).
func originalReplicas(st metastore.PartitionState) []int32 {
	return slices.DeleteFunc(slices.Clone(st.Replicas), func(id int32) bool { return slices.Contains(st.AddingReplicas, id) })
}

// startReassignment returns st moving to target. A reassignment already in
// progress is replaced: the new one starts from the original replicas.
// known tells which broker ids exist. It completes at once when the whole
// target is already in sync.
func startReassignment(st metastore.PartitionState, target []int32, known func(int32) bool) (metastore.PartitionState, error) {
	if len(target) == 0 {
		return st, coded(kerr.InvalidReplicaAssignment, "the target replica list is empty")
	}
	for i, id := range target {
		if slices.Contains(target[:i], id) {
			return st, coded(kerr.InvalidReplicaAssignment, "broker %d is listed twice", id)
		}
		if !known(id) {
			return st, coded(kerr.InvalidReplicaAssignment, "broker %d is not registered", id)
		}
	}
	orig := originalReplicas(st)
	next := st
	next.Replicas = slices.Clone(target)
	next.AddingReplicas, next.RemovingReplicas = nil, nil
	for _, id := range target {
		if !slices.Contains(orig, id) {
			next.AddingReplicas = append(next.AddingReplicas, id)
		}
	}
	for _, id := range orig {
		if !slices.Contains(target, id) {
			next.Replicas = append(next.Replicas, id)
			next.RemovingReplicas = append(next.RemovingReplicas, id)
		}
	}
	// Replicas dropped by a replaced reassignment leave the ISR with it.
	next.ISR = slices.DeleteFunc(slices.Clone(st.ISR), func(id int32) bool { return !slices.Contains(next.Replicas, id) })
	if len(next.ISR) == 0 {
		return st, coded(kerr.InvalidReplicaAssignment, "no in-sync replica would remain")
	}
	if !slices.Contains(next.ISR, next.Leader) {
		next.Leader = firstOf(next.Replicas, next.ISR)
		next.LeaderEpoch++
	}
	if done, ok := completeReassignment(next); ok {
		return done, nil
	}
	return next, nil
}

// cancelReassignment returns st back on its original replicas.
func cancelReassignment(st metastore.PartitionState) (metastore.PartitionState, error) {
	if !st.Reassigning() {
		return st, coded(kerr.NoReassignmentInProgress, "no reassignment of this partition is in progress")
	}
	next := st
	next.Replicas = originalReplicas(st)
	next.ISR = slices.DeleteFunc(slices.Clone(st.ISR), func(id int32) bool { return slices.Contains(st.AddingReplicas, id) })
	next.AddingReplicas, next.RemovingReplicas = nil, nil
	if len(next.ISR) == 0 {
		return st, coded(kerr.InvalidReplicaAssignment, "none of the original replicas is in sync; cancelling would leave the partition without one")
	}
	if !slices.Contains(next.ISR, next.Leader) {
		next.Leader = firstOf(next.Replicas, next.ISR)
		next.LeaderEpoch++
	}
	return next, nil
}

// completeReassignment finishes a reassignment whose whole target is in
// sync: the removed replicas go, and if the leader was one of them the
// first target replica leads under a new epoch.
func completeReassignment(st metastore.PartitionState) (metastore.PartitionState, bool) {
	if !st.Reassigning() {
		return st, false
	}
	target := slices.DeleteFunc(slices.Clone(st.Replicas), func(id int32) bool { return slices.Contains(st.RemovingReplicas, id) })
	for _, id := range target {
		if !slices.Contains(st.ISR, id) {
			return st, false
		}
	}
	next := st
	next.Replicas = target
	next.ISR = slices.Clone(target) // all in sync, in replica order
	next.AddingReplicas, next.RemovingReplicas = nil, nil
	if !slices.Contains(target, st.Leader) {
		next.Leader = target[0]
		next.LeaderEpoch++
	}
	return next, true
}

// firstOf returns the first of order that is in set, or -1.
func firstOf(order, set []int32) int32 {
	for _, id := range order {
		if slices.Contains(set, id) {
			return id
		}
	}
	return -1
}

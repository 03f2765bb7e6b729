package metastore

// The rules for changing a partition's leader, ISR and replicas, in one
// place. Every writer of a PartitionState (the controller's elections and
// reassignments, the leader's ISR changes, a restarted follower leaving
// the ISR, ElectLeaders and AlterPartitionReassignments) computes the next
// state with one of these methods and writes it with UpdatePartition, a
// compare-and-set on the state it read. They are pure functions: the
// caller decides who is live, restarted or caught up, on its own clock.
//
// The invariants they keep:
//   - a leader is elected from the ISR (unless the topic prefers
//     availability: unclean), and every change of leader takes a new leader
//     epoch, so the previous leader's writes and followers' fetches under
//     the old epoch are fenced;
//   - a member leaves the ISR when it is dead, restarted (its disk may
//     have lost a tail) or lagging, and joins it only when caught up;
//   - the ISR is never emptied by a member leaving: a partition whose last
//     in-sync member is gone goes offline (leader -1) and keeps its ISR.

import (
	"errors"
	"fmt"
	"slices"
)

// Errors of the partition rules.
var (
	// ErrInvalidReassignment is returned when a reassignment's target
	// cannot be applied (empty, a broker listed twice or unknown, or no
	// in-sync replica would remain).
	ErrInvalidReassignment = errors.New("metastore: invalid replica assignment")
	// ErrNoReassignment is returned when cancelling a partition that has
	// no reassignment in progress.
	ErrNoReassignment = errors.New("metastore: no reassignment in progress")
	// ErrElectionNotNeeded is returned by the requested elections when the
	// partition already has the leader asked for.
	ErrElectionNotNeeded = errors.New("metastore: election not needed")
	// ErrPreferredLeaderNotAvailable is returned by PreferredElection when
	// the preferred replica is not live and in sync.
	ErrPreferredLeaderNotAvailable = errors.New("metastore: preferred leader not available")
	// ErrEligibleLeadersNotAvailable is returned by UncleanElection when no
	// replica is live.
	ErrEligibleLeadersNotAvailable = errors.New("metastore: no eligible leader")
)

// Elect returns the partition's next state after the controller judged
// which brokers are live and which restarted (a new incarnation whose log
// may have lost a tail or its whole disk), or false if nothing changes.
//
// With a good leader (live, not restarted), only restarted followers leave
// the ISR; leader and epoch stay. Otherwise the new leader is the first
// good ISR member in replica order and the members that are not good leave
// the ISR. With no good member, a live restarted ISR member leads (its log
// is all there is; this also restores a cluster whose brokers all
// restarted) and the ISR is kept; with none live, the partition goes
// offline (leader -1) and keeps its ISR for when its members return,
// unless unclean is set: then any live replica leads alone, and whatever
// the ISR held beyond its log is lost.
func (p PartitionState) Elect(live, restarted map[int32]bool, unclean bool) (PartitionState, bool) {
	good := func(id int32) bool { return live[id] && !restarted[id] }
	if p.Leader >= 0 && good(p.Leader) {
		// The leader and its epoch are unchanged, as for the leader's own
		// ISR shrinks.
		isr := slices.DeleteFunc(slices.Clone(p.ISR), func(id int32) bool { return id != p.Leader && restarted[id] })
		if len(isr) == len(p.ISR) {
			return p, false
		}
		next := p
		next.ISR = isr
		return next, true
	}
	next := p
	if inSync := slices.DeleteFunc(slices.Clone(p.ISR), func(id int32) bool { return !good(id) }); len(inSync) > 0 {
		next.ISR, next.Leader = inSync, firstOf(p.Replicas, inSync)
	} else {
		next.ISR = slices.Clone(p.ISR)
		next.Leader = firstOf(p.Replicas, slices.DeleteFunc(slices.Clone(p.ISR), func(id int32) bool { return !live[id] }))
		if next.Leader < 0 && unclean {
			if r := firstOf(p.Replicas, slices.DeleteFunc(slices.Clone(p.Replicas), func(id int32) bool { return !live[id] })); r >= 0 {
				next.Leader, next.ISR = r, []int32{r}
			}
		}
	}
	// A leader that restarted and leads again still gets a new epoch: its
	// log may have lost a tail the followers hold, and a new epoch makes
	// them reconcile with it (KIP-101) instead of fetching past its end.
	if next.Leader == p.Leader && slices.Equal(next.ISR, p.ISR) && !(p.Leader >= 0 && restarted[p.Leader]) {
		return p, false
	}
	next.LeaderEpoch = p.LeaderEpoch + 1
	return next, true
}

// ChangeISR is the leader's ISR decision: the lagging members leave, the
// caught-up replicas join (in replica order), and a reassignment whose
// whole target is then in sync completes in the same write. It returns
// false when nothing changes. The leader never leaves its own ISR here.
func (p PartitionState) ChangeISR(lagging, caughtUp []int32) (PartitionState, bool) {
	next := p
	next.ISR = slices.DeleteFunc(slices.Clone(p.ISR), func(id int32) bool { return id != p.Leader && slices.Contains(lagging, id) })
	for _, id := range p.Replicas {
		if slices.Contains(caughtUp, id) && !slices.Contains(next.ISR, id) {
			next.ISR = append(next.ISR, id)
		}
	}
	if done, ok := next.CompleteReassignment(); ok {
		next = done
	}
	if slices.Equal(next.ISR, p.ISR) && next.Reassigning() == p.Reassigning() {
		return p, false
	}
	return next, true
}

// LeaveISR takes a follower that came back as a new incarnation out of the
// ISR: its log may have lost a tail (or the whole disk), so no election
// may pick it before the leader has seen it catch up again. It returns
// false when id leads, is not in the ISR, is its only member, or the
// partition has no leader (its log may be all there is).
func (p PartitionState) LeaveISR(id int32) (PartitionState, bool) {
	if p.Leader < 0 || p.Leader == id || len(p.ISR) <= 1 || !slices.Contains(p.ISR, id) {
		return p, false
	}
	next := p
	next.ISR = slices.DeleteFunc(slices.Clone(p.ISR), func(m int32) bool { return m == id })
	return next, true
}

// MoveLeader hands leadership to replica to under a new leader epoch (the
// leader rebalance, a broker handing over before it stops). The caller has
// checked that to is live and in sync.
func (p PartitionState) MoveLeader(to int32) PartitionState {
	next := p
	next.Leader, next.LeaderEpoch = to, p.LeaderEpoch+1
	return next
}

// ReplaceReplica replaces a replica (of a broker dead too long) with a
// broker that has none, at the same position in the replica list; the
// replaced one leaves the ISR. The newcomer starts empty, catches up from
// the leader and joins the ISR like any follower.
func (p PartitionState) ReplaceReplica(from, to int32) PartitionState {
	next := p
	next.Replicas = slices.Clone(p.Replicas)
	if i := slices.Index(next.Replicas, from); i >= 0 {
		next.Replicas[i] = to
	}
	next.ISR = slices.DeleteFunc(slices.Clone(p.ISR), func(id int32) bool { return id == from })
	return next
}

// PreferredElection moves leadership to the preferred replica (the first
// in the replica list) when it is live and in sync (ElectLeaders type 0).
func (p PartitionState) PreferredElection(live func(int32) bool) (PartitionState, error) {
	switch {
	case len(p.Replicas) == 0:
		return p, fmt.Errorf("%w: the partition has no replicas", ErrPreferredLeaderNotAvailable)
	case p.Leader == p.Replicas[0]:
		return p, fmt.Errorf("%w: the preferred replica leads already", ErrElectionNotNeeded)
	case !live(p.Replicas[0]) || !slices.Contains(p.ISR, p.Replicas[0]):
		return p, fmt.Errorf("%w: the preferred replica is not live and in sync", ErrPreferredLeaderNotAvailable)
	}
	return p.MoveLeader(p.Replicas[0]), nil
}

// UncleanElection elects the first live replica of a partition without a
// live leader, in sync or not (ElectLeaders type 1); one out of sync leads
// alone, and what the old ISR held beyond its log is lost.
func (p PartitionState) UncleanElection(live func(int32) bool) (PartitionState, error) {
	if p.Leader >= 0 && live(p.Leader) {
		return p, fmt.Errorf("%w: the partition has a live leader", ErrElectionNotNeeded)
	}
	for _, r := range p.Replicas {
		if !live(r) {
			continue
		}
		next := p.MoveLeader(r)
		if !slices.Contains(p.ISR, r) {
			next.ISR = []int32{r}
		}
		return next, nil
	}
	return p, fmt.Errorf("%w: no replica is live", ErrEligibleLeadersNotAvailable)
}

// OriginalReplicas returns the replicas the partition had before its
// current reassignment (all of them when none is in progress).
func (p PartitionState) OriginalReplicas() []int32 {
	return slices.DeleteFunc(slices.Clone(p.Replicas), func(id int32) bool { return slices.Contains(p.AddingReplicas, id) })
}

// StartReassignment returns the partition moving to target (KIP-455):
// Replicas becomes the target followed by the original replicas not in
// it, with AddingReplicas and RemovingReplicas beside. A reassignment in
// progress is replaced: the new one starts from the original replicas.
// known tells which broker ids exist. It completes at once when the whole
// target is already in sync.
func (p PartitionState) StartReassignment(target []int32, known func(int32) bool) (PartitionState, error) {
	if len(target) == 0 {
		return p, fmt.Errorf("%w: the target replica list is empty", ErrInvalidReassignment)
	}
	for i, id := range target {
		if slices.Contains(target[:i], id) {
			return p, fmt.Errorf("%w: broker %d is listed twice", ErrInvalidReassignment, id)
		}
		if !known(id) {
			return p, fmt.Errorf("%w: broker %d is not registered", ErrInvalidReassignment, id)
		}
	}
	orig := p.OriginalReplicas()
	next := p
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
	next.ISR = slices.DeleteFunc(slices.Clone(p.ISR), func(id int32) bool { return !slices.Contains(next.Replicas, id) })
	if len(next.ISR) == 0 {
		return p, fmt.Errorf("%w: no in-sync replica would remain", ErrInvalidReassignment)
	}
	if !slices.Contains(next.ISR, next.Leader) {
		next.Leader = firstOf(next.Replicas, next.ISR)
		next.LeaderEpoch++
	}
	if done, ok := next.CompleteReassignment(); ok {
		return done, nil
	}
	return next, nil
}

// CancelReassignment returns the partition back on its original replicas.
func (p PartitionState) CancelReassignment() (PartitionState, error) {
	if !p.Reassigning() {
		return p, fmt.Errorf("%w: no reassignment of this partition is in progress", ErrNoReassignment)
	}
	next := p
	next.Replicas = p.OriginalReplicas()
	next.ISR = slices.DeleteFunc(slices.Clone(p.ISR), func(id int32) bool { return slices.Contains(p.AddingReplicas, id) })
	next.AddingReplicas, next.RemovingReplicas = nil, nil
	if len(next.ISR) == 0 {
		return p, fmt.Errorf("%w: none of the original replicas is in sync; cancelling would leave the partition without one", ErrInvalidReassignment)
	}
	if !slices.Contains(next.ISR, next.Leader) {
		next.Leader = firstOf(next.Replicas, next.ISR)
		next.LeaderEpoch++
	}
	return next, nil
}

// CompleteReassignment finishes a reassignment whose whole target is in
// sync: the removed replicas go, and if the leader was one of them the
// first target replica leads under a new epoch.
func (p PartitionState) CompleteReassignment() (PartitionState, bool) {
	if !p.Reassigning() {
		return p, false
	}
	target := slices.DeleteFunc(slices.Clone(p.Replicas), func(id int32) bool { return slices.Contains(p.RemovingReplicas, id) })
	for _, id := range target {
		if !slices.Contains(p.ISR, id) {
			return p, false
		}
	}
	next := p
	next.Replicas = target
	next.ISR = slices.Clone(target) // all in sync, in replica order
	next.AddingReplicas, next.RemovingReplicas = nil, nil
	if !slices.Contains(target, p.Leader) {
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

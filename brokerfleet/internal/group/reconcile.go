package group

// Reconciliation of a consumer-protocol member (KIP-848): how its current
// assignment moves towards its target, one heartbeat at a time, so that a
// partition reaches its new owner only after the old owner confirmed it
// gave the partition up. One pure function, reconcile, table-tested in
// reconcile_test.go; Kafka's CurrentAssignmentBuilder is the reference.

import (
	"maps"

	"github.com/stratamq/strata/brokerfleet/internal/group/assign"
	"github.com/stratamq/strata/pkg/metastore"
)

// memberState is a member's reconciliation state.
type memberState int8

const (
	// memberStable: the member has its whole target, or all of it that
	// it may have.
	memberStable memberState = iota
	// memberUnrevoked: the member must give up partitions (pending)
	// before it may move to the group's assignment epoch.
	memberUnrevoked
	// memberUnreleased: the member is at the assignment epoch but waits
	// for partitions of its target that others have not released yet.
	memberUnreleased
)

var memberStateNames = [...]string{"stable", "unrevoked", "unreleased"}

func (s memberState) String() string { return memberStateNames[s] }

// partKey is one partition of a topic.
type partKey struct {
	topic     metastore.TopicID
	partition int32
}

// partSet is a set of partitions, each with its assignment epoch: the
// group's assignment epoch when the member was given it (KIP-1251).
type partSet map[partKey]int32

// hasAnyOf reports whether owned (nil: unknown, so assumed to) contains
// a partition of s.
func hasAnyOf(owned map[partKey]bool, s partSet) bool {
	if len(s) == 0 {
		return false
	}
	if owned == nil {
		return true
	}
	for p := range s {
		if owned[p] {
			return true
		}
	}
	return false
}

// memberAssignment is what reconciliation moves: the member's epoch, its
// state, the partitions it may use and those it must still give up.
type memberAssignment struct {
	epoch, prevEpoch int32
	state            memberState
	assigned         partSet
	pending          partSet
}

func (a memberAssignment) equal(b memberAssignment) bool {
	return a.epoch == b.epoch && a.prevEpoch == b.prevEpoch && a.state == b.state &&
		maps.Equal(a.assigned, b.assigned) && maps.Equal(a.pending, b.pending)
}

// reconcileInput is what one reconciliation step decides from.
type reconcileInput struct {
	cur             memberAssignment
	target          assign.Assignment
	assignmentEpoch int32
	// owned is what the member reports it owns now; nil when its
	// heartbeat did not say (unchanged since its last report).
	owned map[partKey]bool
	// subscribed reports whether the member subscribes to a topic.
	subscribed          func(metastore.TopicID) bool
	subscriptionChanged bool
	// ownedByOther reports whether another member still holds a
	// partition (assigned or pending revocation).
	ownedByOther func(partKey) bool
}

// reconcile returns the member's next assignment.
func reconcile(in reconcileInput) memberAssignment {
	cur := in.cur
	switch cur.state {
	case memberStable:
		if cur.epoch != in.assignmentEpoch {
			return computeNext(in)
		}
		if in.subscriptionChanged {
			return dropUnsubscribed(in)
		}
		return cur
	case memberUnrevoked:
		if hasAnyOf(in.owned, cur.pending) {
			if in.subscriptionChanged {
				return dropUnsubscribed(in)
			}
			return cur // still revoking
		}
		return computeNext(in)
	default: // memberUnreleased: picks up what was released meanwhile
		return computeNext(in)
	}
}

// computeNext moves the member towards its target at the assignment
// epoch: first it must give up what is not in its target; then it gets
// what of its target nobody else holds.
func computeNext(in reconcileInput) memberAssignment {
	cur := in.cur
	inTarget := func(p partKey) bool {
		for _, x := range in.target[p.topic] {
			if x == p.partition {
				return true
			}
		}
		return false
	}
	keep, revoke := partSet{}, partSet{}
	for p, e := range cur.assigned {
		if inTarget(p) {
			keep[p] = e
		} else {
			revoke[p] = e
		}
	}
	toAssign := partSet{}
	unreleased := false
	for topic, ps := range in.target {
		for _, x := range ps {
			p := partKey{topic, x}
			if _, ok := keep[p]; ok {
				continue
			}
			if in.ownedByOther(p) {
				unreleased = true
				continue
			}
			toAssign[p] = in.assignmentEpoch
		}
	}
	if len(revoke) > 0 && hasAnyOf(in.owned, revoke) {
		// Give up first; nothing new until that is confirmed.
		return memberAssignment{epoch: cur.epoch, prevEpoch: cur.epoch, state: memberUnrevoked, assigned: keep, pending: revoke}
	}
	next := memberAssignment{epoch: in.assignmentEpoch, prevEpoch: cur.epoch, state: memberStable, assigned: keep, pending: partSet{}}
	maps.Copy(next.assigned, toAssign)
	if unreleased {
		next.state = memberUnreleased
	}
	return next
}

// dropUnsubscribed is the fast path of a subscription change at the
// current epoch: the partitions of topics the member left are to be
// given up.
func dropUnsubscribed(in reconcileInput) memberAssignment {
	cur := in.cur
	assigned, pending := partSet{}, maps.Clone(cur.pending)
	if pending == nil {
		pending = partSet{}
	}
	moved := false
	for p, e := range cur.assigned {
		if in.subscribed(p.topic) {
			assigned[p] = e
		} else {
			pending[p] = e
			moved = true
		}
	}
	if !moved {
		return cur
	}
	if hasAnyOf(in.owned, pending) {
		return memberAssignment{epoch: cur.epoch, prevEpoch: cur.epoch, state: memberUnrevoked, assigned: assigned, pending: pending}
	}
	return memberAssignment{epoch: cur.epoch, prevEpoch: cur.prevEpoch, state: cur.state, assigned: assigned, pending: partSet{}}
}

package controller

import (
	"slices"

	"github.com/stratamq/strata/pkg/metastore"
)

// LeaderImbalance is the share of a broker's preferred partitions it may
// fail to lead before leadership moves back (Kafka's
// leader.imbalance.per.broker.percentage, 10).
const LeaderImbalance = 0.10

// PlanLeaderBalance returns the partitions whose leadership moves back to
// their preferred replica (the first of the replica list), for every
// broker that leads less than 90% of the partitions it is preferred for,
// where it is live, not restarted, not draining and in sync: after
// failovers and restarts leadership piles up on the brokers that stayed.
// Each returned state has the preferred replica leading under a new epoch.
func PlanLeaderBalance(parts []Part, live, restarted, draining map[int32]bool) []Part {
	preferred := map[int32]int{}
	var candidates []Part
	for _, p := range parts {
		st := p.State
		if len(st.Replicas) == 0 {
			continue
		}
		pref := st.Replicas[0]
		preferred[pref]++
		if st.Leader != pref && live[pref] && !restarted[pref] && !draining[pref] && slices.Contains(st.ISR, pref) {
			candidates = append(candidates, p)
		}
	}
	notLeading := map[int32]int{}
	for _, p := range candidates {
		notLeading[p.State.Replicas[0]]++
	}
	var out []Part
	for _, p := range candidates {
		pref := p.State.Replicas[0]
		if float64(notLeading[pref]) <= LeaderImbalance*float64(preferred[pref]) {
			continue
		}
		out = append(out, Part{Name: p.Name, State: p.State.MoveLeader(pref)})
	}
	return out
}

// PlanHandOver returns the new states of the partitions self leads, with
// leadership moved to another in-sync replica that is live, for a broker
// about to stop: clients switch at once instead of waiting for the
// controller to notice. Partitions with no other live in-sync replica keep
// their leader.
func PlanHandOver(states []metastore.PartitionState, self int32, live map[int32]bool) []metastore.PartitionState {
	others := map[int32]bool{}
	for id, ok := range live {
		others[id] = ok && id != self
	}
	var out []metastore.PartitionState
	for _, st := range states {
		if st.Leader != self {
			continue
		}
		if next, ok := st.Elect(others, nil, false); ok && next.Leader >= 0 && next.Leader != self {
			out = append(out, next)
		}
	}
	return out
}

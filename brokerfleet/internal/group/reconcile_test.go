package group

import (
	"testing"

	"github.com/stratamq/strata/brokerfleet/internal/group/assign"
	"github.com/stratamq/strata/pkg/metastore"
)

func TestReconcileTable(t *testing.T) {
	tA, tB := metastore.TopicID{1}, metastore.TopicID{2}
	ps := func(topic metastore.TopicID, epoch int32, parts ...int32) partSet {
		s := partSet{}
		for _, p := range parts {
			s[partKey{topic, p}] = epoch
		}
		return s
	}
	owns := func(topic metastore.TopicID, parts ...int32) map[partKey]bool {
		m := map[partKey]bool{}
		for _, p := range parts {
			m[partKey{topic, p}] = true
		}
		return m
	}
	nobody := func(partKey) bool { return false }
	held := func(held ...int32) func(partKey) bool {
		return func(p partKey) bool {
			for _, h := range held {
				if p.partition == h {
					return true
				}
			}
			return false
		}
	}
	all := func(metastore.TopicID) bool { return true }
	cases := []struct {
		name string
		in   reconcileInput
		want memberAssignment
	}{
		{"stable at the epoch: nothing", reconcileInput{
			cur: memberAssignment{epoch: 2, prevEpoch: 1, assigned: ps(tA, 1, 0, 1), pending: partSet{}}, target: assign.Assignment{tA: {0, 1}},
			assignmentEpoch: 2, subscribed: all, ownedByOther: nobody,
		}, memberAssignment{epoch: 2, prevEpoch: 1, assigned: ps(tA, 1, 0, 1), pending: partSet{}}},
		{"new epoch, more partitions, free", reconcileInput{
			cur: memberAssignment{epoch: 1, assigned: ps(tA, 1, 0), pending: partSet{}}, target: assign.Assignment{tA: {0, 1}},
			assignmentEpoch: 2, subscribed: all, ownedByOther: nobody,
		}, memberAssignment{epoch: 2, prevEpoch: 1, assigned: partSet{{tA, 0}: 1, {tA, 1}: 2}, pending: partSet{}}},
		{"new epoch, a partition still held elsewhere", reconcileInput{
			cur: memberAssignment{epoch: 1, assigned: ps(tA, 1, 0), pending: partSet{}}, target: assign.Assignment{tA: {0, 1}},
			assignmentEpoch: 2, subscribed: all, ownedByOther: held(1),
		}, memberAssignment{epoch: 2, prevEpoch: 1, state: memberUnreleased, assigned: ps(tA, 1, 0), pending: partSet{}}},
		{"must revoke, still owns (keepalive)", reconcileInput{
			cur: memberAssignment{epoch: 1, assigned: ps(tA, 1, 0, 1), pending: partSet{}}, target: assign.Assignment{tA: {0}},
			assignmentEpoch: 2, subscribed: all, ownedByOther: nobody,
		}, memberAssignment{epoch: 1, prevEpoch: 1, state: memberUnrevoked, assigned: ps(tA, 1, 0), pending: ps(tA, 1, 1)}},
		{"must revoke, already revoked: advances at once", reconcileInput{
			cur: memberAssignment{epoch: 1, assigned: ps(tA, 1, 0, 1), pending: partSet{}}, target: assign.Assignment{tA: {0}},
			assignmentEpoch: 2, owned: owns(tA, 0), subscribed: all, ownedByOther: nobody,
		}, memberAssignment{epoch: 2, prevEpoch: 1, assigned: ps(tA, 1, 0), pending: partSet{}}},
		{"unrevoked, still owning: waits", reconcileInput{
			cur: memberAssignment{epoch: 1, prevEpoch: 1, state: memberUnrevoked, assigned: ps(tA, 1, 0), pending: ps(tA, 1, 1)}, target: assign.Assignment{tA: {0}},
			assignmentEpoch: 2, owned: owns(tA, 0, 1), subscribed: all, ownedByOther: nobody,
		}, memberAssignment{epoch: 1, prevEpoch: 1, state: memberUnrevoked, assigned: ps(tA, 1, 0), pending: ps(tA, 1, 1)}},
		{"unrevoked, confirmed: advances", reconcileInput{
			cur: memberAssignment{epoch: 1, prevEpoch: 1, state: memberUnrevoked, assigned: ps(tA, 1, 0), pending: ps(tA, 1, 1)}, target: assign.Assignment{tA: {0}},
			assignmentEpoch: 2, owned: owns(tA, 0), subscribed: all, ownedByOther: nobody,
		}, memberAssignment{epoch: 2, prevEpoch: 1, assigned: ps(tA, 1, 0), pending: partSet{}}},
		{"a partition back in its own target while pending: kept", reconcileInput{
			cur: memberAssignment{epoch: 1, prevEpoch: 1, state: memberUnreleased, assigned: ps(tA, 1, 0), pending: partSet{}}, target: assign.Assignment{tA: {0, 1}},
			assignmentEpoch: 3, owned: owns(tA, 0), subscribed: all, ownedByOther: nobody,
		}, memberAssignment{epoch: 3, prevEpoch: 1, assigned: partSet{{tA, 0}: 1, {tA, 1}: 3}, pending: partSet{}}},
		{"subscription dropped a topic at the epoch", reconcileInput{
			cur: memberAssignment{epoch: 2, assigned: partSet{{tA, 0}: 1, {tB, 0}: 2}, pending: partSet{}}, target: assign.Assignment{tA: {0}, tB: {0}},
			assignmentEpoch: 2, subscribed: func(t metastore.TopicID) bool { return t == tA }, subscriptionChanged: true, ownedByOther: nobody,
		}, memberAssignment{epoch: 2, prevEpoch: 2, state: memberUnrevoked, assigned: ps(tA, 1, 0), pending: ps(tB, 2, 0)}},
	}
	for _, tc := range cases {
		got := reconcile(tc.in)
		if !got.equal(tc.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.name, got, tc.want)
		}
	}
}

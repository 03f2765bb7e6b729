// Package assign holds the server-side assignors of the consumer group
// protocol (KIP-848, group.consumer.assignors): uniform, Kafka's default
// (balance first, then stickiness), and range (contiguous ranges per
// topic, co-partitioned when partition counts match). Assignors are pure
// functions of a Spec, so they are table-tested and a group's target
// assignment can be recomputed anywhere from its stored members. The
// share-group assignor (KIP-932, partitions shared between members) fits
// the same Assignor interface.
package assign

import (
	"bytes"
	"slices"
	"strings"

	"github.com/stratamq/strata/pkg/metastore"
)

// Topic is a topic as assignors see it.
type Topic struct {
	ID         metastore.TopicID
	Name       string
	Partitions int32
}

// Member is a group member as assignors see it.
type Member struct {
	ID         string
	InstanceID string
	RackID     string
	// Topics are the existing topics it subscribes to.
	Topics []metastore.TopicID
	// Current is its previous target, the base of sticky assignors.
	Current Assignment
}

// Assignment is a member's partitions, by topic, each list sorted.
type Assignment map[metastore.TopicID][]int32

// Count is the number of partitions in a.
func (a Assignment) Count() int {
	n := 0
	for _, ps := range a {
		n += len(ps)
	}
	return n
}

// Spec is the input of an assignment: the members and the topics they
// subscribe to (Topics holds at least every topic a member names).
type Spec struct {
	Members []Member
	Topics  map[metastore.TopicID]Topic
}

// Assignor computes a target assignment: every partition of a subscribed
// topic goes to exactly one member subscribed to the topic. Members
// without partitions are in the result with an empty assignment.
type Assignor interface {
	Name() string
	Assign(Spec) map[string]Assignment
}

// Names of the built-in assignors (group.consumer.assignors).
const (
	UniformName = "uniform"
	RangeName   = "range"
)

// ByName returns the built-in assignor of that name, or nil. Kafka's
// class names are accepted too.
func ByName(name string) Assignor {
	switch name {
	case UniformName, "org.apache.kafka.coordinator.group.assignor.UniformAssignor":
		return Uniform{}
	case RangeName, "org.apache.kafka.coordinator.group.assignor.RangeAssignor":
		return Range{}
	}
	return nil
}

// tp is one partition.
type tp struct {
	topic     metastore.TopicID
	partition int32
}

func compareTP(a, b tp) int {
	if c := bytes.Compare(a.topic[:], b.topic[:]); c != 0 {
		return c
	}
	return int(a.partition) - int(b.partition)
}

// build turns per-member partition lists into assignments.
func build(ids []string, parts [][]tp) map[string]Assignment {
	out := make(map[string]Assignment, len(ids))
	for i, id := range ids {
		a := Assignment{}
		slices.SortFunc(parts[i], compareTP)
		for _, p := range parts[i] {
			a[p.topic] = append(a[p.topic], p.partition)
		}
		out[id] = a
	}
	return out
}

// sortedTopics returns the ids of the member's existing topics, sorted
// and without duplicates.
func sortedTopics(m Member, topics map[metastore.TopicID]Topic) []metastore.TopicID {
	var ts []metastore.TopicID
	for _, t := range m.Topics {
		if _, ok := topics[t]; ok {
			ts = append(ts, t)
		}
	}
	slices.SortFunc(ts, func(a, b metastore.TopicID) int { return bytes.Compare(a[:], b[:]) })
	return slices.Compact(ts)
}

func sameTopics(a, b []metastore.TopicID) bool { return slices.Equal(a, b) }

// Range assigns each topic's partitions in contiguous ranges over the
// topic's subscribers, ordered static members first (by instance id),
// then dynamic ones (by member id): the first P%n subscribers get one
// more. With equal partition counts, members get the same partition
// numbers of every topic (co-partitioning). It is not sticky, except
// through instance ids.
type Range struct{}

// Name is "range".
func (Range) Name() string { return RangeName }

// Assign implements Assignor.
func (Range) Assign(s Spec) map[string]Assignment {
	ms := slices.Clone(s.Members)
	slices.SortFunc(ms, func(a, b Member) int {
		switch {
		case a.InstanceID != "" && b.InstanceID == "":
			return -1
		case a.InstanceID == "" && b.InstanceID != "":
			return 1
		case a.InstanceID != b.InstanceID:
			return strings.Compare(a.InstanceID, b.InstanceID)
		}
		return strings.Compare(a.ID, b.ID)
	})
	ids := make([]string, len(ms))
	parts := make([][]tp, len(ms))
	subs := map[metastore.TopicID][]int{}
	for i, m := range ms {
		ids[i] = m.ID
		for _, t := range sortedTopics(m, s.Topics) {
			subs[t] = append(subs[t], i)
		}
	}
	for t, who := range subs {
		n := int32(len(who))
		p := s.Topics[t].Partitions
		minQ, extra := p/n, p%n
		next := int32(0)
		for k, i := range who {
			q := minQ
			if int32(k) < extra {
				q++
			}
			for x := next; x < next+q; x++ {
				parts[i] = append(parts[i], tp{t, x})
			}
			next += q
		}
	}
	return build(ids, parts)
}

// Uniform spreads partitions evenly, then keeps each member's previous
// partitions as far as that allows. When every member subscribes to the
// same topics, every member ends with ⌊P/M⌋ or ⌈P/M⌉ partitions and only
// the partitions over a member's quota move. Otherwise each partition
// goes to one of its topic's subscribers, least loaded first, and
// partitions move from a member to a subscriber of their topic with at
// least two fewer until no such move is left.
type Uniform struct{}

// Name is "uniform".
func (Uniform) Name() string { return UniformName }

// Assign implements Assignor.
func (Uniform) Assign(s Spec) map[string]Assignment {
	ms := slices.Clone(s.Members)
	slices.SortFunc(ms, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	ids := make([]string, len(ms))
	topics := make([][]metastore.TopicID, len(ms))
	homogeneous := true
	for i, m := range ms {
		ids[i] = m.ID
		topics[i] = sortedTopics(m, s.Topics)
		homogeneous = homogeneous && sameTopics(topics[i], topics[0])
	}
	if len(ms) == 0 {
		return map[string]Assignment{}
	}
	// Each member keeps what it had of its subscribed topics' existing
	// partitions, each partition by one member only.
	taken := map[tp]bool{}
	keep := make([][]tp, len(ms))
	for i, m := range ms {
		sub := map[metastore.TopicID]bool{}
		for _, t := range topics[i] {
			sub[t] = true
		}
		var prev []tp
		for t, ps := range m.Current {
			if !sub[t] {
				continue
			}
			for _, p := range ps {
				if p >= 0 && p < s.Topics[t].Partitions {
					prev = append(prev, tp{t, p})
				}
			}
		}
		slices.SortFunc(prev, compareTP)
		for _, p := range slices.Compact(prev) {
			if !taken[p] {
				taken[p] = true
				keep[i] = append(keep[i], p)
			}
		}
	}
	if homogeneous {
		return build(ids, uniformHomogeneous(keep, topics[0], s.Topics, taken))
	}
	return build(ids, uniformHeterogeneous(keep, topics, s.Topics, taken))
}

// free returns the partitions of topics that are not taken, in order.
func free(ts []metastore.TopicID, topics map[metastore.TopicID]Topic, taken map[tp]bool) []tp {
	var out []tp
	for _, t := range ts {
		for p := range topics[t].Partitions {
			if !taken[tp{t, p}] {
				out = append(out, tp{t, p})
			}
		}
	}
	return out
}

func uniformHomogeneous(keep [][]tp, ts []metastore.TopicID, topics map[metastore.TopicID]Topic, taken map[tp]bool) [][]tp {
	total := 0
	for _, t := range ts {
		total += int(topics[t].Partitions)
	}
	m := len(keep)
	minQ, extra := total/m, total%m
	unassigned := free(ts, topics, taken)
	// Trim each member to its quota: minQ, or minQ+1 while extra slots
	// remain for members that hold more than minQ.
	for i := range keep {
		q := minQ
		if len(keep[i]) > minQ && extra > 0 {
			q++
			extra--
		}
		if len(keep[i]) > q {
			unassigned = append(unassigned, keep[i][q:]...)
			keep[i] = keep[i][:q:q]
		}
	}
	slices.SortFunc(unassigned, compareTP)
	for i := range keep {
		for len(keep[i]) < minQ && len(unassigned) > 0 {
			keep[i] = append(keep[i], unassigned[0])
			unassigned = unassigned[1:]
		}
	}
	for i := range keep {
		if extra == 0 || len(unassigned) == 0 {
			break
		}
		if len(keep[i]) == minQ {
			keep[i] = append(keep[i], unassigned[0])
			unassigned = unassigned[1:]
			extra--
		}
	}
	return keep
}

func uniformHeterogeneous(keep [][]tp, memberTopics [][]metastore.TopicID, topics map[metastore.TopicID]Topic, taken map[tp]bool) [][]tp {
	subs := map[metastore.TopicID][]int{}
	for i, ts := range memberTopics {
		for _, t := range ts {
			subs[t] = append(subs[t], i)
		}
	}
	all := make([]metastore.TopicID, 0, len(subs))
	for t := range subs {
		all = append(all, t)
	}
	// Topics with the fewest subscribers per partition first, so the
	// members with few choices are filled before the flexible ones.
	slices.SortFunc(all, func(a, b metastore.TopicID) int {
		if d := len(subs[a]) - len(subs[b]); d != 0 {
			return d
		}
		if d := int(topics[b].Partitions) - int(topics[a].Partitions); d != 0 {
			return d
		}
		return bytes.Compare(a[:], b[:])
	})
	leastLoaded := func(who []int) int {
		best := who[0]
		for _, i := range who[1:] {
			if len(keep[i]) < len(keep[best]) {
				best = i
			}
		}
		return best
	}
	for _, t := range all {
		for _, p := range free([]metastore.TopicID{t}, topics, taken) {
			i := leastLoaded(subs[t])
			keep[i] = append(keep[i], p)
		}
	}
	// Balance: move a partition to a subscriber of its topic with at
	// least two fewer. Every move lowers the sum of squared loads, so it
	// ends; the bound is a safety net.
	total := 0
	for i := range keep {
		total += len(keep[i])
	}
	for range 2*total + 1 {
		moved := false
		order := make([]int, len(keep))
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int { return len(keep[b]) - len(keep[a]) })
	scan:
		for _, a := range order {
			// The most recently added partitions move first.
			for k := len(keep[a]) - 1; k >= 0; k-- {
				p := keep[a][k]
				b := leastLoaded(subs[p.topic])
				if len(keep[a])-len(keep[b]) >= 2 {
					keep[a] = slices.Delete(keep[a], k, k+1)
					keep[b] = append(keep[b], p)
					moved = true
					break scan
				}
			}
		}
		if !moved {
			break
		}
	}
	return keep
}

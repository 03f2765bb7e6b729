package assign

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stratamq/strata/pkg/metastore"
)

func tid(b byte) metastore.TopicID { return metastore.TopicID{b} }

func topicsOf(counts ...int32) map[metastore.TopicID]Topic {
	out := map[metastore.TopicID]Topic{}
	for i, n := range counts {
		id := tid(byte(i + 1))
		out[id] = Topic{ID: id, Name: fmt.Sprintf("t%d", i+1), Partitions: n}
	}
	return out
}

// checkValid fails unless every partition of a subscribed topic is
// assigned exactly once, to a subscriber, and nothing else is assigned.
func checkValid(t *testing.T, s Spec, got map[string]Assignment) {
	t.Helper()
	subscribed := map[metastore.TopicID]bool{}
	byID := map[string]Member{}
	for _, m := range s.Members {
		byID[m.ID] = m
		for _, tp := range m.Topics {
			if _, ok := s.Topics[tp]; ok {
				subscribed[tp] = true
			}
		}
		if _, ok := got[m.ID]; !ok {
			t.Fatalf("member %s missing from the result", m.ID)
		}
	}
	owner := map[tp]string{}
	for id, a := range got {
		m, ok := byID[id]
		if !ok {
			t.Fatalf("result names unknown member %s", id)
		}
		for topic, ps := range a {
			if !slices.Contains(m.Topics, topic) {
				t.Fatalf("member %s got topic %v it does not subscribe to", id, topic)
			}
			if !slices.IsSorted(ps) {
				t.Fatalf("member %s: partitions %v not sorted", id, ps)
			}
			for _, p := range ps {
				k := tp{topic, p}
				if prev, dup := owner[k]; dup {
					t.Fatalf("partition %v/%d given to %s and %s", topic, p, prev, id)
				}
				if p < 0 || p >= s.Topics[topic].Partitions {
					t.Fatalf("partition %v/%d does not exist", topic, p)
				}
				owner[k] = id
			}
		}
	}
	for topic := range subscribed {
		for p := range s.Topics[topic].Partitions {
			if _, ok := owner[tp{topic, p}]; !ok {
				t.Fatalf("partition %v/%d unassigned", topic, p)
			}
		}
	}
}

func spread(got map[string]Assignment) (lo, hi int) {
	lo = 1 << 30
	for _, a := range got {
		lo, hi = min(lo, a.Count()), max(hi, a.Count())
	}
	return lo, hi
}

func members(n int, topics ...metastore.TopicID) []Member {
	var ms []Member
	for i := range n {
		ms = append(ms, Member{ID: fmt.Sprintf("m%02d", i), Topics: topics})
	}
	return ms
}

// withCurrent gives each member its assignment from a previous round.
func withCurrent(ms []Member, prev map[string]Assignment) []Member {
	out := slices.Clone(ms)
	for i := range out {
		out[i].Current = prev[out[i].ID]
	}
	return out
}

// moved counts partitions whose owner differs between two assignments
// (partitions not assigned before are not counted).
func moved(before, after map[string]Assignment) int {
	owner := map[tp]string{}
	for id, a := range before {
		for t, ps := range a {
			for _, p := range ps {
				owner[tp{t, p}] = id
			}
		}
	}
	n := 0
	for id, a := range after {
		for t, ps := range a {
			for _, p := range ps {
				if o, ok := owner[tp{t, p}]; ok && o != id {
					n++
				}
			}
		}
	}
	return n
}

func TestUniformHomogeneousBalancedAndSticky(t *testing.T) {
	topics := topicsOf(12, 5)
	all := []metastore.TopicID{tid(1), tid(2)}
	u := Uniform{}
	var prev map[string]Assignment
	// Members join one by one: each round is balanced within one, and
	// only partitions over a member's new quota move.
	for n := 1; n <= 8; n++ {
		s := Spec{Members: withCurrent(members(n, all...), prev), Topics: topics}
		got := u.Assign(s)
		checkValid(t, s, got)
		if lo, hi := spread(got); hi-lo > 1 {
			t.Fatalf("%d members: sizes %d..%d", n, lo, hi)
		}
		if prev != nil {
			// The newcomer's share is all that must move: ⌊17/n⌋.
			if m := moved(prev, got); m > 17/n+1 {
				t.Fatalf("%d members: %d partitions moved, want at most %d", n, m, 17/n+1)
			}
		}
		prev = got
	}
	// A member leaves: survivors keep everything they had.
	ms := withCurrent(members(8, all...), prev)[1:]
	got := u.Assign(Spec{Members: ms, Topics: topics})
	checkValid(t, Spec{Members: ms, Topics: topics}, got)
	for _, m := range ms {
		for topic, ps := range prev[m.ID] {
			for _, p := range ps {
				if !slices.Contains(got[m.ID][topic], p) {
					t.Fatalf("survivor %s lost %v/%d", m.ID, topic, p)
				}
			}
		}
	}
	// Recomputing with nothing changed moves nothing.
	again := u.Assign(Spec{Members: withCurrent(ms, got), Topics: topics})
	if m := moved(got, again); m != 0 {
		t.Fatalf("a stable group moved %d partitions", m)
	}
}

func TestUniformHeterogeneous(t *testing.T) {
	topics := topicsOf(6, 6, 1)
	ms := []Member{
		{ID: "a", Topics: []metastore.TopicID{tid(1)}},
		{ID: "b", Topics: []metastore.TopicID{tid(1), tid(2)}},
		{ID: "c", Topics: []metastore.TopicID{tid(2), tid(3)}},
		{ID: "d", Topics: []metastore.TopicID{tid(9)}}, // a topic that does not exist
	}
	s := Spec{Members: ms, Topics: topics}
	got := Uniform{}.Assign(s)
	checkValid(t, s, got)
	if got["d"].Count() != 0 {
		t.Fatalf("d got %v", got["d"])
	}
	// 13 partitions over a, b, c: 4/5 each, a holds only topic 1.
	for _, id := range []string{"a", "b", "c"} {
		if n := got[id].Count(); n < 4 || n > 5 {
			t.Fatalf("member %s has %d partitions: %v", id, n, got)
		}
	}
	// Random subscriptions and previous targets always give valid,
	// stable results.
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		nt := 1 + r.IntN(4)
		counts := make([]int32, nt)
		for i := range counts {
			counts[i] = int32(r.IntN(10))
		}
		topics := topicsOf(counts...)
		var ms []Member
		for i := range 1 + r.IntN(7) {
			m := Member{ID: fmt.Sprintf("m%d", i)}
			for k := range nt {
				if r.IntN(2) == 0 {
					m.Topics = append(m.Topics, tid(byte(k+1)))
				}
			}
			ms = append(ms, m)
		}
		s := Spec{Members: ms, Topics: topics}
		first := Uniform{}.Assign(s)
		checkValid(t, s, first)
		s2 := Spec{Members: withCurrent(ms, first), Topics: topics}
		second := Uniform{}.Assign(s2)
		checkValid(t, s2, second)
		if m := moved(first, second); m != 0 {
			t.Fatalf("round %d: recomputing moved %d partitions", round, m)
		}
	}
}

func TestRangeContiguousCoPartitioned(t *testing.T) {
	topics := topicsOf(7, 7)
	ms := []Member{
		{ID: "z-dynamic", Topics: []metastore.TopicID{tid(1), tid(2)}},
		{ID: "b", InstanceID: "i-2", Topics: []metastore.TopicID{tid(1), tid(2)}},
		{ID: "a-dynamic", Topics: []metastore.TopicID{tid(1), tid(2)}},
		{ID: "c", InstanceID: "i-1", Topics: []metastore.TopicID{tid(1), tid(2)}},
	}
	s := Spec{Members: ms, Topics: topics}
	got := Range{}.Assign(s)
	checkValid(t, s, got)
	// Order: i-1 (c), i-2 (b), a-dynamic, z-dynamic; 7 = 2+2+2+1.
	want := map[string][]int32{"c": {0, 1}, "b": {2, 3}, "a-dynamic": {4, 5}, "z-dynamic": {6}}
	for id, ps := range want {
		for _, topic := range []metastore.TopicID{tid(1), tid(2)} {
			if !slices.Equal(got[id][topic], ps) {
				t.Fatalf("member %s topic %v: %v, want %v", id, topic, got[id][topic], ps)
			}
		}
	}
	// Heterogeneous: each topic over its own subscribers.
	ms = []Member{{ID: "a", Topics: []metastore.TopicID{tid(1)}}, {ID: "b", Topics: []metastore.TopicID{tid(1), tid(2)}}}
	s = Spec{Members: ms, Topics: topics}
	got = Range{}.Assign(s)
	checkValid(t, s, got)
	if !slices.Equal(got["a"][tid(1)], []int32{0, 1, 2, 3}) || len(got["b"][tid(2)]) != 7 {
		t.Fatalf("heterogeneous range: %v", got)
	}
}

func TestByName(t *testing.T) {
	if ByName("uniform").Name() != "uniform" || ByName("range").Name() != "range" || ByName("sticky") != nil {
		t.Fatal("ByName")
	}
}

func TestSimpleShareAssignor(t *testing.T) {
	t1 := metastore.TopicID{1}
	spec := func(members, parts int) Spec {
		s := Spec{Topics: map[metastore.TopicID]Topic{t1: {ID: t1, Name: "t", Partitions: int32(parts)}}}
		for i := range members {
			s.Members = append(s.Members, Member{ID: string(rune('a' + i)), Topics: []metastore.TopicID{t1}})
		}
		return s
	}
	// More members than partitions: every member has one, partitions shared.
	out := Simple{}.Assign(spec(8, 1))
	for id, a := range out {
		if len(a[t1]) != 1 || a[t1][0] != 0 {
			t.Fatalf("member %s of 8 on one partition: %v", id, a)
		}
	}
	// Fewer: each partition to exactly one member, all covered.
	out = Simple{}.Assign(spec(3, 7))
	seen := map[int32]int{}
	for _, a := range out {
		if n := len(a[t1]); n < 2 || n > 3 {
			t.Fatalf("uneven: %v", out)
		}
		for _, p := range a[t1] {
			seen[p]++
		}
	}
	if len(seen) != 7 {
		t.Fatalf("partitions covered: %v", seen)
	}
	for p, n := range seen {
		if n != 1 {
			t.Fatalf("partition %d given %d times", p, n)
		}
	}
	// 4 members, 3 partitions: all work, every partition covered.
	out = Simple{}.Assign(spec(4, 3))
	seen = map[int32]int{}
	for id, a := range out {
		if len(a[t1]) == 0 {
			t.Fatalf("member %s idle: %v", id, out)
		}
		for _, p := range a[t1] {
			seen[p]++
		}
	}
	if len(seen) != 3 {
		t.Fatalf("partitions covered: %v", seen)
	}
}

package metrics

import (
	"fmt"
	"testing"
	"time"
)

func TestLagHistory(t *testing.T) {
	m := New()
	t0 := time.UnixMilli(1_700_000_000_000)
	stat := func(committed int64, parts ...int32) []GroupStat {
		g := GroupStat{Group: "g"}
		for _, p := range parts {
			g.Offsets = append(g.Offsets, GroupOffset{Topic: "t", Partition: p, Committed: committed, End: 100})
		}
		return []GroupStat{g}
	}
	for i := range LagHistorySamples + 5 {
		m.groupsMu.Lock()
		m.recordLag(stat(int64(i), 1, 0), t0.Add(time.Duration(i)*time.Second))
		m.groupsMu.Unlock()
	}
	got, ok := m.GroupLag("g")
	if !ok || len(got) != 2 || got[0].Partition != 0 || got[1].Partition != 1 {
		t.Fatalf("GroupLag = %v, %v; want partitions 0 and 1", len(got), ok)
	}
	s := got[0].Samples
	if len(s) != LagHistorySamples || s[0].Committed != 5 || s[len(s)-1].Committed != LagHistorySamples+4 || !s[0].At.Equal(t0.Add(5*time.Second)) {
		t.Fatalf("ring holds %d samples from %d to %d; want the last %d", len(s), s[0].Committed, s[len(s)-1].Committed, LagHistorySamples)
	}
	if _, ok := m.GroupLag("other"); ok {
		t.Fatal("history for an unknown group")
	}
	// A partition no longer reported is dropped; the group stays.
	m.SetGroups(stat(1, 0))
	if got, _ := m.GroupLag("g"); len(got) != 1 {
		t.Fatalf("%d series after partition 1 left, want 1", len(got))
	}
	m.SetGroups(nil)
	if _, ok := m.GroupLag("g"); ok {
		t.Fatal("history kept for a group no longer coordinated")
	}
	// The series cap holds.
	var many []GroupStat
	for i := range LagHistorySeries + 10 {
		many = append(many, GroupStat{Group: fmt.Sprint("g", i), Offsets: []GroupOffset{{Topic: "t", Committed: 1, End: 2}}})
	}
	m.SetGroups(many)
	m.groupsMu.Lock()
	n := len(m.lag)
	m.groupsMu.Unlock()
	if n != LagHistorySeries {
		t.Fatalf("%d series, want the cap %d", n, LagHistorySeries)
	}
}

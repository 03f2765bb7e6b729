package assign

// The simple share assignor (KIP-932's SimpleAssignor): share group
// members share partitions. With no more members subscribed to a topic
// than it has partitions, its partitions are dealt round-robin over them
// (each to one member); with more, the members are dealt round-robin over
// the partitions, so every member has work and a partition has several
// members. Unlike the consumer assignors, a partition may go to several
// members.

import (
	"slices"
	"strings"

	"github.com/stratamq/strata/pkg/metastore"
)

// SimpleName is the simple share assignor's name.
const SimpleName = "simple"

// Simple is the simple share assignor.
type Simple struct{}

// Name implements Assignor.
func (Simple) Name() string { return SimpleName }

// Assign implements Assignor, with a partition possibly given to several
// members.
func (Simple) Assign(s Spec) map[string]Assignment {
	out := make(map[string]Assignment, len(s.Members))
	subs := map[metastore.TopicID][]string{}
	for _, m := range s.Members {
		out[m.ID] = Assignment{}
		for _, t := range m.Topics {
			if _, ok := s.Topics[t]; ok {
				subs[t] = append(subs[t], m.ID)
			}
		}
	}
	for t, members := range subs {
		slices.SortFunc(members, strings.Compare)
		members = slices.Compact(members)
		n := int(s.Topics[t].Partitions)
		if n <= 0 {
			continue
		}
		for i := range max(n, len(members)) {
			m, p := members[i%len(members)], int32(i%n)
			out[m][t] = append(out[m][t], p)
		}
		for _, m := range members {
			slices.Sort(out[m][t])
			out[m][t] = slices.Compact(out[m][t])
		}
	}
	return out
}

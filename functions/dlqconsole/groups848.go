package dlqconsole

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
)

// Groups of the consumer protocol (KIP-848) are not described by
// DescribeGroups (a classic coordinator answers them Dead): they are
// described with ConsumerGroupDescribe, their lag computed from
// OffsetFetch and ListOffsets here.

// consumerGroup describes a consumer-protocol group into a GroupPage
// (without its chart); false when it is not one.
func (c *Console) consumerGroup(ctx context.Context, group string) (GroupPage, bool, error) {
	ds, err := c.adm.DescribeConsumerGroups(ctx, group)
	if err != nil {
		var se *kadm.ShardErrors
		if isShardErrs(err, &se) {
			return GroupPage{}, false, nil
		}
		return GroupPage{}, false, kafkaError("describe consumer group "+group, err)
	}
	d, ok := ds[group]
	if !ok || d.Err != nil || d.State == "Dead" || d.State == "" {
		return GroupPage{}, false, nil
	}
	p := GroupPage{Group: group, State: d.State, ProtocolType: "consumer (KIP-848)", Protocol: d.AssignorName,
		Coordinator: d.Coordinator.NodeID, TotalLag: 0}
	owner := map[string]map[int32]*kadm.ConsumerGroupMember{}
	for i, m := range d.Members {
		row := MemberRow{MemberID: m.MemberID, ClientID: m.ClientID, ClientHost: m.ClientHost, Assigned: topicsSetString(m.Assignment)}
		if m.InstanceID != nil {
			row.InstanceID = *m.InstanceID
		}
		p.Members = append(p.Members, row)
		for t, ps := range m.Assignment {
			if owner[t] == nil {
				owner[t] = map[int32]*kadm.ConsumerGroupMember{}
			}
			for pt := range ps {
				owner[t][pt] = &d.Members[i]
			}
		}
	}
	offs, err := c.adm.FetchOffsets(ctx, group)
	if err != nil {
		return p, true, kafkaError("fetch offsets of "+group, err)
	}
	topics := map[string]bool{}
	for t := range offs {
		topics[t] = true
	}
	for t := range owner {
		topics[t] = true
	}
	names := make([]string, 0, len(topics))
	for t := range topics {
		names = append(names, t)
	}
	var ends kadm.ListedOffsets
	if len(names) > 0 {
		if ends, err = c.adm.ListEndOffsets(ctx, names...); err != nil {
			return p, true, kafkaError("list end offsets", err)
		}
	}
	var sorted []kadm.ListedOffset
	ends.Each(func(e kadm.ListedOffset) { sorted = append(sorted, e) })
	slices.SortFunc(sorted, func(a, b kadm.ListedOffset) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition) - int(b.Partition)
	})
	for _, e := range sorted {
		o, committed := offs.Lookup(e.Topic, e.Partition)
		m := owner[e.Topic][e.Partition]
		if !committed && m == nil {
			continue // a partition of a topic the group neither owns nor committed
		}
		row := LagRow{Topic: e.Topic, Partition: e.Partition, Committed: -1, End: e.Offset, Lag: -1}
		if committed && o.Err == nil {
			row.Committed = o.At
		}
		if e.Err == nil {
			row.Lag = sampleLag(row.Committed, e.Offset)
		} else {
			row.Err = e.Err.Error()
		}
		if m != nil {
			row.Member, row.ClientHost = m.ClientID, m.ClientHost
		}
		if row.Lag < 0 || p.TotalLag < 0 {
			p.TotalLag = -1
		} else {
			p.TotalLag += row.Lag
		}
		p.Lag = append(p.Lag, row)
	}
	return p, true, nil
}

func topicsSetString(s kadm.TopicsSet) string {
	var parts []string
	for _, t := range s.Sorted() {
		ps := slices.Clone(t.Partitions)
		slices.Sort(ps)
		parts = append(parts, t.Topic+": "+ids(ps))
	}
	return strings.Join(parts, "; ")
}

// isShardErrs reports whether err is kadm's per-shard failure (a broker
// that does not serve ConsumerGroupDescribe, for one).
func isShardErrs(err error, se **kadm.ShardErrors) bool {
	return errors.As(err, se)
}

package main

// brokerfleet groups, for groups of the consumer protocol (KIP-848):
// DescribeGroups answers them as Dead, so they are described with
// ConsumerGroupDescribe (epochs, assignor, members with their epochs,
// protocols, assignments and targets) and their lag is computed from
// OffsetFetch and the log end offsets.

import (
	"context"
	"fmt"
	"io"
	"net"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/stratamq/strata/brokerfleet/internal/cli"
)

// topicsSetJSON lists a kadm.TopicsSet by topic, partitions sorted.
func topicsSetJSON(s kadm.TopicsSet) []topicPartitionJSON {
	out := []topicPartitionJSON{}
	s.EachPartitions(func(t string, ps []int32) {
		ps = append([]int32(nil), ps...)
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		out = append(out, topicPartitionJSON{Topic: t, Partitions: ps})
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Topic < out[j].Topic })
	return out
}

// describeConsumer describes a consumer-protocol group, and false if it
// is none (or cannot be described: the classic result stands).
func describeConsumer(ctx context.Context, adm *kadm.Client, name string) (describedGroupJSON, bool) {
	d := describedGroupJSON{Group: name, Type: "consumer", ProtocolType: "consumer", Members: []memberJSON{}, Partitions: []partitionLagJSON{}}
	described, err := adm.DescribeConsumerGroups(ctx, name)
	if err != nil {
		return d, false
	}
	g, ok := described[name]
	if !ok || g.Err != nil {
		return d, false
	}
	d.State, d.Assignor = g.State, g.AssignorName
	d.Epoch, d.AssignmentEpoch = &g.Epoch, &g.AssignmentEpoch
	d.Coordinator = &coordinatorJSON{NodeID: g.Coordinator.NodeID, Host: g.Coordinator.Host, Port: g.Coordinator.Port}
	owner := map[string]map[int32]string{}
	assigned := kadm.TopicsSet{}
	for _, m := range g.Members {
		epoch := m.MemberEpoch
		mj := memberJSON{MemberID: m.MemberID, InstanceID: m.InstanceID, ClientID: m.ClientID, Host: m.ClientHost,
			Assigned: topicsSetJSON(m.Assignment), Target: topicsSetJSON(m.TargetAssignment), MemberEpoch: &epoch, Protocol: "consumer"}
		if m.MemberType == 0 {
			mj.Protocol = "classic"
		}
		m.Assignment.Each(func(t string, p int32) {
			if owner[t] == nil {
				owner[t] = map[int32]string{}
			}
			owner[t][p] = m.MemberID
		})
		assigned.Merge(m.Assignment)
		d.Members = append(d.Members, mj)
	}
	offs, err := adm.FetchOffsets(ctx, name)
	if err == nil {
		err = offs.Error()
	}
	if err != nil {
		d.Error = fmt.Sprintf("fetch committed offsets of group %s: %v", name, err)
		return d, true
	}
	all := kadm.TopicsSet{}
	all.Merge(assigned)
	offs.Each(func(o kadm.OffsetResponse) { all.Add(o.Topic, o.Partition) })
	var ends kadm.ListedOffsets
	if topics := all.Topics(); len(topics) > 0 {
		ends, _ = adm.ListEndOffsets(ctx, topics...)
	}
	var rows []partitionLagJSON
	var total int64
	commits := 0
	all.Each(func(t string, p int32) {
		row := partitionLagJSON{Topic: t, Partition: p, MemberID: owner[t][p]}
		end, endOK := ends.Lookup(t, p)
		if endOK && end.Err == nil {
			row.LogEndOffset = i64p(end.Offset)
		} else if endOK {
			row.Error = end.Err.Error()
		}
		if o, ok := offs.Lookup(t, p); ok && o.At >= 0 {
			row.CurrentOffset = i64p(o.At)
			if row.LogEndOffset != nil {
				lag := max(*row.LogEndOffset-o.At, 0)
				row.Lag = &lag
				total += lag
				commits++
			}
		}
		rows = append(rows, row)
	})
	sort.Slice(rows, func(i, j int) bool {
		if rows[i].Topic != rows[j].Topic {
			return rows[i].Topic < rows[j].Topic
		}
		return rows[i].Partition < rows[j].Partition
	})
	d.Partitions = append(d.Partitions, rows...)
	if commits > 0 {
		d.TotalLag = &total
	}
	return d, true
}

// consumerListed fills a listed consumer-protocol group's members and
// lag.
func consumerListed(ctx context.Context, adm *kadm.Client, g *listedGroupJSON) {
	d, ok := describeConsumer(ctx, adm, g.Group)
	switch {
	case !ok:
		g.Error = "not described"
	case d.Error != "":
		g.Error = d.Error
	default:
		g.Members, g.Lag = len(d.Members), d.TotalLag
	}
}

func partitionsText(tps []topicPartitionJSON) string {
	var parts []string
	for _, a := range tps {
		ps := make([]string, len(a.Partitions))
		for i, p := range a.Partitions {
			ps[i] = strconv.Itoa(int(p))
		}
		parts = append(parts, a.Topic+":"+strings.Join(ps, ","))
	}
	return cli.Dash(strings.Join(parts, " "))
}

func printDescribedConsumer(w io.Writer, d describedGroupJSON) error {
	fmt.Fprintf(w, "group %s: consumer protocol, state %s, epoch %d (assignment epoch %d), assignor %s, coordinator %d at %s, %d member(s), total lag %s\n",
		d.Group, d.State, *d.Epoch, *d.AssignmentEpoch, cli.Dash(d.Assignor), d.Coordinator.NodeID,
		net.JoinHostPort(d.Coordinator.Host, strconv.Itoa(int(d.Coordinator.Port))), len(d.Members), cli.Int64(d.TotalLag))
	tw := cli.NewTable(w)
	if len(d.Members) > 0 {
		tw.Row()
		tw.Row("MEMBER-ID", "INSTANCE-ID", "EPOCH", "PROTOCOL", "CLIENT-ID", "HOST", "ASSIGNED", "TARGET")
		for _, m := range d.Members {
			instance := "-"
			if m.InstanceID != nil {
				instance = *m.InstanceID
			}
			tw.Row(m.MemberID, instance, strconv.Itoa(int(*m.MemberEpoch)), m.Protocol, cli.Dash(m.ClientID), cli.Dash(m.Host),
				partitionsText(m.Assigned), partitionsText(m.Target))
		}
	}
	if len(d.Partitions) > 0 {
		tw.Row()
		tw.Row("TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "MEMBER")
		for _, p := range d.Partitions {
			tw.Row(p.Topic, strconv.Itoa(int(p.Partition)), cli.Int64(p.CurrentOffset), cli.Int64(p.LogEndOffset), cli.Int64(p.Lag), cli.Dash(p.MemberID))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, p := range d.Partitions {
		if p.Error != "" {
			fmt.Fprintf(w, "error: %s/%d: %s\n", p.Topic, p.Partition, p.Error)
		}
	}
	return nil
}

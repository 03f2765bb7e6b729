package main

// brokerfleet groups, for share groups (KIP-932): DescribeGroups answers
// them as Dead, so they are described with ShareGroupDescribe (epoch,
// assignor, members with their assignments) and their backlog per
// partition comes from DescribeShareGroupOffsets (the share start offset
// and the lag: records past it not yet acknowledged, or the log end
// minus the start where the broker cannot say).

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/stratamq/strata/brokerfleet/internal/cli"
)

// describeShare describes a share group, and false if it is none.
func describeShare(ctx context.Context, adm *kadm.Client, name string) (describedGroupJSON, bool) {
	d := describedGroupJSON{Group: name, Type: "share", ProtocolType: "share", Members: []memberJSON{}, Partitions: []partitionLagJSON{}}
	described, err := adm.DescribeShareGroups(ctx, name)
	if err != nil {
		return d, false
	}
	g, ok := described[name]
	if !ok || g.Err != nil {
		return d, false
	}
	d.State, d.Assignor = g.GroupState, g.Assignor
	d.Epoch, d.AssignmentEpoch = &g.GroupEpoch, &g.AssignmentEpoch
	d.Coordinator = &coordinatorJSON{NodeID: g.Coordinator.NodeID, Host: g.Coordinator.Host, Port: g.Coordinator.Port}
	for _, m := range g.Members {
		epoch := m.MemberEpoch
		d.Members = append(d.Members, memberJSON{MemberID: m.MemberID, ClientID: m.ClientID, Host: m.ClientHost,
			Assigned: topicsSetJSON(m.Assignment), MemberEpoch: &epoch, Protocol: "share"})
	}
	offs, err := adm.DescribeShareGroupOffsets(ctx, name)
	if err == nil {
		err = offs.Error()
	}
	if err != nil {
		d.Error = fmt.Sprintf("describe share offsets of group %s: %v", name, err)
		return d, true
	}
	so := offs[name].Offsets
	var topics []string
	for t := range so {
		topics = append(topics, t)
	}
	var ends kadm.ListedOffsets
	if len(topics) > 0 {
		ends, _ = adm.ListEndOffsets(ctx, topics...)
	}
	var total int64
	for _, t := range slices.Sorted(maps.Keys(so)) {
		for _, p := range slices.Sorted(maps.Keys(so[t])) {
			o := so[t][p]
			row := partitionLagJSON{Topic: t, Partition: p}
			if o.Err != nil {
				row.Error = o.Err.Error()
			}
			if end, ok := ends.Lookup(t, p); ok && end.Err == nil {
				row.LogEndOffset = i64p(end.Offset)
			}
			if o.StartOffset >= 0 {
				row.CurrentOffset = i64p(o.StartOffset)
				switch {
				case o.Lag >= 0:
					row.Lag = i64p(o.Lag)
				case row.LogEndOffset != nil:
					row.Lag = i64p(max(*row.LogEndOffset-o.StartOffset, 0))
				}
			}
			if row.Lag != nil {
				total += *row.Lag
			}
			d.Partitions = append(d.Partitions, row)
		}
	}
	d.TotalLag = &total
	return d, true
}

// printDescribedShare prints a share group: its members and, per
// partition, the share start offset and the backlog past it.
func printDescribedShare(w io.Writer, d describedGroupJSON) error {
	fmt.Fprintf(w, "group %s: share group, state %s, epoch %d, assignor %s, coordinator %d at %s, %d member(s), backlog %s\n",
		d.Group, d.State, *d.Epoch, cli.Dash(d.Assignor), d.Coordinator.NodeID,
		net.JoinHostPort(d.Coordinator.Host, strconv.Itoa(int(d.Coordinator.Port))), len(d.Members), cli.Int64(d.TotalLag))
	tw := cli.NewTable(w)
	if len(d.Members) > 0 {
		tw.Row()
		tw.Row("MEMBER-ID", "EPOCH", "CLIENT-ID", "HOST", "ASSIGNED")
		for _, m := range d.Members {
			tw.Row(m.MemberID, strconv.Itoa(int(*m.MemberEpoch)), cli.Dash(m.ClientID), cli.Dash(m.Host), partitionsText(m.Assigned))
		}
	}
	if len(d.Partitions) > 0 {
		tw.Row()
		tw.Row("TOPIC", "PARTITION", "START-OFFSET", "LOG-END-OFFSET", "BACKLOG")
		for _, p := range d.Partitions {
			tw.Row(p.Topic, strconv.Itoa(int(p.Partition)), cli.Int64(p.CurrentOffset), cli.Int64(p.LogEndOffset), cli.Int64(p.Lag))
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

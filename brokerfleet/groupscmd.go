package main

// brokerfleet groups: list, describe and delete consumer groups over the
// Kafka admin API (kadm), against Strata or any Kafka-compatible cluster;
// groupsreset.go resets their offsets.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/stratamq/strata/brokerfleet/internal/cli"
)

const groupsHelp = `usage: brokerfleet groups <verb> [flags] [GROUP...]

Administers consumer groups through the Kafka admin API of any broker in
the cluster (Strata or Kafka).

verbs:
  list                 groups with their state, protocol type, members and total lag
  describe GROUP...    members, assignments, and committed offset, log end offset
                       and lag of every partition
  delete GROUP...      delete groups that have no active members
  reset GROUP -to-earliest | -to-latest | -to-offset N | -to-datetime T
                       move the committed offsets of a group with no active members

Every verb takes -bootstrap (default: STRATA_BOOTSTRAP, else 127.0.0.1:9092),
-json and -timeout. Run 'brokerfleet groups <verb> -help' for its flags.
`

const (
	groupsListHelp = `usage: brokerfleet groups list [flags]

Lists consumer groups. LAG is the sum, over the partitions the group has
committed offsets for, of the log end offset minus the committed offset;
"-" if the group has no committed offsets.

flags:
`
	groupsDescribeHelp = `usage: brokerfleet groups describe [flags] GROUP [GROUP...]

Describes groups like kafka-consumer-groups.sh --describe: state, protocol,
coordinator, members and their assignments, and one row per partition the
group is assigned or has committed offsets for. LAG is the log end offset
(high watermark) minus the committed offset; a partition without a commit
shows "-" for CURRENT-OFFSET and LAG.

flags:
`
	groupsDeleteHelp = `usage: brokerfleet groups delete [flags] GROUP [GROUP...]

Deletes groups and their committed offsets. A group with active members is
not deleted.

flags:
`
)

// groupStates are the classic group states ListGroups filters on.
var groupStates = []string{"Empty", "Stable", "PreparingRebalance", "CompletingRebalance", "Dead"}

func runGroups(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return cli.RunVerbs(ctx, "groups", groupsHelp, []cli.Verb{
		{Name: "list", Run: groupsList},
		{Name: "describe", Run: groupsDescribe},
		{Name: "delete", Run: groupsDelete},
		{Name: "reset", Run: groupsReset},
	}, args, stdout, stderr)
}

// groupNames returns the positional group names in order, without
// duplicates, or a usage error if there are none.
func groupNames(pos []string) ([]string, error) {
	return cli.Names(pos, "name at least one group")
}

func i64p(v int64) *int64 { return &v }

// groupMissing reports whether a describe result says the group does not
// exist: GROUP_ID_NOT_FOUND from DescribeGroups v6+, state Dead before.
func groupMissing(err error, state string) bool {
	return errors.Is(err, kerr.GroupIDNotFound) || (err == nil && state == "Dead")
}

// committedLag sums the lag of the partitions that have a committed offset
// (the numbers describe prints in its LAG column). It returns nil if there
// are none.
func committedLag(l kadm.GroupLag) *int64 {
	var total int64
	var n int
	for _, pl := range l.Sorted() {
		if pl.Commit.At < 0 || pl.Err != nil {
			continue
		}
		total += pl.Lag
		n++
	}
	if n == 0 {
		return nil
	}
	return &total
}

// ---- list ----

type listedGroupJSON struct {
	Group string `json:"group"`
	// Type is "classic" or "consumer" (KIP-848), as ListGroups v5 says.
	Type         string `json:"type,omitempty"`
	State        string `json:"state"`
	ProtocolType string `json:"protocolType"`
	Members      int    `json:"members"`
	Lag          *int64 `json:"lag"` // null: no committed offsets, or lag unknown
	Error        string `json:"error,omitempty"`
}

func groupsList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	a := cli.NewAdmin("groups list", groupsListHelp)
	var states []string
	a.Flags.Func("state", "only groups in `STATE[,STATE...]`, repeatable: "+strings.Join(groupStates, ", ")+" (any case)", func(s string) error {
		for _, v := range strings.Split(s, ",") {
			st, ok := canonicalState(strings.TrimSpace(v))
			if !ok {
				return fmt.Errorf("unknown group state %q: want %s", v, strings.Join(groupStates, ", "))
			}
			states = append(states, st)
		}
		return nil
	})
	pos, err := a.Parse(args, stderr)
	if err != nil {
		return err
	}
	if err := cli.NoArgs(pos); err != nil {
		return err
	}
	return a.Run(ctx, func(ctx context.Context, adm *kadm.Client) error {
		out, partial, err := listGroups(ctx, a, adm, states)
		if err != nil {
			return err
		}
		if err := a.Print(stdout, struct {
			Groups []listedGroupJSON `json:"groups"`
		}{out}, func() error { return printListedGroups(stdout, stderr, out) }); err != nil {
			return err
		}
		return partial
	})
}

func canonicalState(s string) (string, bool) {
	for _, st := range groupStates {
		if strings.EqualFold(s, st) {
			return st, true
		}
	}
	return "", false
}

// listGroups lists the groups in states (all if none) with their lag.
// Partial says which brokers did not answer, if only some did not.
func listGroups(ctx context.Context, a *cli.Admin, adm *kadm.Client, states []string) (out []listedGroupJSON, partial, _ error) {
	listed, err := adm.ListGroups(ctx, states...)
	if se, ok := errors.AsType[*kadm.ShardErrors](err); ok && !se.AllFailed {
		partial = a.Fail("list groups (some brokers did not answer)", err)
	} else if err != nil {
		return nil, nil, a.Fail("list groups", err)
	}
	out = make([]listedGroupJSON, 0, len(listed))
	names := listed.Groups()
	if len(names) == 0 {
		return out, partial, nil
	}
	lags, err := adm.Lag(ctx, names...)
	if err != nil {
		return nil, nil, a.Fail("describe groups", err)
	}
	for _, lg := range listed.Sorted() {
		g := listedGroupJSON{Group: lg.Group, Type: lg.GroupType, State: lg.State, ProtocolType: lg.ProtocolType}
		if lg.GroupType == "consumer" {
			consumerListed(ctx, adm, &g)
			out = append(out, g)
			continue
		}
		l, ok := lags[lg.Group]
		switch {
		case !ok:
			g.Error = "not described"
		case l.Error() != nil:
			g.Error = l.Error().Error()
		default:
			g.Members = len(l.Members)
			g.Lag = committedLag(l.Lag)
		}
		out = append(out, g)
	}
	return out, partial, nil
}

func printListedGroups(stdout, stderr io.Writer, out []listedGroupJSON) error {
	if len(out) == 0 {
		fmt.Fprintln(stdout, "no groups")
		return nil
	}
	tw := cli.NewTable(stdout)
	tw.Row("GROUP", "TYPE", "STATE", "PROTOCOL-TYPE", "MEMBERS", "LAG")
	for _, g := range out {
		tw.Row(g.Group, cli.Dash(g.Type), cli.Dash(g.State), cli.Dash(g.ProtocolType), strconv.Itoa(g.Members), cli.Int64(g.Lag))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, g := range out {
		if g.Error != "" {
			fmt.Fprintf(stderr, "group %s: %s\n", g.Group, g.Error)
		}
	}
	return nil
}

// ---- describe ----

type describedGroupJSON struct {
	Group string `json:"group"`
	// Type is "classic" or "consumer"; the consumer protocol's groups
	// add their epochs and assignor.
	Type            string             `json:"type,omitempty"`
	Epoch           *int32             `json:"epoch,omitempty"`
	AssignmentEpoch *int32             `json:"assignmentEpoch,omitempty"`
	Assignor        string             `json:"assignor,omitempty"`
	State           string             `json:"state,omitempty"`
	ProtocolType    string             `json:"protocolType,omitempty"`
	Protocol        string             `json:"protocol,omitempty"`
	Coordinator     *coordinatorJSON   `json:"coordinator,omitempty"`
	Members         []memberJSON       `json:"members"`
	Partitions      []partitionLagJSON `json:"partitions"`
	TotalLag        *int64             `json:"totalLag"` // over partitions with a commit
	Error           string             `json:"error,omitempty"`
}

type coordinatorJSON struct {
	NodeID int32  `json:"nodeId"`
	Host   string `json:"host"`
	Port   int32  `json:"port"`
}

type memberJSON struct {
	MemberID   string               `json:"memberId"`
	InstanceID *string              `json:"instanceId"`
	ClientID   string               `json:"clientId"`
	Host       string               `json:"host"`
	Assigned   []topicPartitionJSON `json:"assigned"`
	// Consumer-protocol groups: the member's epoch, the protocol it
	// speaks ("consumer" or "classic") and its target assignment.
	MemberEpoch *int32               `json:"memberEpoch,omitempty"`
	Protocol    string               `json:"protocol,omitempty"`
	Target      []topicPartitionJSON `json:"target,omitempty"`
}

type topicPartitionJSON struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

type partitionLagJSON struct {
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	CurrentOffset *int64 `json:"currentOffset"` // null: nothing committed
	LogEndOffset  *int64 `json:"logEndOffset"`
	Lag           *int64 `json:"lag"` // null: nothing committed, or an error
	MemberID      string `json:"memberId,omitempty"`
	Error         string `json:"error,omitempty"`
}

func groupsDescribe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	a := cli.NewAdmin("groups describe", groupsDescribeHelp)
	pos, err := a.Parse(args, stderr)
	if err != nil {
		return err
	}
	names, err := groupNames(pos)
	if err != nil {
		return err
	}
	return a.Run(ctx, func(ctx context.Context, adm *kadm.Client) error {
		lags, err := adm.Lag(ctx, names...)
		if err != nil {
			return a.Fail("describe groups", err)
		}
		var out []describedGroupJSON
		var errs []error
		for _, name := range names {
			d := describeOne(name, lags)
			if l, ok := lags[name]; ok && groupMissing(l.DescribeErr, l.State) {
				// Maybe a consumer-protocol group, which DescribeGroups
				// answers as Dead.
				if cd, ok := describeConsumer(ctx, adm, name); ok {
					d = cd
				} else if sd, ok := describeShare(ctx, adm, name); ok {
					d = sd
				}
			}
			if d.Error != "" {
				errs = append(errs, errors.New(d.Error))
			}
			out = append(out, d)
		}
		if err := a.Print(stdout, struct {
			Groups []describedGroupJSON `json:"groups"`
		}{out}, func() error { return printDescribedGroups(stdout, out) }); err != nil {
			return err
		}
		return errors.Join(errs...)
	})
}

func describeOne(name string, lags kadm.DescribedGroupLags) describedGroupJSON {
	d := describedGroupJSON{Group: name, Members: []memberJSON{}, Partitions: []partitionLagJSON{}}
	l, ok := lags[name]
	switch {
	case !ok:
		d.Error = fmt.Sprintf("group %s: not in the describe response", name)
		return d
	case groupMissing(l.DescribeErr, l.State):
		d.Error = fmt.Sprintf("group %s does not exist", name)
		return d
	case l.DescribeErr != nil:
		d.Error = fmt.Sprintf("describe group %s: %v", name, l.DescribeErr)
		return d
	case l.FetchErr != nil:
		d.Error = fmt.Sprintf("fetch committed offsets of group %s: %v", name, l.FetchErr)
		return d
	}
	d.State, d.ProtocolType, d.Protocol = l.State, l.ProtocolType, l.Protocol
	d.Coordinator = &coordinatorJSON{NodeID: l.Coordinator.NodeID, Host: l.Coordinator.Host, Port: l.Coordinator.Port}
	for _, m := range l.Members {
		mj := memberJSON{MemberID: m.MemberID, InstanceID: m.InstanceID, ClientID: m.ClientID, Host: m.ClientHost, Assigned: []topicPartitionJSON{}}
		if a, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range a.Topics {
				ps := append([]int32(nil), t.Partitions...)
				sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
				mj.Assigned = append(mj.Assigned, topicPartitionJSON{Topic: t.Topic, Partitions: ps})
			}
			sort.Slice(mj.Assigned, func(i, j int) bool { return mj.Assigned[i].Topic < mj.Assigned[j].Topic })
		}
		d.Members = append(d.Members, mj)
	}
	for _, pl := range l.Lag.Sorted() {
		p := partitionLagJSON{Topic: pl.Topic, Partition: pl.Partition}
		if pl.Member != nil {
			p.MemberID = pl.Member.MemberID
		}
		if pl.End.Err == nil {
			p.LogEndOffset = i64p(pl.End.Offset)
		}
		p.CurrentOffset, p.Lag, p.Error = commitAndLag(pl)
		d.Partitions = append(d.Partitions, p)
	}
	d.TotalLag = committedLag(l.Lag)
	return d
}

// commitAndLag returns a partition's committed offset and lag (nil if
// nothing is committed, the lag also if it is unknown) and its error.
func commitAndLag(pl kadm.GroupMemberLag) (current, lag *int64, err string) {
	if pl.Commit.At >= 0 {
		current = i64p(pl.Commit.At)
		if pl.Err == nil {
			lag = i64p(pl.Lag)
		}
	}
	if pl.Err != nil {
		err = pl.Err.Error()
	}
	return current, lag, err
}

// printDescribedGroups prints the groups that were described, a blank
// line between two.
func printDescribedGroups(w io.Writer, out []describedGroupJSON) error {
	first := true
	for _, d := range out {
		if d.Error != "" {
			continue
		}
		if !first {
			fmt.Fprintln(w)
		}
		first = false
		if err := printDescribed(w, d); err != nil {
			return err
		}
	}
	return nil
}

func printDescribed(w io.Writer, d describedGroupJSON) error {
	protocol := cli.Dash(d.ProtocolType)
	if d.Protocol != "" {
		protocol += " (" + d.Protocol + ")"
	}
	if d.Type == "consumer" {
		return printDescribedConsumer(w, d)
	}
	if d.Type == "share" {
		return printDescribedShare(w, d)
	}
	fmt.Fprintf(w, "group %s: state %s, protocol %s, coordinator %d at %s, %d member(s), total lag %s\n",
		d.Group, d.State, protocol, d.Coordinator.NodeID,
		net.JoinHostPort(d.Coordinator.Host, strconv.Itoa(int(d.Coordinator.Port))), len(d.Members), cli.Int64(d.TotalLag))
	tw := cli.NewTable(w)
	if len(d.Members) > 0 {
		tw.Row()
		tw.Row("MEMBER-ID", "INSTANCE-ID", "CLIENT-ID", "HOST", "ASSIGNED")
		for _, m := range d.Members {
			var assigned []string
			for _, a := range m.Assigned {
				ps := make([]string, len(a.Partitions))
				for i, p := range a.Partitions {
					ps[i] = strconv.Itoa(int(p))
				}
				assigned = append(assigned, a.Topic+":"+strings.Join(ps, ","))
			}
			instance := "-"
			if m.InstanceID != nil {
				instance = *m.InstanceID
			}
			tw.Row(m.MemberID, instance, cli.Dash(m.ClientID), cli.Dash(m.Host), cli.Dash(strings.Join(assigned, " ")))
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

// ---- delete ----

type deletedGroupJSON struct {
	Group   string `json:"group"`
	Deleted bool   `json:"deleted"`
	Error   string `json:"error,omitempty"`
}

func groupsDelete(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	a := cli.NewAdmin("groups delete", groupsDeleteHelp)
	pos, err := a.Parse(args, stderr)
	if err != nil {
		return err
	}
	names, err := groupNames(pos)
	if err != nil {
		return err
	}
	return a.Run(ctx, func(ctx context.Context, adm *kadm.Client) error {
		resps, err := adm.DeleteGroups(ctx, names...)
		var shardErr error // why groups missing from resps got no answer
		if _, ok := errors.AsType[*kadm.ShardErrors](err); ok {
			shardErr = err
		} else if err != nil {
			return a.Fail("delete groups", err)
		}
		out, outs := deletedGroups(a, names, resps, shardErr)
		return a.Report(stdout, "group", "deleted", outs, struct {
			Groups []deletedGroupJSON `json:"groups"`
		}{out})
	})
}

// deletedGroups says what became of each of names; shardErr is why the
// groups missing from resps got no answer.
func deletedGroups(a *cli.Admin, names []string, resps kadm.DeleteGroupResponses, shardErr error) ([]deletedGroupJSON, []cli.Outcome) {
	var out []deletedGroupJSON
	var outs []cli.Outcome
	for _, name := range names {
		g := deletedGroupJSON{Group: name}
		r, ok := resps[name]
		switch {
		case !ok && shardErr != nil:
			g.Error = a.Fail("no answer", shardErr).Error()
		case !ok:
			g.Error = "not in the delete response"
		case r.Err == nil:
			g.Deleted = true
		case errors.Is(r.Err, kerr.NonEmptyGroup):
			g.Error = "it has active members; stop them before deleting the group (" + r.Err.Error() + ")"
		case errors.Is(r.Err, kerr.GroupIDNotFound):
			g.Error = "it does not exist"
		default:
			g.Error = r.Err.Error()
			if r.ErrMessage != "" {
				g.Error += ": " + r.ErrMessage
			}
		}
		out = append(out, g)
		outs = append(outs, cli.Outcome{Name: name, Done: g.Deleted, Error: g.Error})
	}
	return out, outs
}

package main

// brokerfleet partitions: list reassignments in progress and elect
// leaders; partitionsreassign.go reassigns partitions to brokers.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/stratamq/strata/brokerfleet/internal/cli"
)

const partitionsHelp = `usage: brokerfleet partitions <verb> [flags]

Moves partitions between brokers and elects their leaders through the
Kafka admin API of any broker in the cluster.

verbs:
  reassign -plan FILE | -move TOPIC:PARTITION=B,B,... [-cancel] [-wait]
                       move partitions' replicas to the listed brokers (the
                       first is the preferred leader), or cancel their moves
  list-reassignments [TOPIC...]
                       reassignments in progress
  elect [-type preferred|unclean] (-all | TOPIC[:PARTITION]...)
                       elect leaders: the preferred replica, or any live
                       replica of a partition without a leader

Every verb takes -bootstrap (default: STRATA_BOOTSTRAP, else 127.0.0.1:9092),
-json and -timeout. Run 'brokerfleet partitions <verb> -help' for its flags.
`

const (
	partitionsListHelp = `usage: brokerfleet partitions list-reassignments [flags] [TOPIC...]

Lists the partitions being reassigned (of every topic, or of the named
ones): their replicas, and the replicas being added and removed.

flags:
`
	partitionsElectHelp = `usage: brokerfleet partitions elect [flags] (-all | TOPIC[:PARTITION]...)

Elects partition leaders (ElectLeaders). -type preferred moves leadership
to the preferred replica (the first of the replica list) if it is live and
in sync; -type unclean elects any live replica of a partition that has no
leader, which may lose acknowledged records. A TOPIC without :PARTITION
means all its partitions.

flags:
`
)

func runPartitions(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return cli.RunVerbs(ctx, "partitions", partitionsHelp, []cli.Verb{
		{Name: "reassign", Run: partitionsReassign},
		{Name: "list-reassignments", Run: partitionsListReassignments},
		{Name: "elect", Run: partitionsElect},
	}, args, stdout, stderr)
}

// unsupported adds a hint to an error that says the cluster does not
// serve api.
func unsupported(err error, api string) error {
	if errors.Is(err, kerr.UnsupportedVersion) || strings.Contains(err.Error(), "broker is too old") {
		return fmt.Errorf("%w (the cluster does not support %s)", err, api)
	}
	return err
}

// partitionsFailed returns nil if no partition failed, else an error
// saying what failed for failed (TOPIC/PARTITION: ERROR) of n partitions.
func partitionsFailed(what string, failed []string, n int) error {
	if len(failed) == 0 {
		return nil
	}
	return fmt.Errorf("%s: %d of %d partitions failed: %s", what, len(failed), n, strings.Join(failed, "; "))
}

func cmpTopicPartition(t1 string, p1 int32, t2 string, p2 int32) int {
	if c := strings.Compare(t1, t2); c != 0 {
		return c
	}
	return int(p1) - int(p2)
}

func sortedKeys[K string | int32, V any](m map[K]V) []K {
	ks := make([]K, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// parseBrokerIDs parses 1,2,3 into broker ids: non-negative, no repeats.
func parseBrokerIDs(s string) ([]int32, error) {
	var ids []int32
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseInt(strings.TrimSpace(f), 10, 32)
		if err != nil || v < 0 {
			return nil, fmt.Errorf("%q is not a broker id", f)
		}
		for _, id := range ids {
			if id == int32(v) {
				return nil, fmt.Errorf("broker %d is listed twice", v)
			}
		}
		ids = append(ids, int32(v))
	}
	return ids, nil
}

// parseTopicPartition parses TOPIC:PARTITION; the partition is after the
// last colon.
func parseTopicPartition(s string) (string, int32, error) {
	i := strings.LastIndexByte(s, ':')
	if i <= 0 {
		return "", 0, fmt.Errorf("%q is not TOPIC:PARTITION", s)
	}
	p, err := strconv.ParseInt(s[i+1:], 10, 32)
	if err != nil || p < 0 {
		return "", 0, fmt.Errorf("%q: %q is not a partition number", s, s[i+1:])
	}
	return s[:i], int32(p), nil
}

// ---- list-reassignments ----

type listedReassignmentJSON struct {
	Topic            string  `json:"topic"`
	Partition        int32   `json:"partition"`
	Replicas         []int32 `json:"replicas"`
	AddingReplicas   []int32 `json:"addingReplicas"`
	RemovingReplicas []int32 `json:"removingReplicas"`
}

func partitionsListReassignments(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	a := cli.NewAdmin("partitions list-reassignments", partitionsListHelp)
	pos, err := a.Parse(args, stderr)
	if err != nil {
		return err
	}
	return a.Run(ctx, func(ctx context.Context, adm *kadm.Client) error {
		var td kadm.TopicDetails
		var err error
		if len(pos) > 0 {
			names, _ := topicNames(pos)
			if td, err = describeTopics(ctx, adm, a, names); err != nil {
				return err
			}
		} else if td, err = adm.ListTopicsWithInternal(ctx); err != nil {
			return a.Fail("list topics", err)
		}
		out := []listedReassignmentJSON{}
		if set := td.TopicsSet(); len(set) > 0 {
			listed, err := adm.ListPartitionReassignments(ctx, set)
			if err != nil {
				return a.Fail("list partition reassignments", unsupported(err, "ListPartitionReassignments"))
			}
			for _, r := range listed.Sorted() {
				out = append(out, listedReassignmentJSON{Topic: r.Topic, Partition: r.Partition,
					Replicas: orEmpty(r.Replicas), AddingReplicas: orEmpty(r.AddingReplicas), RemovingReplicas: orEmpty(r.RemovingReplicas)})
			}
		}
		return a.Print(stdout, struct {
			Reassignments []listedReassignmentJSON `json:"reassignments"`
		}{out}, func() error { return printReassignments(stdout, out) })
	})
}

func printReassignments(w io.Writer, out []listedReassignmentJSON) error {
	if len(out) == 0 {
		fmt.Fprintln(w, "no reassignments in progress")
		return nil
	}
	tw := cli.NewTable(w)
	tw.Row("TOPIC", "PARTITION", "REPLICAS", "ADDING", "REMOVING")
	for _, r := range out {
		tw.Row(r.Topic, strconv.Itoa(int(r.Partition)), cli.Int32s(r.Replicas), cli.Int32s(r.AddingReplicas), cli.Int32s(r.RemovingReplicas))
	}
	return tw.Flush()
}

// ---- elect ----

type electedPartitionJSON struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Elected   bool   `json:"elected"`
	NotNeeded bool   `json:"notNeeded"` // already led by the preferred replica (preferred), or led (unclean)
	Error     string `json:"error,omitempty"`
}

type electJSON struct {
	Type       string                 `json:"type"`
	Partitions []electedPartitionJSON `json:"partitions"`
}

// electArgs are the partitions elect is given: every partition (-all),
// or TOPIC:PARTITION arguments in named and TOPIC arguments in whole.
type electArgs struct {
	all   bool
	named kadm.TopicsSet
	whole []string
}

func parseElectArgs(all bool, pos []string) (electArgs, error) {
	e := electArgs{all: all, named: kadm.TopicsSet{}}
	switch {
	case all && len(pos) > 0:
		return e, cli.Usagef("-all cannot be combined with partitions (argument %q)", pos[0])
	case !all && len(pos) == 0:
		return e, cli.Usagef("name the partitions (TOPIC:PARTITION or TOPIC arguments) or give -all")
	}
	for _, s := range pos {
		if !strings.Contains(s, ":") {
			if !slices.Contains(e.whole, s) {
				e.whole = append(e.whole, s)
			}
			continue
		}
		t, p, err := parseTopicPartition(s)
		if err != nil {
			return e, cli.Usagef("argument %v", err)
		}
		e.named.Add(t, p)
	}
	return e, nil
}

// electHow parses -type.
func electHow(kind string) (kadm.ElectLeadersHow, error) {
	switch kind {
	case "preferred":
		return kadm.ElectPreferredReplica, nil
	case "unclean":
		return kadm.ElectLiveReplica, nil
	}
	return 0, cli.BadFlag("type", kind, "want preferred or unclean")
}

// set checks the partitions exist and returns them, nil for all.
func (e electArgs) set(ctx context.Context, adm *kadm.Client, a *cli.Admin) (kadm.TopicsSet, error) {
	if e.all {
		return nil, nil
	}
	td, err := describeTopics(ctx, adm, a, append(slices.Clone(e.whole), e.named.Topics()...))
	if err != nil {
		return nil, err
	}
	set := kadm.TopicsSet{}
	for _, t := range e.whole {
		for p := range td[t].Partitions {
			set.Add(t, p)
		}
	}
	for _, tp := range e.named.Sorted() {
		for _, p := range tp.Partitions {
			if _, ok := td[tp.Topic].Partitions[p]; !ok {
				return nil, fmt.Errorf("topic %s has no partition %d; it has %d (argument %s:%d)", tp.Topic, p, len(td[tp.Topic].Partitions), tp.Topic, p)
			}
			set.Add(tp.Topic, p)
		}
	}
	return set, nil
}

func partitionsElect(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	a := cli.NewAdmin("partitions elect", partitionsElectHelp)
	kind := a.Flags.String("type", "preferred", "election `type`: preferred or unclean")
	all := a.Flags.Bool("all", false, "elect the leaders of every partition of every topic")
	pos, err := a.Parse(args, stderr)
	if err != nil {
		return err
	}
	how, err := electHow(*kind)
	if err != nil {
		return err
	}
	want, err := parseElectArgs(*all, pos)
	if err != nil {
		return err
	}
	return a.Run(ctx, func(ctx context.Context, adm *kadm.Client) error {
		set, err := want.set(ctx, adm, a)
		if err != nil {
			return err
		}
		results, err := adm.ElectLeaders(ctx, how, set)
		if err != nil {
			return a.Fail("elect leaders", unsupported(err, "ElectLeaders"))
		}
		doc, failed := elected(*kind, results)
		if err := a.Print(stdout, doc, func() error { return printElected(stdout, doc, how) }); err != nil {
			return err
		}
		return partitionsFailed("elect leaders", failed, len(doc.Partitions))
	})
}

// elected returns what an election of kind did to each partition, and
// the partitions that failed as TOPIC/PARTITION: ERROR.
func elected(kind string, results kadm.ElectLeadersResults) (electJSON, []string) {
	doc := electJSON{Type: kind, Partitions: []electedPartitionJSON{}}
	var failed []string
	for _, t := range sortedKeys(results) {
		for _, p := range sortedKeys(results[t]) {
			r := results[t][p]
			e := electedPartitionJSON{Topic: t, Partition: p}
			switch {
			case r.Err == nil:
				e.Elected = true
			case errors.Is(r.Err, kerr.ElectionNotNeeded):
				e.NotNeeded = true
			default:
				e.Error = errWithMessage(r.Err, r.ErrMessage)
				failed = append(failed, fmt.Sprintf("%s/%d: %s", t, p, e.Error))
			}
			doc.Partitions = append(doc.Partitions, e)
		}
	}
	return doc, failed
}

func printElected(w io.Writer, doc electJSON, how kadm.ElectLeadersHow) error {
	tw := cli.NewTable(w)
	tw.Row("TOPIC", "PARTITION", "RESULT")
	for _, e := range doc.Partitions {
		result := "elected"
		switch {
		case e.NotNeeded && how == kadm.ElectPreferredReplica:
			result = "not needed: the preferred replica leads"
		case e.NotNeeded:
			result = "not needed: it has a leader"
		case e.Error != "":
			result = "failed: " + e.Error
		}
		tw.Row(e.Topic, strconv.Itoa(int(e.Partition)), result)
	}
	return tw.Flush()
}

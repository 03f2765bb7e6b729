package main

// brokerfleet partitions: reassign partitions to brokers (Kafka's
// reassignment plans), list reassignments in progress, and elect leaders.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
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
	partitionsReassignHelp = `usage: brokerfleet partitions reassign [flags] (-plan FILE | -move TOPIC:PARTITION=B,B,...)

Starts moving partitions to new replica lists (AlterPartitionReassignments).
The partitions come from a plan in Kafka's reassignment format,

  {"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2,3]}]}

(-plan - reads it from standard input), or from -move flags. The current
assignment is printed in the same format, to roll back with -plan. With
-cancel the reassignments of those partitions are cancelled instead
(replicas may then be omitted). With -wait the command shows the
partitions done until none of them is still being reassigned.

flags:
`
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

// stdin is where -plan - reads; tests replace it.
var stdin io.Reader = os.Stdin

func runPartitions(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runVerbs(ctx, "partitions", partitionsHelp, []verb{{"reassign", partitionsReassign}, {"list-reassignments", partitionsListReassignments}, {"elect", partitionsElect}}, args, stdout, stderr)
}

// unsupported adds a hint to an error that says the cluster does not
// serve api.
func unsupported(err error, api string) error {
	if errors.Is(err, kerr.UnsupportedVersion) || strings.Contains(err.Error(), "broker is too old") {
		return fmt.Errorf("%w (the cluster does not support %s)", err, api)
	}
	return err
}

// waitTimeout raises the default -timeout, which bounds the whole
// command, when the command waits for data to move.
func waitTimeout(fs *flag.FlagSet, af *adminFlags, wait bool) {
	if wait && !flagSet(fs, "timeout") {
		af.timeout = time.Hour
	}
}

// ---- reassign ----

// reassignment is one partition of a plan in Kafka's format.
type reassignment struct {
	Topic     string  `json:"topic"`
	Partition int32   `json:"partition"`
	Replicas  []int32 `json:"replicas"`

	source string // flag -plan or flag -move, for errors
}

// reassignPlan is Kafka's reassignment JSON (kafka-reassign-partitions.sh).
type reassignPlan struct {
	Version    int            `json:"version"`
	Partitions []reassignment `json:"partitions"`
}

// moveFlag collects -move TOPIC:PARTITION[=B,B,...] flags.
type moveFlag []reassignment

func (f *moveFlag) String() string {
	if f == nil {
		return ""
	}
	var s []string
	for _, m := range *f {
		s = append(s, fmt.Sprintf("%s:%d=%s", m.Topic, m.Partition, int32List(m.Replicas)))
	}
	return strings.Join(s, " ")
}

func (f *moveFlag) Set(s string) error {
	tp, list, hasList := strings.Cut(s, "=")
	topic, p, err := parseTopicPartition(tp)
	if err != nil {
		return fmt.Errorf("want TOPIC:PARTITION=BROKER,BROKER,...: %v", err)
	}
	m := reassignment{Topic: topic, Partition: p, source: "flag -move"}
	if hasList {
		if m.Replicas, err = parseBrokerIDs(list); err != nil {
			return fmt.Errorf("want TOPIC:PARTITION=BROKER,BROKER,...: %v", err)
		}
	}
	*f = append(*f, m)
	return nil
}

// readPlan reads and checks a reassignment plan from path ("-": stdin).
func readPlan(path string) ([]reassignment, error) {
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, usageError{fmt.Errorf("flag -plan: %w", err)}
	}
	name := path
	if path == "-" {
		name = "standard input"
	}
	var plan reassignPlan
	dec := json.NewDecoder(strings.NewReader(string(data)))
	if err := dec.Decode(&plan); err != nil {
		return nil, usageError{fmt.Errorf("flag -plan: %s is not a reassignment plan ({\"version\":1,\"partitions\":[{\"topic\":...,\"partition\":...,\"replicas\":[...]}]}): %v", name, err)}
	}
	if dec.More() {
		return nil, usageError{fmt.Errorf("flag -plan: %s: more than one JSON document", name)}
	}
	if plan.Version != 1 {
		return nil, usageError{fmt.Errorf("flag -plan: %s: version %d: want 1", name, plan.Version)}
	}
	if len(plan.Partitions) == 0 {
		return nil, usageError{fmt.Errorf("flag -plan: %s: no partitions", name)}
	}
	for i := range plan.Partitions {
		r := &plan.Partitions[i]
		r.source = "flag -plan"
		switch {
		case r.Topic == "":
			return nil, usageError{fmt.Errorf("flag -plan: %s: partitions[%d]: no topic", name, i)}
		case r.Partition < 0:
			return nil, usageError{fmt.Errorf("flag -plan: %s: partitions[%d]: partition %d is negative", name, i, r.Partition)}
		}
		for j, id := range r.Replicas {
			if id < 0 || slices.Contains(r.Replicas[:j], id) {
				return nil, usageError{fmt.Errorf("flag -plan: %s: partitions[%d] (%s/%d): replicas %v: broker %d is negative or repeated", name, i, r.Topic, r.Partition, r.Replicas, id)}
			}
		}
	}
	return plan.Partitions, nil
}

type reassignedPartitionJSON struct {
	Topic           string  `json:"topic"`
	Partition       int32   `json:"partition"`
	CurrentReplicas []int32 `json:"currentReplicas"`
	NewReplicas     []int32 `json:"newReplicas"` // null when cancelling
	Note            string  `json:"note,omitempty"`
	Error           string  `json:"error,omitempty"`
}

type reassignJSON struct {
	Cancel     bool                      `json:"cancel"`
	Partitions []reassignedPartitionJSON `json:"partitions"`
	// Rollback is the assignment before the command, in plan format.
	Rollback reassignPlan `json:"rollback"`
	Waited   bool         `json:"waited"`
	Complete bool         `json:"complete"` // waited, and none is still reassigning
}

func partitionsReassign(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		af          adminFlags
		planPath    string
		moves       moveFlag
		cancelMoves bool
		wait        bool
		interval    time.Duration
	)
	fs := newCmdFlags("partitions reassign", partitionsReassignHelp)
	af.register(fs)
	fs.StringVar(&planPath, "plan", "", "reassignment plan `FILE` in Kafka's JSON format; - reads standard input")
	fs.Var(&moves, "move", "move `TOPIC:PARTITION=B,B,...` to brokers B (the first is the preferred leader), repeatable")
	fs.BoolVar(&cancelMoves, "cancel", false, "cancel the reassignments of the partitions instead")
	fs.BoolVar(&wait, "wait", false, "wait until none of the partitions is being reassigned, showing progress; -timeout then defaults to 1h")
	fs.DurationVar(&interval, "interval", time.Second, "how often -wait polls the reassignments")
	pos, err := af.parse(fs, args, stderr)
	if err != nil {
		return err
	}
	waitTimeout(fs, &af, wait)
	switch {
	case len(pos) > 0:
		return usageError{fmt.Errorf("unexpected argument %q: partitions come from -plan or -move", pos[0])}
	case planPath == "" && len(moves) == 0:
		return usageError{errors.New("name the partitions: give -plan FILE or -move TOPIC:PARTITION=BROKER,...")}
	case planPath != "" && len(moves) > 0:
		return usageError{errors.New("-plan and -move cannot be combined")}
	case interval <= 0:
		return usageError{fmt.Errorf("invalid value %s for flag -interval: must be positive", interval)}
	}
	want := []reassignment(moves)
	if planPath != "" {
		if want, err = readPlan(planPath); err != nil {
			return err
		}
	}
	seen := map[string]bool{}
	for _, r := range want {
		key := r.Topic + ":" + strconv.Itoa(int(r.Partition))
		if seen[key] {
			return usageError{fmt.Errorf("%s: partition %s/%d is listed twice", r.source, r.Topic, r.Partition)}
		}
		seen[key] = true
		if !cancelMoves && len(r.Replicas) == 0 {
			return usageError{fmt.Errorf("%s: partition %s/%d: no replicas; list the brokers (TOPIC:PARTITION=B,B,...), or give -cancel", r.source, r.Topic, r.Partition)}
		}
	}

	adm, ctx, cancel, err := af.connect(ctx)
	if err != nil {
		return err
	}
	defer adm.Close()
	defer cancel()

	// Check the partitions and brokers exist: a clearer answer than the
	// cluster's, and the current assignment to roll back to.
	var topics []string
	for _, r := range want {
		if !slices.Contains(topics, r.Topic) {
			topics = append(topics, r.Topic)
		}
	}
	md, err := adm.Metadata(ctx, topics...)
	if err != nil {
		return af.fail("describe topics", err)
	}
	brokers := map[int32]bool{}
	for _, b := range md.Brokers {
		brokers[b.NodeID] = true
	}
	doc := reassignJSON{Cancel: cancelMoves, Rollback: reassignPlan{Version: 1, Partitions: []reassignment{}}}
	var req kadm.AlterPartitionAssignmentsReq
	set := kadm.TopicsSet{}
	for _, r := range want {
		td, ok := md.Topics[r.Topic]
		if !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
			return fmt.Errorf("%s: topic %s does not exist", r.source, r.Topic)
		}
		p, ok := td.Partitions[r.Partition]
		if !ok {
			return fmt.Errorf("%s: topic %s has no partition %d; it has %d", r.source, r.Topic, r.Partition, len(td.Partitions))
		}
		if !cancelMoves {
			for _, id := range r.Replicas {
				if !brokers[id] {
					return fmt.Errorf("%s: %s/%d: unknown broker %d; the cluster has brokers %s", r.source, r.Topic, r.Partition, id, brokerIDs(md))
				}
			}
		}
		rp := reassignedPartitionJSON{Topic: r.Topic, Partition: r.Partition, CurrentReplicas: orEmpty(p.Replicas)}
		if cancelMoves {
			req.CancelAssign(r.Topic, r.Partition)
		} else {
			rp.NewReplicas = r.Replicas
			req.Assign(r.Topic, r.Partition, r.Replicas)
		}
		doc.Partitions = append(doc.Partitions, rp)
		doc.Rollback.Partitions = append(doc.Rollback.Partitions, reassignment{Topic: r.Topic, Partition: r.Partition, Replicas: rp.CurrentReplicas})
		set.Add(r.Topic, r.Partition)
	}
	// A partition already being reassigned lists its adding replicas in
	// Metadata: the assignment to roll back to is without them.
	if inflight, err := adm.ListPartitionReassignments(ctx, set); err == nil {
		for i, p := range doc.Partitions {
			if r, ok := inflight[p.Topic][p.Partition]; ok && len(r.AddingReplicas) > 0 {
				orig := slices.DeleteFunc(slices.Clone(p.CurrentReplicas), func(id int32) bool { return slices.Contains(r.AddingReplicas, id) })
				doc.Partitions[i].CurrentReplicas = orig
				doc.Rollback.Partitions[i].Replicas = orig
			}
		}
	}
	slices.SortFunc(doc.Partitions, func(a, b reassignedPartitionJSON) int {
		return cmpTopicPartition(a.Topic, a.Partition, b.Topic, b.Partition)
	})
	slices.SortFunc(doc.Rollback.Partitions, func(a, b reassignment) int {
		return cmpTopicPartition(a.Topic, a.Partition, b.Topic, b.Partition)
	})

	what := "reassign partitions"
	if cancelMoves {
		what = "cancel partition reassignments"
	}
	resps, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		return af.fail(what, unsupported(err, "AlterPartitionReassignments"))
	}
	var failed []string
	for i, p := range doc.Partitions {
		r, ok := resps[p.Topic][p.Partition]
		switch {
		case !ok:
			doc.Partitions[i].Error = "not in the response"
		case r.Err == nil:
		case cancelMoves && errors.Is(r.Err, kerr.NoReassignmentInProgress):
			doc.Partitions[i].Note = "no reassignment was in progress"
		default:
			doc.Partitions[i].Error = errWithMessage(r.Err, r.ErrMessage)
		}
		if e := doc.Partitions[i].Error; e != "" {
			failed = append(failed, fmt.Sprintf("%s/%d: %s", p.Topic, p.Partition, e))
			set.Delete(p.Topic, p.Partition) // nothing to wait for
		}
	}
	if !af.json {
		printReassigned(stdout, doc)
	}
	if len(failed) > 0 {
		if af.json {
			if err := writeJSON(stdout, doc); err != nil {
				return err
			}
		}
		return fmt.Errorf("%s: %d of %d partitions failed: %s", what, len(failed), len(doc.Partitions), strings.Join(failed, "; "))
	}
	if wait {
		pw := stdout
		if af.json {
			pw = stderr
		}
		doc.Waited = true
		if err := waitReassigned(ctx, adm, &af, set, interval, pw, stderr); err != nil {
			if af.json {
				_ = writeJSON(stdout, doc)
			}
			return err
		}
		doc.Complete = true
	}
	if af.json {
		return writeJSON(stdout, doc)
	}
	if wait {
		fmt.Fprintf(stdout, "no partition is being reassigned any more (%d partition(s))\n", len(doc.Partitions))
	}
	return nil
}

func cmpTopicPartition(t1 string, p1 int32, t2 string, p2 int32) int {
	if c := strings.Compare(t1, t2); c != 0 {
		return c
	}
	return int(p1) - int(p2)
}

func printReassigned(w io.Writer, doc reassignJSON) {
	tw := newTable(w)
	row(tw, "TOPIC", "PARTITION", "CURRENT-REPLICAS", "NEW-REPLICAS", "RESULT")
	for _, p := range doc.Partitions {
		result := "started"
		if doc.Cancel {
			result = "cancelled"
		}
		switch {
		case p.Error != "":
			result = "failed: " + p.Error
		case p.Note != "":
			result += ": " + p.Note
		}
		row(tw, p.Topic, strconv.Itoa(int(p.Partition)), int32List(p.CurrentReplicas), int32List(p.NewReplicas), result)
	}
	_ = tw.Flush()
	if !doc.Cancel {
		rb, _ := json.Marshal(doc.Rollback)
		fmt.Fprintf(w, "current assignment (save it to roll back with -plan):\n%s\n", rb)
	}
}

// waitReassigned polls ListPartitionReassignments until none of set is
// being reassigned, showing progress on w.
func waitReassigned(ctx context.Context, adm *kadm.Client, af *adminFlags, set kadm.TopicsSet, interval time.Duration, w, stderr io.Writer) error {
	total := 0
	set.Each(func(string, int32) { total++ })
	bar := newProgress(w)
	defer bar.finish()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		listed, err := adm.ListPartitionReassignments(ctx, set)
		switch {
		case err != nil && ctx.Err() != nil:
			return af.fail("wait for the reassignments", ctx.Err())
		case err != nil && unsupported(err, "") != err:
			return af.fail("wait for the reassignments", unsupported(err, "ListPartitionReassignments"))
		case err != nil:
			bar.finish()
			fmt.Fprintf(stderr, "list partition reassignments: %v (retrying)\n", unsupported(err, "ListPartitionReassignments"))
		default:
			left := 0
			listed.Each(func(r kadm.ListPartitionReassignmentsResponse) {
				if set.Lookup(r.Topic, r.Partition) {
					left++
				}
			})
			bar.update(total-left, total, "partitions reassigned")
			if left == 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return af.fail("wait for the reassignments", ctx.Err())
		case <-tick.C:
		}
	}
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
	var af adminFlags
	fs := newCmdFlags("partitions list-reassignments", partitionsListHelp)
	af.register(fs)
	pos, err := af.parse(fs, args, stderr)
	if err != nil {
		return err
	}
	adm, ctx, cancel, err := af.connect(ctx)
	if err != nil {
		return err
	}
	defer adm.Close()
	defer cancel()

	var td kadm.TopicDetails
	if len(pos) > 0 {
		names, _ := topicNames(pos)
		if td, err = describeTopics(ctx, adm, &af, names); err != nil {
			return err
		}
	} else if td, err = adm.ListTopicsWithInternal(ctx); err != nil {
		return af.fail("list topics", err)
	}
	out := []listedReassignmentJSON{}
	if set := td.TopicsSet(); len(set) > 0 {
		listed, err := adm.ListPartitionReassignments(ctx, set)
		if err != nil {
			return af.fail("list partition reassignments", unsupported(err, "ListPartitionReassignments"))
		}
		for _, r := range listed.Sorted() {
			out = append(out, listedReassignmentJSON{Topic: r.Topic, Partition: r.Partition,
				Replicas: orEmpty(r.Replicas), AddingReplicas: orEmpty(r.AddingReplicas), RemovingReplicas: orEmpty(r.RemovingReplicas)})
		}
	}
	if af.json {
		return writeJSON(stdout, struct {
			Reassignments []listedReassignmentJSON `json:"reassignments"`
		}{out})
	}
	if len(out) == 0 {
		fmt.Fprintln(stdout, "no reassignments in progress")
		return nil
	}
	tw := newTable(stdout)
	row(tw, "TOPIC", "PARTITION", "REPLICAS", "ADDING", "REMOVING")
	for _, r := range out {
		row(tw, r.Topic, strconv.Itoa(int(r.Partition)), int32List(r.Replicas), int32List(r.AddingReplicas), int32List(r.RemovingReplicas))
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

func partitionsElect(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		af    adminFlags
		kind  string
		all   bool
		how   kadm.ElectLeadersHow
		named kadm.TopicsSet // TOPIC:PARTITION arguments
		whole []string       // TOPIC arguments
	)
	fs := newCmdFlags("partitions elect", partitionsElectHelp)
	af.register(fs)
	fs.StringVar(&kind, "type", "preferred", "election `type`: preferred or unclean")
	fs.BoolVar(&all, "all", false, "elect the leaders of every partition of every topic")
	pos, err := af.parse(fs, args, stderr)
	if err != nil {
		return err
	}
	switch kind {
	case "preferred":
		how = kadm.ElectPreferredReplica
	case "unclean":
		how = kadm.ElectLiveReplica
	default:
		return usageError{fmt.Errorf("invalid value %q for flag -type: want preferred or unclean", kind)}
	}
	switch {
	case all && len(pos) > 0:
		return usageError{fmt.Errorf("-all cannot be combined with partitions (argument %q)", pos[0])}
	case !all && len(pos) == 0:
		return usageError{errors.New("name the partitions (TOPIC:PARTITION or TOPIC arguments) or give -all")}
	}
	named = kadm.TopicsSet{}
	for _, a := range pos {
		if !strings.Contains(a, ":") {
			if !slices.Contains(whole, a) {
				whole = append(whole, a)
			}
			continue
		}
		t, p, err := parseTopicPartition(a)
		if err != nil {
			return usageError{fmt.Errorf("argument %v", err)}
		}
		named.Add(t, p)
	}
	adm, ctx, cancel, err := af.connect(ctx)
	if err != nil {
		return err
	}
	defer adm.Close()
	defer cancel()

	var set kadm.TopicsSet // nil: all
	if !all {
		check := append(slices.Clone(whole), named.Topics()...)
		td, err := describeTopics(ctx, adm, &af, check)
		if err != nil {
			return err
		}
		set = kadm.TopicsSet{}
		for _, t := range whole {
			for p := range td[t].Partitions {
				set.Add(t, p)
			}
		}
		for _, tp := range named.Sorted() {
			for _, p := range tp.Partitions {
				if _, ok := td[tp.Topic].Partitions[p]; !ok {
					return fmt.Errorf("topic %s has no partition %d; it has %d (argument %s:%d)", tp.Topic, p, len(td[tp.Topic].Partitions), tp.Topic, p)
				}
				set.Add(tp.Topic, p)
			}
		}
	}
	results, err := adm.ElectLeaders(ctx, how, set)
	if err != nil {
		return af.fail("elect leaders", unsupported(err, "ElectLeaders"))
	}
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
	if af.json {
		if err := writeJSON(stdout, doc); err != nil {
			return err
		}
	} else {
		tw := newTable(stdout)
		row(tw, "TOPIC", "PARTITION", "RESULT")
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
			row(tw, e.Topic, strconv.Itoa(int(e.Partition)), result)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("elect leaders: %d of %d partitions failed: %s", len(failed), len(doc.Partitions), strings.Join(failed, "; "))
	}
	return nil
}

func sortedKeys[K string | int32, V any](m map[K]V) []K {
	ks := make([]K, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

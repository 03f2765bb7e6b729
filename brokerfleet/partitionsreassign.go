package main

// brokerfleet partitions reassign: move partitions' replicas to brokers
// (Kafka's reassignment plans) or cancel their moves, and wait for them.

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

	"github.com/stratamq/strata/brokerfleet/internal/cli"
)

const partitionsReassignHelp = `usage: brokerfleet partitions reassign [flags] (-plan FILE | -move TOPIC:PARTITION=B,B,...)

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

// stdin is where -plan - reads; tests replace it.
var stdin io.Reader = os.Stdin

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
		s = append(s, fmt.Sprintf("%s:%d=%s", m.Topic, m.Partition, cli.Int32s(m.Replicas)))
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
		return nil, cli.Usagef("flag -plan: %w", err)
	}
	name := path
	if path == "-" {
		name = "standard input"
	}
	var plan reassignPlan
	dec := json.NewDecoder(strings.NewReader(string(data)))
	if err := dec.Decode(&plan); err != nil {
		return nil, cli.Usagef("flag -plan: %s is not a reassignment plan ({\"version\":1,\"partitions\":[{\"topic\":...,\"partition\":...,\"replicas\":[...]}]}): %v", name, err)
	}
	if dec.More() {
		return nil, cli.Usagef("flag -plan: %s: more than one JSON document", name)
	}
	if plan.Version != 1 {
		return nil, cli.Usagef("flag -plan: %s: version %d: want 1", name, plan.Version)
	}
	if len(plan.Partitions) == 0 {
		return nil, cli.Usagef("flag -plan: %s: no partitions", name)
	}
	for i := range plan.Partitions {
		r := &plan.Partitions[i]
		r.source = "flag -plan"
		switch {
		case r.Topic == "":
			return nil, cli.Usagef("flag -plan: %s: partitions[%d]: no topic", name, i)
		case r.Partition < 0:
			return nil, cli.Usagef("flag -plan: %s: partitions[%d]: partition %d is negative", name, i, r.Partition)
		}
		for j, id := range r.Replicas {
			if id < 0 || slices.Contains(r.Replicas[:j], id) {
				return nil, cli.Usagef("flag -plan: %s: partitions[%d] (%s/%d): replicas %v: broker %d is negative or repeated", name, i, r.Topic, r.Partition, r.Replicas, id)
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

// reassignFlags are the flags of partitions reassign besides the admin
// ones.
type reassignFlags struct {
	plan     string
	moves    moveFlag
	cancel   bool
	wait     bool
	interval time.Duration
}

func (f *reassignFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.plan, "plan", "", "reassignment plan `FILE` in Kafka's JSON format; - reads standard input")
	fs.Var(&f.moves, "move", "move `TOPIC:PARTITION=B,B,...` to brokers B (the first is the preferred leader), repeatable")
	fs.BoolVar(&f.cancel, "cancel", false, "cancel the reassignments of the partitions instead")
	fs.BoolVar(&f.wait, "wait", false, "wait until none of the partitions is being reassigned, showing progress; -timeout then defaults to 1h")
	fs.DurationVar(&f.interval, "interval", time.Second, "how often -wait polls the reassignments")
}

// partitions checks the flags and returns the partitions they name.
func (f *reassignFlags) partitions(pos []string) ([]reassignment, error) {
	switch {
	case len(pos) > 0:
		return nil, cli.Usagef("unexpected argument %q: partitions come from -plan or -move", pos[0])
	case f.plan == "" && len(f.moves) == 0:
		return nil, cli.Usagef("name the partitions: give -plan FILE or -move TOPIC:PARTITION=BROKER,...")
	case f.plan != "" && len(f.moves) > 0:
		return nil, cli.Usagef("-plan and -move cannot be combined")
	case f.interval <= 0:
		return nil, cli.BadFlag("interval", f.interval, "must be positive")
	}
	want := []reassignment(f.moves)
	if f.plan != "" {
		var err error
		if want, err = readPlan(f.plan); err != nil {
			return nil, err
		}
	}
	seen := map[string]bool{}
	for _, r := range want {
		key := r.Topic + ":" + strconv.Itoa(int(r.Partition))
		if seen[key] {
			return nil, cli.Usagef("%s: partition %s/%d is listed twice", r.source, r.Topic, r.Partition)
		}
		seen[key] = true
		if !f.cancel && len(r.Replicas) == 0 {
			return nil, cli.Usagef("%s: partition %s/%d: no replicas; list the brokers (TOPIC:PARTITION=B,B,...), or give -cancel", r.source, r.Topic, r.Partition)
		}
	}
	return want, nil
}

func partitionsReassign(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	a := cli.NewAdmin("partitions reassign", partitionsReassignHelp)
	var f reassignFlags
	f.register(a.Flags)
	pos, err := a.Parse(args, stderr)
	if err != nil {
		return err
	}
	a.WaitTimeout(f.wait)
	want, err := f.partitions(pos)
	if err != nil {
		return err
	}
	return a.Run(ctx, func(ctx context.Context, adm *kadm.Client) error {
		doc, req, set, err := planReassign(ctx, adm, a, want, f.cancel)
		if err != nil {
			return err
		}
		failed, err := startReassign(ctx, adm, a, req, &doc, set)
		if err != nil {
			return err
		}
		if !a.JSON {
			printReassigned(stdout, doc)
		}
		if failed != nil {
			if a.JSON {
				if err := cli.WriteJSON(stdout, doc); err != nil {
					return err
				}
			}
			return failed
		}
		if f.wait {
			if err := waitReassigned(ctx, adm, a, &doc, set, f.interval, stdout, stderr); err != nil {
				return err
			}
		}
		return a.Print(stdout, doc, func() error {
			if f.wait {
				fmt.Fprintf(stdout, "no partition is being reassigned any more (%d partition(s))\n", len(doc.Partitions))
			}
			return nil
		})
	})
}

// planReassign checks the partitions and brokers of want exist (a clearer
// answer than the cluster's) and returns the document to print, with the
// current assignment to roll back to, the request, and the partitions.
func planReassign(ctx context.Context, adm *kadm.Client, a *cli.Admin, want []reassignment, cancel bool) (reassignJSON, kadm.AlterPartitionAssignmentsReq, kadm.TopicsSet, error) {
	doc := reassignJSON{Cancel: cancel, Rollback: reassignPlan{Version: 1, Partitions: []reassignment{}}}
	var req kadm.AlterPartitionAssignmentsReq
	set := kadm.TopicsSet{}
	var topics []string
	for _, r := range want {
		topics = append(topics, r.Topic)
	}
	md, err := adm.Metadata(ctx, cli.Distinct(topics)...)
	if err != nil {
		return doc, req, set, a.Fail("describe topics", err)
	}
	brokers := map[int32]bool{}
	for _, b := range md.Brokers {
		brokers[b.NodeID] = true
	}
	for _, r := range want {
		td, ok := md.Topics[r.Topic]
		if !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
			return doc, req, set, fmt.Errorf("%s: topic %s does not exist", r.source, r.Topic)
		}
		p, ok := td.Partitions[r.Partition]
		if !ok {
			return doc, req, set, fmt.Errorf("%s: topic %s has no partition %d; it has %d", r.source, r.Topic, r.Partition, len(td.Partitions))
		}
		if !cancel {
			for _, id := range r.Replicas {
				if !brokers[id] {
					return doc, req, set, fmt.Errorf("%s: %s/%d: unknown broker %d; the cluster has brokers %s", r.source, r.Topic, r.Partition, id, brokerIDs(md))
				}
			}
		}
		rp := reassignedPartitionJSON{Topic: r.Topic, Partition: r.Partition, CurrentReplicas: orEmpty(p.Replicas)}
		if cancel {
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
	slices.SortFunc(doc.Partitions, func(x, y reassignedPartitionJSON) int {
		return cmpTopicPartition(x.Topic, x.Partition, y.Topic, y.Partition)
	})
	slices.SortFunc(doc.Rollback.Partitions, func(x, y reassignment) int {
		return cmpTopicPartition(x.Topic, x.Partition, y.Topic, y.Partition)
	})
	return doc, req, set, nil
}

// startReassign sends req and notes each partition's result in doc. It
// takes the partitions that failed out of set and returns an error naming
// them, if any failed.
func startReassign(ctx context.Context, adm *kadm.Client, a *cli.Admin, req kadm.AlterPartitionAssignmentsReq, doc *reassignJSON, set kadm.TopicsSet) (failed, _ error) {
	what := "reassign partitions"
	if doc.Cancel {
		what = "cancel partition reassignments"
	}
	resps, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		return nil, a.Fail(what, unsupported(err, "AlterPartitionReassignments"))
	}
	var errs []string
	for i, p := range doc.Partitions {
		r, ok := resps[p.Topic][p.Partition]
		switch {
		case !ok:
			doc.Partitions[i].Error = "not in the response"
		case r.Err == nil:
		case doc.Cancel && errors.Is(r.Err, kerr.NoReassignmentInProgress):
			doc.Partitions[i].Note = "no reassignment was in progress"
		default:
			doc.Partitions[i].Error = errWithMessage(r.Err, r.ErrMessage)
		}
		if e := doc.Partitions[i].Error; e != "" {
			errs = append(errs, fmt.Sprintf("%s/%d: %s", p.Topic, p.Partition, e))
			set.Delete(p.Topic, p.Partition) // nothing to wait for
		}
	}
	return partitionsFailed(what, errs, len(doc.Partitions)), nil
}

func printReassigned(w io.Writer, doc reassignJSON) {
	tw := cli.NewTable(w)
	tw.Row("TOPIC", "PARTITION", "CURRENT-REPLICAS", "NEW-REPLICAS", "RESULT")
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
		tw.Row(p.Topic, strconv.Itoa(int(p.Partition)), cli.Int32s(p.CurrentReplicas), cli.Int32s(p.NewReplicas), result)
	}
	_ = tw.Flush()
	if !doc.Cancel {
		rb, _ := json.Marshal(doc.Rollback)
		fmt.Fprintf(w, "current assignment (save it to roll back with -plan):\n%s\n", rb)
	}
}

// waitReassigned polls ListPartitionReassignments every interval until
// none of set is being reassigned, showing progress on stdout, or on
// stderr with -json; if it gives up, it prints doc with -json.
func waitReassigned(ctx context.Context, adm *kadm.Client, a *cli.Admin, doc *reassignJSON, set kadm.TopicsSet, interval time.Duration, stdout, stderr io.Writer) error {
	w := stdout
	if a.JSON {
		w = stderr
	}
	doc.Waited = true
	if err := pollReassigned(ctx, adm, a, set, interval, w, stderr); err != nil {
		if a.JSON {
			_ = cli.WriteJSON(stdout, *doc)
		}
		return err
	}
	doc.Complete = true
	return nil
}

// pollReassigned polls ListPartitionReassignments until none of set is
// being reassigned, showing progress on w.
func pollReassigned(ctx context.Context, adm *kadm.Client, a *cli.Admin, set kadm.TopicsSet, interval time.Duration, w, stderr io.Writer) error {
	total := 0
	set.Each(func(string, int32) { total++ })
	bar := cli.NewProgress(w)
	defer bar.Finish()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		listed, err := adm.ListPartitionReassignments(ctx, set)
		switch {
		case err != nil && ctx.Err() != nil:
			return a.Fail("wait for the reassignments", ctx.Err())
		case err != nil && unsupported(err, "") != err:
			return a.Fail("wait for the reassignments", unsupported(err, "ListPartitionReassignments"))
		case err != nil:
			bar.Finish()
			fmt.Fprintf(stderr, "list partition reassignments: %v (retrying)\n", unsupported(err, "ListPartitionReassignments"))
		default:
			left := 0
			listed.Each(func(r kadm.ListPartitionReassignmentsResponse) {
				if set.Lookup(r.Topic, r.Partition) {
					left++
				}
			})
			bar.Update(total-left, total, "partitions reassigned")
			if left == 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return a.Fail("wait for the reassignments", ctx.Err())
		case <-tick.C:
		}
	}
}

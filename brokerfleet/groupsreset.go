package main

// brokerfleet groups reset: move the committed offsets of a consumer group
// that has no active members.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/stratamq/strata/brokerfleet/internal/cli"
)

const groupsResetHelp = `usage: brokerfleet groups reset [flags] GROUP (-to-earliest | -to-latest | -to-offset N | -to-datetime T)

Moves the committed offsets of a group that has no active members. Without
-topic it resets every partition the group has committed offsets for. The
plan (TOPIC PARTITION CURRENT-OFFSET NEW-OFFSET) is printed; with -dry-run
nothing is committed.

flags:
`

// topicFlag collects -topic T[:P,P...] values; a nil partition list means
// every partition of the topic.
type topicFlag struct {
	order []string
	parts map[string][]int32
}

func (f *topicFlag) String() string {
	if f == nil {
		return ""
	}
	return strings.Join(f.order, " ")
}

func (f *topicFlag) Set(s string) error {
	topic, list, hasList := strings.Cut(s, ":")
	if topic == "" {
		return fmt.Errorf("%q: want TOPIC or TOPIC:PARTITION[,PARTITION...]", s)
	}
	var ps []int32
	if hasList {
		for _, p := range strings.Split(list, ",") {
			v, err := strconv.ParseInt(strings.TrimSpace(p), 10, 32)
			if err != nil || v < 0 {
				return fmt.Errorf("%q: %q is not a partition number", s, p)
			}
			ps = append(ps, int32(v))
		}
	}
	if f.parts == nil {
		f.parts = map[string][]int32{}
	}
	prev, seen := f.parts[topic]
	switch {
	case !seen:
		f.order = append(f.order, topic)
		f.parts[topic] = ps
	case prev == nil || ps == nil:
		f.parts[topic] = nil // all partitions wins
	default:
		f.parts[topic] = append(prev, ps...)
	}
	return nil
}

// resetTarget is where reset moves offsets to.
type resetTarget struct {
	kind   string // "earliest", "latest", "offset" or "datetime"
	offset int64
	at     time.Time
}

// resetTimeLayouts are the accepted -to-datetime forms; the second is UTC.
var resetTimeLayouts = []string{time.RFC3339Nano, "2006-01-02T15:04:05"}

func parseResetTime(s string) (time.Time, error) {
	for _, layout := range resetTimeLayouts {
		if t, err := time.Parse(layout, s); err == nil {
			if t.UnixMilli() < 0 { // negative timestamps mean latest or earliest to ListOffsets
				return time.Time{}, fmt.Errorf("%q is before 1970", s)
			}
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time: want RFC3339 (2026-11-30T10:00:00Z) or 2026-11-30T10:00:00 (UTC)", s)
}

type resetPartitionJSON struct {
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	CurrentOffset *int64 `json:"currentOffset"` // null: nothing committed
	NewOffset     int64  `json:"newOffset"`
	Note          string `json:"note,omitempty"`
	Error         string `json:"error,omitempty"` // the commit failed
}

type resetJSON struct {
	Group      string               `json:"group"`
	Target     string               `json:"target"`
	DryRun     bool                 `json:"dryRun"`
	Committed  bool                 `json:"committed"` // every partition committed
	Partitions []resetPartitionJSON `json:"partitions"`
}

// resetFlags are the flags of groups reset besides the admin ones.
type resetFlags struct {
	toEarliest, toLatest bool
	target               resetTarget
	targets              []string // the target flags given, in order
	topics               topicFlag
	dryRun               bool
}

func (f *resetFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.toEarliest, "to-earliest", false, "reset to the log start offset")
	fs.BoolVar(&f.toLatest, "to-latest", false, "reset to the log end offset (high watermark)")
	fs.Func("to-offset", "reset to offset `N`, clamped per partition to [log start, log end]", func(s string) error {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < 0 {
			return fmt.Errorf("%q is not an offset (an integer >= 0)", s)
		}
		f.target.kind, f.target.offset = "offset", v
		f.targets = append(f.targets, "-to-offset")
		return nil
	})
	fs.Func("to-datetime", "reset to the first record at or after `T` (RFC3339, or 2026-11-30T10:00:00 as UTC); the log end offset if there is none", func(s string) error {
		t, err := parseResetTime(s)
		if err != nil {
			return err
		}
		f.target.kind, f.target.at = "datetime", t
		f.targets = append(f.targets, "-to-datetime")
		return nil
	})
	fs.Var(&f.topics, "topic", "reset only `TOPIC[:P,P...]`, repeatable (default: the partitions the group has committed offsets for)")
	fs.BoolVar(&f.dryRun, "dry-run", false, "print the plan and change nothing")
}

// check returns the group pos names, and checks exactly one target is
// given.
func (f *resetFlags) check(pos []string) (string, error) {
	switch len(pos) {
	case 0:
		return "", cli.Usagef("name the group to reset")
	case 1:
	default:
		return "", cli.Usagef("reset takes one group, got %q", pos)
	}
	if f.toEarliest {
		f.target.kind = "earliest"
		f.targets = append(f.targets, "-to-earliest")
	}
	if f.toLatest {
		f.target.kind = "latest"
		f.targets = append(f.targets, "-to-latest")
	}
	switch f.targets = cli.Distinct(f.targets); len(f.targets) {
	case 0:
		return "", cli.Usagef("name a target: one of -to-earliest, -to-latest, -to-offset or -to-datetime")
	case 1:
	default:
		return "", cli.Usagef("%s cannot be combined: give exactly one of -to-earliest, -to-latest, -to-offset or -to-datetime", strings.Join(f.targets, " and "))
	}
	return pos[0], nil
}

func groupsReset(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	a := cli.NewAdmin("groups reset", groupsResetHelp)
	var f resetFlags
	f.register(a.Flags)
	pos, err := a.Parse(args, stderr)
	if err != nil {
		return err
	}
	group, err := f.check(pos)
	if err != nil {
		return err
	}
	return a.Run(ctx, func(ctx context.Context, adm *kadm.Client) error {
		plan, err := planReset(ctx, adm, a, group, f.target, f.topics)
		if err != nil {
			return err
		}
		doc := resetJSON{Group: group, Target: f.target.kind, DryRun: f.dryRun, Partitions: plan}
		var failed []string
		if !f.dryRun {
			if failed, err = commitReset(ctx, adm, a, &doc); err != nil {
				return err
			}
		}
		if err := a.Print(stdout, doc, func() error { return printResetPlan(stdout, doc) }); err != nil {
			return err
		}
		return partitionsFailed("commit offsets of group "+group, failed, len(plan))
	})
}

// commitReset commits the plan of doc, notes the partitions that failed in
// it and returns them as TOPIC/PARTITION: ERROR.
func commitReset(ctx context.Context, adm *kadm.Client, a *cli.Admin, doc *resetJSON) ([]string, error) {
	offsets := make(kadm.Offsets)
	for _, p := range doc.Partitions {
		offsets.AddOffset(p.Topic, p.Partition, p.NewOffset, -1)
	}
	resps, err := adm.CommitOffsets(ctx, doc.Group, offsets)
	if err != nil {
		return nil, a.Fail(fmt.Sprintf("commit offsets of group %s (nothing committed)", doc.Group), err)
	}
	var failed []string
	for i, p := range doc.Partitions {
		r, ok := resps.Lookup(p.Topic, p.Partition)
		switch {
		case !ok:
			doc.Partitions[i].Error = "not in the commit response"
		case r.Err != nil:
			doc.Partitions[i].Error = r.Err.Error()
		}
		if e := doc.Partitions[i].Error; e != "" {
			failed = append(failed, fmt.Sprintf("%s/%d: %s", p.Topic, p.Partition, e))
		}
	}
	doc.Committed = len(failed) == 0
	return failed, nil
}

// planReset checks the group has no members, picks the partitions and
// computes each one's new offset.
func planReset(ctx context.Context, adm *kadm.Client, a *cli.Admin, group string, target resetTarget, sel topicFlag) ([]resetPartitionJSON, error) {
	described, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return nil, a.Fail("describe group "+group, err)
	}
	d, ok := described[group]
	switch {
	case !ok:
		return nil, fmt.Errorf("describe group %s: not in the response", group)
	case d.Err != nil && !errors.Is(d.Err, kerr.GroupIDNotFound):
		return nil, fmt.Errorf("describe group %s: %w", group, d.Err)
	case len(d.Members) > 0:
		return nil, fmt.Errorf("group %s has %d active members; stop them before resetting offsets (state %s)", group, len(d.Members), d.State)
	}

	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		return nil, a.Fail("fetch committed offsets of group "+group, err)
	}
	if err := committed.Error(); err != nil {
		return nil, fmt.Errorf("fetch committed offsets of group %s: %w", group, err)
	}

	want := make(kadm.TopicsSet)
	if len(sel.order) == 0 {
		committed.Each(func(o kadm.OffsetResponse) {
			if o.At >= 0 {
				want.Add(o.Topic, o.Partition)
			}
		})
		if len(want) == 0 {
			return nil, fmt.Errorf("group %s has no committed offsets; name the topics with --topic", group)
		}
	} else {
		listed, err := adm.ListTopics(ctx, sel.order...)
		if err != nil {
			return nil, a.Fail("list topics", err)
		}
		for _, topic := range sel.order {
			td, ok := listed[topic]
			switch {
			case !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition):
				return nil, fmt.Errorf("topic %s does not exist (flag -topic)", topic)
			case td.Err != nil:
				return nil, fmt.Errorf("topic %s: %w", topic, td.Err)
			}
			ps := sel.parts[topic]
			if ps == nil {
				for p := range td.Partitions {
					want.Add(topic, p)
				}
				continue
			}
			for _, p := range ps {
				if _, ok := td.Partitions[p]; !ok {
					return nil, fmt.Errorf("topic %s has no partition %d; it has %d (flag -topic)", topic, p, len(td.Partitions))
				}
				want.Add(topic, p)
			}
		}
	}

	names := want.Topics()
	start, err := adm.ListStartOffsets(ctx, names...)
	if err != nil {
		return nil, a.Fail("list log start offsets", err)
	}
	end, err := adm.ListEndOffsets(ctx, names...)
	if err != nil {
		return nil, a.Fail("list log end offsets", err)
	}
	var at kadm.ListedOffsets
	if target.kind == "datetime" {
		if at, err = adm.ListOffsetsAfterMilli(ctx, target.at.UnixMilli(), names...); err != nil {
			return nil, a.Fail("list offsets by time", err)
		}
	}

	var plan []resetPartitionJSON
	for _, tp := range want.Sorted() {
		for _, p := range tp.Partitions {
			lo, err := listedOffset(start, tp.Topic, p)
			if err != nil {
				return nil, fmt.Errorf("log start offset of %s/%d: %w", tp.Topic, p, err)
			}
			hi, err := listedOffset(end, tp.Topic, p)
			if err != nil {
				return nil, fmt.Errorf("log end offset of %s/%d: %w", tp.Topic, p, err)
			}
			r := resetPartitionJSON{Topic: tp.Topic, Partition: p}
			if c, ok := committed.Lookup(tp.Topic, p); ok && c.At >= 0 {
				r.CurrentOffset = i64p(c.At)
			}
			switch target.kind {
			case "earliest":
				r.NewOffset = lo.Offset
			case "latest":
				r.NewOffset = hi.Offset
			case "offset":
				r.NewOffset = target.offset
				if target.offset < lo.Offset {
					r.NewOffset = lo.Offset
					r.Note = fmt.Sprintf("-to-offset %d is before the log start offset; clamped to %d", target.offset, lo.Offset)
				} else if target.offset > hi.Offset {
					r.NewOffset = hi.Offset
					r.Note = fmt.Sprintf("-to-offset %d is past the log end offset; clamped to %d", target.offset, hi.Offset)
				}
			case "datetime":
				o, err := listedOffset(at, tp.Topic, p)
				if err != nil {
					return nil, fmt.Errorf("offset by time of %s/%d: %w", tp.Topic, p, err)
				}
				r.NewOffset = o.Offset
				if o.Offset < 0 || o.Timestamp < target.at.UnixMilli() {
					// ListOffsetsAfterMilli answers the log end offset when
					// no record is at or after the time.
					r.NewOffset = hi.Offset
					r.Note = "no record at or after " + target.at.UTC().Format(time.RFC3339Nano) + "; using the log end offset"
				}
			}
			plan = append(plan, r)
		}
	}
	return plan, nil
}

func listedOffset(l kadm.ListedOffsets, topic string, p int32) (kadm.ListedOffset, error) {
	o, ok := l.Lookup(topic, p)
	if !ok {
		if miss, ok := l.Lookup(topic, -1); ok && miss.Err != nil {
			return o, miss.Err
		}
		return o, errors.New("no answer for the partition")
	}
	return o, o.Err
}

func printResetPlan(w io.Writer, doc resetJSON) error {
	tw := cli.NewTable(w)
	tw.Row("TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET")
	for _, p := range doc.Partitions {
		tw.Row(p.Topic, strconv.Itoa(int(p.Partition)), cli.Int64(p.CurrentOffset), strconv.FormatInt(p.NewOffset, 10))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, p := range doc.Partitions {
		if p.Note != "" {
			fmt.Fprintf(w, "note: %s/%d: %s\n", p.Topic, p.Partition, p.Note)
		}
	}
	switch {
	case doc.DryRun:
		fmt.Fprintln(w, "dry run: nothing changed")
	case doc.Committed:
		fmt.Fprintf(w, "committed new offsets for %d partition(s) of group %s\n", len(doc.Partitions), doc.Group)
	default:
		for _, p := range doc.Partitions {
			if p.Error != "" {
				fmt.Fprintf(w, "failed: %s/%d: %s\n", p.Topic, p.Partition, p.Error)
			}
		}
	}
	return nil
}

package main

// brokerfleet topics: list, describe, create, alter and delete topics over
// the Kafka admin API (kadm), against Strata or any Kafka-compatible cluster.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/cli"
)

const topicsHelp = `usage: brokerfleet topics <verb> [flags] [TOPIC...]

Administers topics through the Kafka admin API of any broker in the
cluster (Strata or Kafka).

verbs:
  list                 topics with their partition count, replication factor,
                       and under-replicated and offline partitions
  describe TOPIC...    leader, replicas and ISR of every partition, and the
                       configs that differ from the defaults
  create TOPIC... [-partitions N] [-replication-factor R] [-config k=v ...]
  alter TOPIC [-partitions N] [-config k=v ...] [-delete-config k ...]
                       add partitions, set or delete configs
  delete TOPIC... -yes delete topics and all their records

Every verb takes -bootstrap (default: STRATA_BOOTSTRAP, else 127.0.0.1:9092),
-json and -timeout. Run 'brokerfleet topics <verb> -help' for its flags.
`

const (
	topicsListHelp = `usage: brokerfleet topics list [flags]

Lists topics. UNDER-REPLICATED counts partitions whose ISR is smaller than
their replica list; OFFLINE counts partitions without a leader.

flags:
`
	topicsDescribeHelp = `usage: brokerfleet topics describe [flags] TOPIC [TOPIC...]

Describes topics: the configs set on the topic (those that differ from the
cluster defaults), then one row per partition with its leader, replicas and
in-sync replicas. STATUS is "offline" for a partition without a leader,
"under-replicated" for one whose ISR is smaller than its replica list.

flags:
`
	topicsCreateHelp = `usage: brokerfleet topics create [flags] TOPIC [TOPIC...]

Creates topics, each with the same partitions, replication factor and
configs.

flags:
`
	topicsAlterHelp = `usage: brokerfleet topics alter [flags] TOPIC

Adds partitions to a topic (-partitions is the new total), and sets or
deletes topic configs (a deleted config returns to the cluster default).
Every change is validated by the cluster before any is applied.

flags:
`
	topicsDeleteHelp = `usage: brokerfleet topics delete -yes [flags] TOPIC [TOPIC...]

Deletes topics and all their records. It refuses to run without -yes.

flags:
`
)

func runTopics(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return cli.RunVerbs(ctx, "topics", topicsHelp, []cli.Verb{
		{Name: "list", Run: topicsList},
		{Name: "describe", Run: topicsDescribe},
		{Name: "create", Run: topicsCreate},
		{Name: "alter", Run: topicsAlter},
		{Name: "delete", Run: topicsDelete},
	}, args, stdout, stderr)
}

// topicNames returns the positional topic names in order, without
// duplicates, or a usage error if there are none.
func topicNames(pos []string) ([]string, error) {
	if slices.Contains(pos, "") {
		return nil, cli.Usagef("empty topic name (argument TOPIC)")
	}
	return cli.Names(pos, "name at least one topic (argument TOPIC)")
}

// partitionHealth is what describe and list say of a partition.
func partitionHealth(p kadm.PartitionDetail) (offline, underReplicated bool) {
	offline = p.Leader < 0 || p.Err != nil && !errors.Is(p.Err, kerr.ReplicaNotAvailable)
	underReplicated = len(p.ISR) < len(p.Replicas)
	return offline, underReplicated
}

// describeTopics returns the metadata of the named topics, or an error
// naming the first that does not exist.
func describeTopics(ctx context.Context, adm *kadm.Client, a *cli.Admin, names []string) (kadm.TopicDetails, error) {
	td, err := adm.ListTopicsWithInternal(ctx, names...)
	if err != nil {
		return nil, a.Fail("describe topics", err)
	}
	for _, name := range names {
		d, ok := td[name]
		switch {
		case !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition):
			return nil, fmt.Errorf("topic %s does not exist", name)
		case d.Err != nil:
			return nil, fmt.Errorf("topic %s: %w", name, d.Err)
		}
	}
	return td, nil
}

// errWithMessage joins a Kafka error and the broker's message, if any.
func errWithMessage(err error, msg string) string {
	if msg == "" || strings.Contains(err.Error(), msg) {
		return err.Error()
	}
	return err.Error() + ": " + msg
}

func orEmpty(ids []int32) []int32 {
	if ids == nil {
		return []int32{}
	}
	return ids
}

// ---- list ----

type listedTopicJSON struct {
	Topic             string `json:"topic"`
	ID                string `json:"id"`
	Internal          bool   `json:"internal"`
	Partitions        int    `json:"partitions"`
	ReplicationFactor int    `json:"replicationFactor"`
	UnderReplicated   int    `json:"underReplicated"`
	Offline           int    `json:"offline"`
	Error             string `json:"error,omitempty"`
}

func topicsList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	a := cli.NewAdmin("topics list", topicsListHelp)
	internal := a.Flags.Bool("internal", false, "include internal topics")
	pos, err := a.Parse(args, stderr)
	if err != nil {
		return err
	}
	if err := cli.NoArgs(pos); err != nil {
		return err
	}
	return a.Run(ctx, func(ctx context.Context, adm *kadm.Client) error {
		td, err := adm.ListTopicsWithInternal(ctx)
		if err != nil {
			return a.Fail("list topics", err)
		}
		out := make([]listedTopicJSON, 0, len(td))
		for _, d := range td.Sorted() {
			if !d.IsInternal || *internal {
				out = append(out, listedTopic(d))
			}
		}
		return a.Print(stdout, struct {
			Topics []listedTopicJSON `json:"topics"`
		}{out}, func() error { return printListedTopics(stdout, stderr, out) })
	})
}

func listedTopic(d kadm.TopicDetail) listedTopicJSON {
	t := listedTopicJSON{Topic: d.Topic, ID: d.ID.String(), Internal: d.IsInternal,
		Partitions: len(d.Partitions), ReplicationFactor: d.Partitions.NumReplicas()}
	if d.Err != nil {
		t.Error = d.Err.Error()
	}
	for _, p := range d.Partitions {
		off, under := partitionHealth(p)
		if off {
			t.Offline++
		}
		if under {
			t.UnderReplicated++
		}
	}
	return t
}

func printListedTopics(stdout, stderr io.Writer, out []listedTopicJSON) error {
	if len(out) == 0 {
		fmt.Fprintln(stdout, "no topics")
		return nil
	}
	tw := cli.NewTable(stdout)
	tw.Row("TOPIC", "PARTITIONS", "REPLICATION-FACTOR", "UNDER-REPLICATED", "OFFLINE")
	for _, t := range out {
		name := t.Topic
		if t.Internal {
			name += " (internal)"
		}
		tw.Row(name, strconv.Itoa(t.Partitions), strconv.Itoa(t.ReplicationFactor), strconv.Itoa(t.UnderReplicated), strconv.Itoa(t.Offline))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, t := range out {
		if t.Error != "" {
			fmt.Fprintf(stderr, "topic %s: %s\n", t.Topic, t.Error)
		}
	}
	return nil
}

// ---- describe ----

type describedPartitionJSON struct {
	Partition       int32   `json:"partition"`
	Leader          int32   `json:"leader"` // -1: none
	LeaderEpoch     int32   `json:"leaderEpoch"`
	Replicas        []int32 `json:"replicas"`
	ISR             []int32 `json:"isr"`
	OfflineReplicas []int32 `json:"offlineReplicas"`
	UnderReplicated bool    `json:"underReplicated"`
	Offline         bool    `json:"offline"`
	Error           string  `json:"error,omitempty"`
}

type describedTopicJSON struct {
	Topic             string                   `json:"topic"`
	ID                string                   `json:"id"`
	Internal          bool                     `json:"internal"`
	ReplicationFactor int                      `json:"replicationFactor"`
	Configs           map[string]string        `json:"configs"` // those that differ from the defaults
	ConfigsError      string                   `json:"configsError,omitempty"`
	Partitions        []describedPartitionJSON `json:"partitions"`
}

func topicsDescribe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	a := cli.NewAdmin("topics describe", topicsDescribeHelp)
	pos, err := a.Parse(args, stderr)
	if err != nil {
		return err
	}
	names, err := topicNames(pos)
	if err != nil {
		return err
	}
	return a.Run(ctx, func(ctx context.Context, adm *kadm.Client) error {
		td, err := describeTopics(ctx, adm, a, names)
		if err != nil {
			return err
		}
		configs, err := describeTopicConfigs(ctx, adm, names)
		if _, ok := errors.AsType[*kadm.ShardErrors](err); !ok && err != nil {
			return a.Fail("describe topic configs", err)
		}
		var out []describedTopicJSON
		for _, name := range names {
			out = append(out, describedTopic(td[name], configs, err))
		}
		return a.Print(stdout, struct {
			Topics []describedTopicJSON `json:"topics"`
		}{out}, func() error {
			for i, t := range out {
				if i > 0 {
					fmt.Fprintln(stdout)
				}
				if err := printDescribedTopic(stdout, t); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

// describedTopic is d with its configs; configsErr is why some configs
// were not described.
func describedTopic(d kadm.TopicDetail, configs kadm.ResourceConfigs, configsErr error) describedTopicJSON {
	t := describedTopicJSON{Topic: d.Topic, ID: d.ID.String(), Internal: d.IsInternal,
		ReplicationFactor: d.Partitions.NumReplicas(), Configs: map[string]string{}}
	rc, cerr := configs.On(d.Topic, nil)
	switch {
	case cerr != nil && configsErr != nil:
		t.ConfigsError = configsErr.Error()
	case cerr != nil:
		t.ConfigsError = "not in the response"
	case rc.Err != nil:
		t.ConfigsError = rc.Err.Error()
	}
	for _, c := range rc.Configs {
		if c.Source == kmsg.ConfigSourceDynamicTopicConfig && !c.Sensitive {
			t.Configs[c.Key] = c.MaybeValue()
		}
	}
	t.Partitions = []describedPartitionJSON{}
	for _, p := range d.Partitions.Sorted() {
		dp := describedPartitionJSON{Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
			Replicas: orEmpty(p.Replicas), ISR: orEmpty(p.ISR), OfflineReplicas: orEmpty(p.OfflineReplicas)}
		dp.Offline, dp.UnderReplicated = partitionHealth(p)
		if p.Err != nil && !(dp.Offline && errors.Is(p.Err, kerr.LeaderNotAvailable)) { // offline says that
			dp.Error = p.Err.Error()
		}
		t.Partitions = append(t.Partitions, dp)
	}
	return t
}

// describeTopicConfigs describes the configs of topics that exist. The
// request goes to any broker, which may not have learned of a topic
// created a moment ago: it is retried for a while on UNKNOWN_TOPIC.
func describeTopicConfigs(ctx context.Context, adm *kadm.Client, names []string) (kadm.ResourceConfigs, error) {
	for attempt := 0; ; attempt++ {
		rcs, err := adm.DescribeTopicConfigs(ctx, names...)
		unknown := false
		for _, rc := range rcs {
			unknown = unknown || errors.Is(rc.Err, kerr.UnknownTopicOrPartition)
		}
		if !unknown || attempt == 20 {
			return rcs, err
		}
		select {
		case <-ctx.Done():
			return rcs, err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func printDescribedTopic(w io.Writer, t describedTopicJSON) error {
	under, offline := 0, 0
	for _, p := range t.Partitions {
		if p.UnderReplicated {
			under++
		}
		if p.Offline {
			offline++
		}
	}
	kind := ""
	if t.Internal {
		kind = " (internal)"
	}
	fmt.Fprintf(w, "topic %s%s: %d partition(s), replication factor %d, %d under-replicated, %d offline\n",
		t.Topic, kind, len(t.Partitions), t.ReplicationFactor, under, offline)
	switch {
	case t.ConfigsError != "":
		fmt.Fprintf(w, "configs: not described: %s\n", t.ConfigsError)
	case len(t.Configs) == 0:
		fmt.Fprintln(w, "configs: all defaults")
	default:
		keys := make([]string, 0, len(t.Configs))
		for k := range t.Configs {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		fmt.Fprintln(w, "configs (differ from the defaults):")
		for _, k := range keys {
			fmt.Fprintf(w, "  %s=%s\n", k, t.Configs[k])
		}
	}
	fmt.Fprintln(w)
	tw := cli.NewTable(w)
	tw.Row("PARTITION", "LEADER", "REPLICAS", "ISR", "OFFLINE-REPLICAS", "STATUS")
	for _, p := range t.Partitions {
		leader := "-"
		if p.Leader >= 0 {
			leader = strconv.Itoa(int(p.Leader))
		}
		var status []string
		if p.Offline {
			status = append(status, "offline")
		}
		if p.UnderReplicated {
			status = append(status, "under-replicated")
		}
		if p.Error != "" {
			status = append(status, p.Error)
		}
		tw.Row(strconv.Itoa(int(p.Partition)), leader, cli.Int32s(p.Replicas), cli.Int32s(p.ISR), cli.Int32s(p.OfflineReplicas), cli.Dash(strings.Join(status, ", ")))
	}
	return tw.Flush()
}

// ---- create ----

type createdTopicJSON struct {
	Topic             string `json:"topic"`
	Created           bool   `json:"created"`
	ID                string `json:"id,omitempty"`
	Partitions        int32  `json:"partitions"`
	ReplicationFactor int16  `json:"replicationFactor"`
	Error             string `json:"error,omitempty"`
}

func topicsCreate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	a := cli.NewAdmin("topics create", topicsCreateHelp)
	var configs configFlag
	partitions := a.Flags.Int("partitions", -1, "number of partitions `N`; -1: the cluster default (num.partitions)")
	rf := a.Flags.Int("replication-factor", -1, "replicas `R` of each partition; -1: the cluster default (default.replication.factor)")
	a.Flags.Var(&configs, "config", "topic config `key=value`, repeatable")
	pos, err := a.Parse(args, stderr)
	if err != nil {
		return err
	}
	names, err := topicNames(pos)
	if err != nil {
		return err
	}
	if *partitions == 0 || *partitions < -1 || *partitions > 1<<20 {
		return cli.BadFlag("partitions", *partitions, "want at least 1, or -1 for the cluster default")
	}
	if *rf == 0 || *rf < -1 || *rf > 1<<15-1 {
		return cli.BadFlag("replication-factor", *rf, "want at least 1, or -1 for the cluster default")
	}
	return a.Run(ctx, func(ctx context.Context, adm *kadm.Client) error {
		resps, err := adm.CreateTopics(ctx, int32(*partitions), int16(*rf), configs.request(), names...)
		if err != nil {
			return a.Fail("create topics", err)
		}
		out, outs := createdTopics(names, resps)
		return a.Report(stdout, "topic", "created", outs, struct {
			Topics []createdTopicJSON `json:"topics"`
		}{out})
	})
}

// createdTopics says what became of each of names.
func createdTopics(names []string, resps kadm.CreateTopicResponses) ([]createdTopicJSON, []cli.Outcome) {
	var out []createdTopicJSON
	var outs []cli.Outcome
	for _, name := range names {
		t := createdTopicJSON{Topic: name}
		r, ok := resps[name]
		switch {
		case !ok:
			t.Error = "not in the create response"
		case r.Err == nil:
			t.Created, t.ID, t.Partitions, t.ReplicationFactor = true, r.ID.String(), r.NumPartitions, r.ReplicationFactor
		case errors.Is(r.Err, kerr.TopicAlreadyExists):
			t.Error = "it already exists"
		default:
			t.Error = errWithMessage(r.Err, r.ErrMessage)
		}
		out = append(out, t)
		outs = append(outs, cli.Outcome{Name: name, Done: t.Created, Error: t.Error,
			Text: fmt.Sprintf("created with %d partition(s), replication factor %d", t.Partitions, t.ReplicationFactor)})
	}
	return out, outs
}

// ---- delete ----

type deletedTopicJSON struct {
	Topic   string `json:"topic"`
	Deleted bool   `json:"deleted"`
	Error   string `json:"error,omitempty"`
}

func topicsDelete(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	a := cli.NewAdmin("topics delete", topicsDeleteHelp)
	yes := a.Flags.Bool("yes", false, "really delete the topics and their records")
	pos, err := a.Parse(args, stderr)
	if err != nil {
		return err
	}
	names, err := topicNames(pos)
	if err != nil {
		return err
	}
	if !*yes {
		return cli.Usagef("deleting %s deletes all its records: add -yes to confirm (flag -yes)", strings.Join(names, ", "))
	}
	return a.Run(ctx, func(ctx context.Context, adm *kadm.Client) error {
		resps, err := adm.DeleteTopics(ctx, names...)
		if err != nil {
			return a.Fail("delete topics", err)
		}
		out, outs := deletedTopics(names, resps)
		return a.Report(stdout, "topic", "deleted", outs, struct {
			Topics []deletedTopicJSON `json:"topics"`
		}{out})
	})
}

// deletedTopics says what became of each of names.
func deletedTopics(names []string, resps kadm.DeleteTopicResponses) ([]deletedTopicJSON, []cli.Outcome) {
	var out []deletedTopicJSON
	var outs []cli.Outcome
	for _, name := range names {
		t := deletedTopicJSON{Topic: name}
		r, ok := resps[name]
		switch {
		case !ok:
			t.Error = "not in the delete response"
		case r.Err == nil:
			t.Deleted = true
		case errors.Is(r.Err, kerr.UnknownTopicOrPartition):
			t.Error = "it does not exist"
		default:
			t.Error = errWithMessage(r.Err, r.ErrMessage)
		}
		out = append(out, t)
		outs = append(outs, cli.Outcome{Name: name, Done: t.Deleted, Error: t.Error})
	}
	return out, outs
}

// configFlag collects repeated -config key=value flags in order. Unlike
// kvFlag it does not split on commas: list configs such as
// cleanup.policy=compact,delete hold them.
type configFlag struct {
	keys   []string
	values map[string]string
}

func (f *configFlag) String() string {
	if f == nil {
		return ""
	}
	kv := make([]string, len(f.keys))
	for i, k := range f.keys {
		kv[i] = k + "=" + f.values[k]
	}
	return strings.Join(kv, " ")
}

func (f *configFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if k = strings.TrimSpace(k); !ok || k == "" {
		return fmt.Errorf("%q is not key=value", s)
	}
	if f.values == nil {
		f.values = map[string]string{}
	}
	if _, seen := f.values[k]; !seen {
		f.keys = append(f.keys, k)
	}
	f.values[k] = v
	return nil
}

// request returns the configs as CreateTopics takes them: nil for none.
func (f *configFlag) request() map[string]*string {
	var cfg map[string]*string
	for _, k := range f.keys {
		if cfg == nil {
			cfg = map[string]*string{}
		}
		cfg[k] = kadm.StringPtr(f.values[k])
	}
	return cfg
}

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
	return runVerbs(ctx, "topics", topicsHelp, []verb{{"list", topicsList}, {"describe", topicsDescribe}, {"create", topicsCreate}, {"alter", topicsAlter}, {"delete", topicsDelete}}, args, stdout, stderr)
}

// topicNames returns the positional topic names in order, without
// duplicates, or a usage error if there are none.
func topicNames(pos []string) ([]string, error) {
	if len(pos) == 0 {
		return nil, usageError{errors.New("name at least one topic (argument TOPIC)")}
	}
	var names []string
	for _, t := range pos {
		if t == "" {
			return nil, usageError{errors.New("empty topic name (argument TOPIC)")}
		}
		if !slices.Contains(names, t) {
			names = append(names, t)
		}
	}
	return names, nil
}

// partitionHealth is what describe and list say of a partition.
func partitionHealth(p kadm.PartitionDetail) (offline, underReplicated bool) {
	offline = p.Leader < 0 || p.Err != nil && !errors.Is(p.Err, kerr.ReplicaNotAvailable)
	underReplicated = len(p.ISR) < len(p.Replicas)
	return offline, underReplicated
}

// describeTopics returns the metadata of the named topics, or an error
// naming the first that does not exist.
func describeTopics(ctx context.Context, adm *kadm.Client, af *adminFlags, names []string) (kadm.TopicDetails, error) {
	td, err := adm.ListTopicsWithInternal(ctx, names...)
	if err != nil {
		return nil, af.fail("describe topics", err)
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
	var af adminFlags
	var internal bool
	fs := newCmdFlags("topics list", topicsListHelp)
	af.register(fs)
	fs.BoolVar(&internal, "internal", false, "include internal topics")
	pos, err := af.parse(fs, args, stderr)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError{fmt.Errorf("unexpected argument %q", pos[0])}
	}
	adm, ctx, cancel, err := af.connect(ctx)
	if err != nil {
		return err
	}
	defer adm.Close()
	defer cancel()

	td, err := adm.ListTopicsWithInternal(ctx)
	if err != nil {
		return af.fail("list topics", err)
	}
	out := make([]listedTopicJSON, 0, len(td))
	for _, d := range td.Sorted() {
		if d.IsInternal && !internal {
			continue
		}
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
		out = append(out, t)
	}
	if af.json {
		return writeJSON(stdout, struct {
			Topics []listedTopicJSON `json:"topics"`
		}{out})
	}
	if len(out) == 0 {
		fmt.Fprintln(stdout, "no topics")
		return nil
	}
	tw := newTable(stdout)
	row(tw, "TOPIC", "PARTITIONS", "REPLICATION-FACTOR", "UNDER-REPLICATED", "OFFLINE")
	for _, t := range out {
		name := t.Topic
		if t.Internal {
			name += " (internal)"
		}
		row(tw, name, strconv.Itoa(t.Partitions), strconv.Itoa(t.ReplicationFactor), strconv.Itoa(t.UnderReplicated), strconv.Itoa(t.Offline))
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
	var af adminFlags
	fs := newCmdFlags("topics describe", topicsDescribeHelp)
	af.register(fs)
	pos, err := af.parse(fs, args, stderr)
	if err != nil {
		return err
	}
	names, err := topicNames(pos)
	if err != nil {
		return err
	}
	adm, ctx, cancel, err := af.connect(ctx)
	if err != nil {
		return err
	}
	defer adm.Close()
	defer cancel()

	td, err := describeTopics(ctx, adm, &af, names)
	if err != nil {
		return err
	}
	configs, err := describeTopicConfigs(ctx, adm, names)
	if _, ok := errors.AsType[*kadm.ShardErrors](err); !ok && err != nil {
		return af.fail("describe topic configs", err)
	}
	var out []describedTopicJSON
	for _, name := range names {
		d := td[name]
		t := describedTopicJSON{Topic: name, ID: d.ID.String(), Internal: d.IsInternal,
			ReplicationFactor: d.Partitions.NumReplicas(), Configs: map[string]string{}}
		rc, cerr := configs.On(name, nil)
		switch {
		case cerr != nil && err != nil:
			t.ConfigsError = err.Error()
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
		out = append(out, t)
	}

	if af.json {
		return writeJSON(stdout, struct {
			Topics []describedTopicJSON `json:"topics"`
		}{out})
	}
	for i, t := range out {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		if err := printDescribedTopic(stdout, t); err != nil {
			return err
		}
	}
	return nil
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

func orEmpty(ids []int32) []int32 {
	if ids == nil {
		return []int32{}
	}
	return ids
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
	tw := newTable(w)
	row(tw, "PARTITION", "LEADER", "REPLICAS", "ISR", "OFFLINE-REPLICAS", "STATUS")
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
		row(tw, strconv.Itoa(int(p.Partition)), leader, int32List(p.Replicas), int32List(p.ISR), int32List(p.OfflineReplicas), orDash(strings.Join(status, ", ")))
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
	var (
		af         adminFlags
		partitions int
		rf         int
		configs    configFlag
	)
	fs := newCmdFlags("topics create", topicsCreateHelp)
	af.register(fs)
	fs.IntVar(&partitions, "partitions", -1, "number of partitions `N`; -1: the cluster default (num.partitions)")
	fs.IntVar(&rf, "replication-factor", -1, "replicas `R` of each partition; -1: the cluster default (default.replication.factor)")
	fs.Var(&configs, "config", "topic config `key=value`, repeatable")
	pos, err := af.parse(fs, args, stderr)
	if err != nil {
		return err
	}
	names, err := topicNames(pos)
	if err != nil {
		return err
	}
	if partitions == 0 || partitions < -1 || partitions > 1<<20 {
		return usageError{fmt.Errorf("invalid value %d for flag -partitions: want at least 1, or -1 for the cluster default", partitions)}
	}
	if rf == 0 || rf < -1 || rf > 1<<15-1 {
		return usageError{fmt.Errorf("invalid value %d for flag -replication-factor: want at least 1, or -1 for the cluster default", rf)}
	}
	adm, ctx, cancel, err := af.connect(ctx)
	if err != nil {
		return err
	}
	defer adm.Close()
	defer cancel()

	var cfg map[string]*string
	for _, k := range configs.keys {
		if cfg == nil {
			cfg = map[string]*string{}
		}
		cfg[k] = kadm.StringPtr(configs.values[k])
	}
	resps, err := adm.CreateTopics(ctx, int32(partitions), int16(rf), cfg, names...)
	if err != nil {
		return af.fail("create topics", err)
	}
	var out []createdTopicJSON
	failed := 0
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
		if !t.Created {
			failed++
		}
		out = append(out, t)
	}
	if af.json {
		if err := writeJSON(stdout, struct {
			Topics []createdTopicJSON `json:"topics"`
		}{out}); err != nil {
			return err
		}
	} else {
		for _, t := range out {
			if t.Created {
				fmt.Fprintf(stdout, "topic %s: created with %d partition(s), replication factor %d\n", t.Topic, t.Partitions, t.ReplicationFactor)
			} else {
				fmt.Fprintf(stdout, "topic %s: not created: %s\n", t.Topic, t.Error)
			}
		}
	}
	switch {
	case failed == 0:
		return nil
	case len(out) == 1:
		return fmt.Errorf("topic %s not created: %s", out[0].Topic, out[0].Error)
	}
	return fmt.Errorf("%d of %d topics not created", failed, len(out))
}

// errWithMessage joins a Kafka error and the broker's message, if any.
func errWithMessage(err error, msg string) string {
	if msg == "" || strings.Contains(err.Error(), msg) {
		return err.Error()
	}
	return err.Error() + ": " + msg
}

// ---- alter ----

type alteredTopicJSON struct {
	Topic          string            `json:"topic"`
	PartitionsFrom int               `json:"partitionsFrom"`
	PartitionsTo   int               `json:"partitionsTo"`
	Set            map[string]string `json:"set"`
	Deleted        []string          `json:"deleted"`
}

func topicsAlter(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var (
		af         adminFlags
		partitions int
		configs    configFlag
		deletes    stringsFlag
	)
	fs := newCmdFlags("topics alter", topicsAlterHelp)
	af.register(fs)
	fs.IntVar(&partitions, "partitions", 0, "raise the partition count to `N` (partitions cannot be removed)")
	fs.Var(&configs, "config", "set topic config `key=value`, repeatable")
	fs.Var(&deletes, "delete-config", "delete topic config `key[,key...]` (back to the default), repeatable")
	pos, err := af.parse(fs, args, stderr)
	if err != nil {
		return err
	}
	switch {
	case len(pos) == 0:
		return usageError{errors.New("name the topic to alter (argument TOPIC)")}
	case len(pos) > 1:
		return usageError{fmt.Errorf("alter takes one topic, got %q", pos)}
	case flagSet(fs, "partitions") && partitions < 1:
		return usageError{fmt.Errorf("invalid value %d for flag -partitions: want the new total, at least 1", partitions)}
	case !flagSet(fs, "partitions") && len(configs.keys) == 0 && len(deletes) == 0:
		return usageError{errors.New("nothing to change: give -partitions, -config or -delete-config")}
	}
	deletes = dedupe(deletes)
	for _, k := range deletes {
		if _, ok := configs.values[k]; ok {
			return usageError{fmt.Errorf("config %s is both set (flag -config) and deleted (flag -delete-config)", k)}
		}
	}
	name := pos[0]
	adm, ctx, cancel, err := af.connect(ctx)
	if err != nil {
		return err
	}
	defer adm.Close()
	defer cancel()

	td, err := describeTopics(ctx, adm, &af, []string{name})
	if err != nil {
		return err
	}
	doc := alteredTopicJSON{Topic: name, PartitionsFrom: len(td[name].Partitions), Set: map[string]string{}, Deleted: []string{}}
	doc.PartitionsTo = doc.PartitionsFrom
	addPartitions := flagSet(fs, "partitions") && partitions != doc.PartitionsFrom
	if addPartitions && partitions < doc.PartitionsFrom {
		return fmt.Errorf("topic %s has %d partitions; they cannot be reduced to %d (flag -partitions)", name, doc.PartitionsFrom, partitions)
	}
	var alters []kadm.AlterConfig
	for _, k := range configs.keys {
		alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: kadm.StringPtr(configs.values[k])})
	}
	for _, k := range deletes {
		alters = append(alters, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
	}

	// Validate everything, then apply: a bad config must not leave the
	// partitions added.
	for _, dry := range []bool{true, false} {
		if addPartitions {
			f := adm.UpdatePartitions
			if dry {
				f = adm.ValidateUpdatePartitions
			}
			rs, err := f(ctx, partitions, name)
			if err != nil {
				return af.fail("add partitions to topic "+name, err)
			}
			r, ok := rs[name]
			switch {
			case !ok:
				return fmt.Errorf("add partitions to topic %s: not in the response", name)
			case r.Err != nil:
				return fmt.Errorf("add partitions to topic %s (flag -partitions): %s", name, errWithMessage(r.Err, r.ErrMessage))
			}
		}
		if len(alters) > 0 {
			f := adm.AlterTopicConfigs
			if dry {
				f = adm.ValidateAlterTopicConfigs
			}
			rs, err := f(ctx, alters, name)
			if err != nil {
				return af.fail("alter configs of topic "+name, err)
			}
			r, err := rs.On(name, nil)
			switch {
			case err != nil:
				return fmt.Errorf("alter configs of topic %s: not in the response", name)
			case r.Err != nil:
				what := "alter configs of topic " + name
				if dry && addPartitions {
					what += " (nothing changed)"
				} else if addPartitions {
					what += fmt.Sprintf(" (partitions were raised to %d)", partitions)
				}
				return fmt.Errorf("%s (flag -config or -delete-config): %s", what, errWithMessage(r.Err, r.ErrMessage))
			}
		}
	}
	if addPartitions {
		doc.PartitionsTo = partitions
	}
	for _, k := range configs.keys {
		doc.Set[k] = configs.values[k]
	}
	doc.Deleted = append(doc.Deleted, deletes...)

	if af.json {
		return writeJSON(stdout, doc)
	}
	if addPartitions {
		fmt.Fprintf(stdout, "topic %s: partitions %d → %d\n", name, doc.PartitionsFrom, doc.PartitionsTo)
	} else if flagSet(fs, "partitions") {
		fmt.Fprintf(stdout, "topic %s: already has %d partitions\n", name, doc.PartitionsFrom)
	}
	for _, k := range configs.keys {
		fmt.Fprintf(stdout, "topic %s: set %s=%s\n", name, k, configs.values[k])
	}
	for _, k := range deletes {
		fmt.Fprintf(stdout, "topic %s: deleted %s (now the default)\n", name, k)
	}
	return nil
}

// ---- delete ----

type deletedTopicJSON struct {
	Topic   string `json:"topic"`
	Deleted bool   `json:"deleted"`
	Error   string `json:"error,omitempty"`
}

func topicsDelete(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var af adminFlags
	var yes bool
	fs := newCmdFlags("topics delete", topicsDeleteHelp)
	af.register(fs)
	fs.BoolVar(&yes, "yes", false, "really delete the topics and their records")
	pos, err := af.parse(fs, args, stderr)
	if err != nil {
		return err
	}
	names, err := topicNames(pos)
	if err != nil {
		return err
	}
	if !yes {
		return usageError{fmt.Errorf("deleting %s deletes all its records: add -yes to confirm (flag -yes)", strings.Join(names, ", "))}
	}
	adm, ctx, cancel, err := af.connect(ctx)
	if err != nil {
		return err
	}
	defer adm.Close()
	defer cancel()

	resps, err := adm.DeleteTopics(ctx, names...)
	if err != nil {
		return af.fail("delete topics", err)
	}
	var out []deletedTopicJSON
	failed := 0
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
		if !t.Deleted {
			failed++
		}
		out = append(out, t)
	}
	if af.json {
		if err := writeJSON(stdout, struct {
			Topics []deletedTopicJSON `json:"topics"`
		}{out}); err != nil {
			return err
		}
	} else {
		for _, t := range out {
			if t.Deleted {
				fmt.Fprintf(stdout, "topic %s: deleted\n", t.Topic)
			} else {
				fmt.Fprintf(stdout, "topic %s: not deleted: %s\n", t.Topic, t.Error)
			}
		}
	}
	switch {
	case failed == 0:
		return nil
	case len(out) == 1:
		return fmt.Errorf("topic %s not deleted: %s", out[0].Topic, out[0].Error)
	}
	return fmt.Errorf("%d of %d topics not deleted", failed, len(out))
}

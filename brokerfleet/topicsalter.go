package main

// brokerfleet topics alter: add partitions to a topic, and set or delete
// its configs, validating every change before applying any.

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/stratamq/strata/brokerfleet/internal/cli"
)

type alteredTopicJSON struct {
	Topic          string            `json:"topic"`
	PartitionsFrom int               `json:"partitionsFrom"`
	PartitionsTo   int               `json:"partitionsTo"`
	Set            map[string]string `json:"set"`
	Deleted        []string          `json:"deleted"`
}

// alterFlags are the flags of topics alter besides the admin ones.
type alterFlags struct {
	partitions int
	raise      bool // -partitions was given
	configs    configFlag
	deletes    cli.Strings
}

func (f *alterFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&f.partitions, "partitions", 0, "raise the partition count to `N` (partitions cannot be removed)")
	fs.Var(&f.configs, "config", "set topic config `key=value`, repeatable")
	fs.Var(&f.deletes, "delete-config", "delete topic config `key[,key...]` (back to the default), repeatable")
}

// check checks the flags and returns the topic pos names.
func (f *alterFlags) check(fs *flag.FlagSet, pos []string) (string, error) {
	f.raise = cli.IsSet(fs, "partitions")
	switch {
	case len(pos) == 0:
		return "", cli.Usagef("name the topic to alter (argument TOPIC)")
	case len(pos) > 1:
		return "", cli.Usagef("alter takes one topic, got %q", pos)
	case f.raise && f.partitions < 1:
		return "", cli.BadFlag("partitions", f.partitions, "want the new total, at least 1")
	case !f.raise && len(f.configs.keys) == 0 && len(f.deletes) == 0:
		return "", cli.Usagef("nothing to change: give -partitions, -config or -delete-config")
	}
	f.deletes = cli.Distinct(f.deletes)
	for _, k := range f.deletes {
		if _, ok := f.configs.values[k]; ok {
			return "", cli.Usagef("config %s is both set (flag -config) and deleted (flag -delete-config)", k)
		}
	}
	return pos[0], nil
}

// plan returns what altering topic name, which has partitions now, does.
func (f *alterFlags) plan(name string, partitions int) (alteredTopicJSON, error) {
	doc := alteredTopicJSON{Topic: name, PartitionsFrom: partitions, PartitionsTo: partitions, Set: map[string]string{}, Deleted: []string{}}
	if f.raise && f.partitions < partitions {
		return doc, fmt.Errorf("topic %s has %d partitions; they cannot be reduced to %d (flag -partitions)", name, partitions, f.partitions)
	}
	if f.raise {
		doc.PartitionsTo = f.partitions
	}
	for _, k := range f.configs.keys {
		doc.Set[k] = f.configs.values[k]
	}
	doc.Deleted = append(doc.Deleted, f.deletes...)
	return doc, nil
}

func topicsAlter(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	a := cli.NewAdmin("topics alter", topicsAlterHelp)
	var f alterFlags
	f.register(a.Flags)
	pos, err := a.Parse(args, stderr)
	if err != nil {
		return err
	}
	name, err := f.check(a.Flags, pos)
	if err != nil {
		return err
	}
	return a.Run(ctx, func(ctx context.Context, adm *kadm.Client) error {
		td, err := describeTopics(ctx, adm, a, []string{name})
		if err != nil {
			return err
		}
		doc, err := f.plan(name, len(td[name].Partitions))
		if err != nil {
			return err
		}
		if err := alterTopic(ctx, adm, a, doc, f.alters()); err != nil {
			return err
		}
		return a.Print(stdout, doc, func() error {
			if doc.PartitionsTo != doc.PartitionsFrom {
				fmt.Fprintf(stdout, "topic %s: partitions %d → %d\n", name, doc.PartitionsFrom, doc.PartitionsTo)
			} else if f.raise {
				fmt.Fprintf(stdout, "topic %s: already has %d partitions\n", name, doc.PartitionsFrom)
			}
			for _, k := range f.configs.keys {
				fmt.Fprintf(stdout, "topic %s: set %s=%s\n", name, k, f.configs.values[k])
			}
			for _, k := range f.deletes {
				fmt.Fprintf(stdout, "topic %s: deleted %s (now the default)\n", name, k)
			}
			return nil
		})
	})
}

// alters returns the config changes the flags ask for.
func (f *alterFlags) alters() []kadm.AlterConfig {
	var alters []kadm.AlterConfig
	for _, k := range f.configs.keys {
		alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: k, Value: kadm.StringPtr(f.configs.values[k])})
	}
	for _, k := range f.deletes {
		alters = append(alters, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: k})
	}
	return alters
}

// alterTopic raises the partition count of doc's topic to PartitionsTo
// and applies alters to its configs. It validates everything, then
// applies: a bad config must not leave the partitions added.
func alterTopic(ctx context.Context, adm *kadm.Client, a *cli.Admin, doc alteredTopicJSON, alters []kadm.AlterConfig) error {
	name, partitions := doc.Topic, 0 // partitions: the new count, 0 for none
	if doc.PartitionsTo != doc.PartitionsFrom {
		partitions = doc.PartitionsTo
	}
	for _, dry := range []bool{true, false} {
		if partitions > 0 {
			f := adm.UpdatePartitions
			if dry {
				f = adm.ValidateUpdatePartitions
			}
			rs, err := f(ctx, partitions, name)
			if err != nil {
				return a.Fail("add partitions to topic "+name, err)
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
				return a.Fail("alter configs of topic "+name, err)
			}
			r, err := rs.On(name, nil)
			switch {
			case err != nil:
				return fmt.Errorf("alter configs of topic %s: not in the response", name)
			case r.Err != nil:
				what := "alter configs of topic " + name
				if dry && partitions > 0 {
					what += " (nothing changed)"
				} else if partitions > 0 {
					what += fmt.Sprintf(" (partitions were raised to %d)", partitions)
				}
				return fmt.Errorf("%s (flag -config or -delete-config): %s", what, errWithMessage(r.Err, r.ErrMessage))
			}
		}
	}
	return nil
}

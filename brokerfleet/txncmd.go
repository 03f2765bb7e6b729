package main

// brokerfleet transactions: list, describe, find hanging and abort
// transactions over the Kafka admin API (kadm), against Strata or any
// Kafka-compatible cluster, like Kafka's kafka-transactions.sh.

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/stratamq/strata/brokerfleet/internal/cli"
)

const txnHelp = `usage: brokerfleet transactions <verb> [flags] [TRANSACTIONAL-ID...]

Administers transactions through the Kafka admin API of any broker in the
cluster (Strata or Kafka), as kafka-transactions.sh does.

verbs:
  list                       transactional ids with their coordinator, producer id and state
  describe TRANSACTIONAL-ID...
                             state, producer id and epoch, timeout, start time and
                             partitions of each transaction
  hanging [-topic T...] [-older-than D]
                             transactions open in partitions for longer than D
                             (default 15m, the maximum transaction timeout): markers
                             that never came, holding back the last stable offset
  abort -topic T -partition P -start-offset O
                             write an abort marker for the producer whose open
                             transaction in the partition starts at O (Kafka's
                             hanging-transaction tool); needs CLUSTER_ACTION

Every verb takes -bootstrap (default: STRATA_BOOTSTRAP, else 127.0.0.1:9092),
-json and -timeout. Run 'brokerfleet transactions <verb> -help' for its flags.
`

const (
	txnListHelp = `usage: brokerfleet transactions list [flags]

Lists the transactional ids every broker coordinates.

flags:
`
	txnDescribeHelp = `usage: brokerfleet transactions describe [flags] TRANSACTIONAL-ID [TRANSACTIONAL-ID...]

Describes transactions at their coordinators. While a decision is being
carried out (PrepareCommit, PrepareAbort) only the partitions still
without a marker are listed.

flags:
`
	txnHangingHelp = `usage: brokerfleet transactions hanging [flags]

Lists the transactions open in partitions (DescribeProducers, at each
partition's leader) whose producer last wrote longer ago than -older-than:
a transaction that old outlived every timeout, so its marker is lost and
it holds back the partition's last stable offset (read_committed
consumers stop there). Abort one with 'brokerfleet transactions abort'.

flags:
`
	txnAbortHelp = `usage: brokerfleet transactions abort -topic T -partition P -start-offset O [flags]

Writes an abort marker to one partition for the producer whose open
transaction there starts at O, with its producer epoch and coordinator
epoch (so a later marker of its coordinator still wins). Use it only for
a hanging transaction: one whose coordinator will never end it.

flags:
`
)

var txnStates = []string{"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort"}

func runTransactions(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return cli.RunVerbs(ctx, "transactions", txnHelp, []cli.Verb{
		{Name: "list", Run: txnList},
		{Name: "describe", Run: txnDescribe},
		{Name: "hanging", Run: txnHanging},
		{Name: "abort", Run: txnAbort},
	}, args, stdout, stderr)
}

// ---- list ----

type listedTxnJSON struct {
	TransactionalID string `json:"transactionalId"`
	Coordinator     int32  `json:"coordinator"`
	ProducerID      int64  `json:"producerId"`
	State           string `json:"state"`
}

func txnList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	a := cli.NewAdmin("transactions list", txnListHelp)
	var states []string
	a.Flags.Func("state", "only transactions in `STATE[,STATE...]`, repeatable: "+strings.Join(txnStates, ", "), func(s string) error {
		for _, v := range strings.Split(s, ",") {
			v = strings.TrimSpace(v)
			ok := false
			for _, st := range txnStates {
				if strings.EqualFold(v, st) {
					states, ok = append(states, st), true
				}
			}
			if !ok {
				return fmt.Errorf("unknown transaction state %q: want %s", v, strings.Join(txnStates, ", "))
			}
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
		listed, err := adm.ListTransactions(ctx, nil, states)
		if err != nil {
			return a.Fail("list transactions", err)
		}
		out := make([]listedTxnJSON, 0, len(listed))
		for _, t := range listed.Sorted() {
			out = append(out, listedTxnJSON{TransactionalID: t.TxnID, Coordinator: t.Coordinator, ProducerID: t.ProducerID, State: t.State})
		}
		return a.Print(stdout, struct {
			Transactions []listedTxnJSON `json:"transactions"`
		}{out}, func() error {
			if len(out) == 0 {
				fmt.Fprintln(stdout, "no transactions")
				return nil
			}
			tw := cli.NewTable(stdout)
			tw.Row("TRANSACTIONAL-ID", "COORDINATOR", "PRODUCER-ID", "STATE")
			for _, t := range out {
				tw.Row(t.TransactionalID, strconv.Itoa(int(t.Coordinator)), strconv.FormatInt(t.ProducerID, 10), t.State)
			}
			return tw.Flush()
		})
	})
}

// ---- describe ----

type describedTxnJSON struct {
	TransactionalID string               `json:"transactionalId"`
	Coordinator     int32                `json:"coordinator"`
	State           string               `json:"state,omitempty"`
	ProducerID      int64                `json:"producerId"`
	ProducerEpoch   int16                `json:"producerEpoch"`
	TimeoutMs       int32                `json:"timeoutMs"`
	Start           string               `json:"start,omitempty"` // RFC 3339; empty: no transaction
	Partitions      []topicPartitionJSON `json:"partitions"`
	Error           string               `json:"error,omitempty"`
}

func txnDescribe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	a := cli.NewAdmin("transactions describe", txnDescribeHelp)
	pos, err := a.Parse(args, stderr)
	if err != nil {
		return err
	}
	ids, err := cli.Names(pos, "name at least one transactional id")
	if err != nil {
		return err
	}
	return a.Run(ctx, func(ctx context.Context, adm *kadm.Client) error {
		described, err := adm.DescribeTransactions(ctx, ids...)
		if err != nil {
			return a.Fail("describe transactions", err)
		}
		var out []describedTxnJSON
		var failed error
		for _, id := range ids {
			d, ok := described[id]
			j := describedTxnJSON{TransactionalID: id, Coordinator: d.Coordinator, Partitions: []topicPartitionJSON{}}
			switch {
			case !ok:
				j.Error = "not described"
			case d.Err != nil:
				j.Error = d.Err.Error()
			default:
				j.State, j.ProducerID, j.ProducerEpoch, j.TimeoutMs = d.State, d.ProducerID, d.ProducerEpoch, d.TimeoutMillis
				if d.StartTimestamp > 0 {
					j.Start = time.UnixMilli(d.StartTimestamp).UTC().Format(time.RFC3339Nano)
				}
				for _, t := range d.Topics.Sorted() {
					j.Partitions = append(j.Partitions, topicPartitionJSON{Topic: t.Topic, Partitions: t.Partitions})
				}
			}
			if j.Error != "" {
				failed = fmt.Errorf("transactional id %s: %s", id, j.Error)
			}
			out = append(out, j)
		}
		if err := a.Print(stdout, struct {
			Transactions []describedTxnJSON `json:"transactions"`
		}{out}, func() error {
			tw := cli.NewTable(stdout)
			tw.Row("TRANSACTIONAL-ID", "COORDINATOR", "STATE", "PRODUCER-ID", "EPOCH", "TIMEOUT-MS", "START", "PARTITIONS")
			for _, t := range out {
				if t.Error != "" {
					fmt.Fprintf(stderr, "transactional id %s: %s\n", t.TransactionalID, t.Error)
					continue
				}
				var parts []string
				for _, tp := range t.Partitions {
					for _, p := range tp.Partitions {
						parts = append(parts, fmt.Sprintf("%s-%d", tp.Topic, p))
					}
				}
				tw.Row(t.TransactionalID, strconv.Itoa(int(t.Coordinator)), t.State, strconv.FormatInt(t.ProducerID, 10),
					strconv.Itoa(int(t.ProducerEpoch)), strconv.Itoa(int(t.TimeoutMs)), cli.Dash(t.Start), cli.Dash(strings.Join(parts, ",")))
			}
			return tw.Flush()
		}); err != nil {
			return err
		}
		return failed
	})
}

// ---- hanging ----

type openTxnJSON struct {
	Topic            string `json:"topic"`
	Partition        int32  `json:"partition"`
	Leader           int32  `json:"leader"`
	ProducerID       int64  `json:"producerId"`
	ProducerEpoch    int16  `json:"producerEpoch"`
	CoordinatorEpoch int32  `json:"coordinatorEpoch"`
	StartOffset      int64  `json:"startOffset"`
	LastWrite        string `json:"lastWrite"`
}

func txnHanging(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	a := cli.NewAdmin("transactions hanging", txnHangingHelp)
	var topics cli.Strings
	a.Flags.Var(&topics, "topic", "only `TOPIC` (repeatable; default: every topic)")
	olderThan := a.Flags.Duration("older-than", 15*time.Minute, "how long a transaction must have been open in a partition (the broker's transaction-max-timeout)")
	pos, err := a.Parse(args, stderr)
	if err != nil {
		return err
	}
	if err := cli.NoArgs(pos); err != nil {
		return err
	}
	if err := cli.Positive("older-than", *olderThan); err != nil {
		return err
	}
	return a.Run(ctx, func(ctx context.Context, adm *kadm.Client) error {
		set := kadm.TopicsSet{}
		for _, t := range topics {
			set.Add(t) // every partition of it
		}
		described, err := adm.DescribeProducers(ctx, set)
		if err != nil {
			return a.Fail("describe producers", err)
		}
		cutoff := time.Now().Add(-*olderThan).UnixMilli()
		out := []openTxnJSON{}
		described.EachProducer(func(p kadm.DescribedProducer) {
			if p.CurrentTxnStartOffset < 0 || p.LastTimestamp > cutoff {
				return
			}
			out = append(out, openTxnJSON{Topic: p.Topic, Partition: p.Partition, Leader: p.Leader, ProducerID: p.ProducerID,
				ProducerEpoch: p.ProducerEpoch, CoordinatorEpoch: p.CoordinatorEpoch, StartOffset: p.CurrentTxnStartOffset,
				LastWrite: time.UnixMilli(p.LastTimestamp).UTC().Format(time.RFC3339Nano)})
		})
		sort.Slice(out, func(i, j int) bool {
			if out[i].Topic != out[j].Topic {
				return out[i].Topic < out[j].Topic
			}
			return out[i].Partition < out[j].Partition
		})
		return a.Print(stdout, struct {
			Hanging []openTxnJSON `json:"hanging"`
		}{out}, func() error {
			if len(out) == 0 {
				fmt.Fprintln(stdout, "no hanging transactions")
				return nil
			}
			tw := cli.NewTable(stdout)
			tw.Row("TOPIC", "PARTITION", "LEADER", "PRODUCER-ID", "EPOCH", "COORDINATOR-EPOCH", "START-OFFSET", "LAST-WRITE")
			for _, o := range out {
				tw.Row(o.Topic, strconv.Itoa(int(o.Partition)), strconv.Itoa(int(o.Leader)), strconv.FormatInt(o.ProducerID, 10),
					strconv.Itoa(int(o.ProducerEpoch)), strconv.Itoa(int(o.CoordinatorEpoch)), strconv.FormatInt(o.StartOffset, 10), o.LastWrite)
			}
			return tw.Flush()
		})
	})
}

// ---- abort ----

func txnAbort(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	a := cli.NewAdmin("transactions abort", txnAbortHelp)
	topic := a.Flags.String("topic", "", "the partition's `TOPIC`")
	partition := a.Flags.Int("partition", -1, "the `PARTITION`")
	start := a.Flags.Int64("start-offset", -1, "the first `OFFSET` of the open transaction (as 'transactions hanging' lists it)")
	pos, err := a.Parse(args, stderr)
	if err != nil {
		return err
	}
	if err := cli.NoArgs(pos); err != nil {
		return err
	}
	switch {
	case *topic == "":
		return cli.BadFlag("topic", *topic, "name the partition's topic")
	case *partition < 0:
		return cli.BadFlag("partition", *partition, "name the partition")
	case *start < 0:
		return cli.BadFlag("start-offset", *start, "name the open transaction's first offset")
	}
	return a.Run(ctx, func(ctx context.Context, adm *kadm.Client) error {
		set := kadm.TopicsSet{}
		set.Add(*topic, int32(*partition))
		described, err := adm.DescribeProducers(ctx, set)
		if err != nil {
			return a.Fail("describe producers", err)
		}
		var found *kadm.DescribedProducer
		described.EachProducer(func(p kadm.DescribedProducer) {
			if p.Partition == int32(*partition) && p.CurrentTxnStartOffset == *start {
				found = &p
			}
		})
		if found == nil {
			return fmt.Errorf("%s-%d: no producer has an open transaction starting at offset %d", *topic, *partition, *start)
		}
		marker := kadm.TxnMarkers{ProducerID: found.ProducerID, ProducerEpoch: found.ProducerEpoch, Commit: false,
			CoordinatorEpoch: max(found.CoordinatorEpoch, 0), Topics: set}
		resp, err := adm.WriteTxnMarkers(ctx, marker)
		if err != nil {
			return a.Fail("write the abort marker", err)
		}
		var failed error
		resp.EachPartition(func(p kadm.TxnMarkersPartitionResponse) {
			if p.Err != nil {
				failed = fmt.Errorf("%s-%d: %w", p.Topic, p.Partition, p.Err)
			}
		})
		if failed != nil {
			return failed
		}
		return a.Print(stdout, map[string]any{"topic": *topic, "partition": *partition, "producerId": found.ProducerID,
			"producerEpoch": found.ProducerEpoch, "aborted": true}, func() error {
			fmt.Fprintf(stdout, "aborted the transaction of producer %d (epoch %d) in %s-%d from offset %d\n",
				found.ProducerID, found.ProducerEpoch, *topic, *partition, *start)
			return nil
		})
	})
}

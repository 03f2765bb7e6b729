package broker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/brokertest"
)

// readAll consumes a topic from the start until it has read want records
// or nothing more comes, at an isolation level, and returns the values by
// partition in order.
func readAll(t *testing.T, addr, topicName string, committed bool, want int) map[int32][]string {
	t.Helper()
	opts := []kgo.Opt{kgo.ConsumeTopics(topicName), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200 * time.Millisecond)}
	if committed {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl := brokertest.Client(t, addr, opts...)
	defer cl.Close()
	got := map[int32][]string{}
	n := 0
	deadline := time.Now().Add(20 * time.Second)
	idle := 0
	for n < want && time.Now().Before(deadline) && idle < 5 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		before := n
		fs.EachRecord(func(r *kgo.Record) {
			got[r.Partition] = append(got[r.Partition], string(r.Value))
			n++
		})
		for _, e := range fs.Errors() {
			if e.Err != context.DeadlineExceeded {
				t.Fatalf("fetch %s-%d: %v", e.Topic, e.Partition, e.Err)
			}
		}
		if n == before && n >= want {
			break
		}
		if n == before {
			idle++
		} else {
			idle = 0
		}
	}
	return got
}

func count(m map[int32][]string) int {
	n := 0
	for _, v := range m {
		n += len(v)
	}
	return n
}

func TestTransactionsCommitAbortAndIsolation(t *testing.T) {
	b := brokertest.Start(t)
	brokertest.CreateTopic(t, b.Addr, "txn-out", 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	prod := brokertest.Client(t, b.Addr, kgo.TransactionalID("txn-a"), kgo.DefaultProduceTopic("txn-out"),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	send := func(tag string, n int, commit bool) {
		require.NoError(t, prod.BeginTransaction())
		for i := range n {
			prod.Produce(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("%s-%d", tag, i))}, func(_ *kgo.Record, err error) { require.NoError(t, err) })
		}
		require.NoError(t, prod.Flush(ctx))
		require.NoError(t, prod.EndTransaction(ctx, kgo.TransactionEndTry(commit)))
	}
	send("c1", 30, true)
	send("a1", 20, false)
	send("c2", 30, true)
	send("a2", 15, false)

	committed := readAll(t, b.Addr, "txn-out", true, 60)
	require.Equal(t, 60, count(committed), "read_committed sees the committed transactions only")
	for p, vs := range committed {
		for _, v := range vs {
			require.Regexp(t, `^c[12]-\d+$`, v, "partition %d", p)
		}
	}
	all := readAll(t, b.Addr, "txn-out", false, 95)
	require.Equal(t, 95, count(all), "read_uncommitted sees every record, markers skipped")

	// ListOffsets: the last stable offset is the end once no transaction
	// is open; an open one holds read_committed back.
	require.NoError(t, prod.BeginTransaction())
	prod.Produce(ctx, &kgo.Record{Value: []byte("open"), Partition: 0}, nil)
	require.NoError(t, prod.Flush(ctx))
	lso := listEnd(t, b.Addr, "txn-out", 1)
	hwm := listEnd(t, b.Addr, "txn-out", 0)
	var held int
	for p := range hwm {
		if lso[p] < hwm[p] {
			held++
		}
	}
	require.Equal(t, 1, held, "one partition holds an open transaction: lso %v hwm %v", lso, hwm)
	require.NoError(t, prod.EndTransaction(ctx, kgo.TryCommit))
	require.Eventually(t, func() bool {
		l, h := listEnd(t, b.Addr, "txn-out", 1), listEnd(t, b.Addr, "txn-out", 0)
		for p := range h {
			if l[p] != h[p] {
				return false
			}
		}
		return true
	}, 10*time.Second, 20*time.Millisecond)
}

// listEnd returns each partition's latest offset at an isolation level.
func listEnd(t *testing.T, addr, topicName string, isolation int8) map[int32]int64 {
	t.Helper()
	cl := brokertest.Client(t, addr)
	defer cl.Close()
	req := kmsg.NewPtrListOffsetsRequest()
	req.IsolationLevel = isolation
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topicName
	for p := range int32(3) {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = p, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = []kmsg.ListOffsetsRequestTopic{rt}
	resp, err := req.RequestWith(context.Background(), cl)
	require.NoError(t, err)
	out := map[int32]int64{}
	for _, p := range resp.Topics[0].Partitions {
		require.Zero(t, p.ErrorCode, "%v", kerr.ErrorForCode(p.ErrorCode))
		out[p.Partition] = p.Offset
	}
	return out
}

// TestSaramaTransactionalProducer: Sarama's transactional producer commits
// and aborts (with offsets in the transaction), and Sarama's own
// read_committed consumer sees the committed records only.
func TestSaramaTransactionalProducer(t *testing.T) {
	b := brokertest.Start(t)
	for _, version := range []sarama.KafkaVersion{sarama.V2_5_0_0, sarama.V3_6_0_0} {
		t.Run(version.String(), func(t *testing.T) {
			topicName := "sarama-txn-" + version.String()
			brokertest.CreateTopic(t, b.Addr, topicName, 2, nil)
			cfg := sarama.NewConfig()
			cfg.Version = version
			cfg.Producer.Return.Successes = true
			cfg.Producer.RequiredAcks = sarama.WaitForAll
			cfg.Producer.Idempotent = true
			cfg.Producer.Retry.Max = 5
			cfg.Producer.Transaction.ID = "sarama-" + version.String()
			cfg.Net.MaxOpenRequests = 1
			cfg.Consumer.IsolationLevel = sarama.ReadCommitted
			cfg.Consumer.MaxWaitTime = 100 * time.Millisecond
			prod, err := sarama.NewSyncProducer([]string{b.Addr}, cfg)
			require.NoError(t, err)
			defer prod.Close()
			require.True(t, prod.IsTransactional())

			send := func(tag string, n int, commit bool) {
				require.NoError(t, prod.BeginTxn())
				for i := range n {
					_, _, err := prod.SendMessage(&sarama.ProducerMessage{Topic: topicName, Partition: int32(i % 2),
						Value: sarama.StringEncoder(fmt.Sprintf("%s-%d", tag, i))})
					require.NoError(t, err)
				}
				offs := map[string][]*sarama.PartitionOffsetMetadata{topicName: {{Partition: 0, Offset: int64(n)}}}
				require.NoError(t, prod.AddOffsetsToTxn(offs, "sarama-txn-group"))
				if commit {
					require.NoError(t, prod.CommitTxn())
				} else {
					require.NoError(t, prod.AbortTxn())
				}
			}
			send("commit", 10, true)
			send("abort", 6, false)
			send("commit2", 4, true)

			cons, err := sarama.NewConsumer([]string{b.Addr}, cfg)
			require.NoError(t, err)
			defer cons.Close()
			var got []string
			for p := range int32(2) {
				pc, err := cons.ConsumePartition(topicName, p, sarama.OffsetOldest)
				require.NoError(t, err)
				timeout := time.After(3 * time.Second)
			loop:
				for {
					select {
					case m := <-pc.Messages():
						got = append(got, string(m.Value))
					case err := <-pc.Errors():
						t.Fatalf("partition %d: %v", p, err)
					case <-timeout:
						break loop
					}
				}
				require.NoError(t, pc.Close())
			}
			require.Len(t, got, 14, "committed records only: %v", got)
			for _, v := range got {
				require.Regexp(t, `^commit2?-\d+$`, v)
			}
			// The committed transactions' offsets are the group's.
			adm := brokertest.Admin(t, b.Addr)
			offs, err := adm.FetchOffsets(context.Background(), "sarama-txn-group")
			require.NoError(t, err)
			o, ok := offs.Lookup(topicName, 0)
			require.True(t, ok)
			require.EqualValues(t, 4, o.At, "the last committed transaction's offset")
		})
	}
}

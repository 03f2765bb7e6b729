package broker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/broker"
	"github.com/stratamq/strata/brokerfleet/internal/brokertest"
	"github.com/stratamq/strata/pkg/objstore/objstoretest"
	"github.com/stratamq/strata/pkg/objstore/s3store"
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

// TestAbortedTransactionsStayHiddenFromDiskAndTier aborts transactions in
// the three ways Kafka does (EndTxn abort, a new instance fencing the
// producer, the transaction timeout), commits others, and reads the
// partition from local disk and then, after every disk is wiped, from the
// S3 tier: read_committed consumers never see an aborted record,
// read_uncommitted ones see them all, and no client sees a marker.
func TestAbortedTransactionsStayHiddenFromDiskAndTier(t *testing.T) {
	s3 := objstoretest.StartS3(t, "")
	tc := startTiered(t, s3.Store(t, s3store.Options{}), func(c *broker.Config) { c.TransactionCheckInterval = 100 * time.Millisecond })
	addr := tc.brokers[0].Addr
	const topicName = "txn-tier"
	brokertest.CreateTopicRF(t, addr, topicName, 1, 3, map[string]*string{
		"segment.bytes":       kadm.StringPtr("4096"),
		"local.retention.ms":  kadm.StringPtr("0"),
		"min.insync.replicas": kadm.StringPtr("2"),
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	txnClient := func(id string, opts ...kgo.Opt) *kgo.Client {
		return brokertest.Client(t, addr, append([]kgo.Opt{kgo.TransactionalID(id), kgo.DefaultProduceTopic(topicName)}, opts...)...)
	}
	produce := func(cl *kgo.Client, tag string, n int) {
		t.Helper()
		for i := range n {
			require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("%s-%03d-%s", tag, i, "payload-payload-payload"))}).FirstErr())
		}
	}
	want := map[string]bool{}   // committed
	hidden := map[string]bool{} // aborted
	note := func(m map[string]bool, tag string, n int) {
		for i := range n {
			m[fmt.Sprintf("%s-%03d-%s", tag, i, "payload-payload-payload")] = true
		}
	}

	p1 := txnClient("t1")
	require.NoError(t, p1.BeginTransaction())
	produce(p1, "committed-1", 20)
	require.NoError(t, p1.EndTransaction(ctx, kgo.TryCommit))
	note(want, "committed-1", 20)
	// Aborted by EndTxn.
	require.NoError(t, p1.BeginTransaction())
	produce(p1, "aborted-client", 15)
	require.NoError(t, p1.EndTransaction(ctx, kgo.TryAbort))
	note(hidden, "aborted-client", 15)
	// Aborted by a new instance of the transactional id.
	p2 := txnClient("t2")
	require.NoError(t, p2.BeginTransaction())
	produce(p2, "aborted-fenced", 15)
	note(hidden, "aborted-fenced", 15)
	p2b := txnClient("t2")
	require.NoError(t, p2b.BeginTransaction()) // InitProducerId fenced p2 and aborted its transaction
	produce(p2b, "committed-2", 10)
	require.NoError(t, p2b.EndTransaction(ctx, kgo.TryCommit))
	note(want, "committed-2", 10)
	require.Error(t, p2.EndTransaction(ctx, kgo.TryCommit), "the fenced instance cannot commit")
	// Aborted by the transaction timeout.
	p3 := txnClient("t3", kgo.TransactionTimeout(time.Second))
	require.NoError(t, p3.BeginTransaction())
	produce(p3, "aborted-timeout", 15)
	note(hidden, "aborted-timeout", 15)
	adm := brokertest.Admin(t, addr)
	waitFor(t, "the timed-out transaction aborted", func() bool {
		d, err := adm.DescribeTransactions(ctx, "t3")
		if err != nil {
			return false
		}
		return d["t3"].State == "CompleteAbort"
	})
	require.Error(t, p3.EndTransaction(ctx, kgo.TryCommit), "the timed-out producer is fenced")
	p4 := txnClient("t1")
	require.NoError(t, p4.BeginTransaction())
	produce(p4, "committed-3", 20)
	require.NoError(t, p4.EndTransaction(ctx, kgo.TryCommit))
	note(want, "committed-3", 20)

	// Plain records after, so every transaction lies in closed segments.
	end := listEndOf(t, addr, topicName, 0)
	plain := brokertest.Client(t, addr, kgo.DefaultProduceTopic(topicName))
	produce(plain, "plain", 150)
	var tierEnd int64
	waitFor(t, "the transactions uploaded", func() bool {
		ends, _ := manifestEnd(t, tc.meta, topicName, 1)
		tierEnd = ends[0]
		return tierEnd > end
	})
	check := func(where string, committed bool, recs map[string]int64) {
		t.Helper()
		for v := range want {
			require.Contains(t, recs, v, "%s: committed record missing", where)
		}
		for v := range hidden {
			if committed {
				require.NotContains(t, recs, v, "%s: an aborted record is visible to read_committed", where)
			} else {
				require.Contains(t, recs, v, "%s: read_uncommitted misses an aborted record", where)
			}
		}
		for v := range recs {
			require.NotEmpty(t, v, "%s: a marker reached the client", where)
		}
	}
	for _, committed := range []bool{true, false} {
		check("local disk", committed, readValuesOf(t, addr, topicName, committed, end))
	}

	// Wipe every disk: what is read below the tier's end comes from S3.
	for i, b := range tc.brokers {
		require.NoError(t, b.Broker.Close())
		tc.brokers[i] = nil
	}
	for id := 0; id < 3; id++ {
		tc.brokers[id] = tc.start(t, id, t.TempDir(), "127.0.0.1:0")
	}
	addr = tc.brokers[0].Addr
	for _, committed := range []bool{true, false} {
		check("S3 tier", committed, readValuesOf(t, addr, topicName, committed, end))
	}
}

// listEndOf returns a partition's high watermark.
func listEndOf(t *testing.T, addr, topicName string, p int32) int64 {
	t.Helper()
	adm := brokertest.Admin(t, addr)
	ends, err := adm.ListEndOffsets(context.Background(), topicName)
	require.NoError(t, err)
	o, ok := ends.Lookup(topicName, p)
	require.True(t, ok)
	require.NoError(t, o.Err)
	return o.Offset
}

// readValuesOf reads partition 0 from the start until it has passed
// offset end, and returns the values read with their offsets.
func readValuesOf(t *testing.T, addr, topicName string, committed bool, end int64) map[string]int64 {
	t.Helper()
	opts := []kgo.Opt{kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topicName: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxWait(200 * time.Millisecond)}
	if committed {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl := brokertest.Client(t, addr, opts...)
	defer cl.Close()
	got := map[string]int64{}
	deadline := time.Now().Add(30 * time.Second)
	for last := int64(-1); last < end && time.Now().Before(deadline); {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			got[string(r.Value)] = r.Offset
			last = max(last, r.Offset)
		})
		for _, e := range fs.Errors() {
			require.ErrorIs(t, e.Err, context.DeadlineExceeded, "fetch")
		}
	}
	return got
}

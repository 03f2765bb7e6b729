package interop_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/stretchr/testify/require"

	"github.com/stratamq/strata/brokerfleet/internal/brokertest"
)

// segmentio/kafka-go implements the protocol itself (package protocol for
// the Client and Writer, its older Conn for the Reader's group
// membership), so it is a second Go codebase besides franz-go and Sarama
// reading our answers.

// TestKafkaGo: kafka-go's admin client creates a replicated topic, its
// Writer produces with acks all (and zstd), two Readers in one consumer
// group split the partitions and commit what they read, and a Reader that
// joins later resumes exactly after the commits. Each step is checked
// with franz-go or the admin API, not with kafka-go itself.
func TestKafkaGo(t *testing.T) {
	bs := startCluster(t, 3)
	seeds := addrs(bs)
	const topicName, group, parts, n = "kafka-go", "kafka-go-readers", 3, 300
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Admin: CreateTopics through kafka-go's Client, then an exact
	// duplicate, which Kafka answers with TOPIC_ALREADY_EXISTS.
	client := &kafka.Client{Addr: kafka.TCP(seeds...), Timeout: 20 * time.Second}
	create := &kafka.CreateTopicsRequest{Topics: []kafka.TopicConfig{{
		Topic: topicName, NumPartitions: parts, ReplicationFactor: 3,
		ConfigEntries: []kafka.ConfigEntry{{ConfigName: "retention.ms", ConfigValue: "86400000"}},
	}}}
	resp, err := client.CreateTopics(ctx, create)
	require.NoError(t, err)
	require.NoError(t, resp.Errors[topicName])
	resp, err = client.CreateTopics(ctx, create)
	require.NoError(t, err)
	require.ErrorIs(t, resp.Errors[topicName], kafka.TopicAlreadyExists)
	md, err := brokertest.Admin(t, seeds[0]).ListTopics(ctx, topicName)
	require.NoError(t, err)
	require.NoError(t, md[topicName].Err)
	require.Len(t, md[topicName].Partitions, parts)
	for _, p := range md[topicName].Partitions {
		require.Len(t, p.Replicas, 3, "partition %d", p.Partition)
	}

	// Writer with RequiredAcks all: each WriteMessages returns once every
	// in-sync replica has the batch. The Hash balancer (FNV-1a of the
	// key) decides partitions, so keys say where each record must be.
	want := map[int32][]record{}
	write := func(w *kafka.Writer, from, to int) {
		t.Helper()
		msgs := make([]kafka.Message, 0, to-from)
		for i := from; i < to; i++ {
			msgs = append(msgs, kafka.Message{
				Key:     []byte("key-" + strconv.Itoa(i%17)),
				Value:   []byte(fmt.Sprintf("value-%04d", i)),
				Headers: []kafka.Header{{Key: "i", Value: []byte(strconv.Itoa(i))}},
			})
		}
		require.NoError(t, w.WriteMessages(ctx, msgs...))
		for _, m := range msgs {
			p := int32((&kafka.Hash{}).Balance(m, 0, 1, 2))
			want[p] = append(want[p], record{Partition: p, Key: string(m.Key), Value: string(m.Value), Headers: "i=" + string(m.Headers[0].Value)})
		}
	}
	w := &kafka.Writer{Addr: kafka.TCP(seeds...), Topic: topicName, Balancer: &kafka.Hash{},
		RequiredAcks: kafka.RequireAll, BatchSize: 50, BatchTimeout: 5 * time.Millisecond}
	write(w, 0, n/2)
	require.NoError(t, w.Close())
	wz := &kafka.Writer{Addr: kafka.TCP(seeds...), Topic: topicName, Balancer: &kafka.Hash{},
		RequiredAcks: kafka.RequireAll, Compression: kafka.Zstd, BatchSize: 50, BatchTimeout: 5 * time.Millisecond}
	write(wz, n/2, n)
	require.NoError(t, wz.Close())

	// franz-go reads back exactly what was written, partition by
	// partition in order, with dense offsets from 0.
	got := map[int32][]record{}
	for _, r := range readAll(t, seeds, topicName, n) {
		got[r.Partition] = append(got[r.Partition], r)
	}
	for p, recs := range want {
		require.Len(t, got[p], len(recs), "partition %d", p)
		for i := range recs {
			g := got[p][i]
			require.Equal(t, int64(i), g.Offset, "partition %d", p)
			g.Offset = 0
			require.Equal(t, recs[i], g, "partition %d offset %d", p, i)
		}
	}
	require.Len(t, got, len(want))

	// Two Readers in one group share the partitions; every message is
	// committed after it is read (CommitInterval 0: synchronous commits).
	seen := readInGroup(t, ctx, seeds, topicName, group, 2, n)
	require.Len(t, seen, n, "every record read once by the group")
	ends := endOffsets(t, seeds[0], topicName)
	require.Eventually(t, func() bool {
		c := committed(t, seeds[0], group, topicName)
		for p, end := range ends {
			if c[p] != end {
				return false
			}
		}
		return true
	}, 10*time.Second, 50*time.Millisecond, "the group's commits reach the end of every partition")

	// kafka-go's own view of the commits (OffsetFetch through its Client)
	// agrees.
	of, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topicName: {0, 1, 2}}})
	require.NoError(t, err)
	require.NoError(t, of.Error)
	for _, p := range of.Topics[topicName] {
		require.NoError(t, p.Error)
		require.Equal(t, ends[int32(p.Partition)], p.CommittedOffset, "partition %d", p.Partition)
	}

	// Later records go to a Reader that joins afterwards: it starts at
	// the committed offsets, so it sees only those.
	w2 := &kafka.Writer{Addr: kafka.TCP(seeds...), Topic: topicName, Balancer: &kafka.Hash{}, RequiredAcks: kafka.RequireAll,
		BatchTimeout: 5 * time.Millisecond}
	write(w2, n, n+30)
	require.NoError(t, w2.Close())
	later := readInGroup(t, ctx, seeds, topicName, group, 1, 30)
	for v := range later {
		i, err := strconv.Atoi(v[len("value-"):])
		require.NoError(t, err)
		require.GreaterOrEqual(t, i, n, "record %s was committed before the Reader joined", v)
	}
}

// readInGroup runs members Readers in group until they have read total
// messages between them, committing each, and returns the values read
// with the member that read each. It fails on a duplicate.
func readInGroup(t *testing.T, ctx context.Context, seeds []string, topicName, group string, members, total int) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var mu sync.Mutex
	seen := map[string]int{}
	var dups []string
	byMember := make([]int, members)
	done := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, members)
	for m := 0; m < members; m++ {
		r := kafka.NewReader(kafka.ReaderConfig{
			Brokers: seeds, GroupID: group, Topic: topicName,
			StartOffset: kafka.FirstOffset, MinBytes: 1, MaxBytes: 1 << 20, MaxWait: 200 * time.Millisecond,
			HeartbeatInterval: 500 * time.Millisecond, SessionTimeout: 6 * time.Second,
			RebalanceTimeout: 5 * time.Second, JoinGroupBackoff: 200 * time.Millisecond,
		})
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer r.Close()
			for {
				msg, err := r.FetchMessage(ctx)
				if err != nil {
					if ctx.Err() == nil {
						errs <- fmt.Errorf("member %d: fetch: %w", m, err)
					}
					return
				}
				if err := r.CommitMessages(ctx, msg); err != nil {
					if ctx.Err() == nil {
						errs <- fmt.Errorf("member %d: commit %d/%d: %w", m, msg.Partition, msg.Offset, err)
					}
					return
				}
				mu.Lock()
				if _, dup := seen[string(msg.Value)]; dup {
					dups = append(dups, string(msg.Value))
				}
				seen[string(msg.Value)] = m
				byMember[m]++
				if len(seen) == total {
					close(done)
				}
				mu.Unlock()
			}
		}()
	}
	select {
	case <-done:
	case err := <-errs:
		t.Fatal(err)
	case <-ctx.Done():
		mu.Lock()
		t.Fatalf("the group read %d of %d records in a minute (per member %v)", len(seen), total, byMember)
	}
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		if !errors.Is(err, context.Canceled) {
			t.Error(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	sort.Strings(dups)
	require.Empty(t, dups, "records read twice by the group (commits after each read)")
	if members > 1 {
		for m, c := range byMember {
			require.Greater(t, c, 0, "member %d read nothing: the group did not share the partitions (%v)", m, byMember)
		}
	}
	return seen
}

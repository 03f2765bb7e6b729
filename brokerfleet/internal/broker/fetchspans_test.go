package broker_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratamq/strata/brokerfleet/internal/broker"
	"github.com/stratamq/strata/brokerfleet/internal/brokertest"
)

// TestSendfileAnswers: on plain TCP, large record sets go from the
// segment files with sendfile. Followers (RF 3) and consumers of both
// isolation levels, with partition limits from below the span threshold
// to several spans' worth, read every record with the value it was
// written with, in segments small enough that answers end at segment
// boundaries; the brokers' sendfile counter shows the path was taken,
// and their record counters count the records of the spans.
func TestSendfileAnswers(t *testing.T) {
	brokers := startCluster(t, 3)
	const topic, parts, perPart = "spans", 3, 3000
	seg := "262144" // 256 KiB: answers cross segments
	brokertest.CreateTopicRF(t, brokers[0].Addr, topic, parts, 3, map[string]*string{"segment.bytes": &seg})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	prod, err := kgo.NewClient(kgo.SeedBrokers(brokers[0].Addr), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	require.NoError(t, err)
	defer prod.Close()
	value := func(p int32, off int64) string { return fmt.Sprintf("%d/%d/%01000d", p, off, off*7+int64(p)) }
	for i := range perPart {
		for p := range int32(parts) {
			prod.Produce(ctx, &kgo.Record{Partition: p, Value: []byte(value(p, int64(i)))}, func(_ *kgo.Record, err error) {
				if err != nil {
					t.Errorf("produce: %v", err)
				}
			})
		}
	}
	require.NoError(t, prod.Flush(ctx))

	var wg sync.WaitGroup
	limits := []int32{16 << 10, 100 << 10, 1 << 20}
	for c := range 2 * len(limits) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			opts := []kgo.Opt{kgo.SeedBrokers(brokers[c%3].Addr), kgo.ConsumeTopics(topic),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxPartitionBytes(limits[c%len(limits)])}
			if c >= len(limits) {
				opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
			}
			cl, err := kgo.NewClient(opts...)
			if err != nil {
				t.Error(err)
				return
			}
			defer cl.Close()
			readChecked(ctx, t, c, cl, parts*perPart, value)
		}()
	}
	wg.Wait()

	var sent, records float64
	for _, b := range brokers {
		s := gather(t, b.Gatherer())
		sent += sum(s, "strata_fetch_sendfile_bytes_total", nil)
		records += sum(s, "strata_fetch_records_total", map[string]string{"topic": topic})
	}
	// Each consumer reads 9 MB; the four above the threshold and the
	// followers send most of it from the files.
	require.Greater(t, sent, float64(4*parts*perPart*1000), "bytes sent with sendfile")
	// Whole batches: at least every record once per consumer.
	require.GreaterOrEqual(t, records, float64(2*len(limits)*parts*perPart), "records counted, spans included")
}

// TestNoSendfileReadsEverything: with NoSendfile nothing goes from the
// files, and consumers read the same.
func TestNoSendfileReadsEverything(t *testing.T) {
	b := brokertest.Start(t, func(c *broker.Config) { c.NoSendfile = true })
	const topic, n = "copied", 2000
	brokertest.CreateTopic(t, b.Addr, topic, 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	prod := brokertest.Client(t, b.Addr, kgo.DefaultProduceTopic(topic))
	value := func(off int64) string { return fmt.Sprintf("%d/%01000d", off, off) }
	for i := range n {
		prod.Produce(ctx, &kgo.Record{Value: []byte(value(int64(i)))}, nil)
	}
	require.NoError(t, prod.Flush(ctx))
	cons := brokertest.Client(t, b.Addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := 0
	for got < n && ctx.Err() == nil {
		fs := cons.PollFetches(ctx)
		require.NoError(t, fs.Err())
		fs.EachRecord(func(r *kgo.Record) {
			require.Equal(t, value(r.Offset), string(r.Value))
			got++
		})
	}
	require.Equal(t, n, got)
	require.Zero(t, sum(gather(t, b.Gatherer()), "strata_fetch_sendfile_bytes_total", nil))
}

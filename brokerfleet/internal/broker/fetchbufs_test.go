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

// TestPooledFetchBuffersKeepAnswersIntact: fetch answers are read into
// pooled buffers that go back once written. Replicated topics (followers
// fetch too) read by many consumers at once, with small partition limits
// so each answer is one of many: every record comes back with the value
// it was written with, at its offset. Released buffers are scribbled
// over, so one given back before its answer was written shows.
func TestPooledFetchBuffersKeepAnswersIntact(t *testing.T) {
	broker.PoisonFetchBuffers(true) // a released buffer is scribbled over
	t.Cleanup(func() { broker.PoisonFetchBuffers(false) })
	brokers := startCluster(t, 3)
	const topic, parts, perPart = "pooled", 6, 1500
	brokertest.CreateTopicRF(t, brokers[0].Addr, topic, parts, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	prod, err := kgo.NewClient(kgo.SeedBrokers(brokers[0].Addr), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	defer prod.Close()
	value := func(p int32, off int64) string { return fmt.Sprintf("%d/%d/%0200d", p, off, off) }
	for i := 0; i < perPart; i++ {
		for p := int32(0); p < parts; p++ {
			prod.Produce(ctx, &kgo.Record{Partition: p, Value: []byte(value(p, int64(i)))}, func(_ *kgo.Record, err error) {
				if err != nil {
					t.Errorf("produce: %v", err)
				}
			})
		}
	}
	require.NoError(t, prod.Flush(ctx))

	var wg sync.WaitGroup
	for c := 0; c < 6; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cl, err := kgo.NewClient(kgo.SeedBrokers(brokers[c%3].Addr), kgo.ConsumeTopics(topic),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxPartitionBytes(int32(4<<10*(1+c))),
				kgo.FetchMaxBytes(64<<10))
			if err != nil {
				t.Error(err)
				return
			}
			defer cl.Close()
			readChecked(ctx, t, c, cl, parts*perPart, value)
		}()
	}
	wg.Wait()
}

// readChecked polls cl until it has read n records, each holding the
// value value gives for its partition and offset (errors go to t as
// consumer c's; safe from any goroutine).
func readChecked(ctx context.Context, t *testing.T, c int, cl *kgo.Client, n int, value func(int32, int64) string) {
	got := 0
	for got < n && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachError(func(_ string, _ int32, err error) { t.Errorf("consumer %d: %v", c, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if want := value(r.Partition, r.Offset); string(r.Value) != want {
				t.Errorf("consumer %d: partition %d offset %d holds %.40q, want %.40q", c, r.Partition, r.Offset, r.Value, want)
			}
			got++
		})
	}
	if got != n {
		t.Errorf("consumer %d read %d records, want %d", c, got, n)
	}
}

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

// TestProduceFramesReused: produce requests of several hundred KiB are
// read into pooled buffers that the next requests reuse (framepool.go).
// Three producers at once, each to its own partition of an RF 3 topic,
// write records whose values name their partition and offset; every
// record reads back as written, so no batch was appended from, or left
// pointing into, a buffer another request had taken.
func TestProduceFramesReused(t *testing.T) {
	brokers := startCluster(t, 3)
	const topic, parts, perPart = "pooled", 3, 2000
	brokertest.CreateTopicRF(t, brokers[0].Addr, topic, parts, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	value := func(p int32, off int64) string { return fmt.Sprintf("%d/%d/%04000d", p, off, off*31+int64(p)) }
	before := broker.ReusedProduceFrames()
	var wg sync.WaitGroup
	for p := range int32(parts) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A linger gathers each request's batch to hundreds of KiB.
			prod, err := kgo.NewClient(kgo.SeedBrokers(brokers[p].Addr), kgo.DefaultProduceTopic(topic),
				kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()),
				kgo.ProducerLinger(20*time.Millisecond), kgo.ProducerBatchMaxBytes(1<<20))
			if err != nil {
				t.Error(err)
				return
			}
			defer prod.Close()
			for i := range perPart {
				prod.Produce(ctx, &kgo.Record{Partition: p, Value: []byte(value(p, int64(i)))}, func(_ *kgo.Record, err error) {
					if err != nil {
						t.Errorf("produce: %v", err)
					}
				})
			}
			if err := prod.Flush(ctx); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	require.Positive(t, broker.ReusedProduceFrames()-before, "produce frames read into reused buffers")

	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers[0].Addr), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()
	readChecked(ctx, t, 0, cl, parts*perPart, value)
}

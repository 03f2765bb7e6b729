package broker_test

import (
	"bytes"
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

// sent is what a producer got acknowledged, per partition in offset order.
type sent map[int32][]*kgo.Record

// produceAll produces n keyed records with headers and returns them as
// acknowledged, grouped by partition.
func produceAll(t *testing.T, cl *kgo.Client, topicName string, n int, tag string) sent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var mu sync.Mutex
	out := sent{}
	var firstErr error
	for i := 0; i < n; i++ {
		r := &kgo.Record{
			Topic: topicName,
			Key:   []byte(fmt.Sprintf("key-%d", i%1000)),
			Value: bytes.Repeat([]byte(fmt.Sprintf("%s-value-%07d|", tag, i)), 1+i%7),
			Headers: []kgo.RecordHeader{
				{Key: "seq", Value: []byte(fmt.Sprint(i))},
				{Key: "tag", Value: []byte(tag)},
			},
		}
		cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			out[r.Partition] = append(out[r.Partition], r)
		})
	}
	require.NoError(t, cl.Flush(ctx))
	require.NoError(t, firstErr)
	return out
}

// consumeAll reads every partition of topicName from the start until it
// has n records, returning them by partition.
func consumeAll(t *testing.T, addr, topicName string, n int) sent {
	t.Helper()
	cl := brokertest.Client(t, addr, kgo.ConsumeTopics(topicName),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out := sent{}
	got := 0
	for got < n {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "consumed %d of %d records", got, n)
		fs.EachError(func(tp string, p int32, err error) { t.Fatalf("fetch %s-%d: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			out[r.Partition] = append(out[r.Partition], r)
			got++
		})
	}
	require.Equal(t, n, got, "consumed more records than were produced")
	return out
}

// requireSame checks consumed records equal the acknowledged ones, in
// order per partition, with dense offsets.
func requireSame(t *testing.T, want, got sent) {
	t.Helper()
	require.Equal(t, len(want), len(got), "partitions with data")
	for p, ws := range want {
		gs := got[p]
		require.Len(t, gs, len(ws), "partition %d", p)
		for i := range ws {
			w, g := ws[i], gs[i]
			require.Equal(t, w.Offset, g.Offset, "partition %d index %d offset", p, i)
			require.Equal(t, int64(i)+gs[0].Offset, g.Offset, "offsets are dense")
			require.Equal(t, w.Key, g.Key, "partition %d offset %d key", p, g.Offset)
			require.Equal(t, w.Value, g.Value, "partition %d offset %d value", p, g.Offset)
			require.Equal(t, w.Headers, g.Headers, "partition %d offset %d headers", p, g.Offset)
		}
	}
}

func TestFranzRoundTripEveryCodec(t *testing.T) {
	n := 100_000
	if testing.Short() {
		n = 10_000
	}
	b := brokertest.Start(t)
	codecs := []struct {
		name  string
		codec kgo.CompressionCodec
	}{
		{"none", kgo.NoCompression()},
		{"gzip", kgo.GzipCompression()},
		{"snappy", kgo.SnappyCompression()},
		{"lz4", kgo.Lz4Compression()},
		{"zstd", kgo.ZstdCompression()},
	}
	for _, c := range codecs {
		t.Run(c.name, func(t *testing.T) {
			topicName := "roundtrip-" + c.name
			brokertest.CreateTopic(t, b.Addr, topicName, 6, nil)
			prod := brokertest.Client(t, b.Addr, kgo.ProducerBatchCompression(c.codec), kgo.DefaultProduceTopic(topicName))
			want := produceAll(t, prod, topicName, n, c.name)
			require.Len(t, want, 6, "keys spread over all partitions")
			got := consumeAll(t, b.Addr, topicName, n)
			requireSame(t, want, got)
		})
	}
}

func TestIdempotentProducerDuplicatedRequestsStoredOnce(t *testing.T) {
	proxy := brokertest.NewDupProxy(t)
	b := brokertest.Start(t, func(c *broker.Config) { c.Advertise = proxy.Addr() })
	proxy.Forward(b.Addr)
	const n = 20_000
	topicName := "dedup"
	brokertest.CreateTopic(t, b.Addr, topicName, 3, nil)
	prod := brokertest.Client(t, proxy.Addr(), kgo.DefaultProduceTopic(topicName), kgo.ProducerBatchMaxBytes(4096))
	want := produceAll(t, prod, topicName, n, "dup")
	require.Greater(t, proxy.Duplicated.Load(), int64(10), "the proxy duplicated produce requests")

	// Each partition's end offset equals what was acknowledged: the copies
	// were recognised as duplicates and not stored.
	total := 0
	for p, rs := range want {
		end := rs[len(rs)-1].Offset + 1
		require.Equal(t, int64(len(rs)), end, "partition %d holds exactly the acknowledged records", p)
		total += len(rs)
	}
	require.Equal(t, n, total)
	got := consumeAll(t, b.Addr, topicName, n)
	requireSame(t, want, got)
}

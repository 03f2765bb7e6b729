package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/stratamq/strata/brokerfleet/internal/brokertest"
	"github.com/stratamq/strata/pkg/segment"
)

// namedFetches caps a client's Fetch at v12, the last version that names
// topics, for tests that build Fetch requests by topic name (from v13 the
// request names them by id; TestFetchByTopicID covers that).
func namedFetches() kgo.Opt {
	v := kversion.Stable()
	v.SetMaxKeyVersion(1, 12)
	return kgo.MaxVersions(v)
}

func fetchReq(topicName string, parts []int32, offset int64, maxWait, minBytes, maxBytes, partMax int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = maxWait, minBytes, maxBytes
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topicName
	for _, p := range parts {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, offset, partMax
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	return req
}

// batchCount counts the whole batches in a fetched record set.
func batchCount(t *testing.T, b []byte) int {
	t.Helper()
	n := 0
	require.NoError(t, segment.Split(b, func(segment.Header, []byte) error { n++; return nil }))
	return n
}

func TestFetchLongPollWakesOnProduce(t *testing.T) {
	b := brokertest.Start(t)
	brokertest.CreateTopic(t, b.Addr, "poll", 1, nil)
	cl := brokertest.Client(t, b.Addr, namedFetches())
	ctx := context.Background()

	type result struct {
		resp *kmsg.FetchResponse
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := fetchReq("poll", []int32{0}, 0, 20_000, 1, 1<<20, 1<<20).RequestWith(ctx, cl)
		done <- result{resp, err}
	}()
	time.Sleep(100 * time.Millisecond) // let the fetch start waiting
	produceCl := brokertest.Client(t, b.Addr)
	require.NoError(t, produceCl.ProduceSync(ctx, &kgo.Record{Topic: "poll", Value: []byte("wake")}).FirstErr())
	r := <-done
	require.NoError(t, r.err)
	sp := r.resp.Topics[0].Partitions[0]
	require.Equal(t, int16(0), sp.ErrorCode)
	require.Equal(t, 1, batchCount(t, sp.RecordBatches), "the waiting fetch returned the new batch (it was woken, not timed out)")

	// With nothing new, a short MaxWait returns an empty, non-error answer.
	resp, err := fetchReq("poll", []int32{0}, 1, 50, 1, 1<<20, 1<<20).RequestWith(ctx, cl)
	require.NoError(t, err)
	require.Equal(t, int16(0), resp.Topics[0].Partitions[0].ErrorCode)
	require.Empty(t, resp.Topics[0].Partitions[0].RecordBatches)
	require.Equal(t, int64(1), resp.Topics[0].Partitions[0].HighWatermark)
}

func TestFetchByteLimits(t *testing.T) {
	b := brokertest.Start(t)
	brokertest.CreateTopic(t, b.Addr, "limits", 2, nil)
	cl := brokertest.Client(t, b.Addr, namedFetches())
	ctx := context.Background()
	// Ten batches of ten 100-byte records (about 1.2 KiB each) per partition.
	one := len(batch(-1, -1, -1, 10, 100))
	for p := int32(0); p < 2; p++ {
		for i := 0; i < 10; i++ {
			require.Equal(t, int16(0), produceRawTo(t, cl, "limits", p, batch(-1, -1, -1, 10, 100)).ErrorCode)
		}
	}
	fetch := func(offset int64, maxBytes, partMax int32) []kmsg.FetchResponseTopicPartition {
		resp, err := fetchReq("limits", []int32{0, 1}, offset, 0, 0, maxBytes, partMax).RequestWith(ctx, cl)
		require.NoError(t, err)
		return resp.Topics[0].Partitions
	}

	// Partition limit of 2.5 batches: two whole batches from each.
	ps := fetch(0, 1<<20, int32(one*5/2))
	require.Equal(t, 2, batchCount(t, ps[0].RecordBatches))
	require.Equal(t, 2, batchCount(t, ps[1].RecordBatches))

	// A limit below one batch still returns the first batch of the first
	// partition whole (KIP-74), and nothing from the next.
	ps = fetch(0, 10, 10)
	require.Equal(t, 1, batchCount(t, ps[0].RecordBatches))
	require.Empty(t, ps[1].RecordBatches)

	// The response limit is shared: 3 batches' worth, partition limit high.
	ps = fetch(0, int32(one*3), 1<<20)
	require.Equal(t, 3, batchCount(t, ps[0].RecordBatches)+batchCount(t, ps[1].RecordBatches))

	// An offset inside a batch returns that whole batch first.
	ps = fetch(15, 1<<20, int32(one))
	h, err := segment.ParseHeader(ps[0].RecordBatches)
	require.NoError(t, err)
	require.Equal(t, int64(10), h.BaseOffset)

	// Past the end is OFFSET_OUT_OF_RANGE.
	ps = fetch(1000, 1<<20, 1<<20)
	require.Equal(t, kerr.OffsetOutOfRange.Code, ps[0].ErrorCode)
	require.Equal(t, int64(100), ps[0].HighWatermark)
}

func TestProduceAcksAndLegacyVersions(t *testing.T) {
	b := brokertest.Start(t)
	brokertest.CreateTopic(t, b.Addr, "acks", 1, nil)
	ctx := context.Background()
	for _, acks := range []kgo.Acks{kgo.NoAck(), kgo.LeaderAck(), kgo.AllISRAcks()} {
		cl := brokertest.Client(t, b.Addr, kgo.RequiredAcks(acks), kgo.DisableIdempotentWrite(), kgo.DefaultProduceTopic("acks"))
		for i := 0; i < 100; i++ {
			require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte("x")}).FirstErr())
		}
	}
	// acks=0 gets no response, so wait for the high watermark.
	adm := brokertest.Admin(t, b.Addr)
	waitFor(t, "300 records", func() bool {
		ends, err := adm.ListEndOffsets(ctx, "acks")
		require.NoError(t, err)
		o, _ := ends.Lookup("acks", 0)
		return o.Offset == 300
	})

	// Produce v2 (message format v0/v1) is advertised but refused, as in Kafka 4.
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 2, 1, 1000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "acks"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batch(-1, -1, -1, 1, 1)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	c := rawConn(t, b.Addr)
	_, err := c.Write(frame(0, 2, 9, req.AppendTo(nil)))
	require.NoError(t, err)
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = 2
	require.NoError(t, resp.ReadFrom(readResponse(t, c)[4:]))
	require.Equal(t, kerr.UnsupportedVersion.Code, resp.Topics[0].Partitions[0].ErrorCode)
}

func TestLogAppendTime(t *testing.T) {
	b := brokertest.Start(t)
	brokertest.CreateTopic(t, b.Addr, "lat", 1, map[string]*string{"message.timestamp.type": strp("LogAppendTime")})
	cl := brokertest.Client(t, b.Addr)
	ctx := context.Background()
	old := time.UnixMilli(1_000_000_000_000)
	before := time.Now().Add(-time.Second)
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "lat", Value: []byte("x"), Timestamp: old}).FirstErr())
	cons := brokertest.Client(t, b.Addr, kgo.ConsumeTopics("lat"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	fs := cons.PollFetches(ctx)
	require.NoError(t, fs.Err())
	r := fs.Records()[0]
	require.True(t, r.Attrs.TimestampType() == 1, "the batch is marked LogAppendTime")
	require.True(t, r.Timestamp.After(before), "timestamp %v is the broker's append time, not the producer's", r.Timestamp)
}

package broker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratamq/strata/brokerfleet/internal/broker"
	"github.com/stratamq/strata/brokerfleet/internal/brokertest"
	"github.com/stratamq/strata/pkg/clock"
)

func strp(s string) *string { return &s }

// produceAt produces n records to partition 0 with timestamps base+i*step ms,
// flushing every batchEvery records so they land in several batches.
func produceAt(t *testing.T, cl *kgo.Client, topicName string, n int, base time.Time, step time.Duration, batchEvery int) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < n; i++ {
		r := &kgo.Record{Topic: topicName, Partition: 0, Value: []byte(fmt.Sprintf("v%05d", i)), Timestamp: base.Add(time.Duration(i) * step)}
		cl.Produce(ctx, r, func(_ *kgo.Record, err error) { require.NoError(t, err) })
		if (i+1)%batchEvery == 0 {
			require.NoError(t, cl.Flush(ctx))
		}
	}
	require.NoError(t, cl.Flush(ctx))
}

func manualClient(t *testing.T, addr string) *kgo.Client {
	return brokertest.Client(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
}

func TestListOffsetsByTimestamp(t *testing.T) {
	b := brokertest.Start(t)
	const topicName = "times"
	brokertest.CreateTopic(t, b.Addr, topicName, 1, map[string]*string{"segment.bytes": strp("2048")})
	cl := manualClient(t, b.Addr)
	base := time.UnixMilli(1_700_000_000_000)
	const n = 500
	produceAt(t, cl, topicName, n, base, 10*time.Millisecond, 7) // several segments, 7-record batches
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	for _, q := range []struct {
		at   time.Time
		want int64
	}{
		{base.Add(-time.Hour), 0},
		{base, 0},
		{base.Add(1 * time.Millisecond), 1},
		{base.Add(10 * time.Millisecond), 1},
		{base.Add(255 * time.Millisecond), 26},
		{base.Add(4990 * time.Millisecond), 499},
		{base.Add(4991 * time.Millisecond), -1},
	} {
		got, err := adm.ListOffsetsAfterMilli(ctx, q.at.UnixMilli(), topicName)
		require.NoError(t, err)
		o, ok := got.Lookup(topicName, 0)
		require.True(t, ok)
		require.NoError(t, o.Err)
		if q.want < 0 {
			// No record at or after the time: Kafka answers -1, which kadm
			// reports as the end offset.
			require.Contains(t, []int64{-1, n}, o.Offset, "after the last record")
			continue
		}
		require.Equal(t, q.want, o.Offset, "first offset at or after %v", q.at.Sub(base))
		require.Equal(t, base.Add(time.Duration(q.want)*10*time.Millisecond).UnixMilli(), o.Timestamp)
	}
	// Timestamp -3: the record with the largest timestamp.
	maxTS, err := adm.ListMaxTimestampOffsets(ctx, topicName)
	require.NoError(t, err)
	o, ok := maxTS.Lookup(topicName, 0)
	require.True(t, ok)
	require.NoError(t, o.Err)
	require.Equal(t, int64(n-1), o.Offset)
	require.Equal(t, base.Add(time.Duration(n-1)*10*time.Millisecond).UnixMilli(), o.Timestamp)
}

func TestRetentionAndDeleteRecordsMoveEarliestOffset(t *testing.T) {
	now := time.Now()
	b := brokertest.Start(t, func(c *broker.Config) {
		c.Clock = frozenWallClock{clock.Real(), now}
		c.MaintenanceInterval = time.Hour
	})
	ctx := context.Background()
	cl := manualClient(t, b.Addr)
	adm := kadm.NewClient(cl)
	earliest := func(topicName string) int64 {
		t.Helper()
		got, err := adm.ListStartOffsets(ctx, topicName)
		require.NoError(t, err)
		o, ok := got.Lookup(topicName, 0)
		require.True(t, ok)
		require.NoError(t, o.Err)
		return o.Offset
	}

	t.Run("retention.bytes", func(t *testing.T) {
		const topicName = "ret-bytes"
		brokertest.CreateTopic(t, b.Addr, topicName, 1, map[string]*string{"segment.bytes": strp("2048"), "retention.bytes": strp("4096")})
		produceAt(t, cl, topicName, 600, now, time.Millisecond, 10)
		require.Equal(t, int64(0), earliest(topicName))
		b.RunMaintenance()
		start := earliest(topicName)
		require.Greater(t, start, int64(0), "retention.bytes deleted old segments")
		// What is left is readable from the new start.
		fs := brokertest.Client(t, b.Addr, kgo.ConsumeTopics(topicName), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())).PollFetches(ctx)
		require.NoError(t, fs.Err())
		require.Equal(t, start, fs.Records()[0].Offset)
	})

	t.Run("retention.ms", func(t *testing.T) {
		const topicName = "ret-time"
		brokertest.CreateTopic(t, b.Addr, topicName, 1, map[string]*string{"segment.bytes": strp("2048"), "retention.ms": strp("3600000")})
		produceAt(t, cl, topicName, 300, now.Add(-2*time.Hour), time.Millisecond, 10) // expired
		produceAt(t, cl, topicName, 300, now.Add(-time.Minute), time.Millisecond, 10) // fresh
		b.RunMaintenance()
		start := earliest(topicName)
		require.Greater(t, start, int64(200), "expired segments deleted")
		require.LessOrEqual(t, start, int64(300), "fresh records kept")
	})

	t.Run("DeleteRecords", func(t *testing.T) {
		const topicName = "delete-records"
		brokertest.CreateTopic(t, b.Addr, topicName, 1, nil)
		produceAt(t, cl, topicName, 100, now, time.Millisecond, 10)
		resp, err := adm.DeleteRecords(ctx, kadm.Offsets{topicName: {0: {At: 42}}})
		require.NoError(t, err)
		d, ok := resp.Lookup(topicName, 0)
		require.True(t, ok)
		require.NoError(t, d.Err)
		require.Equal(t, int64(42), d.LowWatermark)
		require.Equal(t, int64(42), earliest(topicName))

		// Past the high watermark is refused.
		resp, err = adm.DeleteRecords(ctx, kadm.Offsets{topicName: {0: {At: 1000}}})
		require.NoError(t, err)
		d, _ = resp.Lookup(topicName, 0)
		require.Error(t, d.Err)

		// The start offset survives a restart.
		b2 := b.Restart(t)
		adm2 := brokertest.Admin(t, b2.Addr)
		got, err := adm2.ListStartOffsets(ctx, topicName)
		require.NoError(t, err)
		o, _ := got.Lookup(topicName, 0)
		require.Equal(t, int64(42), o.Offset)
	})
}

// frozenWallClock reads a fixed time; its timers are real.
type frozenWallClock struct {
	clock.Clock
	at time.Time
}

func (c frozenWallClock) Now() time.Time { return c.at }

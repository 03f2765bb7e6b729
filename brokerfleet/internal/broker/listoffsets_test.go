package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/brokertest"
)

// TestListOffsetsV0: the version Kafka 4 dropped and Burrow 1.2 still
// sends answers one old-style offset: the high watermark for latest, the
// log start for earliest, none when asked for none; an unknown partition
// is an error.
func TestListOffsetsV0(t *testing.T) {
	b := brokertest.Start(t)
	brokertest.CreateTopic(t, b.Addr, "old-style", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cl := brokertest.Client(t, b.Addr)
	for i := 0; i < 3; i++ {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "old-style", Value: []byte("v")}).FirstErr())
	}
	ask := func(partition int32, ts int64, max int32) kmsg.ListOffsetsResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version, req.ReplicaID = 0, -1
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.MaxNumOffsets = partition, ts, max
		req.Topics = []kmsg.ListOffsetsRequestTopic{{Topic: "old-style", Partitions: []kmsg.ListOffsetsRequestTopicPartition{rp}}}
		c := rawConn(t, b.Addr)
		_, err := c.Write(frame(2, 0, 1, req.AppendTo(nil)))
		require.NoError(t, err)
		raw := readResponse(t, c)
		resp := kmsg.NewPtrListOffsetsResponse()
		resp.Version = 0
		require.NoError(t, resp.ReadFrom(raw[4:])) // after the correlation id
		require.Len(t, resp.Topics, 1)
		require.Len(t, resp.Topics[0].Partitions, 1)
		return resp.Topics[0].Partitions[0]
	}
	require.Equal(t, []int64{3}, ask(0, -1, 1).OldStyleOffsets)
	require.Equal(t, []int64{0}, ask(0, -2, 5).OldStyleOffsets)
	require.Empty(t, ask(0, -1, 0).OldStyleOffsets)
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, ask(9, -1, 1).ErrorCode)
}

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

// TestFetchByTopicID: Fetch v13 names topics by id (KIP-516) in the
// request, its forgotten topics and the answer. A known id reads its
// topic, an unknown one is answered UNKNOWN_TOPIC_ID, and a session
// forgets a partition named by id. (@platformatic/kafka, which found
// this, sends topic ids in every Fetch version, so it could not read
// from a broker serving v12 at most.)
func TestFetchByTopicID(t *testing.T) {
	b := brokertest.Start(t)
	const topicName = "by-id"
	brokertest.CreateTopic(t, b.Addr, topicName, 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := brokertest.Client(t, b.Addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce := func(p int32, v string) {
		t.Helper()
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: topicName, Partition: p, Value: []byte(v)}).FirstErr())
	}
	produce(0, "zero")
	produce(1, "one")
	topics, err := brokertest.Admin(t, b.Addr).ListTopics(ctx, topicName)
	require.NoError(t, err)
	id := topics[topicName].ID
	require.NotZero(t, id)

	byID := func(id [16]byte, parts ...int32) kmsg.FetchRequestTopic {
		rt := kmsg.NewFetchRequestTopic()
		rt.TopicID = id
		for _, p := range parts {
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.PartitionMaxBytes = p, 1<<20
			rt.Partitions = append(rt.Partitions, rp)
		}
		return rt
	}
	fc := newFetchConn(t, b.Addr)
	fc.version = 13
	unknown := [16]byte{1, 2, 3}
	req := sessionFetch(0, -1, 0, "", nil)
	req.Topics = []kmsg.FetchRequestTopic{byID(id, 0, 1), byID(unknown, 4)}
	resp, _, _ := fc.do(req)
	require.Zero(t, resp.ErrorCode)
	require.Len(t, resp.Topics, 2)
	require.Equal(t, [16]byte(id), resp.Topics[0].TopicID)
	got := map[int32]int{}
	for _, rp := range resp.Topics[0].Partitions {
		require.Zero(t, rp.ErrorCode, "partition %d: %v", rp.Partition, kerr.ErrorForCode(rp.ErrorCode))
		require.Equal(t, int64(1), rp.HighWatermark)
		got[rp.Partition] = batchCount(t, rp.RecordBatches)
	}
	require.Equal(t, map[int32]int{0: 1, 1: 1}, got)
	require.Equal(t, unknown, resp.Topics[1].TopicID)
	require.Len(t, resp.Topics[1].Partitions, 1)
	require.Equal(t, kerr.UnknownTopicID.Code, resp.Topics[1].Partitions[0].ErrorCode)
	require.Equal(t, int32(4), resp.Topics[1].Partitions[0].Partition)

	// A session over both partitions, then an incremental fetch that
	// forgets partition 1 by id: a record appended there is not
	// answered, one appended to partition 0 is.
	req = sessionFetch(0, 0, 0, "", nil)
	t0 := byID(id, 0, 1)
	for i := range t0.Partitions {
		t0.Partitions[i].FetchOffset = 1
	}
	req.Topics = []kmsg.FetchRequestTopic{t0}
	resp, _, _ = fc.do(req)
	require.Zero(t, resp.ErrorCode)
	require.NotZero(t, resp.SessionID)
	session := resp.SessionID
	req = sessionFetch(session, 1, 0, "", nil)
	forget := kmsg.NewFetchRequestForgottenTopic()
	forget.TopicID, forget.Partitions = id, []int32{1}
	req.ForgottenTopics = []kmsg.FetchRequestForgottenTopic{forget}
	resp, _, _ = fc.do(req)
	require.Zero(t, resp.ErrorCode, kerr.ErrorForCode(resp.ErrorCode))
	produce(1, "one again")
	produce(0, "zero again")
	req = sessionFetch(session, 2, 2000, "", nil)
	resp, _, _ = fc.do(req)
	require.Zero(t, resp.ErrorCode, kerr.ErrorForCode(resp.ErrorCode))
	require.Len(t, resp.Topics, 1)
	require.Equal(t, [16]byte(id), resp.Topics[0].TopicID)
	require.Equal(t, map[int32]int{0: 1}, answered(t, resp), "partition 1 was forgotten by id")
}

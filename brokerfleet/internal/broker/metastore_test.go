package broker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/broker"
	"github.com/stratamq/strata/brokerfleet/internal/brokertest"
	"github.com/stratamq/strata/pkg/metastore"
	"github.com/stratamq/strata/pkg/metastore/dynamo/dynamotest"
)

// TestTopicChangesReachOtherBrokers: two brokers share one metastore; what
// one creates, reconfigures or deletes, the other applies within a second.
func TestTopicChangesReachOtherBrokers(t *testing.T) {
	meta := brokertest.NewMeta(t)
	withMeta := func(id int32) brokertest.Option {
		return func(c *broker.Config) {
			c.Meta, c.NodeID, c.WatchInterval, c.AutoCreateTopics = meta, id, 500*time.Millisecond, false
		}
	}
	b1 := brokertest.Start(t, withMeta(1))
	b2 := brokertest.Start(t, withMeta(2))
	ctx := context.Background()
	adm1, adm2 := brokertest.Admin(t, b1.Addr), brokertest.Admin(t, b2.Addr)

	within := func(what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(time.Second)
		for !cond() {
			require.True(t, time.Now().Before(deadline), "%s not seen by the other broker within 1s", what)
			time.Sleep(20 * time.Millisecond)
		}
	}
	cl2 := brokertest.Client(t, b2.Addr)
	partitionsOn := func(_ *kadm.Client, name string) int {
		// One Metadata request, answered by b2 alone, without client retries.
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(name)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl2)
		require.NoError(t, err)
		return len(resp.Topics[0].Partitions)
	}
	brokertest.CreateTopic(t, b1.Addr, "shared", 3, nil)
	within("a new topic", func() bool { return partitionsOn(adm2, "shared") == 3 })

	_, err := adm1.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: strp("12345")}}, "shared")
	require.NoError(t, err)
	within("a config change", func() bool {
		rcs, err := adm2.DescribeTopicConfigs(ctx, "shared")
		require.NoError(t, err)
		rc, _ := rcs.On("shared", nil)
		for _, c := range rc.Configs {
			if c.Key == "retention.ms" {
				return *c.Value == "12345"
			}
		}
		return false
	})

	_, err = adm1.CreatePartitions(ctx, 2, "shared")
	require.NoError(t, err)
	within("new partitions", func() bool { return partitionsOn(adm2, "shared") == 5 })

	_, err = adm1.DeleteTopics(ctx, "shared")
	require.NoError(t, err)
	within("a deletion", func() bool { return partitionsOn(adm2, "shared") == 0 })
}

// TestMetastoreOutage: while the store is unreachable, control-plane
// requests get retriable errors; once the broker can no longer prove its
// lease it stops accepting writes; when the store returns, all recovers.
// The outage is injected at the Store seam (embedded) and at the HTTP layer
// in front of DynamoDB (minidyn answering 500s and throttling through the
// real SDK and its retries).
func TestMetastoreOutage(t *testing.T) {
	t.Run("embedded", func(t *testing.T) {
		flaky := &brokertest.FlakyStore{Store: brokertest.NewMeta(t).Store()}
		testOutage(t, metastore.New(flaky), func(down bool) { flaky.Down.Store(down) })
	})
	for _, kind := range []dynamotest.Fault{dynamotest.Fault500, dynamotest.FaultThrottle} {
		t.Run(fmt.Sprintf("dynamodb-fault-%d", kind), func(t *testing.T) {
			faults := &dynamotest.Faults{}
			store := dynamotest.NewStore(t, dynamotest.StartMinidynWith(t, faults.Wrap), dynamotest.Retries(2))
			testOutage(t, metastore.New(store), func(down bool) {
				if down {
					faults.Fail("", 1<<30, kind)
				} else {
					faults.Fail("", 0, kind)
				}
			})
		})
	}
}

func testOutage(t *testing.T, meta *metastore.Meta, setDown func(bool)) {
	lease := metastore.LeaseOptions{Duration: 900 * time.Millisecond, Margin: 200 * time.Millisecond}
	b := brokertest.Start(t, func(c *broker.Config) { c.Meta = meta; c.Lease = lease })
	brokertest.CreateTopic(t, b.Addr, "outage", 1, nil)
	ctx := context.Background()
	cl := brokertest.Client(t, b.Addr)

	setDown(true)
	// Control plane: retriable errors.
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "during-outage", 1, 1
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	require.NoError(t, err)
	code := resp.Topics[0].ErrorCode
	require.True(t, kerr.IsRetriable(kerr.ErrorForCode(code)), "CreateTopics during an outage: %v is not retriable", kerr.ErrorForCode(code))
	// InitProducerId over a raw connection: kgo itself would retry it.
	c := rawConn(t, b.Addr)
	ipReq := kmsg.NewPtrInitProducerIDRequest()
	ipReq.Version = 1
	_, err = c.Write(frame(22, 1, 3, ipReq.AppendTo(nil)))
	require.NoError(t, err)
	ipid := kmsg.NewPtrInitProducerIDResponse()
	ipid.Version = 1
	require.NoError(t, ipid.ReadFrom(readResponse(t, c)[4:]))
	require.Equal(t, kerr.CoordinatorNotAvailable.Code, ipid.ErrorCode)

	// Data path: writes continue until the lease's safe deadline, then stop.
	raw := brokertest.Client(t, b.Addr)
	waitFor(t, "writes to stop", func() bool {
		return produceRaw(t, raw, "outage", batch(-1, -1, -1, 1, 10)).ErrorCode == kerr.NotLeaderForPartition.Code
	})

	// The store comes back: the broker renews and takes writes again.
	setDown(false)
	waitFor(t, "writes to resume", func() bool {
		return produceRaw(t, raw, "outage", batch(-1, -1, -1, 1, 10)).ErrorCode == 0
	})
	prod := brokertest.Client(t, b.Addr, kgo.DefaultProduceTopic("outage"))
	require.NoError(t, prod.ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).FirstErr())
}

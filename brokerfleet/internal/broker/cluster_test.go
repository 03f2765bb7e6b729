package broker_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/broker"
	"github.com/stratamq/strata/brokerfleet/internal/brokertest"
)

// startCluster runs n brokers sharing one metastore, ids 0..n-1, racks
// alternating between two zones.
func startCluster(t *testing.T, n int) []*brokertest.Broker {
	meta := brokertest.NewMeta(t)
	var out []*brokertest.Broker
	for id := 0; id < n; id++ {
		out = append(out, brokertest.Start(t, func(c *broker.Config) {
			c.Meta, c.NodeID, c.Rack = meta, int32(id), []string{"az-a", "az-b"}[id%2]
		}))
	}
	// Every broker sees every registration.
	for _, b := range out {
		cl := brokertest.Client(t, b.Addr)
		waitFor(t, "all brokers registered", func() bool {
			resp, err := kmsg.NewPtrMetadataRequest().RequestWith(context.Background(), cl)
			require.NoError(t, err)
			return len(resp.Brokers) == n
		})
	}
	return out
}

func TestPartitionsSpreadOverBrokers(t *testing.T) {
	brokers := startCluster(t, 3)
	brokertest.CreateTopic(t, brokers[1].Addr, "spread", 6, nil)
	ctx := context.Background()

	// Ask another broker, once it has applied the change.
	var mt kmsg.MetadataResponseTopic
	cl2 := brokertest.Client(t, brokers[2].Addr)
	waitFor(t, "the topic on another broker", func() bool {
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl2)
		require.NoError(t, err)
		for _, tp := range resp.Topics {
			if *tp.Topic == "spread" {
				mt = tp
			}
		}
		return len(mt.Partitions) == 6
	})
	leaders := map[int32]int{}
	for _, p := range mt.Partitions {
		require.Equal(t, int16(0), p.ErrorCode)
		require.Equal(t, []int32{p.Leader}, p.Replicas)
		leaders[p.Leader]++
	}
	require.Equal(t, map[int32]int{0: 2, 1: 2, 2: 2}, leaders, "leadership is spread evenly")

	// A produce sent to a broker that does not lead the partition is
	// refused with NOT_LEADER_OR_FOLLOWER, so the client re-routes.
	for _, p := range mt.Partitions {
		for _, b := range brokers {
			if b.Cfg.NodeID == p.Leader {
				continue
			}
			got := produceRawTo(t, brokertest.Client(t, b.Addr), "spread", p.Partition, -1, batch(-1, -1, -1, 1, 10))
			require.Equal(t, kerr.NotLeaderForPartition.Code, got.ErrorCode)
			break
		}
	}

	// Clients that bootstrap from any one broker reach all partitions.
	prod := brokertest.Client(t, brokers[0].Addr, kgo.DefaultProduceTopic("spread"))
	want := produceAll(t, prod, "spread", 3000, "cluster")
	require.Len(t, want, 6)
	got := consumeAll(t, brokers[2].Addr, "spread", 3000)
	requireSame(t, want, got)
}

func TestPlacementNeedsLiveBrokers(t *testing.T) {
	brokers := startCluster(t, 2)
	adm := brokertest.Admin(t, brokers[0].Addr)
	ctx := context.Background()
	_, err := adm.CreateTopic(ctx, 1, 3, nil, "too-many-replicas")
	require.ErrorIs(t, err, kerr.InvalidReplicationFactor)

	// A broker that shuts down cleanly leaves the metadata at once.
	require.NoError(t, brokers[1].Broker.Close())
	cl := brokertest.Client(t, brokers[0].Addr)
	waitFor(t, "the stopped broker to leave the metadata", func() bool {
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
		require.NoError(t, err)
		return len(resp.Brokers) == 1
	})
	brokertest.CreateTopic(t, brokers[0].Addr, "after", 4, nil)
	resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
	require.NoError(t, err)
	for _, tp := range resp.Topics {
		if *tp.Topic == "after" {
			for _, p := range tp.Partitions {
				require.Equal(t, int32(0), p.Leader, "new partitions go to live brokers only")
			}
		}
	}
}

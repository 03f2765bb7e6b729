package broker_test

import (
	"context"
	"fmt"
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
		waitFor(t, "all brokers registered", func() bool {
			return len(metadataOnConn(t, b.Addr).Brokers) == n
		})
	}
	return out
}

func TestPartitionsSpreadOverBrokers(t *testing.T) {
	brokers := startCluster(t, 3)
	brokertest.CreateTopic(t, brokers[1].Addr, "spread", 6, nil)

	// Every broker applies the change (asked one by one on raw
	// connections: a client would pick any broker); take broker 2's view.
	var mt kmsg.MetadataResponseTopic
	for _, b := range brokers {
		waitFor(t, "the topic on every broker", func() bool {
			resp := metadataOnConn(t, b.Addr)
			mt = kmsg.MetadataResponseTopic{}
			for _, tp := range resp.Topics {
				if *tp.Topic == "spread" {
					mt = tp
				}
			}
			return len(mt.Partitions) == 6
		})
	}
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
			got := produceOnConn(t, b.Addr, "spread", p.Partition, batch(-1, -1, -1, 1, 10))
			require.Equal(t, kerr.NotLeaderForPartition.Code, got.ErrorCode, "broker %d for partition %d led by %d", b.Cfg.NodeID, p.Partition, p.Leader)
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
	waitFor(t, "the stopped broker to leave the metadata", func() bool {
		return len(metadataOnConn(t, brokers[0].Addr).Brokers) == 1
	})
	brokertest.CreateTopic(t, brokers[0].Addr, "after", 4, nil)
	for _, tp := range metadataOnConn(t, brokers[0].Addr).Topics {
		if *tp.Topic == "after" {
			for _, p := range tp.Partitions {
				require.Equal(t, int32(0), p.Leader, "new partitions go to live brokers only")
			}
		}
	}
}

// produceOnConn sends one Produce (v7, acks=all) to exactly the broker at
// addr over a raw connection: no client routing.
func produceOnConn(t *testing.T, addr, topicName string, partition int32, records []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 7, -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topicName
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = partition, records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	c := rawConn(t, addr)
	_, err := c.Write(frame(0, 7, 1, req.AppendTo(nil)))
	require.NoError(t, err)
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = 7
	require.NoError(t, resp.ReadFrom(readResponse(t, c)[4:]))
	return resp.Topics[0].Partitions[0]
}

// metadataOnConn asks exactly the broker at addr for all topics.
func metadataOnConn(t *testing.T, addr string) *kmsg.MetadataResponse {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 9
	c := rawConn(t, addr)
	_, err := c.Write(flexFrame(3, 9, 1, req.AppendTo(nil)))
	require.NoError(t, err)
	resp := kmsg.NewPtrMetadataResponse()
	resp.Version = 9
	raw := readResponse(t, c)
	require.NoError(t, resp.ReadFrom(raw[5:])) // correlation id and the empty header tag section
	return resp
}

// flexFrame is frame for flexible request versions (an empty header tag
// section after the client id).
func flexFrame(key, version int16, corr int32, body []byte) []byte {
	return frame(key, version, corr, append([]byte{0}, body...))
}

// TestNotLeaderAnswersNameTheLeader: a Produce v10+ sent to a follower
// carries the current leader and its address (KIP-951).
func TestNotLeaderAnswersNameTheLeader(t *testing.T) {
	brokers := startCluster(t, 2)
	brokertest.CreateTopic(t, brokers[0].Addr, "hint", 2, nil)
	for _, b := range brokers {
		waitFor(t, "the topic everywhere", func() bool {
			for _, tp := range metadataOnConn(t, b.Addr).Topics {
				if *tp.Topic == "hint" {
					return len(tp.Partitions) == 2
				}
			}
			return false
		})
	}
	md := metadataOnConn(t, brokers[0].Addr)
	var p kmsg.MetadataResponseTopicPartition
	for _, tp := range md.Topics {
		if *tp.Topic == "hint" {
			p = tp.Partitions[0]
		}
	}
	follower := brokers[1-p.Leader]
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis = 11, -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "hint"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = p.Partition, batch(-1, -1, -1, 1, 10)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	c := rawConn(t, follower.Addr)
	_, err := c.Write(flexFrame(0, 11, 1, req.AppendTo(nil)))
	require.NoError(t, err)
	resp := kmsg.NewPtrProduceResponse()
	resp.Version = 11
	require.NoError(t, resp.ReadFrom(readResponse(t, c)[5:]))
	sp := resp.Topics[0].Partitions[0]
	require.Equal(t, kerr.NotLeaderForPartition.Code, sp.ErrorCode)
	require.Equal(t, p.Leader, sp.CurrentLeader.LeaderID)
	require.Equal(t, p.LeaderEpoch, sp.CurrentLeader.LeaderEpoch)
	require.Len(t, resp.Brokers, 1)
	require.Equal(t, brokers[p.Leader].Addr, fmt.Sprintf("%s:%d", resp.Brokers[0].Host, resp.Brokers[0].Port))
}

package broker_test

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/broker"
	"github.com/stratamq/strata/brokerfleet/internal/brokertest"
	"github.com/stratamq/strata/pkg/metastore"
	"github.com/stratamq/strata/pkg/segment"
)

// replCluster is three brokers sharing a metastore, with cuttable links.
type replCluster struct {
	brokers []*brokertest.Broker
	links   *brokertest.Links
}

func startReplCluster(t *testing.T, lag time.Duration) *replCluster {
	meta := brokertest.NewMeta(t)
	rc := &replCluster{links: brokertest.NewLinks()}
	for id := 0; id < 3; id++ {
		rc.brokers = append(rc.brokers, brokertest.Start(t, func(c *broker.Config) {
			c.Meta, c.NodeID, c.ReplicaLagMax = meta, int32(id), lag
			c.DialPeer = rc.links.Dialer(fmt.Sprint(id))
		}))
	}
	cl := brokertest.Client(t, rc.brokers[0].Addr)
	waitFor(t, "all brokers registered", func() bool {
		resp, err := kmsg.NewPtrMetadataRequest().RequestWith(context.Background(), cl)
		require.NoError(t, err)
		return len(resp.Brokers) == 3
	})
	return rc
}

// partitionMeta returns a partition's metadata as broker 0 sees it.
func (rc *replCluster) partitionMeta(t *testing.T, topicName string, p int32) (kmsg.MetadataResponseTopicPartition, [16]byte) {
	t.Helper()
	return rc.partitionMetaFrom(t, rc.brokers[0].Addr, topicName, p)
}

// partitionMetaFrom returns a partition's metadata as the broker at addr
// (or any broker its client picks) sees it.
func (rc *replCluster) partitionMetaFrom(t *testing.T, addr, topicName string, p int32) (kmsg.MetadataResponseTopicPartition, [16]byte) {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topicName)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), brokertest.Client(t, addr))
	require.NoError(t, err)
	require.Greater(t, len(resp.Topics[0].Partitions), int(p))
	return resp.Topics[0].Partitions[p], resp.Topics[0].TopicID
}

func TestReplicatedProduceAndIdenticalReplicas(t *testing.T) {
	rc := startReplCluster(t, 10*time.Second)
	brokertest.CreateTopicRF(t, rc.brokers[0].Addr, "r3", 3, 3, map[string]*string{"min.insync.replicas": strp("2")})
	pm, _ := rc.partitionMeta(t, "r3", 0)
	require.Len(t, pm.Replicas, 3)
	require.ElementsMatch(t, pm.Replicas, pm.ISR)

	prod := brokertest.Client(t, rc.brokers[1].Addr, kgo.DefaultProduceTopic("r3"))
	want := produceAll(t, prod, "r3", 20_000, "repl")
	got := consumeAll(t, rc.brokers[2].Addr, "r3", 20_000)
	requireSame(t, want, got)

	// Every replica holds the same bytes up to the end, once followers
	// caught up: compare the logs on disk after a clean shutdown.
	_, id := rc.partitionMeta(t, "r3", 0)
	time.Sleep(time.Second) // followers fetch the last high watermark
	for _, b := range rc.brokers {
		require.NoError(t, b.Broker.Close())
	}
	for p := int32(0); p < 3; p++ {
		var logs [][]byte
		for _, b := range rc.brokers {
			dir := filepath.Join(b.Cfg.DataDir, "logs", fmt.Sprintf("r3-%x", id[:]), fmt.Sprint(p))
			lg, err := segment.Open(segment.Options{FS: segment.OS(), Dir: dir})
			require.NoError(t, err)
			data, err := lg.Read(nil, 0, 1<<30, lg.NextOffset())
			require.NoError(t, err)
			require.NoError(t, lg.Close())
			logs = append(logs, data)
		}
		require.NotEmpty(t, logs[0])
		for i := 1; i < 3; i++ {
			require.True(t, bytes.Equal(logs[0], logs[i]), "partition %d: replica %d differs from replica 0 (%d vs %d bytes)", p, i, len(logs[i]), len(logs[0]))
		}
	}
}

func TestISRShrinksAndGrowsWhenAFollowerIsCutOff(t *testing.T) {
	rc := startReplCluster(t, time.Second)
	brokertest.CreateTopicRF(t, rc.brokers[0].Addr, "cut", 1, 3, map[string]*string{"min.insync.replicas": strp("2")})
	pm, _ := rc.partitionMeta(t, "cut", 0)
	leader := pm.Leader
	var follower int32 = -1
	for _, r := range pm.Replicas {
		if r != leader {
			follower = r
			break
		}
	}
	leaderAddr := rc.brokers[leader].Addr
	ctx := context.Background()
	prod := brokertest.Client(t, leaderAddr, kgo.DefaultProduceTopic("cut"), kgo.ProduceRequestTimeout(30*time.Second))
	require.NoError(t, prod.ProduceSync(ctx, &kgo.Record{Value: []byte("before")}).FirstErr())

	rc.links.Cut(fmt.Sprint(follower), leaderAddr)
	waitFor(t, "the ISR to shrink", func() bool {
		pm, _ := rc.partitionMeta(t, "cut", 0)
		return len(pm.ISR) == 2 && !slices.Contains(pm.ISR, follower)
	})
	// acks=all continues with min.insync.replicas=2.
	for i := 0; i < 50; i++ {
		require.NoError(t, prod.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint("during", i))}).FirstErr())
	}

	rc.links.Restore(fmt.Sprint(follower), leaderAddr)
	waitFor(t, "the ISR to grow back", func() bool {
		pm, _ := rc.partitionMeta(t, "cut", 0)
		return len(pm.ISR) == 3
	})
	require.NoError(t, prod.ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).FirstErr())
}

func TestNotEnoughReplicas(t *testing.T) {
	rc := startReplCluster(t, time.Second)
	brokertest.CreateTopicRF(t, rc.brokers[0].Addr, "few", 1, 3, map[string]*string{"min.insync.replicas": strp("2")})
	pm, _ := rc.partitionMeta(t, "few", 0)
	leader := rc.brokers[pm.Leader]
	// Both followers go away.
	for _, r := range pm.Replicas {
		if r != pm.Leader {
			require.NoError(t, rc.brokers[r].Broker.Close())
		}
	}
	cl := brokertest.Client(t, leader.Addr)
	waitFor(t, "the ISR to shrink to the leader", func() bool {
		return produceRawTo(t, cl, "few", 0, batch(-1, -1, -1, 1, 10)).ErrorCode == kerr.NotEnoughReplicas.Code
	})
	before := leaderEnd(t, cl)
	for i := 0; i < 5; i++ {
		require.Equal(t, kerr.NotEnoughReplicas.Code, produceRawTo(t, cl, "few", 0, batch(-1, -1, -1, 1, 10)).ErrorCode)
	}
	require.Equal(t, before, leaderEnd(t, cl), "nothing was appended or acknowledged")
}

// TestAcksAllWaitsForTheISR: with both followers cut off (but still in the
// ISR), an acks=all produce is not acknowledged; acks=1 is.
func TestAcksAllWaitsForTheISR(t *testing.T) {
	rc := startReplCluster(t, time.Minute)
	brokertest.CreateTopicRF(t, rc.brokers[0].Addr, "wait", 1, 3, nil)
	pm, _ := rc.partitionMeta(t, "wait", 0)
	leaderAddr := rc.brokers[pm.Leader].Addr
	for _, r := range pm.Replicas {
		if r != pm.Leader {
			rc.links.Cut(fmt.Sprint(r), leaderAddr)
		}
	}
	cl := brokertest.Client(t, leaderAddr)
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 300
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "wait"
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batch(-1, -1, -1, 1, 10)
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	require.NoError(t, err)
	require.Equal(t, kerr.RequestTimedOut.Code, resp.Topics[0].Partitions[0].ErrorCode, "acks=all answered without the followers")
	leaderAcks := brokertest.Client(t, leaderAddr, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	require.Equal(t, int16(0), produceRawTo(t, leaderAcks, "wait", 0, batch(-1, -1, -1, 1, 10)).ErrorCode, "acks=1 needs only the leader")

	// Reconnected followers catch up and the high watermark covers both.
	for _, r := range pm.Replicas {
		rc.links.Restore(fmt.Sprint(r), leaderAddr)
	}
	waitFor(t, "the high watermark to pass both batches", func() bool {
		end := leaderEndOf(t, cl, "wait")
		return end == 2
	})
}

func leaderEnd(t *testing.T, cl *kgo.Client) int64 { return leaderEndOf(t, cl, "few") }

// leaderEndOf returns partition 0's high watermark (ListOffsets latest).
func leaderEndOf(t *testing.T, cl *kgo.Client, topicName string) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topicName
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(context.Background(), cl)
	require.NoError(t, err)
	return resp.Topics[0].Partitions[0].Offset
}

// TestReplicasMoveOffADeadBroker: with four brokers and three replicas,
// the replica of a broker that stays dead moves to the spare broker, which
// catches up and joins the ISR.
func TestReplicasMoveOffADeadBroker(t *testing.T) {
	meta := brokertest.NewMeta(t)
	var brokers []*brokertest.Broker
	for id := 0; id < 4; id++ {
		brokers = append(brokers, brokertest.Start(t, func(c *broker.Config) {
			c.Meta, c.NodeID, c.ReplicaLagMax, c.ReassignAfter = meta, int32(id), time.Second, 500*time.Millisecond
			c.Lease = metastore.LeaseOptions{Duration: 1500 * time.Millisecond, Margin: 300 * time.Millisecond}
		}))
	}
	for _, b := range brokers {
		waitFor(t, "all brokers registered", func() bool { return len(metadataOnConn(t, b.Addr).Brokers) == 4 })
	}
	brokertest.CreateTopicRF(t, brokers[0].Addr, "moving", 1, 3, map[string]*string{"min.insync.replicas": strp("2")})
	partition := func(addr string) kmsg.MetadataResponseTopicPartition {
		for _, tp := range metadataOnConn(t, addr).Topics {
			if *tp.Topic == "moving" && len(tp.Partitions) == 1 {
				return tp.Partitions[0]
			}
		}
		return kmsg.MetadataResponseTopicPartition{}
	}
	var before kmsg.MetadataResponseTopicPartition
	waitFor(t, "the topic", func() bool { before = partition(brokers[0].Addr); return len(before.Replicas) == 3 })
	prod := brokertest.Client(t, brokers[0].Addr, kgo.DefaultProduceTopic("moving"))
	ctx := context.Background()
	for i := 0; i < 100; i++ {
		require.NoError(t, prod.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr())
	}
	var victim, spare int32 = -1, -1
	for _, r := range before.Replicas {
		if r != before.Leader {
			victim = r
		}
	}
	for id := int32(0); id < 4; id++ {
		if !slices.Contains(before.Replicas, id) {
			spare = id
		}
	}
	require.NoError(t, brokers[victim].Broker.Close())
	leaderAddr := brokers[before.Leader].Addr
	waitFor(t, "the replica to move to the spare broker and join the ISR", func() bool {
		p := partition(leaderAddr)
		return slices.Contains(p.Replicas, spare) && !slices.Contains(p.Replicas, victim) && len(p.ISR) == 3
	})
	for i := 100; i < 200; i++ {
		require.NoError(t, prod.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr())
	}
	// The newcomer holds the whole log: it can lead after the old leader
	// hands over.
	require.NoError(t, brokers[before.Leader].Broker.Close())
	var others []*brokertest.Broker
	for id, b := range brokers {
		if int32(id) != victim && int32(id) != before.Leader {
			others = append(others, b)
		}
	}
	got := consumeAll(t, others[0].Addr, "moving", 200)
	require.Len(t, got[0], 200)
}

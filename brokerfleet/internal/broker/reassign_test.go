package broker_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
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
)

// startBalancing runs brokers ids from..to-1 on meta with a fast placement
// pass and leader rebalance, racks alternating.
func startBalancing(t *testing.T, meta *metastore.Meta, ids ...int32) []*brokertest.Broker {
	var out []*brokertest.Broker
	for _, id := range ids {
		out = append(out, brokertest.Start(t, func(c *broker.Config) {
			c.Meta, c.NodeID, c.Rack = meta, id, []string{"az-a", "az-b"}[id%2]
			c.ReplicaBalanceInterval, c.LeaderRebalanceInterval = 300*time.Millisecond, 500*time.Millisecond
			c.ReassignThrottle = 1 << 20 // slow enough to see moves in progress
		}))
	}
	return out
}

// placement is each broker's replica and leader counts for a topic.
func placement(t *testing.T, cl *kgo.Client, topic string) (replicas, leaders map[int32]int, reassigning bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	md, err := kadm.NewClient(cl).Metadata(ctx, topic)
	if err != nil {
		return nil, nil, true
	}
	replicas, leaders = map[int32]int{}, map[int32]int{}
	for _, p := range md.Topics[topic].Partitions {
		for _, r := range p.Replicas {
			replicas[r]++
		}
		leaders[p.Leader]++
		if len(p.Replicas) != len(p.ISR) {
			reassigning = true
		}
	}
	if lr, err := listReassignments(ctx, cl); err != nil || len(lr) > 0 {
		reassigning = true
	}
	return replicas, leaders, reassigning
}

// listReassignments lists every reassignment in progress (a null topic
// list, which kadm does not send), by topic and partition.
func listReassignments(ctx context.Context, cl *kgo.Client) (map[string]map[int32]kmsg.ListPartitionReassignmentsResponseTopicPartition, error) {
	req := kmsg.NewPtrListPartitionReassignmentsRequest()
	req.Topics = nil
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, err
	}
	out := map[string]map[int32]kmsg.ListPartitionReassignmentsResponseTopicPartition{}
	for _, rt := range resp.Topics {
		out[rt.Topic] = map[int32]kmsg.ListPartitionReassignmentsResponseTopicPartition{}
		for _, rp := range rt.Partitions {
			out[rt.Topic][rp.Partition] = rp
		}
	}
	return out, nil
}

// The acceptance scenario of scale out and in: a loaded 3-broker cluster
// gains a fourth broker, which the controller fills with replicas and
// leadership; then broker 0 is drained until it holds nothing and stops.
// Idempotent acks=all producers run throughout, and every acknowledged
// record is read back exactly once.
func TestScaleOutThenDrain(t *testing.T) {
	meta := brokertest.NewMeta(t)
	brokers := startBalancing(t, meta, 0, 1, 2)
	for _, b := range brokers {
		waitFor(t, "all brokers registered", func() bool { return len(metadataOnConn(t, b.Addr).Brokers) == 3 })
	}
	const topic = "scaled"
	brokertest.CreateTopicRF(t, brokers[1].Addr, topic, 12, 3, map[string]*string{"min.insync.replicas": strp("2")})
	cl := brokertest.Client(t, brokers[1].Addr)
	adm := kadm.NewClient(cl)

	// Producers: keyed records, acks=all, idempotent, until told to stop.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var (
		mu    sync.Mutex
		acked = map[string]bool{}
		fails atomic.Int64
		stop  = make(chan struct{})
		done  sync.WaitGroup
	)
	seeds := []string{brokers[1].Addr, brokers[2].Addr}
	for w := 0; w < 2; w++ {
		done.Add(1)
		go func() {
			defer done.Done()
			cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
			if err != nil {
				fails.Add(1)
				return
			}
			defer cl.Close()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				v := fmt.Sprintf("w%d-%d", w, i)
				if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(v), Value: []byte(v)}).FirstErr(); err != nil {
					if ctx.Err() != nil {
						return
					}
					t.Logf("produce %s: %v", v, err)
					fails.Add(1)
					continue
				}
				mu.Lock()
				acked[v] = true
				mu.Unlock()
			}
		}()
	}
	time.Sleep(time.Second)
	var last string
	t.Cleanup(func() { t.Log("last placement: ", last) })

	// Scale out: broker 3 joins and gets its share of replicas (12*3/4 = 9)
	// and, once in sync, leadership.
	brokers = append(brokers, startBalancing(t, meta, 3)...)
	waitFor(t, "replicas and leaders spread onto broker 3", func() bool {
		replicas, leaders, moving := placement(t, cl, topic)
		last = fmt.Sprintf("replicas %v leaders %v moving %v", replicas, leaders, moving)
		return !moving && replicas[3] == 9 && replicas[0] == 9 && replicas[1] == 9 && replicas[2] == 9 && leaders[0] == 3 && leaders[1] == 3 && leaders[2] == 3 && leaders[3] == 3
	})

	// Scale in: drain broker 0 until it holds no replica and leads nothing.
	res, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "strata.broker.draining", Value: strp("true")}}, 0)
	require.NoError(t, err)
	for _, r := range res {
		require.NoError(t, r.Err)
	}
	waitFor(t, "broker 0 drained", func() bool {
		replicas, leaders, moving := placement(t, cl, topic)
		last = fmt.Sprintf("replicas %v leaders %v moving %v", replicas, leaders, moving)
		return !moving && replicas[0] == 0 && leaders[0] == 0 && leaders[1] == 4 && leaders[2] == 4 && leaders[3] == 4 && replicas[1] == 12 && replicas[2] == 12 && replicas[3] == 12
	})
	// A new topic avoids the draining broker.
	brokertest.CreateTopicRF(t, brokers[1].Addr, "after-drain", 6, 3, nil)
	md, err := adm.Metadata(ctx, "after-drain")
	require.NoError(t, err)
	for _, p := range md.Topics["after-drain"].Partitions {
		require.NotContains(t, p.Replicas, int32(0))
	}
	require.NoError(t, brokers[0].Broker.Close())
	time.Sleep(time.Second) // produce on without broker 0
	close(stop)
	done.Wait()

	mu.Lock()
	defer mu.Unlock()
	require.Greater(t, len(acked), 100)
	seen := readValues(t, brokers[1].Addr, topic)
	for v := range acked {
		require.Equal(t, 1, seen[v], "acknowledged record %s read %d times", v, seen[v])
	}
	t.Logf("%d records acknowledged, %d produce errors (retried by the client or given up)", len(acked), fails.Load())
}

// AlterPartitionReassignments moves a partition's replicas by request, and
// ListPartitionReassignments shows it in progress; bad requests get
// Kafka's error codes.
func TestAlterPartitionReassignments(t *testing.T) {
	meta := brokertest.NewMeta(t)
	var brokers []*brokertest.Broker
	for id := int32(0); id < 4; id++ {
		brokers = append(brokers, brokertest.Start(t, func(c *broker.Config) {
			c.Meta, c.NodeID = meta, id
			c.ReassignThrottle = 64 << 10 // 64 KiB/s: the move takes seconds
		}))
	}
	for _, b := range brokers {
		waitFor(t, "all brokers registered", func() bool { return len(metadataOnConn(t, b.Addr).Brokers) == 4 })
	}
	brokertest.CreateTopicRF(t, brokers[0].Addr, "moved", 1, 3, nil)
	cl := brokertest.Client(t, brokers[0].Addr)
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	md, err := adm.Metadata(ctx, "moved")
	require.NoError(t, err)
	before := md.Topics["moved"].Partitions[0]
	var spare int32
	for id := int32(0); id < 4; id++ {
		if !slices.Contains(before.Replicas, id) {
			spare = id
		}
	}
	prod := brokertest.Client(t, brokers[0].Addr, kgo.DefaultProduceTopic("moved"))
	val := make([]byte, 1000)
	for i := 0; i < 300; i++ {
		require.NoError(t, prod.ProduceSync(ctx, &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: val}).FirstErr())
	}
	// Move the leader's replica to the spare broker.
	target := slices.Clone(before.Replicas)
	target[slices.Index(target, before.Leader)] = spare
	slices.Reverse(target)
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign("moved", 0, target)
	res, err := adm.AlterPartitionAssignments(ctx, req)
	require.NoError(t, err)
	require.NoError(t, res["moved"][0].Err)
	lr, err := listReassignments(ctx, cl)
	require.NoError(t, err)
	require.Contains(t, lr, "moved", "300 KB at 64 KiB/s is still moving")
	named, err := adm.ListPartitionReassignments(ctx, kadm.TopicsSet{"moved": {0: {}}})
	require.NoError(t, err)
	require.Equal(t, lr["moved"][0].Replicas, named["moved"][0].Replicas)
	require.Equal(t, []int32{spare}, lr["moved"][0].AddingReplicas)
	require.Equal(t, []int32{before.Leader}, lr["moved"][0].RemovingReplicas)
	reassigning := 0.0
	for _, b := range brokers {
		reassigning += sum(gather(t, b.Broker.Gatherer()), "strata_reassigning_partitions", nil)
	}
	require.Equal(t, 1.0, reassigning, "the leader reports the move in progress")

	var after kadm.PartitionDetail
	waitFor(t, "the reassignment to complete", func() bool {
		lr, err := listReassignments(ctx, cl)
		if err != nil || len(lr) > 0 {
			return false
		}
		md, err = adm.Metadata(ctx, "moved")
		after = md.Topics["moved"].Partitions[0]
		return err == nil && slices.Equal(after.Replicas, target) // metadata is applied within a watch interval
	})
	require.Equal(t, target, after.Replicas)
	require.Equal(t, target[0], after.Leader, "the leaving leader hands over to the first target replica")
	require.ElementsMatch(t, target, after.ISR)
	for i := 300; i < 400; i++ {
		require.NoError(t, prod.ProduceSync(ctx, &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: val}).FirstErr())
	}
	// The removed replica's broker can go; the others hold everything.
	require.NoError(t, brokers[before.Leader].Broker.Close())
	got := consumeAll(t, brokers[target[0]].Addr, "moved", 400)
	require.Len(t, got[0], 400)

	// Errors, each with its Kafka code.
	check := func(topic string, p int32, replicas []int32, cancel bool, want error) {
		t.Helper()
		var req kadm.AlterPartitionAssignmentsReq
		if cancel {
			req.CancelAssign(topic, p)
		} else {
			req.Assign(topic, p, replicas)
		}
		res, err := adm.AlterPartitionAssignments(ctx, req)
		require.NoError(t, err)
		require.ErrorIs(t, res[topic][p].Err, want)
	}
	check("moved", 0, []int32{target[0], target[0], target[1]}, false, kerr.InvalidReplicaAssignment)
	check("moved", 0, []int32{target[0], 42}, false, kerr.InvalidReplicaAssignment)
	check("moved", 0, nil, true, kerr.NoReassignmentInProgress)
	check("no-such-topic", 0, []int32{1, 2}, false, kerr.UnknownTopicOrPartition)
	check("moved", 7, []int32{1, 2}, false, kerr.UnknownTopicOrPartition)

	// Broker configs: only draining may change, to a boolean.
	bad, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "num.partitions", Value: strp("3")}}, target[0])
	require.NoError(t, err)
	require.ErrorIs(t, bad[0].Err, kerr.InvalidConfig)
	bad, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "strata.broker.draining", Value: strp("maybe")}}, target[0])
	require.NoError(t, err)
	require.ErrorIs(t, bad[0].Err, kerr.InvalidConfig)
}

package broker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/broker"
	"github.com/stratamq/strata/brokerfleet/internal/brokertest"
	"github.com/stratamq/strata/pkg/segment"
)

// startRackCluster runs one broker per rack (ids 0..), sharing a
// metastore, with cuttable links between them.
func startRackCluster(t *testing.T, racks []string, links *brokertest.Links) []*brokertest.Broker {
	meta := brokertest.NewMeta(t)
	var out []*brokertest.Broker
	for id, rack := range racks {
		out = append(out, brokertest.Start(t, func(c *broker.Config) {
			c.Meta, c.NodeID, c.Rack = meta, int32(id), rack
			c.ReplicaLagMax = 10 * time.Second
			c.ReplicaBalanceInterval, c.LeaderRebalanceInterval = 0, 0
			if links != nil {
				c.DialPeer = links.Dialer(fmt.Sprint(id))
			}
		}))
	}
	for _, b := range out {
		waitFor(t, "all brokers registered", func() bool { return len(metadataOnConn(t, b.Addr).Brokers) == len(racks) })
	}
	return out
}

// partitionOn returns a partition's metadata as the broker at addr sees it.
func partitionOn(t *testing.T, addr, topicName string, p int32) kmsg.MetadataResponseTopicPartition {
	t.Helper()
	var out kmsg.MetadataResponseTopicPartition
	waitFor(t, "the partition in the metadata", func() bool {
		for _, tp := range metadataOnConn(t, addr).Topics {
			if *tp.Topic == topicName && len(tp.Partitions) > int(p) {
				out = tp.Partitions[p]
				return out.Leader >= 0
			}
		}
		return false
	})
	return out
}

// consumerFetch is a consumer's (replica id -1) fetch of one partition.
func consumerFetch(t *testing.T, addr string, version int16, rack, topicName string, p int32, offset int64, maxWait int32) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := fetchReq(topicName, []int32{p}, offset, maxWait, 1, 1<<20, 1<<20)
	req.Version, req.Rack = version, rack
	c := rawConn(t, addr)
	require.NoError(t, c.SetDeadline(time.Now().Add(time.Duration(maxWait)*time.Millisecond+10*time.Second)))
	var err error
	if version >= 12 {
		_, err = c.Write(flexFrame(1, version, 1, req.AppendTo(nil)))
	} else {
		_, err = c.Write(frame(1, version, 1, req.AppendTo(nil)))
	}
	require.NoError(t, err)
	raw := readResponse(t, c)
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = version
	body := raw[4:]
	if version >= 12 {
		body = raw[5:]
	}
	require.NoError(t, resp.ReadFrom(body))
	require.Len(t, resp.Topics, 1)
	require.Len(t, resp.Topics[0].Partitions, 1)
	return resp.Topics[0].Partitions[0]
}

// batchesEnd returns the offset after the last record of the batches.
func batchesEnd(t *testing.T, b []byte) int64 {
	t.Helper()
	end := int64(-1)
	require.NoError(t, segment.Split(b, func(h segment.Header, _ []byte) error { end = h.LastOffset() + 1; return nil }))
	return end
}

// TestFollowerServesConsumerFetches: what a follower answers a consumer
// (KIP-392), and what the leader tells a consumer that sends its rack.
func TestFollowerServesConsumerFetches(t *testing.T) {
	links := brokertest.NewLinks()
	bs := startRackCluster(t, []string{"az-a", "az-b", "az-c"}, links)
	brokertest.CreateTopicRF(t, bs[0].Addr, "ff", 1, 3, nil)
	pm := partitionOn(t, bs[0].Addr, "ff", 0)
	leader := bs[pm.Leader]
	var followers []*brokertest.Broker
	for _, b := range bs {
		if b.Cfg.NodeID != pm.Leader {
			followers = append(followers, b)
		}
	}
	f, g := followers[0], followers[1]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	prod := brokertest.Client(t, leader.Addr, kgo.DefaultProduceTopic("ff"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce := func(n int, acks kgo.Acks) {
		t.Helper()
		cl := prod
		if acks != kgo.AllISRAcks() {
			cl = brokertest.Client(t, leader.Addr, kgo.DefaultProduceTopic("ff"), kgo.RecordPartitioner(kgo.ManualPartitioner()),
				kgo.RequiredAcks(acks), kgo.DisableIdempotentWrite())
		}
		for i := 0; i < n; i++ {
			require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr())
		}
	}
	produce(10, kgo.AllISRAcks())

	// The follower learns the high watermark at once (its leader answers
	// a fetch that moved it) and serves up to it.
	start := time.Now()
	waitFor(t, "the follower's high watermark", func() bool {
		return consumerFetch(t, f.Addr, 11, "", "ff", 0, 0, 0).HighWatermark == 10
	})
	t.Logf("follower high watermark caught up in %v", time.Since(start))
	sp := consumerFetch(t, f.Addr, 11, "", "ff", 0, 0, 0)
	require.Zero(t, sp.ErrorCode)
	require.EqualValues(t, -1, sp.PreferredReadReplica, "a follower serves, it does not redirect")
	require.EqualValues(t, 10, batchesEnd(t, sp.RecordBatches))
	require.EqualValues(t, 10, consumerFetch(t, f.Addr, 12, "az-x", "ff", 0, 0, 0).HighWatermark, "v12 too")

	// Consumers before v11 read from the leader only.
	require.Equal(t, kerr.NotLeaderForPartition.Code, consumerFetch(t, f.Addr, 10, "", "ff", 0, 0, 0).ErrorCode)
	// At the high watermark: nothing yet; past the log end: out of range.
	sp = consumerFetch(t, f.Addr, 11, "", "ff", 0, 10, 0)
	require.Zero(t, sp.ErrorCode)
	require.Empty(t, sp.RecordBatches)
	require.Equal(t, kerr.OffsetOutOfRange.Code, consumerFetch(t, f.Addr, 11, "", "ff", 0, 11, 0).ErrorCode)

	// G is cut off (it stays in the ISR for the lag window), so the
	// leader's high watermark stays at 10 while F replicates 5 more.
	links.Cut(fmt.Sprint(g.Cfg.NodeID), leader.Addr)
	produce(5, kgo.LeaderAck())
	waitFor(t, "F to hold the unacknowledged records", func() bool {
		return consumerFetch(t, f.Addr, 11, "", "ff", 0, 15, 0).ErrorCode == 0
	})
	// Between its high watermark and its log end: an empty answer, and
	// never a record past the high watermark.
	for _, off := range []int64{10, 12} {
		sp = consumerFetch(t, f.Addr, 11, "", "ff", 0, off, 0)
		require.Zero(t, sp.ErrorCode, "offset %d", off)
		require.Empty(t, sp.RecordBatches, "offset %d", off)
		require.EqualValues(t, 10, sp.HighWatermark)
	}
	sp = consumerFetch(t, f.Addr, 11, "", "ff", 0, 0, 0)
	require.EqualValues(t, 10, batchesEnd(t, sp.RecordBatches), "F holds 15 but serves 10")
	require.Equal(t, kerr.OffsetOutOfRange.Code, consumerFetch(t, f.Addr, 11, "", "ff", 0, 16, 0).ErrorCode)

	// A consumer waiting at the follower wakes when its high watermark
	// moves (G reconnects and catches up).
	done := make(chan kmsg.FetchResponseTopicPartition, 1)
	go func() { done <- consumerFetch(t, f.Addr, 11, "", "ff", 0, 10, 20_000) }()
	time.Sleep(100 * time.Millisecond)
	links.Restore(fmt.Sprint(g.Cfg.NodeID), leader.Addr)
	start = time.Now()
	sp = <-done
	require.Less(t, time.Since(start), 15*time.Second, "woken by the high watermark, not MaxWait")
	require.Zero(t, sp.ErrorCode)
	require.EqualValues(t, 15, batchesEnd(t, sp.RecordBatches))

	// The leader sends a consumer in F's rack to F, without records; one
	// in its own rack, or in a rack without a replica, it serves.
	rackOf := func(b *brokertest.Broker) string { return b.Cfg.Rack }
	sp = consumerFetch(t, leader.Addr, 11, rackOf(f), "ff", 0, 0, 0)
	require.Zero(t, sp.ErrorCode)
	require.Equal(t, f.Cfg.NodeID, sp.PreferredReadReplica)
	require.Empty(t, sp.RecordBatches)
	require.EqualValues(t, 15, sp.HighWatermark)
	for _, rack := range []string{rackOf(leader), "az-x", ""} {
		sp = consumerFetch(t, leader.Addr, 11, rack, "ff", 0, 0, 0)
		require.EqualValues(t, -1, sp.PreferredReadReplica, "rack %q", rack)
		require.NotEmpty(t, sp.RecordBatches, "rack %q", rack)
	}

	// A broker that is no replica of a partition answers
	// NOT_LEADER_OR_FOLLOWER, naming the leader.
	brokertest.CreateTopicRF(t, bs[0].Addr, "ff2", 1, 2, nil)
	pm2 := partitionOn(t, bs[0].Addr, "ff2", 0)
	for _, b := range bs {
		if b.Cfg.NodeID != pm2.Replicas[0] && b.Cfg.NodeID != pm2.Replicas[1] {
			waitFor(t, "the topic on the outsider", func() bool {
				return consumerFetch(t, b.Addr, 12, "", "ff2", 0, 0, 0).ErrorCode != kerr.UnknownTopicOrPartition.Code
			})
			sp = consumerFetch(t, b.Addr, 12, "", "ff2", 0, 0, 0)
			require.Equal(t, kerr.NotLeaderForPartition.Code, sp.ErrorCode)
			require.Equal(t, pm2.Leader, sp.CurrentLeader.LeaderID)
		}
	}
}

// rackConsume reads every partition of topicName from the start until it
// has n records, with opts, returning them by partition.
func rackConsume(t *testing.T, addr, topicName string, n int, opts ...kgo.Opt) sent {
	t.Helper()
	cl := brokertest.Client(t, addr, append(opts, kgo.ConsumeTopics(topicName),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))...)
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
	// Nothing more arrives: every record was read once.
	pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer pcancel()
	require.Empty(t, cl.PollFetches(pctx).Records(), "records read twice")
	return out
}

// TestConsumersReadFromFollowersInTheirRack: with client.rack set, a
// franz-go consumer reads every partition from the broker in its rack
// (KIP-392), every record exactly once; without it, from the leaders. The
// test logs the cross-rack (inter-AZ) consumer bytes per consumed byte in
// both cases, and the replication bytes per produced byte.
func TestConsumersReadFromFollowersInTheirRack(t *testing.T) {
	racks := []string{"az-a", "az-b", "az-c"}
	bs := startRackCluster(t, racks, nil)
	brokertest.CreateTopicRF(t, bs[0].Addr, "zonal", 6, 3, nil)
	prod := brokertest.Client(t, bs[0].Addr, kgo.DefaultProduceTopic("zonal"))
	const n = 20_000
	want := produceAll(t, prod, "zonal", n, "zonal")
	require.Len(t, want, 6)

	counter := func(name string) []float64 {
		out := make([]float64, len(bs))
		for i, b := range bs {
			out[i] = sum(gather(t, b.Broker.Gatherer()), name, map[string]string{"topic": "zonal"})
		}
		return out
	}
	total := func(v []float64) float64 {
		s := 0.0
		for _, x := range v {
			s += x
		}
		return s
	}
	home := 1 // the consumer's rack: az-b, broker 1
	ratio := map[string]float64{}
	for _, mode := range []string{"leaders", "follower fetching"} {
		var opts []kgo.Opt
		if mode != "leaders" {
			opts = append(opts, kgo.Rack(racks[home]))
		}
		h := &fetchBytes{}
		before := counter("strata_fetch_bytes_total")
		got := rackConsume(t, bs[0].Addr, "zonal", n, append(opts, kgo.WithHooks(h))...)
		requireSame(t, want, got)
		after := counter("strata_fetch_bytes_total")
		served := make([]float64, len(bs))
		for i := range bs {
			served[i] = after[i] - before[i]
		}
		cross := total(served) - served[home]
		ratio[mode] = cross / total(served)
		wire := h.byNode()
		t.Logf("%s: record bytes served per broker %v (consumer in %s); fetch response bytes on the wire per broker %v", mode, served, racks[home], wire)
		if mode != "leaders" {
			require.Zero(t, cross, "no record bytes from another rack")
			for id, b := range wire {
				if id != int32(home) {
					require.Less(t, b, 64<<10, "broker %d only redirects", id)
				}
			}
		} else {
			require.Greater(t, ratio[mode], 0.3, "two thirds of the leaders are in other racks")
		}
	}
	produced := total(counter("strata_produce_bytes_total"))
	replicated := total(counter("strata_replica_fetch_bytes_total"))
	t.Logf("inter-AZ consumer bytes per consumed byte (3 racks, RF 3, consumer in %s): %.3f reading from leaders, %.3f with follower fetching; "+
		"replication (cross-AZ either way): %.2f bytes per produced byte", racks[home], ratio["leaders"], ratio["follower fetching"], replicated/produced)
}

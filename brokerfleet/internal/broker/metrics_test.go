package broker_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratamq/strata/brokerfleet/internal/broker"
	"github.com/stratamq/strata/brokerfleet/internal/brokertest"
	"github.com/stratamq/strata/pkg/objstore"
)

// sample is one gathered series.
type sample struct {
	labels map[string]string
	value  float64 // a counter's or gauge's value, a histogram's count
}

// gather returns the series of g by metric name.
func gather(t *testing.T, g prometheus.Gatherer) map[string][]sample {
	t.Helper()
	fams, err := g.Gather()
	require.NoError(t, err)
	out := map[string][]sample{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			s := sample{labels: map[string]string{}}
			for _, l := range m.GetLabel() {
				s.labels[l.GetName()] = l.GetValue()
			}
			switch {
			case m.GetCounter() != nil:
				s.value = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				s.value = m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				s.value = float64(m.GetHistogram().GetSampleCount())
			}
			out[f.GetName()] = append(out[f.GetName()], s)
		}
	}
	return out
}

// sum adds the series of name whose labels include want.
func sum(series map[string][]sample, name string, want map[string]string) float64 {
	total := 0.0
next:
	for _, s := range series[name] {
		for k, v := range want {
			if s.labels[k] != v {
				continue next
			}
		}
		total += s.value
	}
	return total
}

// A scripted produce, fetch and commit shows up in the broker's registry
// with the exact counts.
func TestMetricsProduceFetchLag(t *testing.T) {
	b := brokertest.Start(t)
	const topicName, n, m, size = "metered", 50, 20, 100
	brokertest.CreateTopic(t, b.Addr, topicName, 1, nil)
	ctx := context.Background()
	prod := brokertest.Client(t, b.Addr, kgo.ProducerBatchCompression(kgo.NoCompression()))
	value := bytes.Repeat([]byte("x"), size)
	for i := 0; i < n; i++ {
		require.NoError(t, prod.ProduceSync(ctx, &kgo.Record{Topic: topicName, Value: value}).FirstErr())
	}

	cons := brokertest.Client(t, b.Addr, kgo.ConsumeTopics(topicName), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	got := 0
	for got < n {
		fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		fs := cons.PollFetches(fctx)
		cancel()
		require.NoError(t, fs.Err())
		got += fs.NumRecords()
	}

	adm := brokertest.Admin(t, b.Addr)
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: topicName, Partition: 0, At: m, LeaderEpoch: -1})
	resp, err := adm.CommitOffsets(ctx, "metered-readers", offs)
	require.NoError(t, err)
	require.NoError(t, resp.Error())

	// A produce to a partition that does not exist is an error by code,
	// and one more Produce request.
	before := sum(gather(t, b.Gatherer()), "strata_requests_total", map[string]string{"api": "Produce"})
	require.Equal(t, kerr.UnknownTopicOrPartition.Code, produceOnConn(t, b.Addr, topicName, 7, []byte("junk")).ErrorCode)

	// Group lag is refreshed in the background (GroupStatsInterval), never
	// computed by the scrape.
	require.Eventually(t, func() bool {
		return sum(gather(t, b.Gatherer()), "strata_consumer_group_lag", map[string]string{"group": "metered-readers", "topic": topicName}) == float64(n-m)
	}, 10*time.Second, 20*time.Millisecond, "lag of metered-readers")
	// Error codes, fetched records and durations are counted once a
	// response is written, which the client may see first: wait for the
	// rejected produce to be counted before taking the snapshot.
	require.Eventually(t, func() bool {
		return sum(gather(t, b.Gatherer()), "strata_request_errors_total", map[string]string{"api": "Produce", "error": "UNKNOWN_TOPIC_OR_PARTITION"}) >= 1
	}, 5*time.Second, 10*time.Millisecond, "the rejected produce counted")
	s := gather(t, b.Gatherer())
	byTopic := map[string]string{"topic": topicName}
	require.Equal(t, float64(n), sum(s, "strata_produce_records_total", byTopic))
	require.GreaterOrEqual(t, sum(s, "strata_produce_bytes_total", byTopic), float64(n*size))
	require.GreaterOrEqual(t, sum(s, "strata_fetch_records_total", byTopic), float64(n))
	require.Greater(t, sum(s, "strata_fetch_bytes_total", byTopic), 0.0)
	produces := sum(s, "strata_requests_total", map[string]string{"api": "Produce"})
	require.Equal(t, before+1, produces)
	require.GreaterOrEqual(t, produces, float64(n)/2, "the client's produce requests (it may coalesce a few)")
	// A request's duration is observed once its answer is written, which
	// the client may see first.
	require.Eventually(t, func() bool {
		return sum(gather(t, b.Gatherer()), "strata_request_duration_seconds", map[string]string{"api": "Produce"}) >= produces
	}, 5*time.Second, 10*time.Millisecond, "produce durations observed")
	require.Greater(t, sum(s, "strata_request_duration_seconds", map[string]string{"api": "Fetch"}), 0.0)
	require.Equal(t, 1.0, sum(s, "strata_request_errors_total", map[string]string{"api": "Produce", "error": "UNKNOWN_TOPIC_OR_PARTITION"}))
	require.Greater(t, sum(s, "strata_metastore_requests_total", map[string]string{"op": "put", "result": "ok"}), 0.0)
	require.Greater(t, sum(s, "strata_metastore_request_duration_seconds", map[string]string{"op": "get"}), 0.0)
	require.Equal(t, 1.0, sum(s, "strata_leader_partitions", nil))
	require.Equal(t, 1.0, sum(s, "strata_partitions", nil))
	require.Equal(t, 0.0, sum(s, "strata_under_replicated_partitions", nil))
	require.Equal(t, 1.0, sum(s, "strata_controller", nil))
	require.GreaterOrEqual(t, sum(s, "strata_leader_elections_total", nil), 1.0)

	// The EMF line reads the same registry.
	line, err := b.NewEMF().Line(time.Now())
	require.NoError(t, err)
	require.Contains(t, string(line), fmt.Sprintf(`"MaxConsumerGroupLag":%d`, n-m))
	require.Contains(t, string(line), `"ProduceErrors":1`)
}

// Each broker of a cluster reports only its own partitions: an RF=3
// partition counts under its leader, goes under-replicated when a follower
// stops and recovers when it comes back; offline partitions come from the
// controller alone.
func TestMetricsUnderReplicated(t *testing.T) {
	meta := brokertest.NewMeta(t)
	var bs []*brokertest.Broker
	for id := 0; id < 3; id++ {
		bs = append(bs, brokertest.Start(t, func(c *broker.Config) {
			c.Meta, c.NodeID, c.ReplicaLagMax = meta, int32(id), 500*time.Millisecond
		}))
	}
	for _, b := range bs {
		waitFor(t, "all brokers registered", func() bool { return len(metadataOnConn(t, b.Addr).Brokers) == 3 })
	}
	brokertest.CreateTopicRF(t, bs[0].Addr, "replicated", 1, 3, nil)
	var leader int32 = -1
	waitFor(t, "a leader", func() bool {
		for _, tp := range metadataOnConn(t, bs[0].Addr).Topics {
			if tp.Topic != nil && *tp.Topic == "replicated" && len(tp.Partitions) == 1 && len(tp.Partitions[0].ISR) == 3 {
				leader = tp.Partitions[0].Leader
			}
		}
		return leader >= 0
	})
	total := func(name string) float64 {
		v := 0.0
		for _, b := range bs {
			v += sum(gather(t, b.Gatherer()), name, nil)
		}
		return v
	}
	lead := bs[leader]
	require.Equal(t, 1.0, sum(gather(t, lead.Gatherer()), "strata_leader_partitions", nil))
	waitFor(t, "every replica open", func() bool { return total("strata_partitions") == 3 })
	require.Equal(t, 1.0, total("strata_controller"))
	require.Equal(t, 0.0, total("strata_offline_partitions"))

	follower := bs[(leader+1)%3]
	require.NoError(t, follower.Close())
	waitFor(t, "under-replicated on the leader", func() bool {
		return sum(gather(t, lead.Gatherer()), "strata_under_replicated_partitions", nil) == 1
	})
	s := gather(t, lead.Gatherer())
	require.GreaterOrEqual(t, sum(s, "strata_isr_shrinks_total", nil), 1.0)
	require.Equal(t, 0.0, sum(s, "strata_under_min_isr_partitions", nil), "min.insync.replicas=1")

	follower.Restart(t)
	waitFor(t, "back in sync", func() bool {
		return sum(gather(t, lead.Gatherer()), "strata_under_replicated_partitions", nil) == 0
	})
	require.GreaterOrEqual(t, sum(gather(t, lead.Gatherer()), "strata_isr_expands_total", nil), 1.0)
}

// stalledPuts is an object store whose puts fail while stalled is set.
type stalledPuts struct {
	objstore.Store
	stalled atomic.Bool
}

func (s *stalledPuts) Put(ctx context.Context, key string, body []byte, opts objstore.PutOptions) error {
	if s.stalled.Load() {
		return errors.New("stalled")
	}
	return s.Store.Put(ctx, key, body, opts)
}

func (s *stalledPuts) PutReader(ctx context.Context, key string, r io.ReadSeeker, size int64, opts objstore.PutOptions) error {
	if s.stalled.Load() {
		return errors.New("stalled")
	}
	return s.Store.PutReader(ctx, key, r, size, opts)
}

// Closed segments waiting for the S3 tier show as upload lag and backlog
// while uploads fail, and the uploads as counts once they succeed.
func TestMetricsTierUploadLag(t *testing.T) {
	objects := &stalledPuts{Store: objstore.NewMemory()}
	objects.stalled.Store(true)
	b := brokertest.Start(t, func(c *broker.Config) {
		c.Objects, c.TierInterval, c.MaintenanceInterval = objects, 50*time.Millisecond, 50*time.Millisecond
	})
	brokertest.CreateTopic(t, b.Addr, "tiered-metrics", 1, map[string]*string{"segment.bytes": kadm.StringPtr("4096")})
	prod := brokertest.Client(t, b.Addr, kgo.ProducerBatchCompression(kgo.NoCompression()))
	for i := 0; i < 60; i++ {
		require.NoError(t, prod.ProduceSync(context.Background(), &kgo.Record{Topic: "tiered-metrics", Value: bytes.Repeat([]byte("v"), 200)}).FirstErr())
	}
	waitFor(t, "a backlog", func() bool {
		return sum(gather(t, b.Gatherer()), "strata_tier_upload_backlog_segments", nil) >= 2
	})
	time.Sleep(300 * time.Millisecond)
	s := gather(t, b.Gatherer())
	require.GreaterOrEqual(t, sum(s, "strata_tier_upload_lag_seconds", nil), 0.3)
	require.Greater(t, sum(s, "strata_tier_upload_backlog_bytes", nil), 4096.0)
	require.Equal(t, 0.0, sum(s, "strata_tier_segment_uploads_total", nil))
	require.Greater(t, sum(s, "strata_s3_requests_total", map[string]string{"op": "put"}), 0.0, "failed puts count too")

	objects.stalled.Store(false)
	waitFor(t, "the backlog uploaded", func() bool {
		s := gather(t, b.Gatherer())
		return sum(s, "strata_tier_upload_backlog_segments", nil) == 0 && sum(s, "strata_tier_upload_lag_seconds", nil) == 0
	})
	s = gather(t, b.Gatherer())
	require.GreaterOrEqual(t, sum(s, "strata_tier_segment_uploads_total", nil), 2.0)
	require.Greater(t, sum(s, "strata_tier_segment_upload_bytes_total", nil), 4096.0)
	require.Greater(t, sum(s, "strata_s3_bytes_total", map[string]string{"op": "put"}), 4096.0)
}

// A deleted topic's per-topic series go with it.
func TestMetricsForgetDeletedTopics(t *testing.T) {
	b := brokertest.Start(t)
	brokertest.CreateTopic(t, b.Addr, "short-lived", 1, nil)
	prod := brokertest.Client(t, b.Addr)
	require.NoError(t, prod.ProduceSync(context.Background(), &kgo.Record{Topic: "short-lived", Value: []byte("v")}).FirstErr())
	byTopic := map[string]string{"topic": "short-lived"}
	require.Equal(t, 1.0, sum(gather(t, b.Gatherer()), "strata_produce_records_total", byTopic))
	_, err := brokertest.Admin(t, b.Addr).DeleteTopics(context.Background(), "short-lived")
	require.NoError(t, err)
	waitFor(t, "the series dropped", func() bool {
		return len(gather(t, b.Gatherer())["strata_produce_records_total"]) == 0
	})
}

package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stratamq/strata/brokerfleet/internal/catalog"
)

// Scrape-time gauges: partition and tier gauges from the partition states
// this broker last read and its local logs, group gauges from the last
// SetGroups. Nothing here reads the metastore or asks another broker.
//
// Who reports what, so that summing a series over the brokers of a cluster
// counts each partition once:
//   - strata_leader_partitions, strata_under_replicated_partitions and
//     strata_under_min_isr_partitions: the partition's leader;
//   - strata_partitions: every broker with a replica (the sum is the
//     replica count);
//   - strata_offline_partitions (no leader at all): the controller alone,
//     0 on every other broker (strata_controller tells which one it is).
var (
	descPartitions = prometheus.NewDesc("strata_partitions",
		"Partition replicas hosted on this broker.", nil, nil)
	descLeaders = prometheus.NewDesc("strata_leader_partitions",
		"Partitions this broker leads.", nil, nil)
	descUnderReplicated = prometheus.NewDesc("strata_under_replicated_partitions",
		"Partitions this broker leads whose ISR is smaller than their replica set.", nil, nil)
	descUnderMinISR = prometheus.NewDesc("strata_under_min_isr_partitions",
		"Partitions this broker leads whose ISR is smaller than the topic's min.insync.replicas (acks=all produce fails).", nil, nil)
	descReassigning = prometheus.NewDesc("strata_reassigning_partitions",
		"Partitions this broker leads with a replica reassignment in progress (replicas being added or removed).", nil, nil)
	descOffline = prometheus.NewDesc("strata_offline_partitions",
		"Partitions without a leader, reported by the controller only (0 on the other brokers), so the cluster sum counts each once.", nil, nil)
	descController = prometheus.NewDesc("strata_controller",
		"1 if this broker holds the controller lease, else 0.", nil, nil)
	descTierLag = prometheus.NewDesc("strata_tier_upload_lag_seconds",
		"Over the partitions this broker leads: the longest time a closed, committed segment has waited for its upload to the S3 tier (since this broker first saw it waiting); 0 when none waits.", nil, nil)
	descTierBacklogSegments = prometheus.NewDesc("strata_tier_upload_backlog_segments",
		"Closed, committed segments of partitions this broker leads not yet uploaded to the S3 tier.", nil, nil)
	descTierBacklogBytes = prometheus.NewDesc("strata_tier_upload_backlog_bytes",
		"Bytes of the closed, committed segments not yet uploaded to the S3 tier.", nil, nil)
	descS3Requests = prometheus.NewDesc("strata_s3_requests_total",
		"Requests to the S3 tier's object store by operation (put, get, list, delete), failed ones included.", []string{"op"}, nil)
	descS3Bytes = prometheus.NewDesc("strata_s3_bytes_total",
		"Body bytes of successful S3 puts and gets.", []string{"op"}, nil)

	descGroupLag = prometheus.NewDesc("strata_consumer_group_lag",
		"Log end offset (high watermark) minus committed offset, per group and partition, for the groups this broker coordinates (refreshed in the background).",
		[]string{"group", "topic", "partition"}, nil)
	descGroupCommitted = prometheus.NewDesc("strata_consumer_group_committed_offset",
		"Committed offset per group and partition, for the groups this broker coordinates.",
		[]string{"group", "topic", "partition"}, nil)
	descGroupMembers = prometheus.NewDesc("strata_consumer_group_members",
		"Members of each group this broker coordinates, labelled with the group's state.",
		[]string{"group", "state"}, nil)
	descGroupEpoch = prometheus.NewDesc("strata_consumer_group_epoch",
		"Each group's epoch (consumer protocol, KIP-848) or generation (classic protocol), labelled with its type (classic, consumer), for the groups this broker coordinates.",
		[]string{"group", "type"}, nil)
	descCoordShards = prometheus.NewDesc("strata_group_coordinator_shards",
		"Group coordinator shards this broker holds.", nil, nil)
)

// PartitionCounts is one pass over the partition states.
type PartitionCounts struct {
	Hosted, Leaders, UnderReplicated, UnderMinISR, Reassigning, Offline int
}

// CountPartitions counts the partitions of s: every partition without a
// leader, the replicas hosted here, and of those this broker leads the
// under-replicated (replicas being added by a reassignment do not count,
// as in Kafka), reassigning and under-min-ISR ones.
func CountPartitions(s *catalog.Snapshot) PartitionCounts {
	var c PartitionCounts
	for _, t := range s.Topics() {
		for i, st := range t.States {
			if t.Parts[i] != nil {
				c.Hosted++
			}
			if st.Leader < 0 {
				c.Offline++
			}
			if st.Leader != s.Self() {
				continue
			}
			c.Leaders++
			if len(st.ISR) < len(st.Replicas)-len(st.AddingReplicas) {
				c.UnderReplicated++
			}
			if st.Reassigning() {
				c.Reassigning++
			}
			if int32(len(st.ISR)) < t.Config.MinInsyncReplicas {
				c.UnderMinISR++
			}
		}
	}
	return c
}

// Source is what the scrape-time gauges read, all from memory.
type Source interface {
	// Partitions counts the partitions as this broker last read them.
	Partitions() PartitionCounts
	// TopicExists reports whether a topic exists (per-topic series of
	// deleted topics are dropped).
	TopicExists(name string) bool
	// TierBacklog is the S3 upload backlog of the partitions this broker
	// leads (zeros without a tier).
	TierBacklog() (lag time.Duration, segs int, bytes int64)
	// CoordinatorShards is how many group coordinator shards this broker
	// holds.
	CoordinatorShards() int
}

// Collect registers the scrape-time gauges, read from src.
func (m *Broker) Collect(src Source) {
	m.reg.MustRegister(&collector{m: m, src: src})
}

type collector struct {
	m   *Broker
	src Source
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descPartitions, descLeaders, descUnderReplicated, descUnderMinISR, descReassigning,
		descOffline, descController, descTierLag, descTierBacklogSegments, descTierBacklogBytes, descS3Requests, descS3Bytes,
		descGroupLag, descGroupCommitted, descGroupMembers, descGroupEpoch, descCoordShards} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	m := c.m
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	m.forgetTopics(c.src.TopicExists)
	pc := c.src.Partitions()
	isController := m.controller.Load()
	if !isController {
		pc.Offline = 0
	}
	gauge(descPartitions, float64(pc.Hosted))
	gauge(descLeaders, float64(pc.Leaders))
	gauge(descUnderReplicated, float64(pc.UnderReplicated))
	gauge(descUnderMinISR, float64(pc.UnderMinISR))
	gauge(descReassigning, float64(pc.Reassigning))
	gauge(descOffline, float64(pc.Offline))
	gauge(descController, boolFloat(isController))

	lag, segs, bytes := c.src.TierBacklog()
	gauge(descTierLag, lag.Seconds())
	gauge(descTierBacklogSegments, float64(segs))
	gauge(descTierBacklogBytes, float64(bytes))
	if m.objects != nil {
		n := m.objects.Counts()
		for op, v := range map[string]int64{"put": n.Puts, "get": n.Gets, "list": n.Lists, "delete": n.Deletes} {
			ch <- prometheus.MustNewConstMetric(descS3Requests, prometheus.CounterValue, float64(v), op)
		}
		ch <- prometheus.MustNewConstMetric(descS3Bytes, prometheus.CounterValue, float64(n.PutBytes), "put")
		ch <- prometheus.MustNewConstMetric(descS3Bytes, prometheus.CounterValue, float64(n.GetBytes), "get")
	}

	gauge(descCoordShards, float64(c.src.CoordinatorShards()))
	for _, g := range m.lastGroups() {
		gauge(descGroupMembers, float64(g.Members), g.Group, g.State)
		if g.Type != "" {
			gauge(descGroupEpoch, float64(g.Epoch), g.Group, g.Type)
		}
		for _, o := range g.Offsets {
			p := strconv.Itoa(int(o.Partition))
			gauge(descGroupCommitted, float64(o.Committed), g.Group, o.Topic, p)
			if o.End >= 0 {
				gauge(descGroupLag, float64(max(0, o.End-o.Committed)), g.Group, o.Topic, p)
			}
		}
	}
}

func boolFloat(v bool) float64 {
	if v {
		return 1
	}
	return 0
}

package broker

// Metrics (issue 12). Each broker owns one Prometheus registry, so several
// brokers in one process (dev, tests) each expose only their own series.
// Three kinds of series live in it:
//
//   - counters and histograms updated on the request path (conn.go, the
//     Produce and Fetch handlers, ISR changes, leader elections, tier
//     uploads, the instrumented metastore);
//   - gauges computed at scrape time from the broker's state
//     (metrics_partitions.go): partitions, leaders, under-replicated,
//     under-min-ISR, offline, tier upload lag, S3 request counts;
//   - consumer group lag and committed offsets (below), reported by each
//     group's coordinator alone.
//
// The file map: metrics.go (the registry and counters), metrics_requests.go
// (what a response tells: latency, error codes, fetched bytes),
// metrics_partitions.go (scrape-time gauges), metrics_emf.go (CloudWatch
// Embedded Metric Format lines derived from the registry).

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratamq/strata/pkg/metastore"
	"github.com/stratamq/strata/pkg/objstore"
)

// latencyBuckets span a local produce (sub-millisecond) to a Fetch long
// poll (MaxWait, capped at 30 s).
var latencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// metastoreBuckets span the embedded store (microseconds) to DynamoDB
// under throttling retries (seconds).
var metastoreBuckets = []float64{.0001, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}

// brokerMetrics holds a broker's registry and the series updated as work
// happens. Every method is safe on a nil receiver (a no-op), so hooks need
// no guard.
type brokerMetrics struct {
	reg *prometheus.Registry

	requests *prometheus.CounterVec   // api
	latency  *prometheus.HistogramVec // api
	errors   *prometheus.CounterVec   // api, error

	produceRecords, produceBytes *prometheus.CounterVec // topic
	fetchRecords, fetchBytes     *prometheus.CounterVec // topic
	replicaFetchBytes            *prometheus.CounterVec // topic

	isrShrinks, isrExpands prometheus.Counter
	leaderElections        prometheus.Counter

	tierUploads, tierUploadBytes prometheus.Counter

	metaRequests *prometheus.CounterVec   // op, result
	metaLatency  *prometheus.HistogramVec // op

	objects *objstore.Counting // the tier's object store, counted; nil without a tier

	// controller is whether this broker held the controller lease at the
	// end of its last controller round (offline partitions are reported by
	// the controller alone).
	controller atomic.Bool

	// labelled holds the topic names the per-topic counters have series
	// for, so a scrape can drop those of deleted topics.
	labelled sync.Map // string -> struct{}

	// ledMu guards led: the leader epoch of each partition this broker
	// leads, as last applied, to count elections (entries of deleted
	// topics stay; see forgetTopics).
	ledMu sync.Mutex
	led   map[tierKey]int32

	// tierMu guards tierPending: per led partition, the oldest closed
	// segment not yet uploaded and when this broker first saw it so.
	tierMu      sync.Mutex
	tierPending map[tierKey]tierBacklog
}

type tierBacklog struct {
	base  int64
	since time.Time
}

// newBrokerMetrics builds the broker's registry and wraps cfg.Meta's store
// and cfg.Objects so their requests are counted. It runs in New before
// anything uses them.
func newBrokerMetrics(cfg *Config) *brokerMetrics {
	m := &brokerMetrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_requests_total",
			Help: "Kafka requests received, by API (Produce, Fetch, Metadata, ...)."}, []string{"api"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "strata_request_duration_seconds",
			Help:    "Time from reading a request frame to writing its response, by API. Fetch includes its long-poll wait (MaxWait).",
			Buckets: latencyBuckets}, []string{"api"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_request_errors_total",
			Help: "Non-zero Kafka error codes in responses, by API and error name: every partition of Produce and Fetch, top-level and per-item codes of the other common APIs."}, []string{"api", "error"}),
		produceRecords: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_produce_records_total",
			Help: "Records appended by Produce requests to partitions this broker leads, by topic."}, []string{"topic"}),
		produceBytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_produce_bytes_total",
			Help: "Record batch bytes appended by Produce requests, by topic."}, []string{"topic"}),
		fetchRecords: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_fetch_records_total",
			Help: "Records sent to consumers in Fetch responses (whole batches, so possibly some before the fetch offset), by topic."}, []string{"topic"}),
		fetchBytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_fetch_bytes_total",
			Help: "Record batch bytes sent to consumers in Fetch responses, by topic."}, []string{"topic"}),
		replicaFetchBytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_replica_fetch_bytes_total",
			Help: "Record batch bytes sent to follower replicas in Fetch responses, by topic."}, []string{"topic"}),
		isrShrinks: prometheus.NewCounter(prometheus.CounterOpts{Name: "strata_isr_shrinks_total",
			Help: "ISR changes written by this broker, as leader, that removed a replica."}),
		isrExpands: prometheus.NewCounter(prometheus.CounterOpts{Name: "strata_isr_expands_total",
			Help: "ISR changes written by this broker, as leader, that added a replica."}),
		leaderElections: prometheus.NewCounter(prometheus.CounterOpts{Name: "strata_leader_elections_total",
			Help: "Times this broker became the leader of a partition (or took a new leader epoch of one it led)."}),
		tierUploads: prometheus.NewCounter(prometheus.CounterOpts{Name: "strata_tier_segment_uploads_total",
			Help: "Closed segments uploaded to the S3 tier and recorded in their manifest."}),
		tierUploadBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "strata_tier_segment_upload_bytes_total",
			Help: "Bytes of the segments uploaded to the S3 tier."}),
		metaRequests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_metastore_requests_total",
			Help: "Metastore (DynamoDB or embedded) operations, by operation and result (ok, not_found, condition_failed, error)."}, []string{"op", "result"}),
		metaLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "strata_metastore_request_duration_seconds",
			Help: "Metastore operation latency, by operation.", Buckets: metastoreBuckets}, []string{"op"}),
		tierPending: map[tierKey]tierBacklog{},
		led:         map[tierKey]int32{},
	}
	m.reg.MustRegister(m.requests, m.latency, m.errors, m.produceRecords, m.produceBytes,
		m.fetchRecords, m.fetchBytes, m.replicaFetchBytes, m.isrShrinks, m.isrExpands, m.leaderElections,
		m.tierUploads, m.tierUploadBytes, m.metaRequests, m.metaLatency)
	if cfg.Meta != nil {
		cfg.Meta = metastore.New(metastore.Instrument(cfg.Meta.Store(), m.observeMeta))
	}
	if cfg.Objects != nil {
		m.objects = objstore.NewCounting(cfg.Objects)
		cfg.Objects = m.objects
	}
	return m
}

// register adds the scrape-time collector of b, once b exists, and
// returns m.
func (m *brokerMetrics) register(b *Broker) *brokerMetrics {
	m.reg.MustRegister(&brokerCollector{b: b})
	return m
}

// Gatherer returns the broker's own metrics registry: every strata_* series
// of this broker and no other's. Serve it with promhttp.HandlerFor, beside
// the process's runtime collectors.
func (b *Broker) Gatherer() prometheus.Gatherer {
	if b.metrics == nil {
		return prometheus.NewRegistry()
	}
	return b.metrics.reg
}

func (m *brokerMetrics) observeMeta(op string, took time.Duration, err error) {
	result := "ok"
	switch {
	case err == nil:
	case errors.Is(err, metastore.ErrNotFound):
		result = "not_found"
	case errors.Is(err, metastore.ErrConditionFailed):
		result = "condition_failed"
	default:
		result = "error"
	}
	m.metaRequests.WithLabelValues(op, result).Inc()
	m.metaLatency.WithLabelValues(op).Observe(took.Seconds())
}

// produced counts a batch appended by Produce.
func (m *brokerMetrics) produced(topicName string, records, bytes int) {
	if m == nil {
		return
	}
	m.label(topicName)
	m.produceRecords.WithLabelValues(topicName).Add(float64(records))
	m.produceBytes.WithLabelValues(topicName).Add(float64(bytes))
}

// label notes that topicName has per-topic series.
func (m *brokerMetrics) label(topicName string) {
	if _, ok := m.labelled.Load(topicName); !ok {
		m.labelled.Store(topicName, struct{}{})
	}
}

// forgetTopics drops the per-topic series of topics that no longer exist.
// The labelled names are read before the broker's topics, and a topic is
// only counted while it is published, so a topic created meanwhile is
// never dropped. (The election bookkeeping, one small entry per partition
// ever led, is kept: pruning it could race with a topic being opened and
// count its election twice.)
func (b *Broker) forgetTopics() {
	m := b.metrics
	var names []string
	m.labelled.Range(func(k, _ any) bool {
		names = append(names, k.(string))
		return true
	})
	b.mu.RLock()
	var gone []string
	for _, n := range names {
		if b.topics[n] == nil {
			gone = append(gone, n)
		}
	}
	b.mu.RUnlock()
	for _, n := range gone {
		m.labelled.Delete(n)
		for _, v := range []*prometheus.CounterVec{m.produceRecords, m.produceBytes, m.fetchRecords, m.fetchBytes, m.replicaFetchBytes} {
			v.DeleteLabelValues(n)
		}
	}
}

// tierUploaded counts a segment uploaded to the S3 tier.
func (m *brokerMetrics) tierUploaded(bytes int64) {
	if m == nil {
		return
	}
	m.tierUploads.Inc()
	m.tierUploadBytes.Add(float64(bytes))
}

// setController records whether this broker holds the controller lease.
func (m *brokerMetrics) setController(held bool) {
	if m != nil {
		m.controller.Store(held)
	}
}

// observeISRChange counts a written ISR change of a partition this broker
// leads: a shrink if a member left, an expand if one joined (both, if
// both). It compares with the state this broker last read.
func (b *Broker) observeISRChange(next metastore.PartitionState) {
	m := b.metrics
	if m == nil {
		return
	}
	b.mu.RLock()
	var prev []int32
	if ts := b.byID[next.Topic]; ts != nil && next.Partition >= 0 && int(next.Partition) < len(ts.states) {
		prev = ts.states[next.Partition].ISR
	}
	b.mu.RUnlock()
	if !subset(prev, next.ISR) {
		m.isrShrinks.Inc()
	}
	if !subset(next.ISR, prev) {
		m.isrExpands.Inc()
	}
}

// subset reports whether every member of a is in b.
func subset(a, b []int32) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}

// observeLeadership counts an election won by this broker: st makes it
// the leader of a partition it did not lead, or leads under another epoch.
// It runs wherever a partition state is applied to a local replica.
func (b *Broker) observeLeadership(st metastore.PartitionState) {
	m := b.metrics
	if m == nil {
		return
	}
	k := tierKey{st.Topic, st.Partition}
	m.ledMu.Lock()
	defer m.ledMu.Unlock()
	if st.Leader != b.cfg.NodeID {
		delete(m.led, k)
		return
	}
	if e, ok := m.led[k]; !ok || e != st.LeaderEpoch {
		m.led[k] = st.LeaderEpoch
		m.leaderElections.Inc()
	}
}

var (
	descGroupLag = prometheus.NewDesc("strata_consumer_group_lag",
		"Log end offset (high watermark) minus committed offset, per group and partition, for the groups this broker coordinates.",
		[]string{"group", "topic", "partition"}, nil)
	descGroupCommitted = prometheus.NewDesc("strata_consumer_group_committed_offset",
		"Committed offset per group and partition, for the groups this broker coordinates.",
		[]string{"group", "topic", "partition"}, nil)
	descGroupMembers = prometheus.NewDesc("strata_consumer_group_members",
		"Members of each group this broker coordinates, labelled with the group's state.",
		[]string{"group", "state"}, nil)
	descCoordShards = prometheus.NewDesc("strata_group_coordinator_shards",
		"Group coordinator shards this broker holds.", nil, nil)
)

// collectTimeout bounds one scrape's metastore reads and end-offset lookups.
const collectTimeout = 5 * time.Second

// Collector returns the broker's scrape-time Prometheus collector: consumer
// group lag, committed offsets and members for the groups this broker
// coordinates (each group is reported by exactly one broker, its
// coordinator), and the partition and tier gauges of metrics_partitions.go.
// Gatherer already includes it, with the request counters.
func (b *Broker) Collector() prometheus.Collector { return &brokerCollector{b: b} }

type brokerCollector struct {
	b *Broker

	mu  sync.Mutex
	adm *kadm.Client // to look up end offsets of partitions led elsewhere
}

func (c *brokerCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descGroupLag
	ch <- descGroupCommitted
	ch <- descGroupMembers
	ch <- descCoordShards
	describePartitions(ch)
}

func (c *brokerCollector) Collect(ch chan<- prometheus.Metric) {
	b := c.b
	c.b.collectPartitions(ch)
	ch <- prometheus.MustNewConstMetric(descCoordShards, prometheus.GaugeValue, float64(len(b.coord.Shards())))
	ctx, cancel := context.WithTimeout(b.ctx, collectTimeout)
	defer cancel()
	if err := b.coord.LoadAll(ctx); err != nil {
		b.log.Warn("metrics: load groups", "err", err)
	}
	snaps := b.coord.Snapshots()
	topics := map[string]bool{}
	for _, s := range snaps {
		ch <- prometheus.MustNewConstMetric(descGroupMembers, prometheus.GaugeValue, float64(s.Members), s.Group, s.State)
		for _, o := range s.Offsets {
			topics[o.Topic] = true
		}
	}
	ends := c.endOffsets(ctx, topics)
	for _, s := range snaps {
		for _, o := range s.Offsets {
			p := strconv.Itoa(int(o.Partition))
			ch <- prometheus.MustNewConstMetric(descGroupCommitted, prometheus.GaugeValue, float64(o.Offset), s.Group, o.Topic, p)
			end, ok := ends.Lookup(o.Topic, o.Partition)
			if !ok || end.Err != nil {
				continue
			}
			ch <- prometheus.MustNewConstMetric(descGroupLag, prometheus.GaugeValue, float64(max(0, end.Offset-o.Offset)), s.Group, o.Topic, p)
		}
	}
}

// endOffsets asks the partition leaders for the high watermarks, through
// a Kafka client of this cluster (the leaders may be other brokers).
func (c *brokerCollector) endOffsets(ctx context.Context, topics map[string]bool) kadm.ListedOffsets {
	if len(topics) == 0 {
		return nil
	}
	adm, err := c.admin()
	if err != nil {
		c.b.log.Warn("metrics: cluster client", "err", err)
		return nil
	}
	names := make([]string, 0, len(topics))
	for t := range topics {
		names = append(names, t)
	}
	ends, err := adm.ListEndOffsets(ctx, names...)
	if err != nil {
		c.b.log.Warn("metrics: list end offsets", "err", err)
	}
	return ends
}

func (c *brokerCollector) admin() (*kadm.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.adm != nil {
		return c.adm, nil
	}
	var seeds []string
	for _, br := range c.b.clusterBrokers() {
		seeds = append(seeds, c.b.cfg.Security.InterBrokerEndpoint(br))
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ClientID("strata-metrics")}, c.b.cfg.Security.ClientOpts()...)...)
	if err != nil {
		return nil, err
	}
	c.adm = kadm.NewClient(cl)
	context.AfterFunc(c.b.ctx, cl.Close)
	return c.adm, nil
}

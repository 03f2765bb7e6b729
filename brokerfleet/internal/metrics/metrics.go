// Package metrics is a broker's Prometheus registry and the hooks the
// other components call as work happens. Each broker owns one registry, so
// several brokers in one process (dev, tests) each expose only their own
// series. Every hook is safe on a nil *Broker (a no-op), so components
// take one without a guard, franz-go's Hook style.
//
// Three kinds of series live in the registry:
//   - counters and histograms updated on the request path (the front end,
//     the Produce and Fetch handlers, ISR changes, leader elections, tier
//     uploads, object-durability flushes, the instrumented metastore);
//   - gauges computed at scrape time from in-memory state only
//     (collector.go): partitions, leaders, under-replicated, under-min-ISR,
//     offline, tier upload lag, S3 request counts, coordinator shards;
//   - consumer group lag, committed offsets and members, from the last
//     SetGroups: the broker refreshes them in the background, so a scrape
//     never waits on the metastore or another broker.
//
// The file map: metrics.go (the registry, counters and hooks), txns.go
// (transaction gauges and aborts), requests.go
// (what a response tells: latency, error codes, fetched bytes),
// collector.go (scrape-time gauges), emf.go (CloudWatch Embedded Metric
// Format lines derived from the registry).
package metrics

import (
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stratamq/strata/pkg/metastore"
	"github.com/stratamq/strata/pkg/objstore"
)

// latencyBuckets span a local produce (sub-millisecond) to a Fetch long
// poll (MaxWait, capped at 30 s).
var latencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// metastoreBuckets span the embedded store (microseconds) to DynamoDB
// under throttling retries (seconds).
var metastoreBuckets = []float64{.0001, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}

// Broker holds a broker's registry and the series updated as work happens.
type Broker struct {
	reg *prometheus.Registry

	requests *prometheus.CounterVec   // api
	latency  *prometheus.HistogramVec // api
	errors   *prometheus.CounterVec   // api, error

	produceRecords, produceBytes *prometheus.CounterVec // topic
	fetchRecords, fetchBytes     *prometheus.CounterVec // topic
	replicaFetchBytes            *prometheus.CounterVec // topic
	sendfileBytes                prometheus.Counter

	isrShrinks, isrExpands prometheus.Counter
	leaderElections        prometheus.Counter

	tierUploads, tierUploadBytes prometheus.Counter
	objectFlushes                *prometheus.CounterVec // by paced
	objectFlushWrites            prometheus.Counter

	txnAborts *prometheus.CounterVec // cause

	metaRequests *prometheus.CounterVec   // op, result
	metaLatency  *prometheus.HistogramVec // op

	stages *produceStages // stages.go

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
	led   map[partitionKey]int32

	// groupsMu guards groups, the last SetGroups.
	groupsMu sync.Mutex
	groups   []GroupStat
	lag      map[lagKey]*lagRing // the lag history (laghistory.go)
}

type partitionKey struct {
	id        metastore.TopicID
	partition int32
}

// New builds a broker's registry.
func New() *Broker {
	m := &Broker{
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
		sendfileBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "strata_fetch_sendfile_bytes_total",
			Help: "Record batch bytes of Fetch responses (consumers' and followers') sent from their segment files with sendfile, not read into memory: large record sets on plain TCP connections."}),
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
		objectFlushes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_object_flushes_total",
			Help: "strata.durability=object flushes to S3 (one WAL object each), by paced: true when the flush waited for -object-flush-interval (it gathered batches that arrived during the previous one)."}, []string{"paced"}),
		objectFlushWrites: prometheus.NewCounter(prometheus.CounterOpts{Name: "strata_object_flush_metastore_writes_total",
			Help: "Metastore writes made by strata.durability=object flushes: one per flush (the WAL index), more when the index had to be absorbed into manifests, one per partition with -object-wal-index=false."}),
		metaRequests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_metastore_requests_total",
			Help: "Metastore (DynamoDB or embedded) operations, by operation and result (ok, not_found, condition_failed, error)."}, []string{"op", "result"}),
		metaLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "strata_metastore_request_duration_seconds",
			Help: "Metastore operation latency, by operation.", Buckets: metastoreBuckets}, []string{"op"}),
		txnAborts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "strata_transaction_aborts_total",
			Help: "Transaction aborts decided by this broker's transaction coordinator, by cause: client (EndTxn), timeout (transaction.timeout.ms ran out), fenced (a new instance of the transactional id)."}, []string{"cause"}),
		stages: newProduceStages(),
		led:    map[partitionKey]int32{},
	}
	m.reg.MustRegister(m.requests, m.latency, m.errors, m.produceRecords, m.produceBytes,
		m.fetchRecords, m.fetchBytes, m.replicaFetchBytes, m.sendfileBytes, m.isrShrinks, m.isrExpands, m.leaderElections,
		m.tierUploads, m.tierUploadBytes, m.objectFlushes, m.objectFlushWrites, m.metaRequests, m.metaLatency, m.stages.vec)
	// Both series exist from the start, so a rate over them is 0, not
	// absent, on a broker that has not flushed yet.
	m.objectFlushes.WithLabelValues("false")
	m.objectFlushes.WithLabelValues("true")
	return m
}

// Gatherer returns the registry: every strata_* series of this broker and
// no other's. Serve it with promhttp.HandlerFor, beside the process's
// runtime collectors.
func (m *Broker) Gatherer() prometheus.Gatherer {
	if m == nil {
		return prometheus.NewRegistry()
	}
	return m.reg
}

// InstrumentMeta returns meta with its store's requests counted.
func (m *Broker) InstrumentMeta(meta *metastore.Meta) *metastore.Meta {
	if meta == nil {
		return nil
	}
	return metastore.New(metastore.Instrument(meta.Store(), m.observeMeta))
}

// CountObjects returns s with its requests counted (strata_s3_*).
func (m *Broker) CountObjects(s objstore.Store) objstore.Store {
	if s == nil {
		return nil
	}
	m.objects = objstore.NewCounting(s)
	return m.objects
}

func (m *Broker) observeMeta(op string, took time.Duration, err error) {
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

// Produced counts a batch appended by Produce.
func (m *Broker) Produced(topicName string, records, bytes int) {
	if m == nil {
		return
	}
	m.label(topicName)
	m.produceRecords.WithLabelValues(topicName).Add(float64(records))
	m.produceBytes.WithLabelValues(topicName).Add(float64(bytes))
}

// label notes that topicName has per-topic series.
func (m *Broker) label(topicName string) {
	if _, ok := m.labelled.Load(topicName); !ok {
		m.labelled.Store(topicName, struct{}{})
	}
}

// forgetTopics drops the per-topic series of topics that no longer exist.
// The labelled names are read before exists is asked, and a topic is only
// counted while it is published, so a topic created meanwhile is never
// dropped. (The election bookkeeping, one small entry per partition ever
// led, is kept: pruning it could race with a topic being opened and count
// its election twice.)
func (m *Broker) forgetTopics(exists func(string) bool) {
	var names []string
	m.labelled.Range(func(k, _ any) bool {
		names = append(names, k.(string))
		return true
	})
	for _, n := range names {
		if exists(n) {
			continue
		}
		m.labelled.Delete(n)
		for _, v := range []*prometheus.CounterVec{m.produceRecords, m.produceBytes, m.fetchRecords, m.fetchBytes, m.replicaFetchBytes} {
			v.DeleteLabelValues(n)
		}
	}
}

// TierUploaded counts a segment uploaded to the S3 tier.
func (m *Broker) TierUploaded(bytes int64) {
	if m == nil {
		return
	}
	m.tierUploads.Inc()
	m.tierUploadBytes.Add(float64(bytes))
}

// ObjectFlushed counts an object-durability flush and the metastore writes
// it made.
func (m *Broker) ObjectFlushed(metaWrites int64, paced bool) {
	if m == nil {
		return
	}
	m.objectFlushes.WithLabelValues(strconv.FormatBool(paced)).Inc()
	m.objectFlushWrites.Add(float64(metaWrites))
}

// SetController records whether this broker holds the controller lease.
func (m *Broker) SetController(held bool) {
	if m != nil {
		m.controller.Store(held)
	}
}

// ISRChanged counts an ISR change this broker wrote as leader: a shrink if
// a member left, an expand if one joined (both, if both).
func (m *Broker) ISRChanged(prev, next metastore.PartitionState) {
	if m == nil {
		return
	}
	if !subset(prev.ISR, next.ISR) {
		m.isrShrinks.Inc()
	}
	if !subset(next.ISR, prev.ISR) {
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

// RoleApplied counts an election won by broker self: st makes it the
// leader of a partition it did not lead, or leads under another epoch. It
// runs wherever a partition state is applied to a local replica.
func (m *Broker) RoleApplied(self int32, st metastore.PartitionState) {
	if m == nil {
		return
	}
	k := partitionKey{st.Topic, st.Partition}
	m.ledMu.Lock()
	defer m.ledMu.Unlock()
	if st.Leader != self {
		delete(m.led, k)
		return
	}
	if e, ok := m.led[k]; !ok || e != st.LeaderEpoch {
		m.led[k] = st.LeaderEpoch
		m.leaderElections.Inc()
	}
}

// GroupStat is one consumer group as its coordinator last saw it, for the
// group gauges.
type GroupStat struct {
	Group, State string
	// Type is "classic" or "consumer" (the KIP-848 protocol); Epoch is a
	// consumer group's epoch or a classic group's generation.
	Type    string
	Epoch   int32
	Members int
	Offsets []GroupOffset
}

// GroupOffset is a committed offset and the partition's log end (high
// watermark), or End < 0 when it could not be learned.
type GroupOffset struct {
	Topic     string
	Partition int32
	Committed int64
	End       int64
}

// SetGroups replaces the groups the group gauges report (those this broker
// coordinates) and adds a sample of each to the lag history (GroupLag).
func (m *Broker) SetGroups(groups []GroupStat) {
	if m == nil {
		return
	}
	m.groupsMu.Lock()
	m.groups = groups
	m.recordLag(groups, time.Now())
	m.groupsMu.Unlock()
}

func (m *Broker) lastGroups() []GroupStat {
	m.groupsMu.Lock()
	defer m.groupsMu.Unlock()
	return m.groups
}

package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stratamq/strata/brokerfleet/internal/partition"
)

// stageBuckets resolve sub-millisecond steps: 10 µs to about 2.6 s in
// steps of 25 %, so a quantile read from them is within about 12 %.
var stageBuckets = prometheus.ExponentialBuckets(10e-6, 1.25, 57)

// Produce stages (strata_produce_stage_seconds), each observer resolved
// once so the request path does no label lookup.
type produceStages struct {
	vec                                *prometheus.HistogramVec
	append, followerAppend, respond    prometheus.Observer
	woken                              prometheus.Observer
	answered, followerAcked, committed prometheus.Observer
}

func newProduceStages() *produceStages {
	vec := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "strata_produce_stage_seconds",
		Help: "Where a produce spends its time, by stage. append: the Produce handler's own appends (on the leader). " +
			"follower_fetch_answered, follower_acked, high_watermark_advanced: from the leader's append of a partition's newest batch until a follower's fetch was answered with it, " +
			"until a follower's next fetch said it holds it, and until the high watermark passed it (for acks=all, what the response waits for). " +
			"follower_append: on a follower, from a fetch answer's arrival to its records appended (and synced for strata.durability=fsync). " +
			"producer_woken: from the high watermark passing a produce's last batch to the produce resuming. " +
			"response_written: from there to the response written to the connection.",
		Buckets: stageBuckets}, []string{"stage"})
	return &produceStages{vec: vec,
		append:         vec.WithLabelValues("append"),
		followerAppend: vec.WithLabelValues("follower_append"),
		respond:        vec.WithLabelValues("response_written"),
		woken:          vec.WithLabelValues("producer_woken"),
		answered:       vec.WithLabelValues(partition.StageAnswered.String()),
		followerAcked:  vec.WithLabelValues(partition.StageFollowerAcked.String()),
		committed:      vec.WithLabelValues(partition.StageCommitted.String()),
	}
}

// ProduceAppended times a Produce request's appends.
func (m *Broker) ProduceAppended(d time.Duration) {
	if m == nil {
		return
	}
	m.stages.append.Observe(d.Seconds())
}

// ProduceResponded times a Produce response from its records committing
// to its write.
func (m *Broker) ProduceResponded(d time.Duration) {
	if m == nil {
		return
	}
	m.stages.respond.Observe(d.Seconds())
}

// ProduceWoken times an acks=all produce's wake-up after its records
// committed.
func (m *Broker) ProduceWoken(d time.Duration) {
	if m == nil {
		return
	}
	m.stages.woken.Observe(d.Seconds())
}

// FollowerAppended times a follower's append of one fetch answer.
func (m *Broker) FollowerAppended(d time.Duration) {
	if m == nil {
		return
	}
	m.stages.followerAppend.Observe(d.Seconds())
}

// ReplicationStage is the partitions' Options.Observe: the replication
// stages of a leader's newest append.
func (m *Broker) ReplicationStage(s partition.Stage, d time.Duration) {
	if m == nil {
		return
	}
	switch s {
	case partition.StageAnswered:
		m.stages.answered.Observe(d.Seconds())
	case partition.StageFollowerAcked:
		m.stages.followerAcked.Observe(d.Seconds())
	case partition.StageCommitted:
		m.stages.committed.Observe(d.Seconds())
	}
}

package broker

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Partition and tier gauges, computed at scrape time from the partition
// states this broker last read and its local logs.
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
)

func describePartitions(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descPartitions, descLeaders, descUnderReplicated, descUnderMinISR, descReassigning,
		descOffline, descController, descTierLag, descTierBacklogSegments, descTierBacklogBytes, descS3Requests, descS3Bytes} {
		ch <- d
	}
}

// partitionCounts is one pass over the partition states.
type partitionCounts struct {
	hosted, leaders, underReplicated, underMinISR, reassigning, offline int
}

func (b *Broker) countPartitions() partitionCounts {
	var c partitionCounts
	b.mu.RLock()
	defer b.mu.RUnlock()
	for _, ts := range b.topics {
		for i, st := range ts.states {
			if ts.parts[i] != nil {
				c.hosted++
			}
			if st.Leader < 0 {
				c.offline++
			}
			if st.Leader != b.cfg.NodeID {
				continue
			}
			c.leaders++
			// Replicas being added by a reassignment do not count (Kafka
			// measures against the original replication factor).
			if len(st.ISR) < len(st.Replicas)-len(st.AddingReplicas) {
				c.underReplicated++
			}
			if st.Reassigning() {
				c.reassigning++
			}
			if int32(len(st.ISR)) < ts.cfg.MinInsyncReplicas {
				c.underMinISR++
			}
		}
	}
	return c
}

func (b *Broker) collectPartitions(ch chan<- prometheus.Metric) {
	m := b.metrics
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	if m != nil {
		b.forgetTopics()
	}
	c := b.countPartitions()
	isController := m != nil && m.controller.Load()
	if !isController {
		c.offline = 0
	}
	gauge(descPartitions, float64(c.hosted))
	gauge(descLeaders, float64(c.leaders))
	gauge(descUnderReplicated, float64(c.underReplicated))
	gauge(descUnderMinISR, float64(c.underMinISR))
	gauge(descReassigning, float64(c.reassigning))
	gauge(descOffline, float64(c.offline))
	gauge(descController, boolFloat(isController))

	lag, segs, bytes := b.tierBacklog(time.Now())
	gauge(descTierLag, lag.Seconds())
	gauge(descTierBacklogSegments, float64(segs))
	gauge(descTierBacklogBytes, float64(bytes))
	if m != nil && m.objects != nil {
		n := m.objects.Counts()
		for op, v := range map[string]int64{"put": n.Puts, "get": n.Gets, "list": n.Lists, "delete": n.Deletes} {
			ch <- prometheus.MustNewConstMetric(descS3Requests, prometheus.CounterValue, float64(v), op)
		}
		ch <- prometheus.MustNewConstMetric(descS3Bytes, prometheus.CounterValue, float64(n.PutBytes), "put")
		ch <- prometheus.MustNewConstMetric(descS3Bytes, prometheus.CounterValue, float64(n.GetBytes), "get")
	}
}

func boolFloat(v bool) float64 {
	if v {
		return 1
	}
	return 0
}

// tierBacklog walks the partitions this broker leads for closed, committed
// segments not yet uploaded. The wait of the oldest one per partition is
// measured from when a scrape (or an EMF line) first saw it waiting, so
// its resolution is the scrape interval; a partition whose tier manifest
// has not been read yet counts all its closed segments.
func (b *Broker) tierBacklog(now time.Time) (lag time.Duration, segs int, bytes int64) {
	m := b.metrics
	if m == nil || b.tiering == nil {
		return 0, 0, 0
	}
	oldest := map[tierKey]int64{}
	for _, lp := range b.tiering.led(false) {
		uploaded := lp.p.UploadedTo()
		if !lp.p.Tiered() {
			uploaded = -1
		}
		first := true
		for _, s := range lp.p.ClosedSegments() {
			if s.NextOffset <= uploaded {
				continue
			}
			segs++
			bytes += s.Size
			if first {
				oldest[lp.key] = s.BaseOffset
				first = false
			}
		}
	}
	m.tierMu.Lock()
	defer m.tierMu.Unlock()
	for k, base := range oldest {
		cur, ok := m.tierPending[k]
		if !ok || cur.base != base {
			cur = tierBacklog{base: base, since: now}
			m.tierPending[k] = cur
		}
		lag = max(lag, now.Sub(cur.since))
	}
	for k := range m.tierPending {
		if _, ok := oldest[k]; !ok {
			delete(m.tierPending, k)
		}
	}
	return lag, segs, bytes
}

package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Share groups (KIP-932): per share group and partition this broker
// leads, the backlog for autoscaling, read at scrape time from memory
// (the share partitions loaded here) and the local log; and the share
// state writes to the metastore and the offsets acknowledged, counted.

var (
	shareLabels        = []string{"group", "topic", "partition"}
	descShareAvailable = prometheus.NewDesc("strata_share_records_available",
		"Records of the share partition available for delivery: in flight and released, or not yet delivered (up to the high watermark).", shareLabels, nil)
	descShareAcquired = prometheus.NewDesc("strata_share_records_acquired",
		"Records of the share partition acquired by a member and not yet acknowledged.", shareLabels, nil)
	descShareArchived = prometheus.NewDesc("strata_share_records_archived",
		"Records archived (rejected or at the delivery limit) in the share partition's in-flight window.", shareLabels, nil)
	descShareOldest = prometheus.NewDesc("strata_share_oldest_available_age_seconds",
		"Age of the oldest available record of the share partition (its batch's timestamp), 0 when none is available.", shareLabels, nil)
	descShareWrites = prometheus.NewDesc("strata_share_state_writes_total",
		"Share partition state writes this broker made to the metastore.", nil, nil)
	descShareAcked = prometheus.NewDesc("strata_share_acknowledged_total",
		"Offsets acknowledged (any type) to the share partitions this broker leads.", nil, nil)
)

// ShareStat is one share partition's backlog.
type ShareStat struct {
	Group, Topic                  string
	Partition                     int32
	Available, Acquired, Archived int64
	OldestAgeSeconds              float64
}

// ShareSource is what the share gauges read, without the metastore.
type ShareSource interface {
	ShareBacklog() []ShareStat
	ShareCounts() (writes, acked int64)
}

type shareCollector struct{ src ShareSource }

func (c shareCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descShareAvailable, descShareAcquired, descShareArchived, descShareOldest, descShareWrites, descShareAcked} {
		ch <- d
	}
}

func (c shareCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.src.ShareBacklog() {
		l := []string{s.Group, s.Topic, strconv.Itoa(int(s.Partition))}
		ch <- prometheus.MustNewConstMetric(descShareAvailable, prometheus.GaugeValue, float64(s.Available), l...)
		ch <- prometheus.MustNewConstMetric(descShareAcquired, prometheus.GaugeValue, float64(s.Acquired), l...)
		ch <- prometheus.MustNewConstMetric(descShareArchived, prometheus.GaugeValue, float64(s.Archived), l...)
		ch <- prometheus.MustNewConstMetric(descShareOldest, prometheus.GaugeValue, s.OldestAgeSeconds, l...)
	}
	w, a := c.src.ShareCounts()
	ch <- prometheus.MustNewConstMetric(descShareWrites, prometheus.CounterValue, float64(w))
	ch <- prometheus.MustNewConstMetric(descShareAcked, prometheus.CounterValue, float64(a))
}

// CollectShares registers the share group gauges, read from src.
func (m *Broker) CollectShares(src ShareSource) {
	m.reg.MustRegister(shareCollector{src})
}

package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The log cleaner's series (compacted topics), read at scrape time from
// the cleaner's memory. Every replica cleans its own log, so each broker
// reports the replicas it hosts.
var (
	descCleanerRead = prometheus.NewDesc("strata_cleaner_read_bytes_total",
		"Bytes of log the cleaner read (mapping keys and rewriting segments).", nil, nil)
	descCleanerWritten = prometheus.NewDesc("strata_cleaner_written_bytes_total",
		"Bytes of cleaned segments the cleaner wrote.", nil, nil)
	descCleanerPasses = prometheus.NewDesc("strata_cleaner_passes_total",
		"Cleaning passes completed.", nil, nil)
	descCleanerDirtyBytes = prometheus.NewDesc("strata_cleaner_dirty_bytes_total",
		"Bytes of dirty (not yet compacted) log the cleaner processed; over strata_cleaner_busy_seconds_total, its throughput.", nil, nil)
	descCleanerBusy = prometheus.NewDesc("strata_cleaner_busy_seconds_total",
		"Seconds the cleaner threads spent in cleaning passes.", nil, nil)
	descCleanerDirty = prometheus.NewDesc("strata_cleaner_dirty_ratio",
		"Per compacted replica: bytes not yet cleaned over all cleanable bytes, as of the cleaner's last look.",
		[]string{"topic", "partition"}, nil)
	descCleanerSince = prometheus.NewDesc("strata_cleaner_seconds_since_last_clean",
		"Per compacted replica: seconds since its last completed cleaning pass (since the broker started if none yet).",
		[]string{"topic", "partition"}, nil)
	descCleanerUncleanable = prometheus.NewDesc("strata_cleaner_uncleanable_partitions",
		"Compacted replicas the cleaner gave up on after a failure (see the broker log); cleared when the partition is reopened.", nil, nil)
)

// CleanerStats is what the cleaner reports.
type CleanerStats struct {
	ReadBytes, WrittenBytes, Passes int64
	DirtyBytes                      int64
	BusySeconds                     float64
	Partitions                      []CleanerPartition
}

// CleanerPartition is one compacted replica's state.
type CleanerPartition struct {
	Topic       string
	Partition   int32
	DirtyRatio  float64
	LastClean   time.Time // zero: not since the broker started
	Uncleanable bool
}

// CollectCleaner registers the cleaner's series, read from stats at every
// scrape (memory only); now is the broker's clock.
func (m *Broker) CollectCleaner(stats func() CleanerStats, now func() time.Time) {
	m.reg.MustRegister(&cleanerCollector{stats: stats, now: now, started: now()})
}

type cleanerCollector struct {
	stats   func() CleanerStats
	now     func() time.Time
	started time.Time
}

func (c *cleanerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descCleanerRead, descCleanerWritten, descCleanerPasses, descCleanerDirtyBytes, descCleanerBusy, descCleanerDirty, descCleanerSince, descCleanerUncleanable} {
		ch <- d
	}
}

func (c *cleanerCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.stats()
	ch <- prometheus.MustNewConstMetric(descCleanerRead, prometheus.CounterValue, float64(s.ReadBytes))
	ch <- prometheus.MustNewConstMetric(descCleanerWritten, prometheus.CounterValue, float64(s.WrittenBytes))
	ch <- prometheus.MustNewConstMetric(descCleanerPasses, prometheus.CounterValue, float64(s.Passes))
	ch <- prometheus.MustNewConstMetric(descCleanerDirtyBytes, prometheus.CounterValue, float64(s.DirtyBytes))
	ch <- prometheus.MustNewConstMetric(descCleanerBusy, prometheus.CounterValue, s.BusySeconds)
	unclean := 0
	for _, p := range s.Partitions {
		part := strconv.Itoa(int(p.Partition))
		ch <- prometheus.MustNewConstMetric(descCleanerDirty, prometheus.GaugeValue, p.DirtyRatio, p.Topic, part)
		since := c.started
		if p.LastClean.After(since) {
			since = p.LastClean
		}
		ch <- prometheus.MustNewConstMetric(descCleanerSince, prometheus.GaugeValue, c.now().Sub(since).Seconds(), p.Topic, part)
		if p.Uncleanable {
			unclean++
		}
	}
	ch <- prometheus.MustNewConstMetric(descCleanerUncleanable, prometheus.GaugeValue, float64(unclean))
}

package broker

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

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

// Collector returns the broker's Prometheus collector: consumer group lag,
// committed offsets and members for the groups this broker coordinates
// (each group is reported by exactly one broker, its coordinator).
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
}

func (c *brokerCollector) Collect(ch chan<- prometheus.Metric) {
	b := c.b
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
		seeds = append(seeds, br.Endpoint)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ClientID("strata-metrics"))
	if err != nil {
		return nil, err
	}
	c.adm = kadm.NewClient(cl)
	context.AfterFunc(c.b.ctx, cl.Close)
	return c.adm, nil
}

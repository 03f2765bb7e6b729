package broker

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratamq/strata/brokerfleet/internal/metrics"
	"github.com/stratamq/strata/pkg/segment"
)

// metricsSource is what the scrape-time gauges read from this broker, all
// in memory.
type metricsSource struct{ b *Broker }

func (m metricsSource) Partitions() metrics.PartitionCounts {
	return metrics.CountPartitions(m.b.cat.Snapshot())
}

func (m metricsSource) TopicExists(name string) bool { return m.b.cat.Snapshot().Topic(name) != nil }

func (m metricsSource) TierBacklog() (time.Duration, int, int64) {
	if m.b.tier == nil {
		return 0, 0, 0
	}
	return m.b.tier.Backlog()
}

func (m metricsSource) CoordinatorShards() int { return len(m.b.coord.Shards()) }

func (m metricsSource) TransactionsOngoing() int { return m.b.txn.Ongoing() }

func (m metricsSource) PartitionTransactions() (open int, maxLag int64) {
	for _, l := range m.b.cat.Snapshot().Led(nil) {
		if l.Part == nil {
			continue
		}
		open += len(l.Part.OpenTxns())
		maxLag = max(maxLag, l.Part.HighWatermark()-l.Part.LastStableOffset())
	}
	return open, maxLag
}

// groupStatsTimeout bounds one refresh of the group gauges.
const groupStatsTimeout = 5 * time.Second

// refreshGroupStats refreshes the consumer group gauges every
// GroupStatsInterval, away from the scrape: the groups this broker
// coordinates, their committed offsets, and the partitions' high
// watermarks asked of their leaders through a Kafka client of this
// cluster (the leaders may be other brokers). Groups nobody uses are not
// in the coordinator's memory, so each round also loads one owned shard's
// groups from the metastore (a shard just acquired at once): one query per
// round, whatever the number of groups, and every group is reported within
// a round per owned shard.
func (b *Broker) refreshGroupStats(ctx context.Context) {
	var adm *kadm.Client
	t := b.clock.NewTicker(b.cfg.GroupStatsInterval)
	defer t.Stop()
	loaded := map[int32]bool{}
	next := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		rctx, cancel := context.WithTimeout(ctx, groupStatsTimeout)
		owned := b.coord.Shards()
		var load []int32
		for _, s := range owned {
			if !loaded[s] {
				load = append(load, s)
			}
		}
		if len(load) == 0 && len(owned) > 0 {
			next = (next + 1) % len(owned)
			load = append(load, owned[next])
		}
		clear(loaded)
		for _, s := range owned {
			loaded[s] = true
		}
		for _, s := range load {
			if err := b.coord.LoadShard(rctx, s); err != nil && ctx.Err() == nil {
				b.log.Warn("metrics: load groups", "shard", s, "err", err)
				loaded[s] = false
			}
		}
		snaps := b.coord.Snapshots()
		// Partitions this broker leads are read in memory; only the rest
		// are asked of their leaders (none, on a one-broker cluster).
		cat := b.cat.Snapshot()
		local := map[tp]int64{}
		topics := map[string]bool{}
		for _, s := range snaps {
			for _, o := range s.Offsets {
				if p, _ := leaderOf(cat, o.Topic, o.Partition); p != nil {
					local[tp{o.Topic, o.Partition}] = p.HighWatermark()
				} else {
					topics[o.Topic] = true
				}
			}
		}
		var ends kadm.ListedOffsets
		if len(topics) > 0 {
			if adm == nil {
				adm = b.clusterAdmin()
			}
			if adm != nil {
				names := make([]string, 0, len(topics))
				for n := range topics {
					names = append(names, n)
				}
				var err error
				if ends, err = adm.ListEndOffsets(rctx, names...); err != nil && ctx.Err() == nil {
					b.log.Warn("metrics: list end offsets", "err", err)
				}
			}
		}
		cancel()
		stats := make([]metrics.GroupStat, 0, len(snaps))
		for _, s := range snaps {
			g := metrics.GroupStat{Group: s.Group, State: s.State, Type: s.Type, Epoch: s.Epoch, Members: s.Members}
			for _, o := range s.Offsets {
				end, ok := local[tp{o.Topic, o.Partition}]
				if !ok {
					end = -1
				}
				if e, ok := ends.Lookup(o.Topic, o.Partition); ok && e.Err == nil {
					end = e.Offset
				}
				g.Offsets = append(g.Offsets, metrics.GroupOffset{Topic: o.Topic, Partition: o.Partition, Committed: o.Offset, End: end})
			}
			stats = append(stats, g)
		}
		b.metrics.SetGroups(stats)
	}
}

// clusterAdmin returns an admin client of this cluster over the
// inter-broker listener, closed with the broker; nil if it cannot be made.
func (b *Broker) clusterAdmin() *kadm.Client {
	var seeds []string
	for _, br := range b.clusterBrokers(b.cat.Snapshot()) {
		seeds = append(seeds, b.cfg.Security.InterBrokerEndpoint(br))
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...), kgo.ClientID("strata-metrics")}, b.cfg.Security.ClientOpts()...)...)
	if err != nil {
		b.log.Warn("metrics: cluster client", "err", err)
		return nil
	}
	context.AfterFunc(b.ctx, cl.Close)
	return kadm.NewClient(cl)
}

// tp names a partition.
type tp struct {
	topic     string
	partition int32
}

// ShareBacklog is the backlog of every share partition loaded here whose
// partition this broker still leads; the oldest available record's age
// comes from its batch's timestamp in the local log.
func (m metricsSource) ShareBacklog() []metrics.ShareStat {
	s := m.b.cat.Snapshot()
	var out []metrics.ShareStat
	for _, sp := range m.b.shares.Loaded() {
		k := sp.Key()
		t := s.TopicByID(k.Topic)
		if t == nil {
			continue
		}
		p, code := leaderOf(s, t.Meta.Name, k.Partition)
		if code != 0 || p.LeaderEpoch() != sp.LeaderEpoch() {
			continue
		}
		st, first := sp.Backlog(p.HighWatermark())
		ms := metrics.ShareStat{Group: k.Group, Topic: t.Meta.Name, Partition: k.Partition,
			Available: int64(st.Available), Acquired: int64(st.Acquired), Archived: int64(st.Archived)}
		if first >= 0 {
			if data, err := p.Read(nil, first, 1, true); err == nil {
				_ = segment.Split(data, func(h segment.Header, _ []byte) error {
					if ms.OldestAgeSeconds == 0 && h.FirstTimestamp > 0 {
						ms.OldestAgeSeconds = max(time.Since(time.UnixMilli(h.FirstTimestamp)).Seconds(), 0)
					}
					return nil
				})
			}
		}
		out = append(out, ms)
	}
	return out
}

// ShareCounts is the share state writes and acknowledged offsets so far.
func (m metricsSource) ShareCounts() (writes, acked int64) {
	return m.b.shares.Writes(), m.b.shares.Acked()
}

package dlqconsole

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The cluster pages: brokers (the index) and topics, all through the Kafka
// protocol (Metadata, ListOffsets, DescribeConfigs, ApiVersions).

// maxListed bounds the rows of the topic and group lists.
const maxListed = 1000

// BrokersPage is the index: the cluster and its brokers.
type BrokersPage struct {
	ClusterID       string
	Controller      int32
	Brokers         []BrokerRow
	Topics          int
	Partitions      int
	UnderReplicated int // partitions whose ISR is smaller than their replicas
	Offline         int // partitions without a leader
}

// BrokerRow is one live broker.
type BrokerRow struct {
	ID         int32
	Host       string
	Port       int32
	Rack       string
	Controller bool
	Leaders    int // partitions it leads
	Replicas   int // partition replicas it holds
	// Health is the answer to an ApiVersions request sent to this broker
	// alone: "ok" and its round trip, or the error.
	Healthy bool
	Health  string
}

func (c *Console) brokersPage(ctx context.Context) (BrokersPage, error) {
	md, err := c.adm.Metadata(ctx)
	if err != nil {
		return BrokersPage{}, kafkaError("metadata", err)
	}
	p := BrokersPage{ClusterID: md.Cluster, Controller: md.Controller}
	leaders, replicas := map[int32]int{}, map[int32]int{}
	for _, t := range md.Topics {
		if errors.Is(t.Err, kerr.UnknownTopicOrPartition) {
			continue // a missing topic asked for before, from kadm's metadata cache
		}
		p.Topics++
		for _, pd := range t.Partitions {
			p.Partitions++
			if pd.Leader < 0 {
				p.Offline++
			} else {
				leaders[pd.Leader]++
			}
			if len(pd.ISR) < len(pd.Replicas) {
				p.UnderReplicated++
			}
			for _, r := range pd.Replicas {
				replicas[r]++
			}
		}
	}
	for _, b := range md.Brokers {
		row := BrokerRow{ID: b.NodeID, Host: b.Host, Port: b.Port, Controller: b.NodeID == md.Controller,
			Leaders: leaders[b.NodeID], Replicas: replicas[b.NodeID]}
		if b.Rack != nil {
			row.Rack = *b.Rack
		}
		p.Brokers = append(p.Brokers, row)
	}
	slices.SortFunc(p.Brokers, func(a, b BrokerRow) int { return int(a.ID) - int(b.ID) })
	var wg sync.WaitGroup
	for i := range p.Brokers {
		wg.Go(func() {
			row := &p.Brokers[i]
			hctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			start := time.Now()
			_, err := c.producer.Broker(int(row.ID)).Request(hctx, kmsg.NewPtrApiVersionsRequest())
			if err != nil {
				row.Health = "unreachable: " + err.Error()
				return
			}
			row.Healthy, row.Health = true, fmt.Sprintf("ok (%.1f ms)", float64(time.Since(start).Microseconds())/1000)
		})
	}
	wg.Wait()
	return p, nil
}

// TopicRow is one topic in the topic list.
type TopicRow struct {
	Name            string
	Internal        bool
	Partitions      int
	Replication     int
	UnderReplicated int
	Offline         int
	Messages        int64 // sum over partitions of end minus start offset
}

// TopicsPage is the topic list.
type TopicsPage struct {
	Topics    []TopicRow
	Truncated int // topics left out past maxListed
}

func (c *Console) topicsPage(ctx context.Context) (TopicsPage, error) {
	td, err := c.adm.ListTopicsWithInternal(ctx)
	if err != nil {
		return TopicsPage{}, kafkaError("list topics", err)
	}
	var names []string
	for n, t := range td {
		// kadm's metadata cache answers topics asked for before, missing ones too.
		if !errors.Is(t.Err, kerr.UnknownTopicOrPartition) {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	var p TopicsPage
	if len(names) > maxListed {
		p.Truncated = len(names) - maxListed
		names = names[:maxListed]
	}
	starts, serr := c.adm.ListStartOffsets(ctx, names...)
	ends, eerr := c.adm.ListEndOffsets(ctx, names...)
	for _, n := range names {
		t := td[n]
		row := TopicRow{Name: n, Internal: t.IsInternal, Partitions: len(t.Partitions), Messages: -1}
		if serr == nil && eerr == nil {
			row.Messages = 0
		}
		for _, pd := range t.Partitions {
			row.Replication = max(row.Replication, len(pd.Replicas))
			if pd.Leader < 0 {
				row.Offline++
			}
			if len(pd.ISR) < len(pd.Replicas) {
				row.UnderReplicated++
			}
			if row.Messages >= 0 {
				s, sok := starts.Lookup(n, pd.Partition)
				e, eok := ends.Lookup(n, pd.Partition)
				if sok && eok && s.Err == nil && e.Err == nil {
					row.Messages += max(0, e.Offset-s.Offset)
				}
			}
		}
		p.Topics = append(p.Topics, row)
	}
	return p, nil
}

// PartitionRow is one partition of a topic.
type PartitionRow struct {
	Partition       int32
	Leader          int32 // -1: none (offline)
	LeaderEpoch     int32
	Replicas, ISR   []int32
	Offline         []int32
	UnderReplicated bool
	Start, End      int64 // log start offset and high watermark; -1: unknown
	Err             string
	// Sizes, as the brokers report them; empty when unknown.
	OnDisk   string // the leader's log, and all replicas' together
	InS3     string // what the tier manifest references, and in how many segments
	TierNote string
}

// ConfigRow is one topic config.
type ConfigRow struct {
	Name, Value string
	Source      string // DEFAULT_CONFIG, DYNAMIC_TOPIC_CONFIG, ...
	Default     bool
	Sensitive   bool
}

// TopicPage is one topic: its partitions and configs.
type TopicPage struct {
	Name       string
	Internal   bool
	Partitions []PartitionRow
	Configs    []ConfigRow
	ConfigErr  string
	SizeNote   string // why sizes are missing or incomplete
	OnDisk     string // all partitions' replicas together
	InS3       string // all partitions together
}

// topicDetail describes topic, or answers 404 when it does not exist.
func (c *Console) topicDetail(ctx context.Context, topic string) (kadm.TopicDetail, error) {
	if topic == "" || len(topic) > 249 {
		return kadm.TopicDetail{}, errorf(http.StatusBadRequest, "invalid topic name %q", topic)
	}
	td, err := c.adm.ListTopicsWithInternal(ctx, topic)
	if err != nil {
		return kadm.TopicDetail{}, kafkaError("describe "+topic, err)
	}
	t, ok := td[topic]
	if !ok || errors.Is(t.Err, kerr.UnknownTopicOrPartition) {
		return kadm.TopicDetail{}, errorf(http.StatusNotFound, "unknown topic %q", topic)
	}
	if t.Err != nil {
		return kadm.TopicDetail{}, kafkaError("describe "+topic, t.Err)
	}
	return t, nil
}

func (c *Console) topicPage(ctx context.Context, topic string) (TopicPage, error) {
	t, err := c.topicDetail(ctx, topic)
	if err != nil {
		return TopicPage{}, err
	}
	p := TopicPage{Name: topic, Internal: t.IsInternal}
	starts, _ := c.adm.ListStartOffsets(ctx, topic)
	ends, _ := c.adm.ListEndOffsets(ctx, topic)
	for _, pd := range t.Partitions.Sorted() {
		row := PartitionRow{Partition: pd.Partition, Leader: pd.Leader, LeaderEpoch: pd.LeaderEpoch,
			Replicas: pd.Replicas, ISR: pd.ISR, Offline: pd.OfflineReplicas,
			UnderReplicated: len(pd.ISR) < len(pd.Replicas), Start: -1, End: -1}
		if pd.Err != nil {
			row.Err = pd.Err.Error()
		}
		if s, ok := starts.Lookup(topic, pd.Partition); ok && s.Err == nil {
			row.Start = s.Offset
		}
		if e, ok := ends.Lookup(topic, pd.Partition); ok && e.Err == nil {
			row.End = e.Offset
		}
		p.Partitions = append(p.Partitions, row)
	}
	c.addSizes(ctx, &p)
	rcs, err := c.adm.DescribeTopicConfigs(ctx, topic)
	if err == nil && len(rcs) == 1 && rcs[0].Err != nil {
		err = rcs[0].Err
	}
	if err != nil {
		p.ConfigErr = err.Error()
		return p, nil
	}
	for _, rc := range rcs {
		for _, cf := range rc.Configs {
			row := ConfigRow{Name: cf.Key, Source: cf.Source.String(), Sensitive: cf.Sensitive,
				Default: cf.Source == kmsg.ConfigSourceDefaultConfig || cf.Source == kmsg.ConfigSourceStaticBrokerConfig}
			switch {
			case cf.Sensitive:
				row.Value = "(sensitive)"
			case cf.Value != nil:
				row.Value = *cf.Value
			default:
				row.Value = "(null)"
			}
			p.Configs = append(p.Configs, row)
		}
	}
	slices.SortFunc(p.Configs, func(a, b ConfigRow) int { return strings.Compare(a.Name, b.Name) })
	return p, nil
}

// ids joins broker ids for the templates: "0, 1, 2".
func ids(v []int32) string {
	s := make([]string, len(v))
	for i, id := range v {
		s[i] = fmt.Sprint(id)
	}
	return strings.Join(s, ", ")
}

// addSizes fills p's sizes from the brokers.
func (c *Console) addSizes(ctx context.Context, p *TopicPage) {
	md, err := c.adm.BrokerMetadata(ctx)
	if err != nil {
		p.SizeNote = "sizes unknown: " + err.Error()
		return
	}
	var hosts []string
	for _, b := range md.Brokers {
		hosts = append(hosts, b.Host)
	}
	sizes, note := c.sizesOf(ctx, p.Name, hosts)
	p.SizeNote = note
	if sizes == nil {
		return
	}
	var disk, s3 int64
	tiered := false
	for i := range p.Partitions {
		row := &p.Partitions[i]
		s, ok := sizes[row.Partition]
		if !ok {
			continue
		}
		disk += s.allBytes
		row.OnDisk = fmt.Sprintf("%s (%d replica(s): %s)", humanBytes(s.leaderBytes), s.replicas, humanBytes(s.allBytes))
		if s.tiered {
			tiered = true
			s3 += s.tierBytes
			row.InS3 = fmt.Sprintf("%s in %d segment(s)", humanBytes(s.tierBytes), s.tierSegments)
		}
	}
	p.OnDisk = humanBytes(disk)
	if tiered {
		p.InS3 = humanBytes(s3)
	}
}

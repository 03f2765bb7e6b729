package broker_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/broker"
	"github.com/stratamq/strata/brokerfleet/internal/brokertest"
)

// ackGaps produces to every partition of a topic without pause and
// records, per partition, the longest time between two acknowledgements.
type ackGaps struct {
	mu   sync.Mutex
	last map[int32]time.Time
	max  map[int32]time.Duration
	errs int
}

func (g *ackGaps) ack(p int32, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if err != nil {
		g.errs++
		return
	}
	now := time.Now()
	if prev, ok := g.last[p]; ok {
		g.max[p] = max(g.max[p], now.Sub(prev))
	}
	g.last[p] = now
}

func (g *ackGaps) longest() (int32, time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var worst int32
	var d time.Duration
	for p, m := range g.max {
		if m > d {
			worst, d = p, m
		}
	}
	return worst, d
}

// A broker the metastore has just made leader accepts writes at once: it
// catches its own view up instead of answering NOT_LEADER_OR_FOLLOWER
// until its next watch poll (franz-go then waited up to 5 s for its next
// metadata refresh). 20 leader changes, with the production watch
// interval: no partition goes more than a second without an ack.
func TestNoStallAfterLeaderChanges(t *testing.T) {
	meta := brokertest.NewMeta(t)
	var brokers []*brokertest.Broker
	for id := int32(0); id < 3; id++ {
		brokers = append(brokers, brokertest.Start(t, func(c *broker.Config) {
			c.Meta, c.NodeID = meta, id
			c.WatchInterval = broker.DefaultConfig().WatchInterval
		}))
	}
	for _, b := range brokers {
		waitFor(t, "all brokers registered", func() bool { return len(metadataOnConn(t, b.Addr).Brokers) == 3 })
	}
	const topicName, parts = "moving", 3
	brokertest.CreateTopicRF(t, brokers[0].Addr, topicName, parts, 3, nil)
	adm := brokertest.Admin(t, brokers[0].Addr)
	prod := brokertest.Client(t, brokers[0].Addr, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MaxBufferedRecords(64))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := &ackGaps{last: map[int32]time.Time{}, max: map[int32]time.Duration{}}
	var wg sync.WaitGroup
	for p := int32(0); p < parts; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				r := prod.ProduceSync(ctx, &kgo.Record{Topic: topicName, Partition: p, Value: []byte("v")})
				if ctx.Err() == nil {
					g.ack(p, r.FirstErr())
				}
			}
		}()
	}
	waitFor(t, "acks on every partition", func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.last) == parts
	})

	// 20 leader changes: make another in-sync replica preferred (a
	// reordering completes at once), then elect it. (Metadata may come
	// from a broker a watch interval behind: an election found not needed
	// is tried again.)
	for i := 0; i < 20; {
		p := int32(i % parts)
		// From a broker's own answer: kadm's Metadata may be served from
		// the client's cache.
		var pd kmsg.MetadataResponseTopicPartition
		for _, mt := range metadataOnConn(t, brokers[0].Addr).Topics {
			if *mt.Topic == topicName {
				pd = mt.Partitions[p]
			}
		}
		replicas := slices.Clone(pd.Replicas)
		j := slices.Index(replicas, pd.Leader)
		next := replicas[(j+1)%len(replicas)]
		order := []int32{next}
		for _, r := range replicas {
			if r != next {
				order = append(order, r)
			}
		}
		req := kadm.AlterPartitionAssignmentsReq{}
		req.Assign(topicName, p, order)
		ar, err := adm.AlterPartitionAssignments(ctx, req)
		require.NoError(t, err)
		require.NoError(t, ar.Error())
		set := kadm.TopicsSet{}
		set.Add(topicName, p)
		er, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, set)
		require.NoError(t, err)
		time.Sleep(400 * time.Millisecond)
		if errors.Is(er[topicName][p].Err, kerr.ElectionNotNeeded) {
			continue
		}
		require.NoError(t, er[topicName][p].Err, "elect %d", next)
		i++
	}
	time.Sleep(time.Second)
	cancel()
	wg.Wait()
	worst, gap := g.longest()
	t.Logf("longest ack gap over 20 leader changes: %v (partition %d); %d produce errors", gap, worst, g.errs)
	require.Less(t, gap, time.Second, fmt.Sprintf("partition %d went %v without an ack", worst, gap))
}

// A topic's first writes are acknowledged at once: every broker has
// applied the topic (and its leaders their leadership) by the time
// CreateTopics answers. 36 new topics, the first record of each timed
// from the creation's answer.
func TestNoStallOnNewTopics(t *testing.T) {
	meta := brokertest.NewMeta(t)
	var brokers []*brokertest.Broker
	var seeds []string
	for id := int32(0); id < 3; id++ {
		b := brokertest.Start(t, func(c *broker.Config) {
			c.Meta, c.NodeID = meta, id
			c.WatchInterval = broker.DefaultConfig().WatchInterval
		})
		brokers = append(brokers, b)
		seeds = append(seeds, b.Addr)
	}
	for _, b := range brokers {
		waitFor(t, "all brokers registered", func() bool { return len(metadataOnConn(t, b.Addr).Brokers) == 3 })
	}
	adm := brokertest.Admin(t, seeds[0])
	prod := brokertest.Client(t, seeds[1], kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var worst time.Duration
	for i := range 36 {
		name := fmt.Sprintf("fresh-%d", i)
		resp, err := adm.CreateTopic(ctx, 3, 3, nil, name)
		require.NoError(t, err)
		require.NoError(t, resp.Err)
		start := time.Now()
		for p := int32(0); p < 3; p++ {
			require.NoError(t, prod.ProduceSync(ctx, &kgo.Record{Topic: name, Partition: p, Value: []byte("first")}).FirstErr())
		}
		worst = max(worst, time.Since(start))
	}
	t.Logf("longest time to the first acks of a new topic's 3 partitions: %v", worst)
	require.Less(t, worst, time.Second)
}

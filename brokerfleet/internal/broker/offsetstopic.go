package broker

// The __consumer_offsets copy of committed offsets (internal/offsetlog),
// when Config.OffsetsTopicPartitions is set: the broker holding the
// controller lease creates the topic once enough brokers are live for its
// replication factor, and every broker publishes the commits of the
// groups it coordinates through a Kafka client of the cluster (over the
// inter-broker listener, as the broker). The metastore stays the only
// truth; nothing reads the topic back.

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratamq/strata/brokerfleet/internal/offsetlog"
	"github.com/stratamq/strata/pkg/metastore"
)

// offsetsTopic publishes commits once the topic exists.
type offsetsTopic struct {
	b    *Broker
	feed atomic.Pointer[offsetlog.Feed] // nil until the topic exists here
}

// committed is the coordinator's hook: it runs after offsets are stored,
// with the group's lock held, and never blocks.
func (o *offsetsTopic) committed(group string, offs []metastore.Offset) {
	o.feed.Load().Committed(group, offs)
}

// exists reports whether this broker's view has the topic.
func (o *offsetsTopic) exists() bool { return o.b.cat.Snapshot().Topic(offsetlog.Topic) != nil }

// run creates the topic (on the controller) and starts the feed once the
// topic is in this broker's view.
func (o *offsetsTopic) run(ctx context.Context) {
	b := o.b
	t := b.clock.NewTicker(time.Second)
	defer t.Stop()
	for {
		s := b.cat.Snapshot()
		switch {
		case s.Topic(offsetlog.Topic) != nil:
			o.start(ctx)
			return
		case b.controlling.Load() && len(b.clusterBrokers(s)) >= int(b.cfg.DefaultReplicationFactor):
			cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			_, err := b.admin.createTopic(cctx, offsetlog.Topic, b.cfg.OffsetsTopicPartitions, -1, nil, false)
			cancel()
			if err != nil && !errors.Is(err, errTopicExists) && ctx.Err() == nil {
				b.log.Warn("create the offsets topic", "topic", offsetlog.Topic, "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// start makes the feed's client, closed with the broker.
func (o *offsetsTopic) start(ctx context.Context) {
	b := o.b
	var seeds []string
	for _, br := range b.clusterBrokers(b.cat.Snapshot()) {
		seeds = append(seeds, b.cfg.Security.InterBrokerEndpoint(br))
	}
	parts := b.cat.Snapshot().Topic(offsetlog.Topic).Meta.Partitions
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.SeedBrokers(seeds...), kgo.ClientID("strata-offsets"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5 * time.Millisecond),
		kgo.MaxBufferedRecords(10000),
	}, b.cfg.Security.ClientOpts()...)...)
	if err != nil {
		b.log.Warn("offsets topic: client", "err", err)
		return
	}
	context.AfterFunc(ctx, cl.Close)
	o.feed.Store(offsetlog.New(ctx, cl, parts, o.exists, b.log))
	b.log.Info("publishing committed offsets", "topic", offsetlog.Topic, "partitions", parts)
}

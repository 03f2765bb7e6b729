package broker

// The __consumer_offsets copy of committed offsets (internal/offsetlog),
// when Config.OffsetsTopicPartitions is set: the broker holding the
// controller lease creates the topic once enough brokers are live for its
// replication factor, and every broker publishes the commits of the
// groups it coordinates through a Kafka client of the cluster (over the
// inter-broker listener, as the broker), made at the first commit after
// the topic is in its view. The metastore stays the only truth; nothing
// reads the topic back.

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratamq/strata/brokerfleet/internal/offsetlog"
	"github.com/stratamq/strata/pkg/metastore"
)

// offsetsTopic publishes commits once the topic exists.
type offsetsTopic struct {
	b *Broker
	// mu guards feed, made once (nil until the topic is in this broker's
	// view and a commit came). Taken under a group's lock; it never waits
	// on anything but the client's construction, which does no I/O.
	mu   sync.Mutex
	feed *offsetlog.Feed
}

// committed is the coordinator's hook: it runs after offsets are stored,
// with the group's lock held, and never blocks.
func (o *offsetsTopic) committed(group string, offs []metastore.Offset) {
	if o.b.cfg.OffsetsTopicPartitions <= 0 {
		return
	}
	o.mu.Lock()
	if o.feed == nil && o.exists() {
		o.feed = o.newFeed()
	}
	f := o.feed
	o.mu.Unlock()
	f.Committed(group, offs)
}

// exists reports whether this broker's view has the topic.
func (o *offsetsTopic) exists() bool { return o.b.cat.Snapshot().Topic(offsetlog.Topic) != nil }

// create makes the topic: on the controller, once enough brokers are live
// for the default replication factor, until it is in this broker's view.
func (o *offsetsTopic) create(ctx context.Context) {
	b := o.b
	t := b.clock.NewTicker(time.Second)
	defer t.Stop()
	for {
		s := b.cat.Snapshot()
		switch {
		case s.Topic(offsetlog.Topic) != nil:
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

// newFeed makes the feed and its client, closed with the broker; nil
// (publishing nothing) if the client cannot be made.
func (o *offsetsTopic) newFeed() *offsetlog.Feed {
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
		return nil
	}
	context.AfterFunc(b.ctx, cl.Close)
	b.log.Info("publishing committed offsets", "topic", offsetlog.Topic, "partitions", parts)
	return offsetlog.New(b.ctx, cl, parts, o.exists, b.log)
}

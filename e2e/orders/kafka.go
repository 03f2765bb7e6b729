package orders

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratamq/strata/pkg/retry"
)

// GroupTiming are the consumer group timeouts of the pipeline's consumers.
// A member killed with SIGKILL holds its partitions until its session
// times out, so short sessions make a crash cost seconds, not a minute.
type GroupTiming struct {
	Session   time.Duration // kgo.SessionTimeout (the broker's minimum is 6 s by default)
	Heartbeat time.Duration // kgo.HeartbeatInterval
	Rebalance time.Duration // kgo.RebalanceTimeout
}

// DefaultGroupTiming is a 6 s session, 1 s heartbeats, a 15 s rebalance.
func DefaultGroupTiming() GroupTiming {
	return GroupTiming{Session: 6 * time.Second, Heartbeat: time.Second, Rebalance: 15 * time.Second}
}

func (g GroupTiming) opts() []kgo.Opt {
	return []kgo.Opt{kgo.SessionTimeout(g.Session), kgo.HeartbeatInterval(g.Heartbeat), kgo.RebalanceTimeout(g.Rebalance)}
}

// CreateTopics creates orders, orders.retry and orders.dlq (those that do
// not exist yet) with partitions partitions and rf replicas each; orders
// gets min.insync.replicas=2 when rf allows it.
func CreateTopics(ctx context.Context, adm *kadm.Client, partitions int32, rf int16) error {
	minISR := "1"
	if rf >= 3 {
		minISR = "2"
	}
	for _, t := range []string{Topic, retry.RetryTopic(Topic), retry.DLQTopic(Topic)} {
		cfg := map[string]*string{"min.insync.replicas": kadm.StringPtr(minISR)}
		resp, err := adm.CreateTopic(ctx, partitions, rf, cfg, t)
		if err == nil {
			err = resp.Err
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("orders: create topic %s: %w", t, err)
		}
	}
	return waitTopics(ctx, adm, 30*time.Second, Topic, retry.RetryTopic(Topic), retry.DLQTopic(Topic))
}

// waitTopics waits until every partition of topics has a leader and its
// end offset can be listed.
func waitTopics(ctx context.Context, adm *kadm.Client, d time.Duration, topics ...string) error {
	deadline := time.Now().Add(d)
	for {
		err := topicsReady(ctx, adm, topics)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("orders: topics not ready after %v: %w", d, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func topicsReady(ctx context.Context, adm *kadm.Client, topics []string) error {
	md, err := adm.Metadata(ctx, topics...)
	if err != nil {
		return err
	}
	for _, t := range topics {
		td, ok := md.Topics[t]
		switch {
		case !ok:
			return fmt.Errorf("no topic %s", t)
		case td.Err != nil:
			return fmt.Errorf("%s: %w", t, td.Err)
		}
		for _, p := range td.Partitions {
			if p.Err != nil || p.Leader < 0 {
				return fmt.Errorf("%s/%d: no leader (%v)", t, p.Partition, p.Err)
			}
		}
	}
	ends, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return err
	}
	return ends.Error()
}

// Lag is how many records of topic group has not committed: the sum over
// partitions of the log end offset minus the committed offset (the whole
// partition where nothing is committed).
func Lag(ctx context.Context, adm *kadm.Client, group, topic string) (int64, error) {
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("orders: end offsets of %s: %w", topic, err)
	}
	if err := ends.Error(); err != nil {
		return 0, fmt.Errorf("orders: end offsets of %s: %w", topic, err)
	}
	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return 0, fmt.Errorf("orders: offsets of group %s: %w", group, err)
	}
	if err := committed.Error(); err != nil {
		return 0, fmt.Errorf("orders: offsets of group %s: %w", group, err)
	}
	var lag int64
	ends.Each(func(e kadm.ListedOffset) {
		at := int64(0)
		if c, ok := committed.Lookup(e.Topic, e.Partition); ok && c.At >= 0 {
			at = c.At
		}
		lag += max(e.Offset-at, 0)
	})
	return lag, nil
}

// EndSum is the sum of topic's log end offsets: how many records it ever
// took (retention aside).
func EndSum(ctx context.Context, adm *kadm.Client, topic string) (int64, error) {
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("orders: end offsets of %s: %w", topic, err)
	}
	if err := ends.Error(); err != nil {
		return 0, fmt.Errorf("orders: end offsets of %s: %w", topic, err)
	}
	var n int64
	ends.Each(func(e kadm.ListedOffset) { n += e.Offset })
	return n, nil
}

package retry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Handler processes one record; an error routes it to the retry topic.
type Handler func(ctx context.Context, r *kgo.Record) error

// BatchHandler processes the records of one partition from one poll, in
// offset order; an error routes all of them to the retry topic.
type BatchHandler func(ctx context.Context, rs []*kgo.Record) error

// GroupOpts are the client options a consumer that routes failures needs:
// the group and its topics, manual commits, rebalances held while a poll is
// being processed (so nothing is committed for a partition that moved), and
// Partitioner for the records it re-produces.
func GroupOpts(group string, topics ...string) []kgo.Opt {
	return []kgo.Opt{
		kgo.ConsumerGroup(group),
		kgo.ConsumeTopics(topics...),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.RecordPartitioner(Partitioner()),
		kgo.FetchMaxWait(500 * time.Millisecond),
	}
}

// ConsumerOpt configures a Consumer.
type ConsumerOpt interface{ apply(*consumerCfg) }

type consumerOpt func(*consumerCfg)

func (o consumerOpt) apply(c *consumerCfg) { o(c) }

type consumerCfg struct {
	policy   Policy
	function string
	now      func() time.Time
	kopts    []kgo.Opt
	maxPoll  int
}

// WithPolicy sets the retry policy (default DefaultPolicy()).
func WithPolicy(p Policy) ConsumerOpt { return consumerOpt(func(c *consumerCfg) { c.policy = p }) }

// WithFunction names the handler in the headers of failed records (default
// the group name).
func WithFunction(name string) ConsumerOpt {
	return consumerOpt(func(c *consumerCfg) { c.function = name })
}

// WithClock sets the clock used for failure and not-before times.
func WithClock(now func() time.Time) ConsumerOpt {
	return consumerOpt(func(c *consumerCfg) { c.now = now })
}

// WithClientOpts adds franz-go options (seed brokers, TLS, SASL…).
func WithClientOpts(opts ...kgo.Opt) ConsumerOpt {
	return consumerOpt(func(c *consumerCfg) { c.kopts = append(c.kopts, opts...) })
}

// Consumer runs a handler over the records of a consumer group. A record
// whose handler fails is produced to <topic>.retry (or <topic>.dlq after the
// last attempt) with State headers, and only once that produce is
// acknowledged is its offset committed, so the partition moves on and no
// record is lost.
type Consumer struct {
	cl     *kgo.Client
	topics []string
	router *Router
	one    Handler
	batch  BatchHandler
}

// NewConsumer consumes topics in group with h called per record.
func NewConsumer(group string, topics []string, h Handler, opts ...ConsumerOpt) (*Consumer, error) {
	if h == nil {
		return nil, errors.New("retry: nil handler")
	}
	return newConsumer(group, topics, &Consumer{one: h}, opts)
}

// NewBatchConsumer consumes topics in group with h called per partition
// batch.
func NewBatchConsumer(group string, topics []string, h BatchHandler, opts ...ConsumerOpt) (*Consumer, error) {
	if h == nil {
		return nil, errors.New("retry: nil handler")
	}
	return newConsumer(group, topics, &Consumer{batch: h}, opts)
}

func newConsumer(group string, topics []string, c *Consumer, opts []ConsumerOpt) (*Consumer, error) {
	cfg := consumerCfg{policy: DefaultPolicy(), function: group, maxPoll: 1000}
	for _, o := range opts {
		o.apply(&cfg)
	}
	if group == "" || len(topics) == 0 {
		return nil, errors.New("retry: consumer needs a group and topics")
	}
	if err := cfg.policy.Validate(); err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(append(GroupOpts(group, topics...), cfg.kopts...)...)
	if err != nil {
		return nil, fmt.Errorf("retry: client: %w", err)
	}
	c.cl, c.topics = cl, topics
	c.router, err = NewRouter(cl, cfg.policy, cfg.function, cfg.now)
	if err != nil {
		cl.Close()
		return nil, err
	}
	return c, nil
}

// Client is the consumer's franz-go client.
func (c *Consumer) Client() *kgo.Client { return c.cl }

// Close leaves the group and closes the client.
func (c *Consumer) Close() { c.cl.Close() }

// Run consumes until ctx ends (returning nil) or a failed record cannot be
// routed (returning the error, with everything before it committed). It
// first creates missing retry and dead-letter topics with as many
// partitions as their origin (EnsureTopics; best effort: where topics
// cannot be created, the broker's auto-creation or an operator must).
func (c *Consumer) Run(ctx context.Context) error {
	_ = EnsureTopics(ctx, c.cl, c.topics...)
	for ctx.Err() == nil {
		fs := c.cl.PollRecords(ctx, 1000)
		if fs.IsClientClosed() {
			return nil
		}
		err := c.process(ctx, fs)
		c.cl.AllowRebalance()
		if err != nil {
			return err
		}
	}
	return nil
}

func (c *Consumer) process(ctx context.Context, fs kgo.Fetches) error {
	var done []*kgo.Record
	var failed error
	// routed commits what is done as soon as a failed record has been
	// routed, so a crash right after does not route it a second time.
	routed := func() {
		if err := c.commit(ctx, done); err == nil {
			done = done[:0]
		}
	}
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		if failed != nil || ctx.Err() != nil || len(p.Records) == 0 {
			return
		}
		if c.batch != nil {
			if err := c.batch(ctx, p.Records); err != nil {
				if ctx.Err() != nil {
					return // stopped, not failed: deliver again next time
				}
				if _, err := c.router.Fail(ctx, err, p.Records...); err != nil {
					failed = err
					return
				}
				done = append(done, p.Records[len(p.Records)-1])
				routed()
				return
			}
			done = append(done, p.Records[len(p.Records)-1])
			return
		}
		for _, r := range p.Records {
			if err := c.one(ctx, r); err != nil {
				if ctx.Err() != nil {
					return
				}
				if _, err := c.router.Fail(ctx, err, r); err != nil {
					failed = err
					return
				}
				done = append(done, r)
				routed()
				continue
			}
			done = append(done, r)
		}
	})
	if err := c.commit(ctx, done); err != nil {
		return errors.Join(failed, err)
	}
	return failed
}

// commit commits the offsets past records. A commit refused because the
// group rebalanced (the member or generation is gone, as after a
// coordinator moved) is not an error: the partitions' new owners get the
// records again, as Kafka's at-least-once delivery promises.
func (c *Consumer) commit(ctx context.Context, records []*kgo.Record) error {
	if len(records) == 0 {
		return nil
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err := c.cl.CommitRecords(cctx, records...)
	if err == nil || rebalanced(err) {
		return nil
	}
	return fmt.Errorf("retry: commit: %w", err)
}

// rebalanced reports whether a commit failed because the group moved on.
func rebalanced(err error) bool {
	return errors.Is(err, kerr.UnknownMemberID) || errors.Is(err, kerr.IllegalGeneration) ||
		errors.Is(err, kerr.RebalanceInProgress) || errors.Is(err, kerr.FencedInstanceID)
}

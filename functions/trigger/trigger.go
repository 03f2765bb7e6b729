// Package trigger invokes a Lambda function with the records of Kafka
// topics, like AWS's Kafka event source: a poller in a consumer group
// collects up to BatchSize records or waits BatchWindow, invokes the
// function synchronously (RequestResponse) with an events.KafkaEvent
// ("aws:SelfManagedKafka", records keyed "topic-partition", base64 key and
// value, headers as signed-byte arrays), keeps each payload under Lambda's
// 6 MB limit by splitting the batch, retries a failing batch Retries
// times, then (with Bisect) splits it in halves recursively to isolate the
// failing records. Records that still fail go to <topic>.retry through
// pkg/retry (or <topic>.dlq once exhausted), so the partition is not
// blocked; offsets are committed only after every record of a batch was
// processed or routed.
//
// It runs as a Lambda function on a schedule (cmd/, built to
// functions/trigger/bootstrap by `make lambdas`; each invocation polls
// until its deadline minus STRATA_MARGIN, or until idle for STRATA_IDLE,
// then commits and returns Stats) and as `brokerfleet trigger`.
//
// The Lambda reads these environment variables:
//
//	STRATA_BOOTSTRAP        seed brokers, comma-separated (required)
//	STRATA_TOPICS           topics to consume, comma-separated (required)
//	STRATA_GROUP            consumer group (required)
//	STRATA_FUNCTION         function to invoke, name or ARN (required)
//	STRATA_BATCH_SIZE       records per invocation (default 100, 1-10000)
//	STRATA_BATCH_WINDOW     longest wait to fill a batch (default 500ms)
//	STRATA_MAX_PAYLOAD      payload cap in bytes (default 6291456)
//	STRATA_RETRIES          invokes of a failing batch after the first (default 2)
//	STRATA_BISECT           split failing batches (default true)
//	STRATA_MAX_ATTEMPTS     failed deliveries before the DLQ (default 3)
//	STRATA_EVENT_SOURCE_ARN eventSourceArn in the payload (default empty)
//	STRATA_IDLE             return after this long without records (default 0: run to the deadline)
//	STRATA_MARGIN           stop this long before the invocation's deadline (default 10s)
//	STRATA_LAMBDA_ENDPOINT  Lambda API endpoint override (default: AWS's)
//	STRATA_QUEUE            queue mode: a share group, acknowledged per record (default false; queue.go)
//
// and, to reach secured brokers, package kafkaauth's STRATA_TLS_CA_SECRET_ARN,
// STRATA_SASL_SECRET_ARN (secrets read at cold start) and friends.
package trigger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"strings"
	"sync/atomic"
	"time"

	"github.com/stratamq/strata/functions/internal/kafkaevent"
	"github.com/stratamq/strata/functions/internal/lambdaenv"
	"github.com/stratamq/strata/pkg/retry"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Config configures a Trigger.
type Config struct {
	Bootstrap      []string      // seed brokers
	Topics         []string      // topics to consume
	Group          string        // consumer group
	Function       string        // function to invoke (name or ARN)
	EventSourceARN string        // eventSourceArn in the payload
	BatchSize      int           // records per invocation, 1-10000
	BatchWindow    time.Duration // longest wait to fill a batch
	MaxPayload     int           // largest payload in bytes
	Retries        int           // invokes of a failing batch after the first
	Bisect         bool          // split failing batches in halves
	Policy         retry.Policy  // where failed records go next
	Idle           time.Duration // Run returns after this long without records; 0: never
	// Queue reads through a share group named Group and acknowledges
	// per record from the function's partial batch response (queue.go);
	// Retries and Bisect do not apply, Policy.MaxAttempts bounds the
	// deliveries of a record.
	Queue bool
}

// DefaultConfig is AWS's defaults: batches of 100, a 500 ms window, the
// 6 MB cap; plus two retries, bisect and retry.DefaultPolicy.
func DefaultConfig() Config {
	return Config{BatchSize: 100, BatchWindow: 500 * time.Millisecond, MaxPayload: kafkaevent.MaxPayload,
		Retries: 2, Bisect: true, Policy: retry.DefaultPolicy()}
}

// Validate checks c.
func (c Config) Validate() error {
	switch {
	case len(c.Bootstrap) == 0:
		return errors.New("trigger: no bootstrap servers")
	case len(c.Topics) == 0:
		return errors.New("trigger: no topics")
	case c.Group == "":
		return errors.New("trigger: no group")
	case c.Function == "":
		return errors.New("trigger: no function")
	case c.BatchSize < 1 || c.BatchSize > 10000:
		return fmt.Errorf("trigger: batch size %d, want 1 to 10000", c.BatchSize)
	case c.BatchWindow < 0 || c.Retries < 0 || c.Idle < 0:
		return errors.New("trigger: negative window, retries or idle time")
	case c.MaxPayload < 1024:
		return fmt.Errorf("trigger: max payload %d, want at least 1024", c.MaxPayload)
	}
	return c.Policy.Validate()
}

// Stats counts what a run did.
type Stats struct {
	Records     int `json:"records"`     // records consumed
	Invocations int `json:"invocations"` // function invocations
	Failures    int `json:"failures"`    // failed invocations
	Routed      int `json:"routed"`      // records sent to a retry or dead-letter topic
}

// Trigger polls the topics and invokes the function.
type Trigger struct {
	cfg    Config
	inv    kafkaevent.Invoker
	cl     *kgo.Client
	router *retry.Router
	stats  Stats

	assigned atomic.Int64 // when partitions were last assigned (Unix ns); idle time counts from then at the earliest
}

// New validates cfg and connects; opts add franz-go options (TLS, SASL…).
func New(cfg Config, inv kafkaevent.Invoker, opts ...kgo.Opt) (*Trigger, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	t := &Trigger{cfg: cfg, inv: inv}
	kopts := append(retry.GroupOpts(cfg.Group, cfg.Topics...), kgo.SeedBrokers(cfg.Bootstrap...),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) { t.assigned.Store(time.Now().UnixNano()) }))
	if cfg.Queue {
		kopts = append(queueOpts(cfg), kgo.SeedBrokers(cfg.Bootstrap...), kgo.RecordPartitioner(retry.Partitioner()),
			kgo.FetchMaxWait(500*time.Millisecond))
		t.assigned.Store(time.Now().UnixNano()) // a share group has no assignment callbacks: idle counts from now
	}
	cl, err := kgo.NewClient(append(kopts, opts...)...)
	if err != nil {
		return nil, fmt.Errorf("trigger: client: %w", err)
	}
	router, err := retry.NewRouter(cl, cfg.Policy, cfg.Function, nil)
	if err != nil {
		cl.Close()
		return nil, err
	}
	t.cl, t.router = cl, router
	return t, nil
}

// Close leaves the group and closes the connections.
func (t *Trigger) Close() { t.cl.Close() }

// Run polls and invokes until ctx ends or, with Idle set, no record came
// for that long; it returns what it did. An error means a failed batch
// could not be routed; its offsets are not committed.
//
// It first creates missing retry and dead-letter topics with as many
// partitions as their origin (best effort, see retry.EnsureTopics).
func (t *Trigger) Run(ctx context.Context) (Stats, error) {
	if t.cfg.Queue {
		return t.runQueue(ctx)
	}
	_ = retry.EnsureTopics(ctx, t.cl, t.cfg.Topics...)
	var lastRecord time.Time
	for ctx.Err() == nil {
		batch := t.collect(ctx, t.idleSince(lastRecord))
		if len(batch) == 0 {
			t.cl.AllowRebalance()
			if since := t.idleSince(lastRecord); t.cfg.Idle > 0 && !since.IsZero() && time.Since(since) >= t.cfg.Idle {
				break
			}
			continue
		}
		lastRecord = time.Now()
		t.stats.Records += len(batch)
		err := t.deliver(ctx, batch)
		if err == nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			err = t.cl.CommitRecords(cctx, batch...)
			cancel()
			if err != nil {
				err = fmt.Errorf("trigger: commit: %w", err)
			}
		}
		t.cl.AllowRebalance()
		if err != nil {
			if ctx.Err() != nil {
				break // stopped mid-batch: it is delivered again next run
			}
			return t.stats, err
		}
	}
	return t.stats, nil
}

// runQueue is Run in queue mode: no commits, every record acknowledged.
func (t *Trigger) runQueue(ctx context.Context) (Stats, error) {
	var lastRecord time.Time
	for ctx.Err() == nil {
		batch := t.collect(ctx, t.idleSince(lastRecord))
		if len(batch) == 0 {
			if since := t.idleSince(lastRecord); t.cfg.Idle > 0 && !since.IsZero() && time.Since(since) >= t.cfg.Idle {
				break
			}
			continue
		}
		lastRecord = time.Now()
		t.stats.Records += len(batch)
		if err := t.deliverQueue(ctx, batch); err != nil {
			if ctx.Err() != nil {
				break // unacknowledged records come back after their locks
			}
			return t.stats, err
		}
	}
	return t.stats, nil
}

// idleSince is when the trigger last had work: its last record or, if
// later, its last assignment; zero before the first assignment.
func (t *Trigger) idleSince(lastRecord time.Time) time.Time {
	if ns := t.assigned.Load(); ns != 0 {
		if a := time.Unix(0, ns); a.After(lastRecord) {
			return a
		}
		return lastRecord
	}
	return time.Time{}
}

// collect polls until it has BatchSize records or BatchWindow passed since
// the first one (or, with none, until idle or a second passed).
func (t *Trigger) collect(ctx context.Context, idleSince time.Time) []*kgo.Record {
	var batch []*kgo.Record
	var windowEnd time.Time
	for len(batch) < t.cfg.BatchSize && ctx.Err() == nil {
		var deadline time.Time
		if len(batch) == 0 {
			deadline = time.Now().Add(time.Second)
			if t.cfg.Idle > 0 && !idleSince.IsZero() {
				deadline = idleSince.Add(t.cfg.Idle)
			}
		} else {
			deadline = windowEnd
		}
		pctx, cancel := context.WithDeadline(ctx, deadline)
		fs := t.cl.PollRecords(pctx, t.cfg.BatchSize-len(batch))
		cancel()
		if fs.IsClientClosed() {
			return batch
		}
		fs.EachRecord(func(r *kgo.Record) { batch = append(batch, r) })
		if len(batch) > 0 && windowEnd.IsZero() {
			windowEnd = time.Now().Add(t.cfg.BatchWindow)
		}
		if !time.Now().Before(deadline) {
			return batch
		}
	}
	return batch
}

// deliver invokes the function with recs: in payload-sized pieces, with
// retries, bisecting failures, and routing what still fails.
func (t *Trigger) deliver(ctx context.Context, recs []*kgo.Record) error {
	payload, err := json.Marshal(kafkaevent.New(recs, strings.Join(t.cfg.Bootstrap, ","), t.cfg.EventSourceARN))
	if err != nil {
		return fmt.Errorf("trigger: encode event: %w", err)
	}
	if len(payload) > t.cfg.MaxPayload {
		if len(recs) > 1 {
			return t.halves(ctx, recs)
		}
		return t.route(ctx, recs, fmt.Errorf("trigger: record %s/%d@%d makes a %d-byte payload, over the %d-byte limit",
			recs[0].Topic, recs[0].Partition, recs[0].Offset, len(payload), t.cfg.MaxPayload))
	}
	for i := 0; i <= t.cfg.Retries; i++ {
		t.stats.Invocations++
		_, err = kafkaevent.Invoke(ctx, t.inv, t.cfg.Function, payload)
		if err == nil {
			return nil
		}
		t.stats.Failures++
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	if t.cfg.Bisect && len(recs) > 1 {
		return t.halves(ctx, recs)
	}
	return t.route(ctx, recs, err)
}

func (t *Trigger) halves(ctx context.Context, recs []*kgo.Record) error {
	mid := len(recs) / 2
	if err := t.deliver(ctx, recs[:mid]); err != nil {
		return err
	}
	return t.deliver(ctx, recs[mid:])
}

func (t *Trigger) route(ctx context.Context, recs []*kgo.Record, cause error) error {
	if _, err := t.router.Fail(ctx, cause, recs...); err != nil {
		return fmt.Errorf("trigger: %w", err)
	}
	t.stats.Routed += len(recs)
	return nil
}

// Handler is the scheduled Lambda's handler: each invocation connects,
// runs until its deadline minus margin (or idle), commits and returns the
// run's Stats.
func Handler(cfg Config, inv kafkaevent.Invoker, margin time.Duration, opts ...kgo.Opt) func(context.Context, json.RawMessage) (Stats, error) {
	return func(ctx context.Context, _ json.RawMessage) (Stats, error) {
		if d, ok := ctx.Deadline(); ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, d.Add(-margin))
			defer cancel()
		}
		t, err := New(cfg, inv, opts...)
		if err != nil {
			return Stats{}, err
		}
		defer t.Close()
		return t.Run(ctx)
	}
}

// NewLambdaClient builds the client the trigger invokes functions through:
// the default AWS configuration, with endpoint (when set) as its base
// endpoint (for `brokerfleet trigger`, which cannot reach internal
// packages).
func NewLambdaClient(ctx context.Context, endpoint string) (*lambda.Client, error) {
	return lambdaenv.LambdaClient(ctx, endpoint)
}

// Package retryworker redelivers the records of retry topics when they are
// due. It consumes <topic>.retry topics (a list, or a regular expression)
// in a consumer group and, per record, reads its pkg/retry State:
//
//   - an origin header naming another topic than X for a record of
//     X.retry (pkg/retry State.CheckOrigin), or headers that do not parse:
//     the record is not redelivered anywhere; it moves to X.dlq as a first
//     failure at its own position, with the reason as its error (counted
//     in Stats.Refused when the origin was foreign), so whoever may write
//     X.retry can write X only;
//   - attempts >= MaxAttempts: the record moves to <origin>.dlq with its
//     headers, and so its whole failure history;
//   - not-before in the future: the partition is paused until then
//     (PauseFetchPartitions) and rewound to that record, so nothing past it
//     is committed and the worker does not busy-loop;
//   - otherwise it is redelivered: to the Function when one is configured
//     (a synchronous Invoke with an events.KafkaEvent holding that single
//     record at its origin topic, partition and offset, retry headers
//     included), else back to its origin topic and partition with its
//     headers, for the origin's consumer (pkg/retry.Consumer) to try again.
//     A failed invocation goes back to the retry topic, or the DLQ after the
//     last attempt, through pkg/retry.
//
// Offsets are committed only after the redelivery, or the produce to the
// retry or dead-letter topic, was acknowledged.
//
// It runs in-process (Worker.Run) and as a Lambda function on a schedule
// (cmd/, built to functions/retryworker/bootstrap by `make lambdas`; each
// invocation runs until its deadline minus STRATA_MARGIN, or until idle
// for STRATA_IDLE with nothing due within that time, then commits and
// returns Stats). The Lambda reads these environment variables:
//
//	STRATA_BOOTSTRAP        seed brokers, comma-separated (required)
//	STRATA_TOPICS           retry topics, comma-separated (default: all matching STRATA_TOPIC_REGEX)
//	STRATA_TOPIC_REGEX      retry topics by regular expression (default ^.+\.retry$)
//	STRATA_GROUP            consumer group (default strata-retryworker)
//	STRATA_FUNCTION         function to redeliver to; empty: back to the origin topic
//	STRATA_MAX_ATTEMPTS     failed deliveries before the DLQ (default 3)
//	STRATA_EVENT_SOURCE_ARN eventSourceArn in the payload (default empty)
//	STRATA_IDLE             return after this long without work (default 0: run to the deadline)
//	STRATA_MARGIN           stop this long before the invocation's deadline (default 10s)
//	STRATA_LAMBDA_ENDPOINT  Lambda API endpoint override (default: AWS's)
//
// and, to reach secured brokers, package kafkaauth's STRATA_TLS_CA_SECRET_ARN,
// STRATA_SASL_SECRET_ARN (secrets read at cold start) and friends.
package retryworker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/stratamq/strata/functions/internal/kafkaevent"
	"github.com/stratamq/strata/pkg/retry"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Config configures a Worker.
type Config struct {
	Bootstrap      []string      // seed brokers
	Topics         []string      // retry topics; when empty, TopicRegex
	TopicRegex     string        // retry topics by regular expression
	Group          string        // consumer group
	Function       string        // redeliver to this function; empty: to the origin topic
	EventSourceARN string        // eventSourceArn in the payload
	Policy         retry.Policy  // MaxAttempts and the backoff of failed redeliveries
	Idle           time.Duration // Run returns after this long without work; 0: never
}

// DefaultConfig consumes every topic ending in .retry.
func DefaultConfig() Config {
	return Config{TopicRegex: `^.+\.retry$`, Group: "strata-retryworker", Policy: retry.DefaultPolicy()}
}

// Validate checks c.
func (c Config) Validate() error {
	switch {
	case len(c.Bootstrap) == 0:
		return errors.New("retryworker: no bootstrap servers")
	case len(c.Topics) == 0 && c.TopicRegex == "":
		return errors.New("retryworker: no topics and no topic regex")
	case c.Group == "":
		return errors.New("retryworker: no group")
	case c.Idle < 0:
		return errors.New("retryworker: negative idle time")
	}
	if len(c.Topics) == 0 {
		if _, err := regexp.Compile(c.TopicRegex); err != nil {
			return fmt.Errorf("retryworker: topic regex: %w", err)
		}
	}
	return c.Policy.Validate()
}

// unassignedGrace is how much longer than Idle a worker that has no
// partitions waits for some before it gives up.
const unassignedGrace = 10 * time.Second

// Stats counts what a run did.
type Stats struct {
	Redelivered  int `json:"redelivered"`  // records delivered to the function or origin
	Failed       int `json:"failed"`       // failed invocations (routed to retry or DLQ)
	DeadLettered int `json:"deadLettered"` // records moved to a DLQ
	Paused       int `json:"paused"`       // times a partition was paused for a record not yet due
	Refused      int `json:"refused"`      // records whose origin header named a foreign topic (moved to the DLQ, counted there too)
}

// Worker redelivers due records.
type Worker struct {
	cfg    Config
	inv    kafkaevent.Invoker
	cl     *kgo.Client
	router *retry.Router
	now    func() time.Time
	stats  Stats

	mu       sync.Mutex
	paused   map[string]map[int32]time.Time // partition -> when its first record is due
	assigned time.Time
	started  time.Time
}

// New validates cfg and connects. inv is needed only when cfg.Function is
// set; opts add franz-go options (TLS, SASL…).
func New(cfg Config, inv kafkaevent.Invoker, opts ...kgo.Opt) (*Worker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Function != "" && inv == nil {
		return nil, errors.New("retryworker: a function but no Lambda client")
	}
	w := &Worker{cfg: cfg, inv: inv, now: time.Now, paused: map[string]map[int32]time.Time{}}
	topics := cfg.Topics
	kopts := []kgo.Opt{kgo.SeedBrokers(cfg.Bootstrap...),
		kgo.OnPartitionsAssigned(func(context.Context, *kgo.Client, map[string][]int32) {
			w.mu.Lock()
			w.assigned = time.Now()
			w.mu.Unlock()
		}),
		kgo.OnPartitionsRevoked(w.forget), kgo.OnPartitionsLost(w.forget)}
	if len(topics) == 0 {
		topics = []string{cfg.TopicRegex}
		kopts = append(kopts, kgo.ConsumeRegex())
	}
	kopts = append(append(retry.GroupOpts(cfg.Group, topics...), kopts...), opts...)
	cl, err := kgo.NewClient(kopts...)
	if err != nil {
		return nil, fmt.Errorf("retryworker: client: %w", err)
	}
	fn := cfg.Function
	if fn == "" {
		fn = "retryworker"
	}
	w.router, err = retry.NewRouter(cl, cfg.Policy, fn, nil)
	if err != nil {
		cl.Close()
		return nil, err
	}
	w.cl = cl
	return w, nil
}

// forget drops the pause state of partitions the worker no longer owns and
// resumes them, so a later owner (maybe this worker again) fetches them.
func (w *Worker) forget(_ context.Context, cl *kgo.Client, lost map[string][]int32) {
	w.mu.Lock()
	for t, ps := range lost {
		for _, p := range ps {
			delete(w.paused[t], p)
		}
	}
	w.mu.Unlock()
	cl.ResumeFetchPartitions(lost)
}

// Close leaves the group and closes the connections.
func (w *Worker) Close() { w.cl.Close() }

// Run redelivers until ctx ends or, with Idle set, nothing happened for
// that long and nothing is due within it. An error means a record could
// not be redelivered or routed; nothing from it on is committed.
func (w *Worker) Run(ctx context.Context) (Stats, error) {
	w.started = time.Now()
	var lastWork time.Time
	for ctx.Err() == nil {
		w.resumeDue()
		wake := w.now().Add(time.Second)
		if next, ok := w.nextDue(); ok && next.Before(wake) {
			wake = next
		}
		pctx, cancel := context.WithDeadline(ctx, wake)
		fs := w.cl.PollRecords(pctx, 1000)
		cancel()
		if fs.IsClientClosed() {
			break
		}
		worked, err := w.process(ctx, fs)
		w.cl.AllowRebalance()
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			return w.stats, err
		}
		if worked {
			lastWork = time.Now()
		}
		if w.idle(lastWork) {
			break
		}
	}
	return w.stats, nil
}

func (w *Worker) idle(lastWork time.Time) bool {
	if w.cfg.Idle <= 0 {
		return false
	}
	w.mu.Lock()
	since := w.assigned
	w.mu.Unlock()
	if since.IsZero() {
		// Not consuming yet: joining the group takes a few seconds, and
		// with a regex there may be no retry topic at all.
		return time.Since(w.started) >= w.cfg.Idle+unassignedGrace
	}
	if lastWork.After(since) {
		since = lastWork
	}
	if time.Since(since) < w.cfg.Idle {
		return false
	}
	next, ok := w.nextDue()
	return !ok || next.After(w.now().Add(w.cfg.Idle))
}

func (w *Worker) nextDue() (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var next time.Time
	for _, ps := range w.paused {
		for _, at := range ps {
			if next.IsZero() || at.Before(next) {
				next = at
			}
		}
	}
	return next, !next.IsZero()
}

func (w *Worker) resumeDue() {
	now := w.now()
	due := map[string][]int32{}
	w.mu.Lock()
	for t, ps := range w.paused {
		for p, at := range ps {
			if !at.After(now) {
				due[t] = append(due[t], p)
				delete(ps, p)
			}
		}
	}
	w.mu.Unlock()
	if len(due) > 0 {
		w.cl.ResumeFetchPartitions(due)
	}
}

func (w *Worker) isPaused(t string, p int32) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.paused[t][p]
	return ok
}

// process handles one poll; it commits what it finished.
func (w *Worker) process(ctx context.Context, fs kgo.Fetches) (worked bool, err error) {
	var done []*kgo.Record
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		if err != nil || w.isPaused(p.Topic, p.Partition) {
			return
		}
		for _, r := range p.Records {
			if ctx.Err() != nil {
				return
			}
			var wait time.Time
			wait, err = w.handle(ctx, r)
			if err != nil {
				return
			}
			if !wait.IsZero() {
				w.pause(r, wait)
				return
			}
			worked = true
			done = append(done, r)
		}
	})
	if len(done) > 0 {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if cerr := w.cl.CommitRecords(cctx, done...); cerr != nil {
			return worked, errors.Join(err, fmt.Errorf("retryworker: commit: %w", cerr))
		}
	}
	return worked, err
}

// pause stops fetching r's partition until at and rewinds it to r.
func (w *Worker) pause(r *kgo.Record, at time.Time) {
	w.mu.Lock()
	if w.paused[r.Topic] == nil {
		w.paused[r.Topic] = map[int32]time.Time{}
	}
	w.paused[r.Topic][r.Partition] = at
	w.mu.Unlock()
	w.stats.Paused++
	tp := map[string][]int32{r.Topic: {r.Partition}}
	w.cl.PauseFetchPartitions(tp)
	w.cl.SetOffsets(map[string]map[int32]kgo.EpochOffset{r.Topic: {r.Partition: {Epoch: r.LeaderEpoch, Offset: r.Offset}}})
}

// handle redelivers, dead-letters or defers r; a non-zero time means r is
// due then and was not handled.
func (w *Worker) handle(ctx context.Context, r *kgo.Record) (time.Time, error) {
	st, ok, err := retry.Parse(r.Headers)
	if err == nil && ok {
		err = st.CheckOrigin(r.Topic)
	}
	if err != nil {
		// Unreadable state, or an origin this retry topic may not name: the
		// record goes to the DLQ of the topic this one belongs to, with the
		// reason, and is delivered nowhere.
		if errors.Is(err, retry.ErrForeignOrigin) {
			w.stats.Refused++
		}
		_, ferr := w.router.Fail(ctx, err, r)
		w.stats.DeadLettered++
		return time.Time{}, ferr
	}
	if !ok {
		// Produced to the retry topic by hand: deliver now, as a first retry.
		st = retry.State{OriginTopic: retry.OriginOf(r.Topic), OriginPartition: r.Partition, OriginOffset: -1}
	}
	if st.Attempts >= w.cfg.Policy.MaxAttempts {
		w.stats.DeadLettered++
		return time.Time{}, w.router.DeadLetter(ctx, r, st)
	}
	if st.NotBefore.After(w.now()) {
		return st.NotBefore, nil
	}
	if w.cfg.Function == "" {
		w.stats.Redelivered++
		return time.Time{}, w.router.Redeliver(ctx, r, st)
	}
	origin := *r
	origin.Topic, origin.Partition, origin.Offset = st.OriginTopic, st.OriginPartition, st.OriginOffset
	payload, err := json.Marshal(kafkaevent.New([]*kgo.Record{&origin}, strings.Join(w.cfg.Bootstrap, ","), w.cfg.EventSourceARN))
	if err != nil {
		return time.Time{}, fmt.Errorf("retryworker: encode event: %w", err)
	}
	w.stats.Redelivered++
	_, ierr := kafkaevent.Invoke(ctx, w.inv, w.cfg.Function, payload)
	if ierr == nil {
		return time.Time{}, nil
	}
	if ctx.Err() != nil {
		return time.Time{}, ctx.Err()
	}
	w.stats.Failed++
	if !ok {
		r = &origin // a first failure at the origin position
	}
	routed, err := w.router.Fail(ctx, ierr, r)
	if err == nil && strings.HasSuffix(routed[0].Topic, retry.DLQSuffix) {
		w.stats.DeadLettered++
	}
	return time.Time{}, err
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
		w, err := New(cfg, inv, opts...)
		if err != nil {
			return Stats{}, err
		}
		defer w.Close()
		return w.Run(ctx)
	}
}

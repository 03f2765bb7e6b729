package retryworker_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/stratamq/strata/functions/internal/testbroker"
	"github.com/stratamq/strata/functions/internal/testlambda"
	"github.com/stratamq/strata/functions/retryworker"
	"github.com/stratamq/strata/pkg/retry"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestMain(m *testing.M) { os.Exit(testbroker.Main(m)) }

func setup(t *testing.T, topic string, partitions int32) (string, *kgo.Client) {
	t.Helper()
	addr := testbroker.Start(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, -1, nil, topic)
	require.NoError(t, err)
	require.NoError(t, resp.Err)
	require.NoError(t, retry.EnsureTopics(ctx, cl, topic))
	return addr, cl
}

func policy() retry.Policy {
	return retry.Policy{MaxAttempts: 3, Backoff: func(int) time.Duration { return 300 * time.Millisecond }}
}

func workerConfig(addr string, topics ...string) retryworker.Config {
	cfg := retryworker.DefaultConfig()
	cfg.Bootstrap = []string{addr}
	cfg.Topics = topics
	cfg.Policy = policy()
	return cfg
}

// startWorker runs a worker in the background until the test ends.
func startWorker(t *testing.T, cfg retryworker.Config, inv *testlambda.Invoke) {
	t.Helper()
	var w *retryworker.Worker
	var err error
	if inv != nil {
		w, err = retryworker.New(cfg, testlambda.Client(inv.URL))
	} else {
		w, err = retryworker.New(cfg, nil)
	}
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := w.Run(ctx); done <- err }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
		w.Close()
	})
}

// deliveries records what a flaky handler saw.
type deliveries struct {
	mu       sync.Mutex
	attempts []int // retry.State.Attempts of each delivery
	parts    []int32
	ok       int
}

func (d *deliveries) handler(failFirst int) retry.Handler {
	return func(_ context.Context, r *kgo.Record) error {
		st, _, err := retry.Parse(r.Headers)
		if err != nil {
			return err
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		d.attempts = append(d.attempts, st.Attempts)
		d.parts = append(d.parts, r.Partition)
		if failFirst < 0 || len(d.attempts) <= failFirst {
			return errors.New("handler failed " + strconv.Itoa(len(d.attempts)))
		}
		d.ok++
		return nil
	}
}

func (d *deliveries) snapshot() ([]int, []int32, int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]int(nil), d.attempts...), append([]int32(nil), d.parts...), d.ok
}

// keyOffPartition is a key that murmur2 (franz-go's and Java's default)
// puts on another partition than p of n, so a test sees re-hashing.
func keyOffPartition(p int32, n int) []byte {
	hash := kgo.StickyKeyPartitioner(nil).ForTopic("any")
	for i := 0; ; i++ {
		k := []byte("k" + strconv.Itoa(i))
		if hash.Partition(&kgo.Record{Key: k}, n) != int(p) {
			return k
		}
	}
}

func startConsumer(t *testing.T, addr, topic string, h retry.Handler) {
	t.Helper()
	c, err := retry.NewConsumer("app", []string{topic}, h, retry.WithPolicy(policy()), retry.WithFunction("app-fn"),
		retry.WithClientOpts(kgo.SeedBrokers(addr)))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
		c.Close()
	})
}

func produce(t *testing.T, cl *kgo.Client, rs ...*kgo.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, cl.ProduceSync(ctx, rs...).FirstErr())
}

func consumeN(t *testing.T, addr, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	require.Len(t, out, n, "records in %s", topic)
	return out
}

// TestConsumerRetriesThroughWorker: a pkg/retry.Consumer whose handler fails
// twice gets the record back from the worker twice and processes it once,
// on the partition it was produced to.
func TestConsumerRetriesThroughWorker(t *testing.T) {
	t.Parallel()
	addr, cl := setup(t, "orders", 3)
	var d deliveries
	startConsumer(t, addr, "orders", d.handler(2))
	startWorker(t, workerConfig(addr, "orders.retry"), nil)
	key := keyOffPartition(2, 3)
	produce(t, cl, &kgo.Record{Topic: "orders", Partition: 2, Key: key, Value: []byte("v")})
	require.Eventually(t, func() bool { _, _, ok := d.snapshot(); return ok == 1 }, 30*time.Second, 50*time.Millisecond)
	time.Sleep(time.Second) // nothing more arrives
	attempts, parts, ok := d.snapshot()
	require.Equal(t, []int{0, 1, 2}, attempts, "first delivery, then two retries")
	require.Equal(t, []int32{2, 2, 2}, parts, "always on the origin's partition")
	require.Equal(t, 1, ok)
	for _, r := range consumeN(t, addr, "orders.retry", 2) {
		require.Equal(t, int32(2), r.Partition)
		require.Equal(t, key, r.Key)
	}
}

// TestAlwaysFailingEndsInDLQ: after MaxAttempts failures the record is in
// orders.dlq with every header and a history of MaxAttempts entries.
func TestAlwaysFailingEndsInDLQ(t *testing.T) {
	t.Parallel()
	addr, cl := setup(t, "pay", 2)
	var d deliveries
	startConsumer(t, addr, "pay", d.handler(-1))
	startWorker(t, workerConfig(addr, "pay.retry"), nil)
	key := keyOffPartition(1, 2)
	produce(t, cl, &kgo.Record{Topic: "pay", Partition: 1, Key: key, Value: []byte("v"),
		Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte("t1")}}})
	r := consumeN(t, addr, "pay.dlq", 1)[0]
	attempts, _, _ := d.snapshot()
	require.Equal(t, []int{0, 1, 2}, attempts)
	require.Equal(t, int32(1), r.Partition)
	require.Equal(t, key, r.Key)
	require.Equal(t, "v", string(r.Value))
	require.Equal(t, "trace", r.Headers[0].Key, "the record's own headers are kept")
	st, ok, err := retry.Parse(r.Headers)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 3, st.Attempts)
	require.Equal(t, "pay", st.OriginTopic)
	require.Equal(t, int32(1), st.OriginPartition)
	require.Equal(t, int64(0), st.OriginOffset)
	require.Equal(t, "app-fn", st.Function)
	require.Equal(t, "handler failed 3", st.LastError)
	require.False(t, st.FirstFailure.IsZero())
	require.True(t, st.NotBefore.IsZero(), "a dead letter is not scheduled")
	require.Len(t, st.History, 3)
	for i, f := range st.History {
		require.Equal(t, i+1, f.Attempt)
		require.Equal(t, "handler failed "+strconv.Itoa(i+1), f.Error)
	}
	require.True(t, st.History[1].At.Sub(st.History[0].At) >= 250*time.Millisecond, "the backoff was respected: %v", st.History)
}

// retryRecord is a record as pkg/retry puts it on a retry topic.
func retryRecord(topic string, partition int32, attempts int, notBefore time.Time, value string) *kgo.Record {
	now := time.Now()
	st := retry.State{Attempts: attempts, OriginTopic: topic, OriginPartition: partition, OriginOffset: 42,
		FirstFailure: now, LastError: "boom", NotBefore: notBefore, Function: "target"}
	for i := 1; i <= attempts; i++ {
		st.History = append(st.History, retry.Failure{Attempt: i, At: now, Error: "boom"})
	}
	return &kgo.Record{Topic: retry.RetryTopic(topic), Partition: partition, Key: []byte("k-" + value), Value: []byte(value),
		Headers: st.Headers(nil)}
}

// TestWorkerInvokesFunction: records are redelivered to the function once
// due (not before), a function failing twice then succeeding processes the
// record once, and an always-failing one leaves it in the DLQ.
func TestWorkerInvokesFunction(t *testing.T) {
	t.Parallel()
	addr, cl := setup(t, "evts", 2)
	fake := testlambda.NewInvoke(t, func(n int, ev events.KafkaEvent) error {
		for _, v := range testlambda.Values(ev) {
			if v == "bad" || n <= 2 {
				return errors.New("no")
			}
		}
		return nil
	})
	due := time.Now().Add(time.Second)
	produce(t, cl, retryRecord("evts", 1, 1, due, "flaky"))
	startWorker(t, func() retryworker.Config {
		c := workerConfig(addr, "evts.retry")
		c.Function = "target"
		c.Policy.MaxAttempts = 4
		return c
	}(), fake)
	require.Eventually(t, func() bool { return len(fake.Processed()) == 1 }, 30*time.Second, 50*time.Millisecond)
	calls := fake.Calls()
	require.Len(t, calls, 3, "failed twice, then succeeded")
	require.Equal(t, []string{"flaky"}, fake.Processed())
	ev := calls[0].Event
	require.Len(t, ev.Records["evts-1"], 1, "a single record at its origin position")
	r := ev.Records["evts-1"][0]
	require.Equal(t, int64(42), r.Offset)
	require.Equal(t, "evts", r.Topic)

	// The always failing one.
	produce(t, cl, retryRecord("evts", 0, 2, time.Now(), "bad"))
	d := consumeN(t, addr, "evts.dlq", 1)[0]
	st, _, err := retry.Parse(d.Headers)
	require.NoError(t, err)
	require.Equal(t, 4, st.Attempts)
	require.Len(t, st.History, 4)
	require.Equal(t, int32(0), d.Partition)
	require.Contains(t, st.LastError, "no")
}

// TestWorkerPausesUntilDue: a record due in 5 s is not redelivered before
// then, later records of its partition wait behind it, and other
// partitions go on.
func TestWorkerPausesUntilDue(t *testing.T) {
	t.Parallel()
	addr, cl := setup(t, "slow", 2)
	fake := testlambda.NewInvoke(t, testlambda.Succeed)
	start := time.Now()
	due := start.Add(5 * time.Second)
	produce(t, cl, retryRecord("slow", 0, 1, due, "later"), retryRecord("slow", 0, 1, start, "behind"),
		retryRecord("slow", 1, 1, start, "now"))
	cfg := workerConfig(addr, "slow.retry")
	cfg.Function = "f"
	startWorker(t, cfg, fake)
	require.Eventually(t, func() bool { return len(fake.Processed()) == 1 }, 30*time.Second, 50*time.Millisecond)
	require.Equal(t, []string{"now"}, fake.Processed(), "the other partition goes on")
	require.True(t, time.Now().Before(due), "test too slow: the group took 5 s to form")
	require.Eventually(t, func() bool { return len(fake.Processed()) == 3 }, 30*time.Second, 50*time.Millisecond)
	require.False(t, time.Now().Before(due), "not redelivered before its not-before time")
	require.Equal(t, []string{"now", "later", "behind"}, fake.Processed(), "later records wait behind it")
	require.Len(t, fake.Calls(), 3, "each record delivered once")
}

// TestHandlerInProcess runs the Lambda handler through lambda.NewHandler:
// a due record goes back to its origin topic and partition.
func TestHandlerInProcess(t *testing.T) {
	t.Parallel()
	addr, cl := setup(t, "back", 2)
	produce(t, cl, retryRecord("back", 1, 1, time.Now(), "again"))
	cfg := workerConfig(addr, "back.retry")
	cfg.Idle = 2 * time.Second
	h := lambda.NewHandler(retryworker.Handler(cfg, nil, time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	out, err := h.Invoke(ctx, []byte(`{"source":"aws.events"}`))
	require.NoError(t, err)
	var st retryworker.Stats
	require.NoError(t, json.Unmarshal(out, &st))
	require.Equal(t, retryworker.Stats{Redelivered: 1}, st)
	r := consumeN(t, addr, "back", 1)[0]
	require.Equal(t, int32(1), r.Partition)
	require.Equal(t, "again", string(r.Value))
	s, _, err := retry.Parse(r.Headers)
	require.NoError(t, err)
	require.Equal(t, 1, s.Attempts, "headers kept for the next failure")
}

// TestBootstrapBinary runs the built Lambda under a fake Runtime API: it
// dead-letters an exhausted record and redelivers a due one (topics by the
// default regex).
func TestBootstrapBinary(t *testing.T) {
	t.Parallel()
	addr, cl := setup(t, "bin", 2)
	produce(t, cl, retryRecord("bin", 0, 3, time.Now(), "dead"), retryRecord("bin", 1, 1, time.Now(), "due"))
	bin := testlambda.Build(t, "github.com/stratamq/strata/functions/retryworker/cmd")
	rt := testlambda.NewRuntime(t)
	rt.Start(t, bin, "STRATA_BOOTSTRAP="+addr, "STRATA_IDLE=2s", "STRATA_MARGIN=1s", "STRATA_MAX_ATTEMPTS=3")
	res, err := rt.Invoke([]byte(`{}`), time.Now().Add(40*time.Second), 5*time.Second)
	require.NoError(t, err)
	require.False(t, res.Error, "%s", res.Body)
	var st retryworker.Stats
	require.NoError(t, json.Unmarshal(res.Body, &st))
	require.Equal(t, retryworker.Stats{Redelivered: 1, DeadLettered: 1}, st)
	d := consumeN(t, addr, "bin.dlq", 1)[0]
	require.Equal(t, "dead", string(d.Value))
	require.Equal(t, "due", string(consumeN(t, addr, "bin", 1)[0].Value))
}

// forged is a record on own.retry whose origin header names victim: what
// someone who may write own.retry, but not victim, would produce.
func forged(own, victim string, attempts int, value string) *kgo.Record {
	r := retryRecord(victim, 0, attempts, time.Now(), value)
	r.Topic = retry.RetryTopic(own)
	return r
}

// endOffsets returns the high watermarks of topics, summed over partitions.
func endOffsets(t *testing.T, cl *kgo.Client, topics ...string) map[string]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topics...)
	require.NoError(t, err)
	out := map[string]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		require.NoError(t, o.Err, "%s", o.Topic)
		out[o.Topic] += o.Offset
	})
	return out
}

// TestWorkerRefusesForeignOrigin: records of own.retry whose origin header
// names another topic are delivered nowhere (neither victim nor
// victim.dlq): they move to own.dlq with the reason, and the worker goes
// on with the records behind them.
func TestWorkerRefusesForeignOrigin(t *testing.T) {
	t.Parallel()
	addr, cl := setup(t, "own", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, 1, -1, nil, "victim")
	require.NoError(t, err)
	require.NoError(t, resp.Err)
	require.NoError(t, retry.EnsureTopics(ctx, cl, "victim"))
	produce(t, cl, forged("own", "victim", 1, "due"), forged("own", "victim", 3, "exhausted"),
		retryRecord("own", 0, 1, time.Now(), "legit"))
	cfg := workerConfig(addr, "own.retry")
	cfg.Idle = 2 * time.Second
	out, err := lambda.NewHandler(retryworker.Handler(cfg, nil, time.Second)).Invoke(ctx, []byte(`{}`))
	require.NoError(t, err)
	var st retryworker.Stats
	require.NoError(t, json.Unmarshal(out, &st))
	require.Equal(t, retryworker.Stats{Redelivered: 1, DeadLettered: 2, Refused: 2}, st)

	require.Equal(t, "legit", string(consumeN(t, addr, "own", 1)[0].Value), "the record behind them was redelivered")
	for _, d := range consumeN(t, addr, "own.dlq", 2) {
		s, ok, err := retry.Parse(d.Headers)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, "own", s.OriginTopic, "dead-lettered as a record of own, not of victim")
		require.Equal(t, 1, s.Attempts)
		require.Contains(t, s.LastError, retry.ErrForeignOrigin.Error())
		require.Contains(t, s.LastError, `"victim"`)
	}
	require.Equal(t, map[string]int64{"victim": 0, "victim.dlq": 0}, endOffsets(t, cl, "victim", "victim.dlq"),
		"nothing reached the topic the headers named")
}

// TestWorkerRefusesForeignOriginToFunction: with a function configured, a
// record with a foreign origin is not handed to it (which would believe
// the record came from that topic); it goes to the DLQ.
func TestWorkerRefusesForeignOriginToFunction(t *testing.T) {
	t.Parallel()
	addr, cl := setup(t, "fnown", 1)
	fake := testlambda.NewInvoke(t, testlambda.Succeed)
	produce(t, cl, forged("fnown", "elsewhere", 1, "forged"), retryRecord("fnown", 0, 1, time.Now(), "legit"))
	cfg := workerConfig(addr, "fnown.retry")
	cfg.Function = "target"
	startWorker(t, cfg, fake)
	require.Eventually(t, func() bool { return len(fake.Processed()) == 1 }, 30*time.Second, 50*time.Millisecond)
	require.Equal(t, []string{"legit"}, fake.Processed())
	d := consumeN(t, addr, "fnown.dlq", 1)[0]
	require.Equal(t, "forged", string(d.Value))
	require.Len(t, fake.Calls(), 1, "the forged record was never invoked")
}

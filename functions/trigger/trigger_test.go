package trigger_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/stratamq/strata/functions/internal/testbroker"
	"github.com/stratamq/strata/functions/internal/testlambda"
	"github.com/stratamq/strata/functions/retryworker"
	"github.com/stratamq/strata/functions/trigger"
	"github.com/stratamq/strata/pkg/retry"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

var update = flag.Bool("update", false, "rewrite golden files")

func TestMain(m *testing.M) { os.Exit(testbroker.Main(m)) }

// setup starts a broker and creates topic with partitions partitions, its
// retry and dead-letter topics.
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

func config(addr, topic string) trigger.Config {
	cfg := trigger.DefaultConfig()
	cfg.Bootstrap = []string{addr}
	cfg.Topics = []string{topic}
	cfg.Group = "g-" + topic
	cfg.Function = "fn"
	cfg.Idle = 3 * time.Second
	cfg.Policy.Backoff = func(int) time.Duration { return time.Second }
	return cfg
}

func run(t *testing.T, cfg trigger.Config, url string) trigger.Stats {
	t.Helper()
	tr, err := trigger.New(cfg, testlambda.Client(url))
	require.NoError(t, err)
	defer tr.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st, err := tr.Run(ctx)
	require.NoError(t, err)
	return st
}

func consumeAll(t *testing.T, addr, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	require.Len(t, out, n, "records in %s", topic)
	return out
}

func TestPayloadMatchesGolden(t *testing.T) {
	t.Parallel()
	addr, cl := setup(t, "golden", 2)
	ts := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	ctx := context.Background()
	recs := []*kgo.Record{
		{Topic: "golden", Partition: 0, Key: []byte("k1"), Value: []byte(`{"id":1}`), Timestamp: ts,
			Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte{0x01, 0xff, 0x80}}}},
		{Topic: "golden", Partition: 0, Value: []byte("no key"), Timestamp: ts.Add(time.Millisecond)},
		{Topic: "golden", Partition: 1, Key: []byte("k2"), Value: []byte("ü"), Timestamp: ts.Add(2 * time.Millisecond),
			Headers: []kgo.RecordHeader{{Key: "a", Value: []byte("x")}, {Key: "b", Value: nil}}},
	}
	require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())
	fake := testlambda.NewInvoke(t, testlambda.Succeed)
	cfg := config(addr, "golden")
	cfg.EventSourceARN = "arn:aws:kafka:us-east-1:000000000000:cluster/strata"
	cfg.BatchWindow = 2 * time.Second // all three in one invocation
	st := run(t, cfg, fake.URL)
	require.Equal(t, trigger.Stats{Records: 3, Invocations: 1}, st)
	calls := fake.Calls()
	require.Len(t, calls, 1)
	got := bytes.ReplaceAll(calls[0].Payload, []byte(addr), []byte("127.0.0.1:9092"))
	var buf bytes.Buffer
	require.NoError(t, json.Indent(&buf, got, "", "  "))
	buf.WriteByte('\n')
	golden := filepath.Join("testdata", "event.json")
	if *update {
		require.NoError(t, os.WriteFile(golden, buf.Bytes(), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	require.Equal(t, string(want), buf.String())
}

func produceN(t *testing.T, cl *kgo.Client, topic string, n int, value func(i int) string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: topic, Partition: int32(i % 2), Key: []byte(fmt.Sprint(i)), Value: []byte(value(i))}
	}
	require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())
}

func TestBisectIsolatesPoison(t *testing.T) {
	t.Parallel()
	addr, cl := setup(t, "bisect", 2)
	produceN(t, cl, "bisect", 100, func(i int) string {
		if i == 37 {
			return "poison 37"
		}
		return fmt.Sprint("ok ", i)
	})
	fake := testlambda.NewInvoke(t, testlambda.FailOn("poison"))
	cfg := config(addr, "bisect")
	cfg.Retries = 1
	cfg.BatchWindow = 2 * time.Second
	st := run(t, cfg, fake.URL)
	require.Equal(t, 100, st.Records)
	require.Equal(t, 1, st.Routed)

	processed := fake.Processed()
	slices.Sort(processed)
	var want []string
	for i := 0; i < 100; i++ {
		if i != 37 {
			want = append(want, fmt.Sprint("ok ", i))
		}
	}
	slices.Sort(want)
	require.Equal(t, want, processed, "the other 99 are processed exactly once")

	rs := consumeAll(t, addr, "bisect.retry", 1)
	r := rs[0]
	require.Equal(t, "poison 37", string(r.Value))
	require.Equal(t, "37", string(r.Key), "the key is kept")
	require.Equal(t, int32(1), r.Partition, "the origin's partition is kept")
	s, ok, err := retry.Parse(r.Headers)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 1, s.Attempts)
	require.Equal(t, "bisect", s.OriginTopic)
	require.Equal(t, int32(1), s.OriginPartition)
	require.Equal(t, "fn", s.Function)
	require.Contains(t, s.LastError, "poisoned")
	require.True(t, s.NotBefore.After(s.FirstFailure))

	// Committed: a second run sees nothing.
	st = run(t, cfg, fake.URL)
	require.Equal(t, 0, st.Records)
}

func TestRetriesWholeBatch(t *testing.T) {
	t.Parallel()
	addr, cl := setup(t, "flaky", 2)
	produceN(t, cl, "flaky", 10, func(i int) string { return fmt.Sprint("v", i) })
	fake := testlambda.NewInvoke(t, testlambda.FailTimes(2))
	cfg := config(addr, "flaky")
	cfg.BatchWindow = 2 * time.Second
	st := run(t, cfg, fake.URL)
	require.Equal(t, trigger.Stats{Records: 10, Invocations: 3, Failures: 2}, st)
	require.Len(t, fake.Processed(), 10, "processed once, after two failed invocations")
}

func TestPayloadCapSplitsBatches(t *testing.T) {
	t.Parallel()
	addr, cl := setup(t, "big", 2)
	produceN(t, cl, "big", 20, func(i int) string { return fmt.Sprint(i, strings.Repeat("x", 600)) })
	fake := testlambda.NewInvoke(t, testlambda.Succeed)
	cfg := config(addr, "big")
	cfg.MaxPayload = 4000
	cfg.BatchWindow = 2 * time.Second
	st := run(t, cfg, fake.URL)
	require.Equal(t, 20, st.Records)
	require.Greater(t, st.Invocations, 4)
	for _, c := range fake.Calls() {
		require.LessOrEqual(t, len(c.Payload), 4000)
	}
	require.Len(t, fake.Processed(), 20)
}

func TestHandlerInProcess(t *testing.T) {
	t.Parallel()
	addr, cl := setup(t, "inproc", 2)
	produceN(t, cl, "inproc", 5, func(i int) string { return fmt.Sprint("v", i) })
	fake := testlambda.NewInvoke(t, testlambda.Succeed)
	cfg := config(addr, "inproc")
	h := lambda.NewHandler(trigger.Handler(cfg, testlambda.Client(fake.URL), 2*time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	out, err := h.Invoke(ctx, []byte(`{"source":"aws.events","detail-type":"Scheduled Event"}`))
	require.NoError(t, err)
	var st trigger.Stats
	require.NoError(t, json.Unmarshal(out, &st))
	require.Equal(t, 5, st.Records)
	require.Len(t, fake.Processed(), 5)
}

func TestBootstrapBinary(t *testing.T) {
	t.Parallel()
	addr, cl := setup(t, "binary", 2)
	produceN(t, cl, "binary", 5, func(i int) string {
		if i == 3 {
			return "poison"
		}
		return fmt.Sprint("v", i)
	})
	fake := testlambda.NewInvoke(t, testlambda.FailOn("poison"))
	bin := testlambda.Build(t, "github.com/stratamq/strata/functions/trigger/cmd")
	rt := testlambda.NewRuntime(t)
	rt.Start(t, bin, "STRATA_BOOTSTRAP="+addr, "STRATA_TOPICS=binary", "STRATA_GROUP=g", "STRATA_FUNCTION=target",
		"STRATA_IDLE=3s", "STRATA_MARGIN=1s", "STRATA_RETRIES=0", "STRATA_BATCH_WINDOW=1s",
		"STRATA_LAMBDA_ENDPOINT="+fake.URL, "AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test")
	res, err := rt.Invoke([]byte(`{}`), time.Now().Add(40*time.Second), 5*time.Second)
	require.NoError(t, err)
	require.False(t, res.Error, "%s", res.Body)
	var st trigger.Stats
	require.NoError(t, json.Unmarshal(res.Body, &st))
	require.Equal(t, 5, st.Records)
	require.Equal(t, 1, st.Routed)
	require.Len(t, fake.Processed(), 4)
	for _, c := range fake.Calls() {
		require.Equal(t, "target", c.Function)
	}
	consumeAll(t, addr, "binary.retry", 1)

	// A second invocation of the same process finds nothing new.
	res, err = rt.Invoke([]byte(`{}`), time.Now().Add(40*time.Second), 5*time.Second)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(res.Body, &st))
	require.Equal(t, 0, st.Records)
}

// TestPoisonRetriedThenDeadLettered closes the loop: the trigger routes the
// poisoned record to the retry topic, the retry worker redelivers it to the
// same function when due, and after MaxAttempts failures it is in the DLQ
// with its whole history, while a record fixed on the way succeeds.
func TestPoisonRetriedThenDeadLettered(t *testing.T) {
	t.Parallel()
	addr, cl := setup(t, "loop", 2)
	produceN(t, cl, "loop", 10, func(i int) string {
		switch i {
		case 4:
			return "poison forever"
		case 7:
			return "poison once"
		}
		return fmt.Sprint("ok ", i)
	})
	// "poison once" fails on its first delivery (from the trigger, without
	// retry headers) and succeeds when the worker redelivers it.
	fake := testlambda.NewInvoke(t, func(_ int, ev events.KafkaEvent) error {
		for _, rs := range ev.Records {
			for _, r := range rs {
				v, _ := base64.StdEncoding.DecodeString(r.Value)
				retried := false
				for _, h := range r.Headers {
					_, retried = h[retry.HeaderAttempts]
					if retried {
						break
					}
				}
				if string(v) == "poison forever" || (string(v) == "poison once" && !retried) {
					return fmt.Errorf("bad %s", v)
				}
			}
		}
		return nil
	})
	cfg := config(addr, "loop")
	cfg.Retries = 0
	cfg.Policy.Backoff = func(int) time.Duration { return 200 * time.Millisecond }
	st := run(t, cfg, fake.URL)
	require.Equal(t, 2, st.Routed)

	wcfg := retryworker.DefaultConfig()
	wcfg.Bootstrap = []string{addr}
	wcfg.Function = "fn"
	wcfg.Policy = cfg.Policy
	wcfg.Idle = 3 * time.Second
	w, err := retryworker.New(wcfg, testlambda.Client(fake.URL))
	require.NoError(t, err)
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ws, err := w.Run(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, ws.DeadLettered, "%+v", ws)

	r := consumeAll(t, addr, "loop.dlq", 1)[0]
	require.Equal(t, "poison forever", string(r.Value))
	require.Equal(t, int32(0), r.Partition)
	s, _, err := retry.Parse(r.Headers)
	require.NoError(t, err)
	require.Equal(t, 3, s.Attempts)
	require.Len(t, s.History, 3)
	require.Equal(t, "loop", s.OriginTopic)
	require.Equal(t, int64(2), s.OriginOffset, "the fifth record, third on partition 0")
	processed := fake.Processed()
	slices.Sort(processed)
	require.Equal(t, []string{"ok 0", "ok 1", "ok 2", "ok 3", "ok 5", "ok 6", "ok 8", "ok 9", "poison once"}, processed)
}

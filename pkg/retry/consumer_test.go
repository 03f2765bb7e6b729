package retry

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// These tests run against kfake: pkg/retry cannot import the functions'
// Strata test broker; functions/retryworker runs the same flows on Strata.

func newCluster(t *testing.T, topics map[string]int32) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.ListenFn(func(network, _ string) (net.Listener, error) { return net.Listen(network, "127.0.0.1:0") }))
	require.NoError(t, err)
	t.Cleanup(c.Close)
	for topic, n := range topics {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		require.NoError(t, createTopic(ctx, cl, topic, n))
		require.NoError(t, EnsureTopics(ctx, cl, topic))
		cancel()
		cl.Close()
	}
	return c
}

func createTopic(ctx context.Context, cl *kgo.Client, topic string, n int32) error {
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, n, 1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	return err
}

func TestPartitionerKeepsPartition(t *testing.T) {
	p := Partitioner().ForTopic("t")
	require.Equal(t, 5, p.Partition(&kgo.Record{Key: []byte("k"), Partition: 5}, 8), "kept when the topic has it")
	// Fewer partitions: keyed records hash like the Java client (murmur2).
	want := kgo.StickyKeyPartitioner(nil).ForTopic("t").Partition(&kgo.Record{Key: []byte("k")}, 4)
	require.Equal(t, want, p.Partition(&kgo.Record{Key: []byte("k"), Partition: 5}, 4))
	require.Equal(t, 1, p.Partition(&kgo.Record{Partition: 5}, 4), "no key: partition modulo the count")
}

func TestRouterNext(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	r, err := NewRouter(nil, Policy{MaxAttempts: 2, Backoff: func(a int) time.Duration { return time.Duration(a) * time.Minute }}, "fn",
		func() time.Time { return at })
	require.NoError(t, err)
	rec := &kgo.Record{Topic: "o", Partition: 3, Offset: 9}
	st, exhausted := r.Next(rec, errors.New("e1"))
	require.False(t, exhausted)
	require.Equal(t, State{Attempts: 1, OriginTopic: "o", OriginPartition: 3, OriginOffset: 9, FirstFailure: at, LastError: "e1",
		NotBefore: at.Add(time.Minute), Function: "fn", History: []Failure{{1, at, "e1"}}}, st)
	rec2 := &kgo.Record{Topic: "o.retry", Partition: 0, Offset: 1, Headers: st.Headers(nil)}
	st2, exhausted := r.Next(rec2, errors.New("e2"))
	require.True(t, exhausted)
	require.Equal(t, 2, st2.Attempts)
	require.Equal(t, "o", st2.OriginTopic, "the origin stays the first topic")
	require.True(t, st2.NotBefore.IsZero())
	require.Len(t, st2.History, 2)

	bad := &kgo.Record{Topic: "o", Headers: []kgo.RecordHeader{{Key: HeaderAttempts, Value: []byte("x")}}}
	_, exhausted = r.Next(bad, errors.New("e"))
	require.True(t, exhausted, "malformed retry headers go to the DLQ rather than loop")
}

type flaky struct {
	mu    sync.Mutex
	calls map[string]int
	fails map[string]int // value -> failures before success (-1: always)
}

func (f *flaky) handle(_ context.Context, r *kgo.Record) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	v := string(r.Value)
	f.calls[v]++
	if n := f.fails[v]; n < 0 || f.calls[v] <= n {
		return fmt.Errorf("fail %s #%d", v, f.calls[v])
	}
	return nil
}

func (f *flaky) count(v string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[v]
}

func consumeTopic(t *testing.T, addrs []string, topic string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < n && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	require.Len(t, out, n, topic)
	return out
}

// TestConsumerRoutesFailures: a failing record goes to <topic>.retry on its
// partition with its key, the others are handled once, and everything is
// committed (a new consumer in the group sees nothing).
func TestConsumerRoutesFailures(t *testing.T) {
	c := newCluster(t, map[string]int32{"in": 4})
	addrs := c.ListenAddrs()
	prod, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	defer prod.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for i := 0; i < 20; i++ {
		require.NoError(t, prod.ProduceSync(ctx, &kgo.Record{Topic: "in", Partition: int32(i % 4), Key: []byte(fmt.Sprint("k", i)),
			Value: []byte(fmt.Sprint(i))}).FirstErr())
	}
	f := &flaky{calls: map[string]int{}, fails: map[string]int{"7": -1, "12": 1}}
	cons, err := NewConsumer("g", []string{"in"}, f.handle, WithPolicy(Policy{MaxAttempts: 3, Backoff: func(int) time.Duration { return time.Second }}),
		WithClientOpts(kgo.SeedBrokers(addrs...)))
	require.NoError(t, err)
	rctx, rcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- cons.Run(rctx) }()
	rs := consumeTopic(t, addrs, "in.retry", 2)
	rcancel()
	require.NoError(t, <-done)
	cons.Close()
	byValue := map[string]*kgo.Record{}
	for _, r := range rs {
		byValue[string(r.Value)] = r
	}
	for _, v := range []string{"7", "12"} {
		r := byValue[v]
		require.NotNil(t, r, v)
		require.Equal(t, "k"+v, string(r.Key))
		var i int
		fmt.Sscan(v, &i)
		require.Equal(t, int32(i%4), r.Partition)
		st, ok, err := Parse(r.Headers)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, 1, st.Attempts)
		require.Equal(t, "g", st.Function)
	}
	for i := 0; i < 20; i++ {
		require.Equal(t, 1, f.count(fmt.Sprint(i)), "record %d handled once", i)
	}

	again, err := NewConsumer("g", []string{"in"}, f.handle, WithClientOpts(kgo.SeedBrokers(addrs...)))
	require.NoError(t, err)
	defer again.Close()
	actx, acancel := context.WithTimeout(ctx, 3*time.Second)
	defer acancel()
	require.NoError(t, again.Run(actx))
	for i := 0; i < 20; i++ {
		require.Equal(t, 1, f.count(fmt.Sprint(i)), "committed: record %d not handled again", i)
	}
}

// TestBatchConsumerDeadLetters: with MaxAttempts 1 a failed batch goes
// straight to <topic>.dlq, every record of it.
func TestBatchConsumerDeadLetters(t *testing.T) {
	c := newCluster(t, map[string]int32{"b": 1})
	addrs := c.ListenAddrs()
	prod, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic("b"))
	require.NoError(t, err)
	defer prod.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, prod.ProduceSync(ctx, &kgo.Record{Value: []byte("a")}, &kgo.Record{Value: []byte("b")}).FirstErr())
	cons, err := NewBatchConsumer("g", []string{"b"}, func(context.Context, []*kgo.Record) error { return errors.New("batch failed") },
		WithPolicy(Policy{MaxAttempts: 1, Backoff: func(int) time.Duration { return 0 }}), WithClientOpts(kgo.SeedBrokers(addrs...)))
	require.NoError(t, err)
	defer cons.Close()
	rctx, rcancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- cons.Run(rctx) }()
	rs := consumeTopic(t, addrs, "b.dlq", 2)
	rcancel()
	require.NoError(t, <-done)
	for _, r := range rs {
		st, _, err := Parse(r.Headers)
		require.NoError(t, err)
		require.Equal(t, 1, st.Attempts)
		require.Equal(t, "batch failed", st.LastError)
		require.Len(t, st.History, 1)
	}
}

func TestCommitRefusedByARebalanceIsNotAnError(t *testing.T) {
	for _, err := range []error{kerr.UnknownMemberID, kerr.IllegalGeneration, kerr.RebalanceInProgress, fmt.Errorf("commit: %w", kerr.FencedInstanceID)} {
		require.True(t, rebalanced(err), "%v", err)
	}
	for _, err := range []error{kerr.GroupAuthorizationFailed, kerr.CoordinatorNotAvailable, errors.New("eof")} {
		require.False(t, rebalanced(err), "%v", err)
	}
}

package broker_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratamq/strata/brokerfleet/internal/broker"
	"github.com/stratamq/strata/brokerfleet/internal/brokertest"
	"github.com/stratamq/strata/pkg/segment"
)

// ackedSet records which record ids a producer got acknowledged.
type ackedSet struct {
	mu  sync.Mutex
	ids map[string]bool
}

func (a *ackedSet) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.ids)
}

// produceUntil produces uniquely-valued records until stop is closed,
// recording the acknowledged ones.
func produceUntil(ctx context.Context, cl *kgo.Client, topicName string, stop <-chan struct{}, acked *ackedSet) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		r := &kgo.Record{Topic: topicName, Key: []byte(strconv.Itoa(i % 64)), Value: []byte(fmt.Sprintf("rec-%08d", i))}
		cl.Produce(ctx, r, func(r *kgo.Record, err error) {
			if err == nil {
				acked.mu.Lock()
				acked.ids[string(r.Value)] = true
				acked.mu.Unlock()
			}
		})
		if i%100 == 99 {
			time.Sleep(time.Millisecond)
		}
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// readValues consumes the whole topic and returns how often each value
// appears.
func readValues(t *testing.T, addr, topicName string) map[string]int {
	t.Helper()
	adm := brokertest.Admin(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, topicName)
	require.NoError(t, err)
	total := int64(0)
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	cl := brokertest.Client(t, addr, kgo.ConsumeTopics(topicName), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	seen := map[string]int{}
	for n := int64(0); n < total; {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err())
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++; n++ })
	}
	return seen
}

func TestRestartMidStreamKeepsAcknowledgedRecords(t *testing.T) {
	b := brokertest.Start(t)
	const topicName = "restart"
	brokertest.CreateTopic(t, b.Addr, topicName, 3, nil)
	cl := brokertest.Client(t, b.Addr, kgo.RecordDeliveryTimeout(time.Minute), kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
	acked := &ackedSet{ids: map[string]bool{}}
	stop := make(chan struct{})
	ctx := context.Background()
	done := make(chan struct{})
	go func() { defer close(done); produceUntil(ctx, cl, topicName, stop, acked) }()

	waitFor(t, "first acks", func() bool { return acked.count() >= 3000 })
	b = b.Restart(t)
	before := acked.count()
	waitFor(t, "acks after restart", func() bool { return acked.count() >= before+3000 })
	close(stop)
	<-done
	require.NoError(t, cl.Flush(ctx))

	seen := readValues(t, b.Addr, topicName)
	acked.mu.Lock()
	defer acked.mu.Unlock()
	for id := range acked.ids {
		require.Equal(t, 1, seen[id], "acknowledged record %s must be stored exactly once", id)
	}
	for id, n := range seen {
		require.Equal(t, 1, n, "record %s stored %d times", id, n)
	}
}

// TestCrashKeepsFsyncedAcks pulls the plug on a broker whose filesystem
// loses everything not fsynced: with strata.durability=fsync every
// acknowledged record survives.
func TestCrashKeepsFsyncedAcks(t *testing.T) {
	mem := segment.NewMemFS()
	b := brokertest.Start(t, func(c *broker.Config) { c.FS = mem; c.DataDir = "/data" })
	const topicName = "crash"
	durability := "fsync"
	brokertest.CreateTopic(t, b.Addr, topicName, 2, map[string]*string{"strata.durability": &durability})
	cl := brokertest.Client(t, b.Addr)
	acked := &ackedSet{ids: map[string]bool{}}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { defer close(done); produceUntil(context.Background(), cl, topicName, stop, acked) }()
	waitFor(t, "acks", func() bool { return acked.count() >= 5000 })

	acked.mu.Lock()
	crashed := mem.Crash(0) // the plug is pulled while producing
	ackedAtCrash := make([]string, 0, len(acked.ids))
	for id := range acked.ids {
		ackedAtCrash = append(ackedAtCrash, id)
	}
	acked.mu.Unlock()
	close(stop)
	<-done
	cl.Close()
	b.Broker.Close()

	b2 := brokertest.Start(t, func(c *broker.Config) { c.FS = crashed; c.DataDir = "/data"; c.Meta = b.Cfg.Meta })
	seen := readValues(t, b2.Addr, topicName)
	for _, id := range ackedAtCrash {
		require.Equal(t, 1, seen[id], "acknowledged record %s lost or duplicated by the crash", id)
	}
}

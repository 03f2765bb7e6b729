package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestRollingRestart restarts the three brokers one after the other with
// SIGTERM (a clean stop hands leadership over first) while idempotent
// acks=all producers write and a consumer group reads: no produce fails,
// the consumers see only retriable errors, every acknowledged record is
// stored once at its acknowledged offset, and the longest gap in
// acknowledgements per partition (its unavailability) is reported and
// shorter than a lease, which only a handover achieves (a crashed
// leader's partitions wait for its lease to lapse).
func TestRollingRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("a multi-process rolling restart")
	}
	const partitions = 6
	f := startFleet(t, partitions)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	var mu sync.Mutex
	var acks []ack
	var produceErrs []error
	// franz-go refreshes metadata at most every MetadataMinAge (default
	// 5 s); the brokers restart about 2 s apart, so with the default the
	// second and third handovers wait for that refresh (gaps of 4-4.5 s)
	// and the test would measure the client, not the handover.
	prod, err := kgo.NewClient(kgo.SeedBrokers(f.addrs()...), kgo.DefaultProduceTopic("orders"),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordDeliveryTimeout(time.Minute),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
		kgo.MetadataMinAge(250*time.Millisecond))
	require.NoError(t, err)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			seq := map[int]int{}
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k := w*20 + i%20
				seq[k]++
				r := &kgo.Record{Key: []byte(fmt.Sprintf("key-%03d", k)), Value: []byte(fmt.Sprintf("%03d:%07d", k, seq[k]))}
				prod.Produce(ctx, r, func(r *kgo.Record, err error) {
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						produceErrs = append(produceErrs, err)
						return
					}
					acks = append(acks, ack{string(r.Key), string(r.Value), r.Partition, r.Offset, time.Now()})
				})
				time.Sleep(2 * time.Millisecond)
			}
		}(w)
	}

	// A consumer group member reads along and commits.
	var consumerErrs []error
	consumed := 0
	cons, err := kgo.NewClient(kgo.SeedBrokers(f.addrs()...), kgo.ConsumerGroup("rolling"), kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	require.NoError(t, err)
	consDone := make(chan struct{})
	go func() {
		defer close(consDone)
		for {
			fs := cons.PollFetches(ctx)
			if fs.IsClientClosed() || ctx.Err() != nil {
				return
			}
			mu.Lock()
			fs.EachError(func(topic string, p int32, err error) { consumerErrs = append(consumerErrs, err) })
			consumed += fs.NumRecords()
			mu.Unlock()
		}
	}()

	time.Sleep(2 * time.Second)
	var restarts []time.Time
	for id := range f.procs {
		p := f.procs[id]
		restarts = append(restarts, time.Now())
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
		require.NoError(t, <-p.exited, "broker %d exits cleanly", id)
		f.procs[id] = nil
		f.start(id)
		waitUntil(t, time.Minute, fmt.Sprintf("broker %d back in every ISR", id), func() bool {
			return inEveryISR(ctx, f, "orders", int32(id), partitions)
		})
		time.Sleep(time.Second)
	}
	time.Sleep(2 * time.Second)
	close(stop)
	wg.Wait()
	require.NoError(t, prod.Flush(ctx))
	prod.Close()
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		t.Logf("acked %d consumed %d produce errors %d consumer errors %v", len(acks), consumed, len(produceErrs), consumerErrs)
		adm := freshAdmin(t, f)
		lag, err := adm.Lag(context.Background(), "rolling")
		t.Logf("lag %+v err %v", lag, err)
	})
	waitUntil(t, time.Minute, "the consumer group to read everything", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return consumed >= len(acks)
	})
	cons.Close()
	<-consDone

	mu.Lock()
	defer mu.Unlock()
	require.Empty(t, produceErrs, "produce errors after the client's retries")
	for _, err := range consumerErrs {
		require.True(t, retriable(err), "non-retriable consumer error: %v", err)
	}
	// Unavailability: the longest gap between acknowledgements per
	// partition while the brokers restarted.
	sort.Slice(acks, func(i, j int) bool { return acks[i].at.Before(acks[j].at) })
	var report []string
	gaps := map[int32]time.Duration{}
	for p := int32(0); p < partitions; p++ {
		var prev time.Time
		var worst time.Duration
		for _, a := range acks {
			if a.partition != p || a.at.Before(restarts[0]) {
				continue
			}
			if !prev.IsZero() && a.at.Sub(prev) > worst {
				worst = a.at.Sub(prev)
			}
			prev = a.at
		}
		report = append(report, fmt.Sprintf("p%d %v", p, worst.Round(time.Millisecond)))
		gaps[p] = worst
	}
	t.Logf("rolling restart of 3 brokers: %d records acknowledged, %d consumed, %d retriable consumer errors; longest gap between acks per partition: %s",
		len(acks), consumed, len(consumerErrs), strings.Join(report, ", "))
	for p, gap := range gaps {
		require.Less(t, gap, f.lease, "partition %d went %v without an ack: longer than a lease, as if its leader crashed instead of handing over", p, gap)
	}
	require.Greater(t, len(acks), 1000)
	verifyAcked(t, f, acks)
}

// inEveryISR reports whether broker id is in the ISR of every partition of
// topic, as every running broker sees it.
func inEveryISR(ctx context.Context, f *fleet, topic string, id int32, partitions int) bool {
	for _, addr := range f.addrs() {
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
		if err != nil {
			return false
		}
		md, err := kadm.NewClient(cl).Metadata(ctx, topic)
		cl.Close()
		if err != nil || len(md.Topics[topic].Partitions) != partitions {
			return false
		}
		for _, p := range md.Topics[topic].Partitions {
			if p.Leader < 0 || !containsID(p.ISR, id) {
				return false
			}
		}
	}
	return true
}

func containsID(ids []int32, id int32) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// retriable reports whether a client error is one a Kafka client retries:
// a retriable Kafka code or a connection that went away.
func retriable(err error) bool {
	var ne net.Error
	return kerr.IsRetriable(err) || errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		// Group membership is not persisted: a member whose coordinator
		// moved is unknown to the new one, and franz-go rejoins under a
		// new member id (it reports the error and carries on).
		errors.Is(err, kerr.UnknownMemberID)
}

package main

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// freshAdmin returns an admin client with no cached coordinators. kgo
// (v1.22) clears a cached coordinator after a failed dial only on its
// single-group request path, not on the batched OffsetFetch path kadm uses,
// so a long-lived admin client keeps dialing a dead coordinator until its
// metadata is refreshed; consumers are not affected.
func freshAdmin(t *testing.T, f *fleet) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.addrs()...))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// groupOffsets reads a group's committed offsets by partition of "orders".
func groupOffsets(t *testing.T, f *fleet, group string) map[int32]int64 {
	t.Helper()
	out := map[int32]int64{}
	waitUntil(t, 30*time.Second, "committed offsets readable", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		adm := freshAdmin(t, f)
		resp, err := adm.FetchOffsets(ctx, group)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			t.Logf("fetch offsets of %s: %v", group, err)
			return false
		}
		clear(out)
		resp.Each(func(o kadm.OffsetResponse) { out[o.Partition] = o.At })
		return true
	})
	return out
}

// TestGroupCoordinatorKill9 kills the broker coordinating a group with
// SIGKILL while a member consumes and commits: another broker takes the
// group's shard, the member carries on, committed offsets survive, and a
// new member resumes exactly at them; no record is skipped.
func TestGroupCoordinatorKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("a multi-process failover run")
	}
	f := startFleet(t, 6)
	ctx := context.Background()
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.addrs()...))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)

	const n = 3000
	for i := 0; i < n; i++ {
		cl.Produce(ctx, &kgo.Record{Topic: "orders", Key: []byte(fmt.Sprint(i % 50)), Value: []byte(fmt.Sprintf("order-%05d", i))}, nil)
	}
	require.NoError(t, cl.Flush(ctx))
	ends, err := adm.ListEndOffsets(ctx, "orders")
	require.NoError(t, err)
	var total int64
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	require.Equal(t, int64(n), total)

	var mu sync.Mutex
	processed := map[string]int{}
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(processed) }
	// consume processes slowly and commits what it processed after each
	// poll; it reports the first offset it saw per partition.
	consume := func(stop <-chan struct{}) (first map[int32]int64, done chan struct{}) {
		first = map[int32]int64{}
		done = make(chan struct{})
		c, err := kgo.NewClient(kgo.SeedBrokers(f.addrs()...), kgo.ConsumerGroup("billing"), kgo.ConsumeTopics("orders"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(),
			kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(500*time.Millisecond),
			kgo.FetchMaxPartitionBytes(2000), kgo.FetchMaxBytes(4000), kgo.FetchMaxWait(100*time.Millisecond))
		require.NoError(t, err)
		go func() {
			defer close(done)
			defer c.Close()
			for {
				select {
				case <-stop:
					return
				default:
				}
				pctx, cancel := context.WithTimeout(ctx, time.Second)
				fs := c.PollFetches(pctx)
				cancel()
				var recs []*kgo.Record
				fs.EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
				for _, r := range recs {
					mu.Lock()
					if _, ok := first[r.Partition]; !ok {
						first[r.Partition] = r.Offset
					}
					processed[string(r.Value)]++
					mu.Unlock()
					time.Sleep(3 * time.Millisecond) // the work
				}
				// Commit what was processed; a commit that fails while the
				// coordinator moves is retried by the next round.
				cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				_ = c.CommitUncommittedOffsets(cctx)
				cancel()
			}
		}()
		return first, done
	}

	stopA := make(chan struct{})
	_, doneA := consume(stopA)
	waitUntil(t, 60*time.Second, "a third consumed", func() bool { return count() >= n/3 })
	pre := groupOffsets(t, f, "billing")
	coords := freshAdmin(t, f).FindGroupCoordinators(ctx, "billing")
	require.NoError(t, coords.Error())
	victim := coords["billing"].NodeID
	require.NoError(t, f.procs[victim].cmd.Process.Kill())
	<-f.procs[victim].exited
	killedAt := time.Now()
	t.Logf("killed coordinator %d with %d of %d consumed", victim, count(), n)

	// The group works under a new coordinator: commits move again.
	waitUntil(t, 60*time.Second, "commits accepted by a new coordinator", func() bool {
		coords := freshAdmin(t, f).FindGroupCoordinators(ctx, "billing")
		if coords.Error() != nil || coords["billing"].NodeID == victim {
			return false
		}
		var was, now int64
		for _, o := range pre {
			was += o
		}
		for _, o := range groupOffsets(t, f, "billing") {
			now += o
		}
		return now > was+100
	})
	t.Logf("commits accepted again %.1f s after the kill", time.Since(killedAt).Seconds())
	close(stopA)
	<-doneA
	mid := groupOffsets(t, f, "billing")
	for p, o := range pre {
		require.GreaterOrEqual(t, mid[p], o, "partition %d: a committed offset went back", p)
	}

	// A new member starts exactly at the committed offsets and finishes.
	stopB := make(chan struct{})
	firstB, doneB := consume(stopB)
	waitUntil(t, 90*time.Second, "every record processed and committed", func() bool {
		if count() < n {
			return false
		}
		done := true
		final := groupOffsets(t, f, "billing")
		ends.Each(func(o kadm.ListedOffset) { done = done && final[o.Partition] == o.Offset })
		return done
	})
	close(stopB)
	<-doneB
	mu.Lock()
	for p, off := range firstB {
		require.Equal(t, mid[p], off, "partition %d: the new member did not start at the committed offset", p)
	}
	defer mu.Unlock()
	require.Len(t, processed, n, "every record processed")
}

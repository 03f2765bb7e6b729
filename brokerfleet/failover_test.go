package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratamq/strata/pkg/metastore/dynamo/dynamotest"
	"github.com/stratamq/strata/pkg/segment"
)

// fleet is three `brokerfleet serve` processes sharing a DynamoDB table.
type fleet struct {
	t        *testing.T
	endpoint string
	dirs     [3]string
	procs    [3]*devProcess
	lease    time.Duration
	// args are added to every broker's command line.
	args []string
	// listen is each broker's address once started: a restarted broker
	// comes back on it, as a broker behind a stable name would, so
	// clients that knew it reach it again.
	listen [3]string
}

func (f *fleet) start(id int) {
	listen := f.listen[id]
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	args := []string{"serve", "-node-id", strconv.Itoa(id), "-listen", listen, "-data", f.dirs[id],
		"-metastore", "dynamodb://strata-failover", "-aws-endpoint", f.endpoint, "-create-table",
		"-lease", f.lease.String(), "-lease-margin", "500ms", "-replica-lag-max", "2s", "-watch-interval", "200ms",
		"-log-level", logLevel()}
	f.procs[id] = startProcess(f.t, append(args, f.args...)...)
	p := f.procs[id]
	f.listen[id] = p.addr
	f.t.Cleanup(func() {
		if dir := os.Getenv("STRATA_FAILOVER_LOGS"); dir != "" {
			name := filepath.Join(dir, fmt.Sprintf("broker-%d-%s.log", id, strings.ReplaceAll(p.addr, ":", "_")))
			_ = os.WriteFile(name, p.stderr.Bytes(), 0o644)
		} else if f.t.Failed() {
			f.t.Logf("broker %d (%s) log:\n%s", id, p.addr, tail(p.stderr.String(), 60))
		}
	})
}

func logLevel() string {
	if v := os.Getenv("STRATA_FAILOVER_LOGLEVEL"); v != "" {
		return v
	}
	return "info"
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// startFleet starts three brokers (lease 3 s) and creates the topic
// "orders" with the given partitions, three replicas each and
// min.insync.replicas=2.
func startFleet(t *testing.T, partitions int32, args ...string) *fleet {
	t.Helper()
	f := &fleet{t: t, endpoint: dynamotest.StartMinidyn(t), lease: 3 * time.Second, args: args}
	for i := range f.dirs {
		f.dirs[i] = t.TempDir()
		f.start(i)
	}
	ctx := context.Background()
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.addrs()...))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	waitUntil(t, 30*time.Second, "three brokers", func() bool {
		md, err := adm.Metadata(ctx)
		return err == nil && len(md.Brokers) == 3
	})
	resp, err := adm.CreateTopic(ctx, partitions, 3, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, "orders")
	require.NoError(t, err)
	require.NoError(t, resp.Err)
	return f
}

func (f *fleet) addrs() []string {
	var out []string
	for _, p := range f.procs {
		if p != nil {
			out = append(out, p.addr)
		}
	}
	return out
}

type ack struct {
	key, value string
	partition  int32
	offset     int64
	at         time.Time
}

// produceLog collects what a failover test's producer was told: acks,
// failed records, and franz-go's reports of data loss (a batch answered
// with OUT_OF_ORDER_SEQUENCE_NUMBER or UNKNOWN_PRODUCER_ID: the broker
// forgot batches of this producer).
type produceLog struct {
	mu       sync.Mutex
	acks     []ack
	fails    []produceFailure
	dataLoss []string
}

// produceFailure is a record the producer gave up on, and when.
type produceFailure struct {
	value string
	err   error
	at    time.Time
}

// promise is the produce callback that records into l.
func (l *produceLog) promise(r *kgo.Record, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.fails = append(l.fails, produceFailure{string(r.Value), err, time.Now()})
		return
	}
	l.acks = append(l.acks, ack{string(r.Key), string(r.Value), r.Partition, r.Offset, time.Now()})
}

// onDataLoss is for kgo.ProducerOnDataLossDetected.
func (l *produceLog) onDataLoss(topic string, p int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dataLoss = append(l.dataLoss, fmt.Sprintf("%s/%d at %s", topic, p, time.Now().Format("15:04:05.000")))
}

// window is a stretch of time in which a fault may make records fail.
type window struct{ from, to time.Time }

func (w window) String() string {
	return w.from.Format("15:04:05.000") + "-" + w.to.Format("15:04:05.000")
}

// unavailable reports whether err is how franz-go gives up on a record
// whose partition it could not reach: out of time or retries, or the
// last attempt ended in a retriable Kafka error (NOT_LEADER_OR_FOLLOWER,
// UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT...)
// or a broken connection. Anything else, such as OUT_OF_ORDER_SEQUENCE_NUMBER
// or INVALID_RECORD, means the broker broke the producer's contract.
func unavailable(err error) bool {
	return errors.Is(err, kgo.ErrRecordTimeout) || errors.Is(err, kgo.ErrRecordRetries) ||
		kerr.IsRetriable(err) || kgo.IsRetryableBrokerErr(err)
}

// check asserts what Kafka promises an idempotent acks=all producer with
// unbounded retries and a delivery timeout longer than any failover: no
// data loss is reported, and a record fails only while a fault keeps its
// partition from a reachable leader (inside one of windows), and only in
// the unavailable way. Call it with l.mu held.
func (l *produceLog) check(t *testing.T, windows []window) {
	t.Helper()
	require.Empty(t, l.dataLoss, "franz-go detected data loss (a sequence the broker forgot)")
	kinds := map[string]int{}
	for _, f := range l.fails {
		require.True(t, unavailable(f.err), "record %s failed with a non-retriable error: %v", f.value, f.err)
		inside := false
		for _, w := range windows {
			inside = inside || (!f.at.Before(w.from) && !f.at.After(w.to))
		}
		require.True(t, inside, "record %s failed at %s, outside every fault's window %v: %v",
			f.value, f.at.Format("15:04:05.000"), windows, f.err)
		kinds[f.err.Error()]++
	}
	if len(l.fails) > 0 {
		t.Logf("%d records failed, all retriable and during a fault: %v", len(l.fails), kinds)
	}
}

// TestFailoverKill9 kills the leader of partition 0 with SIGKILL five times
// while idempotent acks=all producers write keyed records, restarting it
// each time: every acknowledged record is read back exactly once, per-key
// order holds, records fail only in retriable ways and only within a
// failover of a kill, and the replicas' logs are identical.
func TestFailoverKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("a 60 s multi-process failover run")
	}
	run := 60 * time.Second
	if v := os.Getenv("STRATA_FAILOVER_RUN"); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(t, err)
		run = d
	}
	f := startFleet(t, 3)
	ctx := context.Background()

	var pl produceLog
	prod, err := kgo.NewClient(kgo.SeedBrokers(f.addrs()...), kgo.DefaultProduceTopic("orders"),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordDeliveryTimeout(2*time.Minute),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
		kgo.ProducerOnDataLossDetected(pl.onDataLoss))
	require.NoError(t, err)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ { // four producer loops, 25 keys each
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
				k := w*25 + i%25
				seq[k]++
				r := &kgo.Record{Key: []byte(fmt.Sprintf("key-%03d", k)), Value: []byte(fmt.Sprintf("%03d:%07d", k, seq[k]))}
				prod.Produce(ctx, r, pl.promise)
				time.Sleep(2 * time.Millisecond)
			}
		}(w)
	}

	// Kill the leader of partition 0 five times, spread over the run, each
	// once partition 0 took writes again after the previous kill.
	var kills []time.Time // when each kill had taken effect
	var windows []window  // from just before each kill
	ackedSince := func(at time.Time) bool {
		pl.mu.Lock()
		defer pl.mu.Unlock()
		for i := len(pl.acks) - 1; i >= 0 && pl.acks[i].at.After(at); i-- {
			if pl.acks[i].partition == 0 {
				return true
			}
		}
		return false
	}
	for k := 0; k < 5; k++ {
		time.Sleep(run / 6)
		if len(kills) > 0 {
			waitUntil(t, 60*time.Second, "partition 0 to take writes again", func() bool { return ackedSince(kills[len(kills)-1]) })
		}
		leader := leaderOf(t, f.addrs(), "orders", 0)
		require.GreaterOrEqual(t, leader, int32(0), "partition 0 has a leader before kill %d", k+1)
		p := f.procs[leader]
		windows = append(windows, window{from: time.Now()})
		require.NoError(t, p.cmd.Process.Kill())
		<-p.exited
		kills = append(kills, time.Now())
		f.procs[leader] = nil
		time.Sleep(500 * time.Millisecond)
		f.start(int(leader))
	}
	time.Sleep(run / 6)
	close(stop)
	wg.Wait()
	require.NoError(t, prod.Flush(ctx))
	prod.Close()

	pl.mu.Lock()
	defer pl.mu.Unlock()
	acks := pl.acks
	sort.Slice(acks, func(i, j int) bool { return acks[i].at.Before(acks[j].at) })
	// A kill may fail records until partition 0 has a new leader: at
	// most the failover bound asserted below.
	for i := range windows {
		windows[i].to = windows[i].from.Add(10 * f.lease)
	}
	pl.check(t, windows)
	for i, k := range kills {
		var last, next time.Time
		for _, a := range acks {
			if a.partition != 0 {
				continue
			}
			if a.at.Before(k) {
				last = a.at
			} else if next.IsZero() {
				next = a.at
			}
		}
		if !last.IsZero() && !next.IsZero() {
			t.Logf("kill %d: partition 0 failover (last ack before the kill to first ack after) %v", i+1, next.Sub(last).Round(time.Millisecond))
			require.Less(t, next.Sub(last), 10*f.lease, "failover %d took too long", i+1)
		}
	}
	t.Logf("%d records acknowledged, %d failed after retries", len(acks), len(pl.fails))
	require.Greater(t, len(acks), 1000)

	verifyAcked(t, f, acks)

	stopAndCompareReplicas(t, f, "orders", 3)
}

// leaderOf asks the fleet for a partition's leader.
func leaderOf(t *testing.T, addrs []string, topic string, p int32) int32 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	require.NoError(t, err)
	defer cl.Close()
	leader := int32(-1)
	waitUntil(t, 30*time.Second, "a leader", func() bool {
		md, err := kadm.NewClient(cl).Metadata(context.Background(), topic)
		if err != nil {
			return false
		}
		pd, ok := md.Topics[topic].Partitions[p]
		if !ok || pd.Leader < 0 {
			return false
		}
		leader = pd.Leader
		return true
	})
	return leader
}

func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		require.True(t, time.Now().Before(deadline), "timed out waiting for %s", what)
		time.Sleep(50 * time.Millisecond)
	}
}

// verifyAcked reads the topic back: each acknowledged record exactly once,
// in per-key order, at the offset it was acknowledged with.
func verifyAcked(t *testing.T, f *fleet, acks []ack) {
	t.Helper()
	ctx := context.Background()
	cons, err := kgo.NewClient(kgo.SeedBrokers(f.addrs()...), kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cons.Close()
	type pos struct {
		p int32
		o int64
	}
	seen := map[string]int{}
	at := map[string]pos{}
	lastSeq := map[string]int{}
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	ackedValues := map[string]bool{}
	for _, a := range acks {
		ackedValues[a.value] = true
	}
	found := 0
	for found < len(ackedValues) {
		fs := cons.PollFetches(cctx)
		if cctx.Err() != nil {
			t.Errorf("found %d of %d acknowledged records", found, len(ackedValues))
			break
		}
		fs.EachRecord(func(r *kgo.Record) {
			v := string(r.Value)
			seen[v]++
			at[v] = pos{r.Partition, r.Offset}
			if ackedValues[v] && seen[v] == 1 {
				found++
			}
			key, seqStr, _ := strings.Cut(v, ":")
			s, _ := strconv.Atoi(seqStr)
			require.Greater(t, s, lastSeq[key], "per-key order broken for %s at %d/%d", key, r.Partition, r.Offset)
			lastSeq[key] = s
		})
	}
	for _, a := range acks {
		if seen[a.value] != 1 {
			t.Errorf("acknowledged record %s at %d/%d seen %d times", a.value, a.partition, a.offset, seen[a.value])
		}
		if seen[a.value] == 1 {
			require.Equal(t, pos{a.partition, a.offset}, at[a.value], "record %s at its acknowledged offset", a.value)
		}
	}
	for v, n := range seen {
		require.Equal(t, 1, n, "record %s stored %d times", v, n)
	}
	if t.Failed() {
		for i, dir := range f.dirs {
			matches, _ := filepath.Glob(filepath.Join(dir, "logs", "orders-*", "0"))
			lg, err := segment.Open(segment.Options{FS: segment.OS(), Dir: matches[0]})
			if err != nil {
				t.Logf("replica %d: %v", i, err)
				continue
			}
			var epochs []string
			last := int32(-99)
			lg.ScanHeaders(0, func(h segment.Header) bool {
				if h.PartitionLeaderEpoch != last {
					epochs = append(epochs, fmt.Sprintf("e%d@%d", h.PartitionLeaderEpoch, h.BaseOffset))
					last = h.PartitionLeaderEpoch
				}
				return true
			})
			t.Logf("replica %d partition 0: start %d end %d epochs %v", i, lg.StartOffset(), lg.NextOffset(), epochs)
			lg.Close()
		}
	}

}

// stopAndCompareReplicas stops the fleet cleanly and compares the
// replicas' logs of every partition byte for byte.
func stopAndCompareReplicas(t *testing.T, f *fleet, topic string, partitions int) {
	t.Helper()
	time.Sleep(time.Second)
	for _, p := range f.procs {
		require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
		<-p.exited
	}
	for part := 0; part < partitions; part++ {
		var logs [][]byte
		for _, dir := range f.dirs {
			matches, _ := filepath.Glob(filepath.Join(dir, "logs", topic+"-*", strconv.Itoa(part)))
			require.Len(t, matches, 1, "partition %d in %s", part, dir)
			lg, err := segment.Open(segment.Options{FS: segment.OS(), Dir: matches[0]})
			require.NoError(t, err)
			data, err := lg.Read(nil, lg.StartOffset(), 1<<30, lg.NextOffset())
			require.NoError(t, err)
			require.NoError(t, lg.Close())
			logs = append(logs, data)
		}
		for i := 1; i < 3; i++ {
			require.True(t, bytes.Equal(logs[0], logs[i]), "partition %d: replica in %s differs (%d vs %d bytes)", part, f.dirs[i], len(logs[i]), len(logs[0]))
		}
	}
}

// TestPausedLeaderStepsDown SIGSTOPs the leader for twice its lease while
// producers write: a new leader takes over; after SIGCONT the old one
// follows, truncates if it must, rejoins the ISR, nothing acknowledged is
// lost or duplicated, and records fail only in retriable ways and only
// until the old leader is back in the ISR.
func TestPausedLeaderStepsDown(t *testing.T) {
	if testing.Short() {
		t.Skip("a multi-process pause test")
	}
	f := startFleet(t, 1)
	ctx := context.Background()
	admCl, err := kgo.NewClient(kgo.SeedBrokers(f.addrs()...))
	require.NoError(t, err)
	defer admCl.Close()
	adm := kadm.NewClient(admCl)

	var pl produceLog
	prod, err := kgo.NewClient(kgo.SeedBrokers(f.addrs()...), kgo.DefaultProduceTopic("orders"),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordDeliveryTimeout(2*time.Minute),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
		kgo.ProducerOnDataLossDetected(pl.onDataLoss))
	require.NoError(t, err)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 1; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			k := i % 20
			r := &kgo.Record{Key: []byte(fmt.Sprintf("key-%03d", k)), Value: []byte(fmt.Sprintf("%03d:%07d", k, i))}
			prod.Produce(ctx, r, pl.promise)
			time.Sleep(2 * time.Millisecond)
		}
	}()
	time.Sleep(3 * time.Second)
	old := leaderOf(t, f.addrs(), "orders", 0)
	paused := f.procs[old]
	require.NoError(t, paused.cmd.Process.Signal(syscall.SIGSTOP))
	pausedAt := time.Now()
	var others []string
	for i, p := range f.procs {
		if int32(i) != old {
			others = append(others, p.addr)
		}
	}
	waitUntil(t, 30*time.Second, "a new leader", func() bool { return leaderOf(t, others, "orders", 0) != old })
	t.Logf("new leader after %v of pause", time.Since(pausedAt).Round(time.Millisecond))
	time.Sleep(time.Until(pausedAt.Add(2 * f.lease)))
	require.NoError(t, paused.cmd.Process.Signal(syscall.SIGCONT))
	waitUntil(t, 60*time.Second, "the old leader back in the ISR", func() bool {
		md, err := adm.Metadata(ctx, "orders")
		if err != nil {
			return false
		}
		p := md.Topics["orders"].Partitions[0]
		return p.Leader != old && len(p.ISR) == 3
	})
	// Records may fail from the pause until the old leader is a follower
	// in the ISR again (and a lease more, for the client to notice).
	fault := window{pausedAt, time.Now().Add(f.lease)}
	time.Sleep(2 * time.Second)
	close(stop)
	<-done
	require.NoError(t, prod.Flush(ctx))
	prod.Close()
	pl.mu.Lock()
	defer pl.mu.Unlock()
	t.Logf("%d records acknowledged, %d failed after retries", len(pl.acks), len(pl.fails))
	pl.check(t, []window{fault})
	require.Greater(t, len(pl.acks), 1000)
	verifyAcked(t, f, pl.acks)
	stopAndCompareReplicas(t, f, "orders", 1)
}

package main

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// shareChildEnv makes the test binary the share consumer of
// TestShareConsumerKill9 (TestMain): "bootstrap,group,topic,n".
const shareChildEnv = "STRATA_TEST_SHARE_CHILD"

// shareChild is the consumer TestShareConsumerKill9 kills: it joins the
// share group, waits until n records are buffered (acquired by its
// ShareFetches), takes them in one poll, prints them and holds them
// without acknowledging (kgo accepts a poll's records only at the next
// poll, which never comes) until it is killed. Its stdout:
//
//	fetch <unix ns>          before its first ShareFetch was written: no lock it holds was taken earlier
//	held <offset> <count>    a record it holds, with its delivery count
//	holding <n>              all printed
func shareChild() int {
	f := strings.Split(os.Getenv(shareChildEnv), ",")
	if len(f) != 4 {
		fmt.Fprintln(os.Stderr, "share child: want bootstrap,group,topic,n")
		return 2
	}
	n, _ := strconv.Atoi(f[3])
	var firstFetch atomic.Int64
	cl, err := kgo.NewClient(kgo.SeedBrokers(f[0]), kgo.ShareGroup(f[1]), kgo.ConsumeTopics(f[2]),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.WithHooks(shareFetchHook{&firstFetch}),
		kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelInfo, nil)))
	if err != nil {
		fmt.Fprintln(os.Stderr, "share child:", err)
		return 1
	}
	deadline := time.Now().Add(2 * time.Minute)
	for cl.BufferedFetchRecords() < int64(n) {
		if time.Now().After(deadline) {
			fmt.Fprintf(os.Stderr, "share child: %d of %d records buffered\n", cl.BufferedFetchRecords(), n)
			return 1
		}
		time.Sleep(20 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	recs := cl.PollRecords(ctx, 0).Records()
	cancel()
	w := bufio.NewWriter(os.Stdout)
	fmt.Fprintf(w, "fetch %d\n", firstFetch.Load())
	for _, r := range recs {
		fmt.Fprintf(w, "held %d %d\n", r.Offset, r.DeliveryCount())
	}
	fmt.Fprintf(w, "holding %d\n", len(recs))
	w.Flush()
	time.Sleep(time.Hour) // killed long before
	return 0
}

// shareFetchHook stores when the client's first ShareFetch began to be
// written.
type shareFetchHook struct{ first *atomic.Int64 }

func (h shareFetchHook) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, timeToWrite time.Duration, _ error) {
	if key == int16(kmsg.ShareFetch) {
		h.first.CompareAndSwap(0, time.Now().Add(-timeToWrite).UnixNano())
	}
}

// TestShareConsumerKill9 is the acceptance item "a consumer killed with
// kill -9 while holding acquired records: they are redelivered to others
// after the lock duration, with the delivery count raised; none lost",
// with real processes: a share consumer in a child process acquires every
// record of a topic (on a `brokerfleet dev` broker) and is killed with
// SIGKILL before acknowledging any. A second consumer, started at once,
// gets the records produced after the kill right away (delivery count 1)
// and the held ones only once their locks expired (never earlier than
// the child's first ShareFetch plus the lock duration), each exactly
// once with delivery count 2; it accepts everything and the group's
// share start offset reaches the end of the topic: nothing lost.
func TestShareConsumerKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("a multi-process run")
	}
	const (
		topic, group = "kill9-jobs", "kill9-workers"
		held, fresh  = 30, 10                // records the child holds, records produced after the kill
		lock         = 8 * time.Second       // share.record.lock.duration.ms
		slack        = 50 * time.Millisecond // clock reads of two processes
	)
	p := startDev(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	admin, err := kgo.NewClient(kgo.SeedBrokers(p.addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	defer admin.Close()
	adm := kadm.NewClient(admin)
	resp, err := adm.CreateTopic(ctx, 1, 1, nil, topic)
	require.NoError(t, err)
	require.NoError(t, resp.Err)
	produce := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			admin.Produce(ctx, &kgo.Record{Topic: topic, Key: []byte(strconv.Itoa(i)), Value: []byte("job")}, nil)
		}
		require.NoError(t, admin.Flush(ctx))
	}
	produce(0, held)
	alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, group
	for k, v := range map[string]string{"share.auto.offset.reset": "earliest", "share.record.lock.duration.ms": strconv.Itoa(int(lock.Milliseconds()))} {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		res.Configs = append(res.Configs, c)
	}
	alter.Resources = append(alter.Resources, res)
	aresp, err := alter.RequestWith(ctx, admin)
	require.NoError(t, err)
	for _, r := range aresp.Resources {
		require.NoError(t, kerr.ErrorForCode(r.ErrorCode), "group configs")
	}

	// The child acquires and holds every record.
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), shareChildEnv+"="+strings.Join([]string{p.addr, group, topic, strconv.Itoa(held)}, ","))
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	lines := make(chan string, held+2)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var firstFetch time.Time
	heldOffsets := map[int64]bool{}
read:
	for {
		select {
		case l, ok := <-lines:
			require.True(t, ok, "the child ended before holding its records:\n%s", tail(stderr.String(), 40))
			f := strings.Fields(l)
			switch {
			case len(f) == 2 && f[0] == "fetch":
				ns, _ := strconv.ParseInt(f[1], 10, 64)
				require.NotZero(t, ns, "no ShareFetch written before the records arrived")
				firstFetch = time.Unix(0, ns)
			case len(f) == 3 && f[0] == "held":
				off, _ := strconv.ParseInt(f[1], 10, 64)
				require.Equal(t, "1", f[2], "offset %d: first delivery", off)
				heldOffsets[off] = true
			case len(f) == 2 && f[0] == "holding":
				break read
			default:
				t.Fatalf("child: %q", l)
			}
		case <-time.After(2 * time.Minute):
			t.Fatalf("the child holds no records after 2 minutes:\n%s", tail(stderr.String(), 40))
		}
	}
	require.Len(t, heldOffsets, held, "the child holds every record")
	require.NoError(t, cmd.Process.Kill()) // SIGKILL: no leave, no acknowledgement, no release
	killed := time.Now()
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the child outlived SIGKILL by 30 s")
	}
	earliest := firstFetch.Add(lock - slack) // no lock the child held can expire before
	t.Logf("child: first ShareFetch %v before the kill; its locks expire %v after the kill at the earliest",
		killed.Sub(firstFetch).Round(time.Millisecond), earliest.Sub(killed).Round(time.Millisecond))

	// Another consumer, at once; then records the child never saw.
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.addrs...), kgo.ShareGroup(group), kgo.ConsumeTopics(topic),
		kgo.FetchMaxWait(200*time.Millisecond))
	require.NoError(t, err)
	defer cl.Close()
	produce(held, held+fresh)
	type delivery struct {
		count int32
		at    time.Time
	}
	got := map[int64]delivery{}
	for len(got) < held+fresh && ctx.Err() == nil {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollFetches(pctx)
		pcancel()
		now := time.Now()
		for _, r := range fs.Records() {
			_, dup := got[r.Offset]
			require.False(t, dup, "offset %d delivered twice to the second consumer", r.Offset)
			got[r.Offset] = delivery{r.DeliveryCount(), now}
			if heldOffsets[r.Offset] {
				require.False(t, now.Before(earliest), "offset %d, held by the killed child, redelivered %v after the kill: before its lock expired",
					r.Offset, now.Sub(killed).Round(time.Millisecond))
			}
			r.Ack(kgo.AckAccept)
		}
		if len(fs.Records()) > 0 {
			require.NoError(t, cl.FlushAcks(ctx))
		}
	}
	require.Len(t, got, held+fresh, "records lost; got offsets %v", slices.Sorted(maps.Keys(got)))
	var lastHeld, firstFresh time.Time
	for off, d := range got {
		if heldOffsets[off] {
			require.GreaterOrEqual(t, d.count, int32(2), "offset %d: delivery count after the child's", off)
			require.EqualValues(t, 2, d.count, "offset %d: delivered to the child and to the second consumer only", off)
			if d.at.After(lastHeld) {
				lastHeld = d.at
			}
		} else {
			require.EqualValues(t, 1, d.count, "offset %d: produced after the kill", off)
			if firstFresh.IsZero() || d.at.Before(firstFresh) {
				firstFresh = d.at
			}
		}
	}
	t.Logf("second consumer: fresh records from %v after the kill, the held ones by %v after it",
		firstFresh.Sub(killed).Round(time.Millisecond), lastHeld.Sub(killed).Round(time.Millisecond))

	// Every record is acknowledged: the share start offset is the end.
	waitUntil(t, 30*time.Second, "share start offset at the end", func() bool {
		req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
		rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
		rg.GroupID = group
		rt := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
		rt.Topic, rt.Partitions = topic, []int32{0}
		rg.Topics = append(rg.Topics, rt)
		req.Groups = append(req.Groups, rg)
		resp, err := req.RequestWith(ctx, admin)
		return err == nil && len(resp.Groups) == 1 && len(resp.Groups[0].Topics) == 1 &&
			len(resp.Groups[0].Topics[0].Partitions) == 1 && resp.Groups[0].Topics[0].Partitions[0].StartOffset == held+fresh
	})
}

package broker_test

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratamq/strata/brokerfleet/internal/brokertest"
)

// seenSet records consumed values, and who consumed what.
type seenSet struct {
	mu   sync.Mutex
	vals map[string]int
}

func (s *seenSet) add(v string) {
	s.mu.Lock()
	s.vals[v]++
	s.mu.Unlock()
}

func (s *seenSet) has(vals []string) (missing int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range vals {
		if s.vals[v] == 0 {
			missing++
		}
	}
	return missing
}

// groupMember is a kgo consumer in a group, polling until stopped.
type groupMember struct {
	cl       *kgo.Client
	done     chan struct{}
	polled   atomic.Int64
	assigned atomic.Int64
}

func startMember(t *testing.T, addr, group, topicName string, seen *seenSet, opts ...kgo.Opt) *groupMember {
	t.Helper()
	m := &groupMember{done: make(chan struct{})}
	base := []kgo.Opt{
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topicName),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100 * time.Millisecond),
		kgo.SessionTimeout(6 * time.Second), kgo.HeartbeatInterval(300 * time.Millisecond),
		kgo.AutoCommitInterval(300 * time.Millisecond),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
			for _, ps := range a {
				m.assigned.Add(int64(len(ps)))
			}
		}),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, r map[string][]int32) {
			// Commit what was polled before giving partitions away (what
			// kgo does by default, kept when overriding the callback).
			_ = cl.CommitUncommittedOffsets(ctx)
			for _, ps := range r {
				m.assigned.Add(-int64(len(ps)))
			}
		}),
		// Partitions are lost (not revoked) when the member is dropped,
		// e.g. when the group's coordinator shard moves while it runs.
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, l map[string][]int32) {
			for _, ps := range l {
				m.assigned.Add(-int64(len(ps)))
			}
		}),
	}
	cl, err := kgo.NewClient(append(append(base, kgo.SeedBrokers(addr)), opts...)...)
	require.NoError(t, err)
	m.cl = cl
	go func() {
		defer close(m.done)
		for {
			fs := cl.PollFetches(context.Background())
			if fs.IsClientClosed() {
				return
			}
			fs.EachRecord(func(r *kgo.Record) {
				seen.add(string(r.Value))
				m.polled.Add(1)
			})
		}
	}()
	return m
}

// leave commits what was polled and leaves the group.
func (m *groupMember) leave() {
	m.cl.Close() // with autocommit: commits the polled offsets, then LeaveGroup
	<-m.done
}

func TestGroupMembersComeAndGo(t *testing.T) {
	brokers := startCluster(t, 3)
	addr := brokers[0].Addr
	brokertest.CreateTopic(t, addr, "flow", 12, nil)
	seen := &seenSet{vals: map[string]int{}}

	// Records flow the whole time.
	prod := brokertest.Client(t, addr, kgo.ProducerLinger(5*time.Millisecond))
	var mu sync.Mutex
	var acked []string
	stop := make(chan struct{})
	prodDone := make(chan struct{})
	go func() {
		defer close(prodDone)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			v := fmt.Sprintf("rec-%06d", i)
			r := &kgo.Record{Topic: "flow", Key: []byte(fmt.Sprint(i % 97)), Value: []byte(v)}
			if err := prod.ProduceSync(context.Background(), r).FirstErr(); err == nil {
				mu.Lock()
				acked = append(acked, v)
				mu.Unlock()
			}
			if i%50 == 0 {
				time.Sleep(5 * time.Millisecond)
			}
		}
	}()
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }

	// Three members join one after another; each gets a share.
	m1 := startMember(t, addr, "flowers", "flow", seen)
	waitFor(t, "member 1 owns all 12 partitions", func() bool { return m1.assigned.Load() == 12 })
	m2 := startMember(t, addr, "flowers", "flow", seen)
	waitFor(t, "two members with 6 partitions each", func() bool {
		return m1.assigned.Load() == 6 && m2.assigned.Load() == 6
	})
	m3 := startMember(t, addr, "flowers", "flow", seen)
	waitFor(t, "three members with 4 partitions each", func() bool {
		return m1.assigned.Load() == 4 && m2.assigned.Load() == 4 && m3.assigned.Load() == 4
	})
	waitFor(t, "each member consumes", func() bool { return m1.polled.Load() > 0 && m2.polled.Load() > 0 && m3.polled.Load() > 0 })

	// One leaves mid-stream; the others take over its partitions.
	m2.leave()
	waitFor(t, "two members with 6 partitions each again", func() bool { return m1.assigned.Load() == 6 && m3.assigned.Load() == 6 })
	at := count()
	waitFor(t, "more records flow", func() bool { return count() > at+500 })
	close(stop)
	<-prodDone
	mu.Lock()
	all := append([]string(nil), acked...)
	mu.Unlock()
	require.Greater(t, len(all), 1000)
	waitFor(t, "every acknowledged record consumed", func() bool { return seen.has(all) == 0 })

	// Final commits on leave: nothing left to consume.
	m1.leave()
	m3.leave()
	adm := brokertest.Admin(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lags, err := adm.Lag(ctx, "flowers")
	require.NoError(t, err)
	gl := lags["flowers"]
	require.NoError(t, gl.Error())
	require.Equal(t, "Empty", gl.State)
	var total int64
	n := 0
	for _, ps := range gl.Lag {
		for _, l := range ps {
			require.NoError(t, l.Err)
			require.Equal(t, int64(0), l.Lag, "partition %d: committed %d, end %d", l.Partition, l.Commit.At, l.End.Offset)
			total += l.End.Offset
			n++
		}
	}
	require.Equal(t, 12, n)
	require.Equal(t, int64(len(all)), total, "committed ends account for every record")
}

// The group's committed offsets are what a new member resumes from.
func TestGroupResumesFromCommittedOffsets(t *testing.T) {
	b := brokertest.Start(t)
	brokertest.CreateTopic(t, b.Addr, "resume", 3, nil)
	prod := brokertest.Client(t, b.Addr)
	produce := func(from, to int) []string {
		var vals []string
		for i := from; i < to; i++ {
			v := fmt.Sprintf("v%04d", i)
			vals = append(vals, v)
			require.NoError(t, prod.ProduceSync(context.Background(), &kgo.Record{Topic: "resume", Value: []byte(v)}).FirstErr())
		}
		return vals
	}
	first := produce(0, 300)
	seen := &seenSet{vals: map[string]int{}}
	m := startMember(t, b.Addr, "resumers", "resume", seen)
	waitFor(t, "first batch consumed", func() bool { return seen.has(first) == 0 })
	m.leave()

	second := produce(300, 600)
	seen2 := &seenSet{vals: map[string]int{}}
	m = startMember(t, b.Addr, "resumers", "resume", seen2)
	waitFor(t, "second batch consumed", func() bool { return seen2.has(second) == 0 })
	m.leave()
	require.Equal(t, len(first), seen2.has(first), "a new member re-read records the group had committed")

	adm := brokertest.Admin(t, b.Addr)
	offs, err := adm.FetchOffsets(context.Background(), "resumers")
	require.NoError(t, err)
	var sum int64
	offs.Each(func(o kadm.OffsetResponse) { require.NoError(t, o.Err); sum += o.At })
	require.Equal(t, int64(600), sum)
}

// The lag metric comes from the group's coordinator alone and agrees with
// what a client computes (kadm.Lag), including partitions led by other
// brokers.
func TestGroupLagMetricMatchesKadm(t *testing.T) {
	brokers := startCluster(t, 3)
	addr := brokers[0].Addr
	brokertest.CreateTopic(t, addr, "lagging", 6, nil)
	prod := brokertest.Client(t, addr)
	for i := 0; i < 600; i++ {
		require.NoError(t, prod.ProduceSync(context.Background(), &kgo.Record{Topic: "lagging", Key: []byte(fmt.Sprint(i)), Value: []byte("v")}).FirstErr())
	}
	// A member reads about half, commits and leaves.
	seen := &seenSet{vals: map[string]int{}}
	m := startMember(t, addr, "laggards", "lagging", seen, kgo.FetchMaxPartitionBytes(200), kgo.FetchMaxBytes(200))
	waitFor(t, "some records consumed", func() bool { return m.polled.Load() >= 300 })
	m.leave()
	for i := 0; i < 100; i++ {
		require.NoError(t, prod.ProduceSync(context.Background(), &kgo.Record{Topic: "lagging", Key: []byte(fmt.Sprint(i)), Value: []byte("w")}).FirstErr())
	}

	adm := brokertest.Admin(t, addr)
	lags, err := adm.Lag(context.Background(), "laggards")
	require.NoError(t, err)
	want := map[string]float64{}
	var total int64
	for _, ps := range lags["laggards"].Lag {
		for _, l := range ps {
			require.NoError(t, l.Err)
			want[fmt.Sprint(l.Partition)] = float64(l.Lag)
			total += l.Lag
		}
	}
	require.Len(t, want, 6)
	require.Greater(t, total, int64(0))

	// Exactly the coordinator reports the group: a broker that has not yet
	// applied a coordinator shard move (within a watch interval) may
	// report it too for a moment, so look until the view settles.
	var last string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("want lag %v; last seen: %s", want, last)
		}
	})
	waitFor(t, "exactly the coordinator reporting the group's lag", func() bool {
		reporters, ok := 0, true
		last = ""
		for _, b := range brokers {
			fams, err := b.Gatherer().Gather()
			require.NoError(t, err)
			got := map[string]float64{}
			members, state := -1.0, ""
			for _, f := range fams {
				for _, mt := range f.GetMetric() {
					labels := map[string]string{}
					for _, l := range mt.GetLabel() {
						labels[l.GetName()] = l.GetValue()
					}
					if labels["group"] != "laggards" {
						continue
					}
					switch f.GetName() {
					case "strata_consumer_group_lag":
						require.Equal(t, "lagging", labels["topic"])
						got[labels["partition"]] = mt.GetGauge().GetValue()
					case "strata_consumer_group_members":
						// Refreshed in the background: the state is the
						// coordinator's at its last refresh.
						members, state = mt.GetGauge().GetValue(), labels["state"]
					}
				}
			}
			if len(got) == 0 {
				continue
			}
			reporters++
			last += fmt.Sprintf("broker %d: lag %v members %v state %s; ", b.Cfg.NodeID, got, members, state)
			ok = ok && maps.Equal(want, got) && members == 0 && state == "Empty"
		}
		return ok && reporters == 1
	})
	t.Log(last)
}

// A deleted topic's committed offsets go with it (as in Kafka): a topic
// created again under the name is read from the group's reset policy, and
// the group's offsets of other topics stay.
func TestDeletedTopicLosesCommittedOffsets(t *testing.T) {
	b := brokertest.Start(t)
	brokertest.CreateTopic(t, b.Addr, "gone", 2, nil)
	brokertest.CreateTopic(t, b.Addr, "kept", 1, nil)
	adm := brokertest.Admin(t, b.Addr)
	ctx := context.Background()
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "gone", Partition: 0, At: 40, LeaderEpoch: -1})
	offs.Add(kadm.Offset{Topic: "gone", Partition: 1, At: 41, LeaderEpoch: -1})
	offs.Add(kadm.Offset{Topic: "kept", Partition: 0, At: 7, LeaderEpoch: -1})
	resp, err := adm.CommitOffsets(ctx, "readers", offs)
	require.NoError(t, err)
	require.NoError(t, resp.Error())
	_, err = adm.DeleteTopics(ctx, "gone")
	require.NoError(t, err)
	waitFor(t, "the deleted topic's offsets removed", func() bool {
		got, err := adm.FetchOffsets(ctx, "readers")
		if err != nil {
			return false
		}
		_, stale := got.Lookup("gone", 0)
		kept, ok := got.Lookup("kept", 0)
		return !stale && ok && kept.At == 7
	})

	brokertest.CreateTopic(t, b.Addr, "gone", 2, nil)
	prod := brokertest.Client(t, b.Addr)
	for i := 0; i < 5; i++ {
		require.NoError(t, prod.ProduceSync(ctx, &kgo.Record{Topic: "gone", Value: []byte(fmt.Sprint(i))}).FirstErr())
	}
	seen := &seenSet{vals: map[string]int{}}
	m := startMember(t, b.Addr, "readers", "gone", seen)
	waitFor(t, "the recreated topic read from the start", func() bool { return seen.has([]string{"0", "1", "2", "3", "4"}) == 0 })
	m.leave()
}

package main

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// groupArgs are the group settings of the kill -9 tests: consumer
// protocol members heartbeat every second and are fenced after 30 s, a
// session long enough that a failover on a loaded 2-core machine (CI
// runs several suites at once) ends inside it; how long the failover took
// is logged, never asserted.
var groupArgs = []string{
	"-group-consumer-min-session-timeout", "1s", "-group-consumer-session-timeout", "30s",
	"-group-consumer-min-heartbeat-interval", "500ms", "-group-consumer-heartbeat-interval", "1s",
}

// TestGroupSurvivesCoordinatorKill9 kills the broker coordinating a
// group with SIGKILL while two members consume and commit, for each
// protocol: the group keeps its members (the same member ids and, for
// the consumer protocol, the same epochs), commits are accepted by the
// new coordinator and every acknowledged record is processed. Consumer
// protocol members keep their partitions (none revoked, lost or assigned
// after the kill) and process every record exactly once; so do classic
// members unless kgo itself ends a session on failed heartbeats (see
// below). How long the group went unserved is logged (about a lease plus
// a heartbeat interval on an idle machine).
func TestGroupSurvivesCoordinatorKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("a multi-process failover run")
	}
	for _, consumer := range []bool{true, false} {
		name := "classic"
		if consumer {
			name = "consumer"
		}
		t.Run(name, func(t *testing.T) { coordinatorKill9(t, consumer) })
	}
}

// k9member is one consumer of the kill -9 test.
type k9member struct {
	cl       *kgo.Client
	done     chan struct{}
	changes  atomic.Int64 // assigned + revoked + lost callbacks with partitions
	lost     atomic.Int64
	commitMu sync.Mutex
	commits  []time.Time // successful commits
	log      syncLog     // the client's log, shown when the test fails
}

// syncLog is an io.Writer safe for concurrent use.
type syncLog struct {
	mu  sync.Mutex
	buf []byte
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	return len(p), nil
}

func (l *syncLog) String() string { l.mu.Lock(); defer l.mu.Unlock(); return string(l.buf) }

func (m *k9member) lastCommitAfter(at time.Time) (time.Time, bool) {
	m.commitMu.Lock()
	defer m.commitMu.Unlock()
	for _, c := range m.commits {
		if c.After(at) {
			return c, true
		}
	}
	return time.Time{}, false
}

func coordinatorKill9(t *testing.T, consumerProtocol bool) {
	f := startFleet(t, 6, groupArgs...)
	const hb = time.Second
	group := "billing"
	ctx := context.Background()
	prod, err := kgo.NewClient(kgo.SeedBrokers(f.addrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	defer prod.Close()

	// Records flow the whole time, round-robin over the partitions.
	var pmu sync.Mutex
	var acked []string
	stop, prodDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(prodDone)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			v := fmt.Sprintf("r-%06d", i)
			pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err := prod.ProduceSync(pctx, &kgo.Record{Topic: "orders", Partition: int32(i % 6), Value: []byte(v)}).FirstErr()
			cancel()
			if err == nil {
				pmu.Lock()
				acked = append(acked, v)
				pmu.Unlock()
			}
			time.Sleep(2 * time.Millisecond)
		}
	}()

	var smu sync.Mutex
	seen := map[string]int{}
	start := func() *k9member {
		m := &k9member{done: make(chan struct{})}
		opts := []kgo.Opt{
			kgo.WithLogger(kgo.BasicLogger(&m.log, kgo.LogLevelInfo, nil)),
			kgo.SeedBrokers(f.addrs()...), kgo.ConsumerGroup(group), kgo.ConsumeTopics("orders"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
			kgo.FetchMaxWait(100 * time.Millisecond), kgo.SessionTimeout(30 * time.Second), kgo.HeartbeatInterval(hb),
			kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) {
				if len(a["orders"]) > 0 {
					m.changes.Add(1)
				}
			}),
			kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, r map[string][]int32) {
				_ = cl.CommitUncommittedOffsets(ctx)
				if len(r["orders"]) > 0 {
					m.changes.Add(1)
				}
			}),
			kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, l map[string][]int32) {
				if len(l["orders"]) > 0 {
					m.changes.Add(1)
					m.lost.Add(1)
				}
			}),
		}
		if consumerProtocol {
			opts = append(opts, kgo.ServerSideBalancer(), kgo.Balancers(kgo.StickyBalancer()))
		} else {
			opts = append(opts, kgo.Balancers(kgo.CooperativeStickyBalancer()))
		}
		cl, err := kgo.NewClient(opts...)
		require.NoError(t, err)
		m.cl = cl
		go func() {
			defer close(m.done)
			for {
				pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
				fs := cl.PollFetches(pctx)
				cancel()
				if fs.IsClientClosed() {
					return
				}
				fs.EachRecord(func(r *kgo.Record) {
					smu.Lock()
					seen[string(r.Value)]++
					smu.Unlock()
				})
				if fs.NumRecords() == 0 {
					cl.AllowRebalance()
					continue // nothing to commit: no request is sent
				}
				cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				err := cl.CommitUncommittedOffsets(cctx)
				cancel()
				if err == nil {
					m.commitMu.Lock()
					m.commits = append(m.commits, time.Now())
					m.commitMu.Unlock()
				}
				cl.AllowRebalance()
			}
		}()
		return m
	}
	members := []*k9member{start(), start()}
	t.Cleanup(func() {
		if t.Failed() {
			for i, m := range members {
				t.Logf("member %d's client log:\n%s", i, tail(m.log.String(), 80))
			}
		}
	})
	// The group settles: both members own partitions, commits flow.
	memberIDs := func() []string {
		adm := freshAdmin(t, f)
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		var ids []string
		if consumerProtocol {
			req := kmsg.NewPtrConsumerGroupDescribeRequest()
			req.Groups = []string{group}
			shards := adm.FindGroupCoordinators(dctx, group)
			if shards.Error() != nil {
				return nil
			}
			cl, err := kgo.NewClient(kgo.SeedBrokers(f.addrs()...))
			if err != nil {
				return nil
			}
			defer cl.Close()
			resp, err := req.RequestWith(dctx, cl)
			if err != nil || resp.Groups[0].ErrorCode != 0 || resp.Groups[0].State != "Stable" {
				if err == nil {
					t.Logf("describe: error %d, state %s", resp.Groups[0].ErrorCode, resp.Groups[0].State)
				} else {
					t.Logf("describe: %v", err)
				}
				return nil
			}
			for _, m := range resp.Groups[0].Members {
				ids = append(ids, fmt.Sprintf("%s@%d", m.MemberID, m.MemberEpoch))
			}
		} else {
			gs, err := adm.DescribeGroups(dctx, group)
			if err != nil || gs.Error() != nil || gs[group].State != "Stable" {
				return nil
			}
			for _, m := range gs[group].Members {
				ids = append(ids, m.MemberID)
			}
		}
		sort.Strings(ids)
		return ids
	}
	var before []string
	waitUntil(t, 60*time.Second, "a stable group of two members that commit", func() bool {
		before = memberIDs()
		_, c0 := members[0].lastCommitAfter(time.Now().Add(-time.Second))
		_, c1 := members[1].lastCommitAfter(time.Now().Add(-time.Second))
		return len(before) == 2 && c0 && c1
	})
	time.Sleep(3 * hb) // nothing moves in a stable group
	changes := members[0].changes.Load() + members[1].changes.Load()
	require.Equal(t, before, memberIDs(), "the group changed while stable")

	coords := freshAdmin(t, f).FindGroupCoordinators(ctx, group)
	require.NoError(t, coords.Error())
	victim := coords[group].NodeID
	require.NoError(t, f.procs[victim].cmd.Process.Kill())
	<-f.procs[victim].exited
	killedAt := time.Now()
	t.Logf("killed coordinator %d", victim)

	// A probe with a short retry backoff asks, as member 0, what only a
	// coordinator that has the membership answers (OffsetFetch at the
	// member epoch; a classic Heartbeat at the generation): when the
	// group is served again, whatever the members' own backoffs.
	id, gen := members[0].cl.GroupMetadata()
	var served time.Duration
	waitUntil(t, 60*time.Second, "the group served again", func() bool {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		// A new client each time: kgo keeps a dead coordinator cached on
		// its batched OffsetFetch path (see freshAdmin).
		probe, err := kgo.NewClient(kgo.SeedBrokers(f.addrs()...), kgo.RequestRetries(0))
		require.NoError(t, err)
		defer probe.Close()
		var code int16
		if consumerProtocol {
			req := kmsg.NewPtrOffsetFetchRequest()
			g := kmsg.NewOffsetFetchRequestGroup()
			g.Group, g.MemberID, g.MemberEpoch = group, &id, gen
			req.Groups = []kmsg.OffsetFetchRequestGroup{g}
			resp, err := req.RequestWith(pctx, probe)
			if err != nil {
				if time.Since(killedAt) > 10*time.Second {
					t.Logf("probe: %v", err)
				}
				return false
			}
			code = resp.Groups[0].ErrorCode
		} else {
			req := kmsg.NewPtrHeartbeatRequest()
			req.Group, req.MemberID, req.Generation = group, id, gen
			resp, err := req.RequestWith(pctx, probe)
			if err != nil {
				return false
			}
			code = resp.ErrorCode
		}
		if code != 0 {
			if time.Since(killedAt) > 10*time.Second {
				t.Logf("probe: error %d", code)
			}
			return false
		}
		served = time.Since(killedAt)
		return true
	})
	t.Logf("the new coordinator serves the group (member %s at epoch/generation %d known) %.1f s after the kill", id, gen, served.Seconds())

	var accepted time.Duration
	waitUntil(t, 60*time.Second, "both members' commits accepted again", func() bool {
		a0, ok0 := members[0].lastCommitAfter(killedAt)
		a1, ok1 := members[1].lastCommitAfter(killedAt)
		if !ok0 || !ok1 {
			return false
		}
		accepted = max(a0.Sub(killedAt), a1.Sub(killedAt))
		return true
	})
	t.Logf("commits of both members accepted by the new coordinator %.1f s after the kill (lease %v + heartbeat %v = %v; the members' own retry backoff, up to 5 s in kgo, adds to it)",
		accepted.Seconds(), f.lease, hb, f.lease+hb)
	time.Sleep(3 * hb)
	var after []string
	waitUntil(t, 10*time.Second, "the group described", func() bool { after = memberIDs(); return after != nil })
	// The consumer protocol's members only heartbeat: a failed heartbeat
	// is retried and the new coordinator carries on at the same epochs.
	// A classic kgo member whose heartbeat retries all fail (it may keep
	// dialling the dead broker) ends its session and rejoins under its own
	// member id, as it would against Kafka: the group keeps its members,
	// but that member's partitions are lost and assigned back, and what it
	// processed since its last commit is processed again.
	moved := members[0].changes.Load() + members[1].changes.Load() - changes
	rejoined := false
	if consumerProtocol {
		require.Equal(t, before, after, "members rejoined (ids or epochs changed)")
		require.Zero(t, moved, "partitions moved after the kill")
	} else {
		require.Equal(t, before, after, "the group lost a member (its id changed)")
		if moved > 0 {
			rejoined = true
			t.Logf("a classic member rejoined after its heartbeats failed (%d partition callbacks): duplicates allowed", moved)
		}
	}

	close(stop)
	<-prodDone
	pmu.Lock()
	all := append([]string(nil), acked...)
	pmu.Unlock()
	waitUntil(t, 60*time.Second, "every acknowledged record processed", func() bool {
		smu.Lock()
		defer smu.Unlock()
		for _, v := range all {
			if seen[v] == 0 {
				return false
			}
		}
		return true
	})
	for _, m := range members {
		m.cl.Close()
		<-m.done
	}
	dups := 0
	smu.Lock()
	for _, n := range seen {
		if n > 1 {
			dups++
		}
	}
	smu.Unlock()
	t.Logf("%d records processed, %d more than once", len(all), dups)
	if !rejoined {
		require.Zero(t, dups, "records processed twice")
	}
	_ = kadm.StringPtr
}

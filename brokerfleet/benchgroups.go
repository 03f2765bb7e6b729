package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratamq/strata/brokerfleet/internal/bench"
)

// groupRun measures consumer group rebalances on the dev target, for the
// classic protocol (cooperative-sticky) and the consumer protocol
// (KIP-848, server-side assignment), with each group size in sizes: n-1
// members consume a 60-partition topic that a producer keeps writing to
// every partition, then member n joins. Reported: the time from the new
// member's client starting to its first record, and the longest gap
// between two polls with records of any earlier member from the join
// until a second after the new member's first record (a member whose
// partitions were not moved should not pause at all).
func groupRun(ctx context.Context, t *benchTarget, sizes []int, stderr io.Writer) ([]bench.GroupJoin, error) {
	const topic, parts = "bench-groups", 60
	cl, err := kgo.NewClient(kgo.SeedBrokers(t.Addrs...), kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if r, err := adm.CreateTopic(ctx, parts, int16(t.RF), nil, topic); err != nil || r.Err != nil {
		return nil, fmt.Errorf("create %s: %v", topic, errors.Join(err, r.Err))
	}
	// Every partition gets a record every 20 ms: a member with partitions
	// sees records at every poll.
	pctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-pctx.Done():
				return
			case <-tick.C:
			}
			for p := range int32(parts) {
				cl.Produce(pctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte("v")}, nil)
			}
		}
	}()

	var out []bench.GroupJoin
	for _, consumer := range []bool{false, true} {
		for _, n := range sizes {
			proto := "classic"
			if consumer {
				proto = "consumer"
			}
			fmt.Fprintf(stderr, "groups: %s protocol, member %d joining %d\n", proto, n, n-1)
			res, err := groupJoin(ctx, t, topic, fmt.Sprintf("bench-%s-%d", proto, n), consumer, n)
			if err != nil {
				return out, fmt.Errorf("%s protocol, %d members: %w", proto, n, err)
			}
			out = append(out, res)
		}
	}
	return out, nil
}

// joinMember is one consumer of groupRun.
type joinMember struct {
	cl      *kgo.Client
	done    chan struct{}
	mu      sync.Mutex
	first   time.Time // first poll with records
	last    time.Time // last poll with records
	maxGap  time.Duration
	counted bool // gaps are counted (after the join started)
}

func (m *joinMember) sawRecords(now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.first.IsZero() {
		m.first = now
	}
	if m.counted && !m.last.IsZero() {
		m.maxGap = max(m.maxGap, now.Sub(m.last))
	}
	m.last = now
}

func groupJoin(ctx context.Context, t *benchTarget, topic, group string, consumer bool, n int) (bench.GroupJoin, error) {
	res := bench.GroupJoin{Protocol: "classic", Members: n}
	if consumer {
		res.Protocol = "consumer"
	}
	start := func() (*joinMember, error) {
		opts := []kgo.Opt{kgo.SeedBrokers(t.Addrs...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()), kgo.FetchMaxWait(50 * time.Millisecond)}
		if consumer {
			opts = append(opts, kgo.ServerSideBalancer(), kgo.Balancers(kgo.StickyBalancer()))
		} else {
			opts = append(opts, kgo.Balancers(kgo.CooperativeStickyBalancer()))
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			return nil, err
		}
		m := &joinMember{cl: cl, done: make(chan struct{})}
		go func() {
			defer close(m.done)
			for {
				fs := cl.PollFetches(ctx)
				if fs.IsClientClosed() || ctx.Err() != nil {
					return
				}
				if fs.NumRecords() > 0 {
					m.sawRecords(time.Now())
				}
			}
		}()
		return m, nil
	}
	var members []*joinMember
	defer func() {
		for _, m := range members {
			m.cl.Close()
			<-m.done
		}
	}()
	for range n - 1 {
		m, err := start()
		if err != nil {
			return res, err
		}
		members = append(members, m)
	}
	// The group settles: every member gets records, then 2 s of quiet.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		all := true
		for _, m := range members {
			m.mu.Lock()
			all = all && !m.last.IsZero() && time.Since(m.last) < time.Second
			m.mu.Unlock()
		}
		if all {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return res, errors.New("the first members did not all consume within 2 minutes")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(2 * time.Second)
	for _, m := range members {
		m.mu.Lock()
		m.counted = true
		m.mu.Unlock()
	}
	joined := time.Now()
	nm, err := start()
	if err != nil {
		return res, err
	}
	members = append(members, nm)
	for {
		nm.mu.Lock()
		first := nm.first
		nm.mu.Unlock()
		if !first.IsZero() {
			res.JoinSeconds = first.Sub(joined).Seconds()
			break
		}
		if time.Since(joined) > 2*time.Minute || ctx.Err() != nil {
			return res, errors.New("the new member got no record within 2 minutes")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(time.Second)
	for _, m := range members[:len(members)-1] {
		m.mu.Lock()
		gap := max(m.maxGap, time.Since(m.last)) // a member still paused counts too
		m.mu.Unlock()
		res.MaxPauseSeconds = max(res.MaxPauseSeconds, gap.Seconds())
	}
	return res, nil
}

// parseGroupSizes parses -groups: group sizes, each from 1 to 60.
func parseGroupSizes(list string) ([]int, error) { return parseCounts(list, "member", 60) }

// parseCounts parses a comma-separated list of counts of what, each from
// 1 to most.
func parseCounts(list, what string, most int) ([]int, error) {
	var out []int
	for _, s := range splitList(list) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > most {
			return nil, fmt.Errorf("%q: want a %s count from 1 to %d", s, what, most)
		}
		out = append(out, n)
	}
	return out, nil
}

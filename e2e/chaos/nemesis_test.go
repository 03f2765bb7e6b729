//go:build chaos

package chaos

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratamq/strata/pkg/metastore/dynamo/dynamotest"
	"github.com/stratamq/strata/pkg/objstore/s3local"
)

// nemesis injects faults until ctx ends. Its choices (which fault, which
// partition's leader or which broker, how long) come from rng, seeded per
// scenario, so a seed replays the same schedule of decisions; the brokers
// they land on follow the cluster's state (who leads then).
type nemesis struct {
	t   *testing.T
	c   *cluster
	h   *History
	g   *group          // consumer-group members, or nil
	tr  *transformers   // the transactional scenario's transformers, or nil
	sm  *shareConsumers // the share-group scenario's members, or nil
	rng *rand.Rand
	ctx context.Context
}

// sleep waits d or until the run ends; false when it ended.
func (n *nemesis) sleep(d time.Duration) bool {
	select {
	case <-n.ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// between is a random duration in [a, b).
func (n *nemesis) between(a, b time.Duration) time.Duration {
	return a + time.Duration(n.rng.Int64N(int64(b-a)))
}

// fault records what is done, does it, holds it for hold (even past the
// end of the run: every fault is undone by its own loop), undoes it.
func (n *nemesis) fault(what string, hold time.Duration, do, undo func()) {
	n.h.Add(Op{Process: -1, Type: Invoke, F: FNemesis, Value: what})
	n.t.Logf("%6.1fs nemesis: %s for %v", n.h.Elapsed().Seconds(), what, hold.Round(time.Millisecond))
	do()
	time.Sleep(hold)
	undo()
	n.h.Add(Op{Process: -1, Type: OK, F: FNemesis, Value: what})
}

// target picks the leader of a random partition, or with probability
// pRandom any broker; -1 when no leader is known.
func (n *nemesis) target(pRandom float64) (int, string) {
	if n.rng.Float64() < pRandom {
		b := n.rng.IntN(brokers)
		return b, fmt.Sprintf("broker %d", b)
	}
	p := int32(n.rng.IntN(partitions))
	l := n.c.Leader(p)
	return l, fmt.Sprintf("broker %d (leader of %d)", l, p)
}

// fork runs loops concurrently, each with its own rng derived from this
// one, and waits for them.
func (n *nemesis) fork(loops ...func(*nemesis)) {
	var wg sync.WaitGroup
	for _, loop := range loops {
		m := *n
		m.rng = rand.New(rand.NewPCG(n.rng.Uint64(), n.rng.Uint64()))
		wg.Go(func() { loop(&m) })
	}
	wg.Wait()
}

func noFaults(n *nemesis) { <-n.ctx.Done() }

// killLoop kills a leader (or, one time in three, any broker) with
// SIGKILL and restarts it 1-3 s later.
func killLoop(n *nemesis) {
	for n.sleep(n.between(2*time.Second, 5*time.Second)) {
		b, what := n.target(0.3)
		if b < 0 || !n.c.Up(b) {
			continue
		}
		n.fault("kill -9 "+what, n.between(time.Second, 3*time.Second), func() { n.c.Kill(b) }, func() { n.c.start(b) })
	}
}

// compactionLoop kills and pauses leaders at once (killLoop and
// pauseLoop side by side): the compaction scenario's faults.
func compactionLoop(n *nemesis) { n.fork(killLoop, pauseLoop) }

// rollingLoop restarts the brokers one after another with SIGTERM,
// waiting for a full ISR after each.
func rollingLoop(n *nemesis) {
	for b := 0; n.sleep(n.between(time.Second, 3*time.Second)); b = (b + 1) % brokers {
		n.fault(fmt.Sprintf("restart broker %d (SIGTERM)", b), 500*time.Millisecond, func() {
			if err := n.c.Stop(b); err != nil {
				n.t.Errorf("clean stop of broker %d: %v", b, err)
			}
		}, func() { n.c.start(b) })
		deadline := time.Now().Add(time.Minute)
		for !n.c.healthy(context.Background()) && time.Now().Before(deadline) {
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// pauseLoop SIGSTOPs a leader past its lease (lease + 1-3 s), then
// SIGCONTs it.
func pauseLoop(n *nemesis) {
	for n.sleep(n.between(2*time.Second, 5*time.Second)) {
		b, what := n.target(0.2)
		if b < 0 || !n.c.Up(b) {
			continue
		}
		n.fault("SIGSTOP "+what, lease+n.between(time.Second, 3*time.Second), func() { n.c.Pause(b) }, func() { n.c.Resume(b) })
	}
}

// partitionLoop cuts links between brokers: a leader isolated from both
// peers, only its followers' fetches from it, or one peer link; now and
// then a client link instead.
func partitionLoop(n *nemesis) {
	for n.sleep(n.between(2*time.Second, 5*time.Second)) {
		b, what := n.target(0.2)
		if b < 0 {
			continue
		}
		hold := n.between(3*time.Second, 9*time.Second)
		var links []*Proxy
		switch k := n.rng.IntN(10); {
		case k < 4:
			what = "isolate " + what + " from its peers"
			for j := range brokers {
				if j != b {
					links = append(links, n.c.peer[b][j], n.c.peer[j][b])
				}
			}
		case k < 7:
			what = "cut the fetches from " + what
			for j := range brokers {
				if j != b {
					links = append(links, n.c.peer[j][b])
				}
			}
		case k < 9:
			j := (b + 1 + n.rng.IntN(brokers-1)) % brokers
			what = fmt.Sprintf("cut the link %d→%d (%s)", j, b, what)
			links = append(links, n.c.peer[j][b])
		default:
			what = "cut the clients from " + what
			links = append(links, n.c.client[b])
		}
		n.fault(what, hold, func() {
			for _, p := range links {
				p.Cut()
			}
		}, func() {
			for _, p := range links {
				p.Heal()
			}
		})
	}
}

// dynamoLoop cuts a leader off DynamoDB, or makes DynamoDB slow or
// failing for everyone.
func dynamoLoop(n *nemesis) {
	for n.sleep(n.between(2*time.Second, 5*time.Second)) {
		switch k := n.rng.IntN(10); {
		case k < 6:
			b, what := n.target(0.2)
			if b < 0 {
				continue
			}
			n.fault("cut "+what+" from DynamoDB", n.between(2*time.Second, 8*time.Second), n.c.dyn[b].Cut, n.c.dyn[b].Heal)
		case k < 8:
			d := n.between(50*time.Millisecond, 600*time.Millisecond)
			n.fault(fmt.Sprintf("DynamoDB latency %v", d.Round(time.Millisecond)), n.between(2*time.Second, 6*time.Second),
				func() { n.c.DynFaults.Delay(d) }, func() { n.c.DynFaults.Delay(0) })
		default:
			kinds := []dynamotest.Fault{dynamotest.Fault500, dynamotest.FaultThrottle, dynamotest.FaultApplied500}
			kind := kinds[n.rng.IntN(len(kinds))]
			cnt := 5 + n.rng.IntN(30)
			n.fault(fmt.Sprintf("DynamoDB fails the next %d requests (kind %d)", cnt, kind), n.between(time.Second, 4*time.Second),
				func() { n.c.DynFaults.Fail("", cnt, kind) }, func() { n.c.DynFaults.Fail("", 0, 0) })
		}
	}
}

// dynamoOutage cuts every broker from DynamoDB for the whole run, as a
// regional outage would. Every broker loses its lease and stops
// acknowledging, but none reports itself unhealthy or unready (the
// container health check must not make ECS replace the fleet), and writes
// resume within a lease once DynamoDB is back.
func dynamoOutage(n *nemesis) {
	c := n.c
	hold := time.Until(deadline(n.ctx))
	var unhealthy atomic.Int64
	stop := make(chan struct{})
	probed := make(chan struct{})
	go func() {
		defer close(probed)
		cl := &http.Client{Timeout: 2 * time.Second}
		for {
			select {
			case <-stop:
				return
			case <-time.After(500 * time.Millisecond):
			}
			for i := range brokers {
				if !c.Up(i) {
					continue
				}
				for _, path := range []string{"/healthz", "/readyz"} {
					resp, err := cl.Get("http://" + c.http[i] + path)
					if err == nil && resp.StatusCode == http.StatusOK {
						resp.Body.Close()
						continue
					}
					unhealthy.Add(1)
					msg := fmt.Sprint(err)
					if err == nil {
						body, _ := io.ReadAll(resp.Body)
						resp.Body.Close()
						msg = fmt.Sprintf("%d %s", resp.StatusCode, bytes.TrimSpace(body))
					}
					n.t.Errorf("broker %d %s during the DynamoDB outage: %s", i, path, msg)
				}
			}
		}
	}()
	n.fault("cut every broker from DynamoDB", hold, func() {
		for i := range brokers {
			c.dyn[i].Cut()
		}
	}, func() {
		for i := range brokers {
			c.dyn[i].Heal()
		}
	})
	healed := n.h.Elapsed()
	close(stop)
	<-probed
	// Writes resume within a lease: a renewal finds each registration as
	// it was left, so no broker needs a new epoch.
	limit := healed + lease + time.Second
	for n.h.Elapsed() < limit+time.Second {
		time.Sleep(100 * time.Millisecond)
	}
	var first time.Duration = -1
	for _, op := range n.h.Ops() {
		if op.F == FSend && op.Type == OK && time.Duration(op.Time) > healed {
			first = time.Duration(op.Time)
			break
		}
	}
	n.t.Logf("%6.1fs first acknowledgement %v after DynamoDB returned; %d failed health probes", n.h.Elapsed().Seconds(), (first - healed).Round(time.Millisecond), unhealthy.Load())
	if first < 0 || first > limit {
		n.t.Errorf("no write acknowledged within %v of DynamoDB returning (first: %v)", lease+time.Second, first-healed)
	}
}

// deadline returns ctx's deadline, or now.
func deadline(ctx context.Context) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return time.Now()
}

// s3Loop fails, slows or cuts S3 while leaders upload segments, and now
// and then kills a leader in the middle of it.
func s3Loop(n *nemesis) {
	f := n.c.S3Faults
	for n.sleep(n.between(time.Second, 3*time.Second)) {
		hold := n.between(2*time.Second, 7*time.Second)
		var what string
		var do, undo func()
		switch k := n.rng.IntN(6); k {
		case 0:
			what, do = "S3 fails 30% of requests (500)", func() { f.FailFraction("", 0.3, s3local.Fault500) }
		case 1:
			what, do = "S3 throttles 60% of PUTs (503 SlowDown)", func() { f.FailFraction("PutObject", 0.6, s3local.Fault503) }
		case 2:
			what, do = "S3 applies the next 5 PUTs and answers 500", func() { f.Fail("PutObject", 5, s3local.FaultApplied500) }
		case 3:
			what, do = "S3 answers 409 to the next 3 conditional PUTs", func() { f.ConflictConditionalPuts(3) }
		case 4:
			d := n.between(100*time.Millisecond, 1500*time.Millisecond)
			what, do = fmt.Sprintf("S3 latency %v", d.Round(time.Millisecond)), func() { f.Delay(d) }
		default:
			b, t := n.target(0.2)
			if b < 0 {
				continue
			}
			what, do, undo = "cut "+t+" from S3", n.c.s3[b].Cut, n.c.s3[b].Heal
		}
		if undo == nil {
			undo = func() {
				f.Fail("", 0, 0)
				f.FailFraction("", 0, 0)
				f.ConflictConditionalPuts(0)
				f.Delay(0)
			}
		}
		n.fault(what, hold, do, undo)
		if n.rng.IntN(4) == 0 {
			// A leader dies with uploads failing or half done.
			n.fault("S3 fails 50% of PUTs (500)", 0, func() { f.FailFraction("PutObject", 0.5, s3local.Fault500) }, func() {})
			b, t := n.target(0)
			if b >= 0 && n.c.Up(b) {
				n.fault("kill -9 "+t, n.between(time.Second, 3*time.Second), func() { n.c.Kill(b) }, func() { n.c.start(b) })
			}
			f.FailFraction("", 0, 0)
		}
	}
}

// groupLoop kills consumer-group members (a new one replaces each) and
// the group's coordinator broker.
func groupLoop(n *nemesis) {
	for n.sleep(n.between(2*time.Second, 4*time.Second)) {
		if n.rng.IntN(2) == 0 {
			ms := n.g.Members()
			if len(ms) == 0 {
				n.g.Start()
				continue
			}
			id := ms[n.rng.IntN(len(ms))]
			n.fault(fmt.Sprintf("kill -9 group member %d", id), n.between(500*time.Millisecond, 2*time.Second),
				func() { n.g.Kill(id) }, func() { n.g.Start() })
			continue
		}
		b := n.g.Coordinator(n.c)
		if b < 0 || b >= brokers || !n.c.Up(b) {
			continue
		}
		n.fault(fmt.Sprintf("kill -9 broker %d (group coordinator)", b), n.between(time.Second, 3*time.Second),
			func() { n.c.Kill(b) }, func() { n.c.start(b) })
	}
}

// combined runs kills, broker partitions, S3 faults and DynamoDB faults
// at once, over brokers whose clocks are skewed.
func combined(n *nemesis) { n.fork(killLoop, partitionLoop, s3Loop, dynamoLoop) }

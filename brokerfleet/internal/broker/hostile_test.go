package broker_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/broker"
	"github.com/stratamq/strata/brokerfleet/internal/brokertest"
	"github.com/stratamq/strata/brokerfleet/internal/security"
	kwire "github.com/stratamq/strata/brokerfleet/internal/wire"
)

// The bounds TestHostileClients holds the whole test process to (three
// brokers and every client but the idle connections' side): what it holds
// (live heap and goroutine stacks) and what is resident, under a Go
// memory limit (GOMEMLIMIT) of hostileMemoryLimit.
const (
	hostileHeldBound   = 512 << 20
	hostileRSSBound    = 1 << 30
	hostileMemoryLimit = 768 << 20
)

const (
	idleAddrEnv = "STRATA_HOSTILE_IDLE_ADDR"
	idleNEnv    = "STRATA_HOSTILE_IDLE_N"
)

// TestHostileIdleHelper is the child process of TestHostileClients that
// holds its idle connections (in a process of their own, so both ends
// need not fit one open-file limit). It skips otherwise.
func TestHostileIdleHelper(t *testing.T) {
	addr := os.Getenv(idleAddrEnv)
	if addr == "" {
		t.Skip("the idle connections' process of TestHostileClients")
	}
	n, err := strconv.Atoi(os.Getenv(idleNEnv))
	require.NoError(t, err)
	var mu sync.Mutex
	var conns []net.Conn
	var failed atomic.Int64
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			var c net.Conn
			var err error
			for range 5 {
				if c, err = net.DialTimeout("tcp", addr, 10*time.Second); err == nil {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err != nil {
				failed.Add(1)
				return
			}
			switch i % 10 {
			case 0: // asks once, never reads the answer
				_, err = c.Write(apiVersionsFrame(1))
			case 1: // half a size prefix
				_, err = c.Write([]byte{0, 0})
			}
			if err != nil {
				failed.Add(1)
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}()
	}
	wg.Wait()
	fmt.Printf("connected %d failed %d\n", len(conns), failed.Load())
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent is done
	for _, c := range conns {
		c.Close()
	}
}

// memPeak samples the process's memory: what it holds (the live heap at
// the last collection, plus goroutine stacks), and what it has resident.
type memPeak struct {
	mu            sync.Mutex
	held, rss     uint64 // peaks
	stop, stopped chan struct{}
}

func rss() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseUint(f[1], 10, 64)
	return pages * uint64(os.Getpagesize())
}

// heldNow is the live heap at the last collection plus goroutine stacks.
func heldNow() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/stacks:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64() + s[1].Value.Uint64()
}

// settledNow collects first, for a reading between phases.
func settledNow() uint64 {
	runtime.GC()
	return heldNow()
}

// stacksNow is the memory of goroutine stacks.
func stacksNow() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/stacks:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func sampleMemory() *memPeak {
	m := &memPeak{stop: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		defer close(m.stopped)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			h, r := heldNow(), rss()
			m.mu.Lock()
			m.held, m.rss = max(m.held, h), max(m.rss, r)
			m.mu.Unlock()
			select {
			case <-t.C:
			case <-m.stop:
				return
			}
		}
	}()
	return m
}

func (m *memPeak) peaks() (held, rss uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.held, m.rss
}

// wellRate is the rate the well-behaved producer aims at, in records of
// 1 KB per second: the attack should not slow it.
const (
	wellRate     = 5000
	wellPerMilli = wellRate / 1000
)

// well is the well-behaved clients: an idempotent acks=all producer and a
// consumer of the same partition.
type well struct {
	produced, consumed atomic.Int64
	mu                 sync.Mutex
	acked              map[int64]string // offset -> value
	seen               map[int64]string
	errs               []error
}

func (w *well) run(ctx context.Context, t *testing.T, addr, topicName string) (done func()) {
	prod := brokertest.Client(t, addr, kgo.MaxBufferedRecords(2000), kgo.ProducerLinger(time.Millisecond), kgo.RecordDeliveryTimeout(time.Minute))
	cons := brokertest.Client(t, addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topicName: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.FetchMaxBytes(1<<20), kgo.FetchMaxPartitionBytes(1<<20))
	pctx, stopProducing := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	producing := make(chan struct{})
	go func() {
		defer close(producing)
		value := make([]byte, 1000)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for i := 0; pctx.Err() == nil; i++ {
			if i%wellPerMilli == 0 {
				select {
				case <-tick.C: // wellRate records a second, when the broker keeps up
				case <-pctx.Done():
				}
			}
			v := "r-" + strconv.Itoa(i)
			copy(value, v)
			prod.Produce(pctx, &kgo.Record{Topic: topicName, Value: append([]byte(v+":"), value[len(v)+1:]...)}, func(r *kgo.Record, err error) {
				if err != nil {
					if !errors.Is(err, context.Canceled) {
						w.mu.Lock()
						w.errs = append(w.errs, err)
						w.mu.Unlock()
					}
					return
				}
				w.mu.Lock()
				w.acked[r.Offset] = v
				w.mu.Unlock()
				w.produced.Add(1)
			})
		}
		_ = prod.Flush(context.Background())
	}()
	cctx, stopConsuming := context.WithCancel(ctx)
	go func() {
		defer wg.Done()
		for cctx.Err() == nil {
			fs := cons.PollFetches(cctx)
			fs.EachRecord(func(r *kgo.Record) {
				v, _, _ := strings.Cut(string(r.Value), ":")
				w.mu.Lock()
				w.seen[r.Offset] = v
				w.mu.Unlock()
				w.consumed.Add(1)
			})
		}
	}()
	return func() {
		stopProducing()
		<-producing // every promise has run
		// Consume until everything acknowledged was seen.
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			w.mu.Lock()
			missing := 0
			for off := range w.acked {
				if _, ok := w.seen[off]; !ok {
					missing++
				}
			}
			w.mu.Unlock()
			if missing == 0 {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		stopConsuming()
		wg.Wait()
	}
}

// rate measures what the well-behaved clients did over d.
func (w *well) rate(d time.Duration) (produced, consumed float64) {
	p0, c0 := w.produced.Load(), w.consumed.Load()
	time.Sleep(d)
	return float64(w.produced.Load()-p0) / d.Seconds(), float64(w.consumed.Load()-c0) / d.Seconds()
}

// TestHostileClients is the hostile-client acceptance test of issue 22,
// on loopback and bounded in time (about 40 s) and count: against the
// leader of a partition of three replicas (min.insync.replicas=2), while a
// well-behaved idempotent producer (acks=all) and a consumer run, it
// opens 10,000 idle connections (from a child process; fewer if the
// open-file limit does not allow them, logged), sends 1 MiB zstd bombs to
// a schema-validated topic (20 GiB each, inflated up to its 16 MiB bound),
// Fetches asking for 2 GiB (fetch.max.bytes is 4 MiB here, so the
// attack's reads do not crowd out the clients on two cores), fake follower
// fetches with huge offsets, and a flood of failed SASL logins; and then,
// with one follower cut off, fake follower fetches in that follower's
// name. The test process (brokers and clients) stays under
// hostileHeapBound of heap and stacks and hostileRSSBound resident, the
// clients keep producing and consuming, every acknowledged record is
// read back at its offset, and the leader's high watermark is never past
// the log end of a follower in its ISR.
func TestHostileClients(t *testing.T) {
	if testing.Short() {
		t.Skip("a 40 s attack")
	}
	idleN := 10_000
	var lim syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim))
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim)
		_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim)
	}
	if room := int(lim.Cur) - 2000; room < idleN {
		t.Logf("open-file limit %d: %d idle connections instead of 10,000", lim.Cur, room)
		idleN = room
	}

	meta := brokertest.NewMeta(t)
	addUser(t, meta, "alice", "alice-secret")
	links := brokertest.NewLinks()
	var brokers []*brokertest.Broker
	var saslAddrs []string
	for id := int32(0); id < 3; id++ {
		sasl, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		saslAddrs = append(saslAddrs, sasl.Addr().String())
		b := brokertest.Start(t, func(c *broker.Config) {
			c.Meta, c.NodeID, c.DialPeer = meta, id, links.Dialer(strconv.Itoa(int(id)))
			c.ReplicaLagMax = 2 * time.Second
			c.FetchMaxBytes = 4 << 20
			c.Security = security.Config{Listeners: []security.Listener{
				{Name: "PLAINTEXT"},
				{Name: "SASL", Advertise: sasl.Addr().String(), SASLMechanisms: []string{security.MechSCRAM512}},
			}, AllowSASLWithoutAuthorizer: true}
		})
		go b.ServeListener("SASL", sasl)
		brokers = append(brokers, b)
	}
	admin := brokertest.Client(t, brokers[0].Addr)
	mir, on := "2", "true"
	createTopicOnWithConfig(t, admin, "orders", 1, 3, map[string]*string{"min.insync.replicas": &mir})
	createTopicOnWithConfig(t, admin, "validated", 1, 1, map[string]*string{"strata.schema.validation": &on})
	pm := metadataVia(t, admin, "orders").Topics[0].Partitions[0]
	leader := brokers[pm.Leader]
	var followers []int32
	for _, id := range pm.Replicas {
		if id != pm.Leader {
			followers = append(followers, id)
		}
	}
	waitFor(t, "the validated topic's leader", func() bool {
		return metadataVia(t, admin, "validated").Topics[0].Partitions[0].Leader >= 0
	})
	vlead := brokers[metadataVia(t, admin, "validated").Topics[0].Partitions[0].Leader]

	// As a deployment should (GOMEMLIMIT at about 90% of the task's
	// memory), the collector runs harder near the limit rather than let
	// garbage grow the process.
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(hostileMemoryLimit))
	runtime.GC()
	mem := sampleMemory()
	defer func() { close(mem.stop); <-mem.stopped }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := &well{acked: map[int64]string{}, seen: map[int64]string{}}
	finish := w.run(ctx, t, leader.Addr, "orders")
	waitFor(t, "the clients to start", func() bool { return w.consumed.Load() > 100 })
	baseP, baseC := w.rate(3 * time.Second)
	baseHeap, baseStacks := settledNow(), stacksNow()

	// The high watermark, sampled throughout.
	var violations, samples atomic.Int64
	var firstViolation atomic.Value
	sampleCtx, stopSampling := context.WithCancel(ctx)
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for sampleCtx.Err() == nil {
			_, hwm, isr, ok := broker.LocalLog(leader.Broker, "orders", 0)
			if ok {
				for _, id := range isr {
					if id == pm.Leader {
						continue
					}
					if leo, _, _, ok := broker.LocalLog(brokers[id].Broker, "orders", 0); ok && hwm > leo {
						violations.Add(1)
						firstViolation.CompareAndSwap(nil, fmt.Sprintf("high watermark %d, follower %d holds %d", hwm, id, leo))
					}
				}
				samples.Add(1)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()

	// 10,000 idle connections from a child process.
	child := exec.Command(os.Args[0], "-test.run=^TestHostileIdleHelper$", "-test.v")
	child.Env = append(os.Environ(), idleAddrEnv+"="+leader.Addr, idleNEnv+"="+strconv.Itoa(idleN))
	stdin, err := child.StdinPipe()
	require.NoError(t, err)
	stdout, err := child.StdoutPipe()
	require.NoError(t, err)
	child.Stderr = os.Stderr
	require.NoError(t, child.Start())
	defer func() { stdin.Close(); _ = child.Wait() }()
	connected := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if line := sc.Text(); strings.HasPrefix(line, "connected ") {
				connected <- line
			}
		}
	}()
	start := time.Now()
	var line string
	select {
	case line = <-connected:
	case <-time.After(60 * time.Second):
		t.Fatal("the idle connections did not connect within a minute")
	}
	var nIdle, nFailed int
	_, err = fmt.Sscanf(line, "connected %d failed %d", &nIdle, &nFailed)
	require.NoError(t, err)
	require.GreaterOrEqual(t, nIdle, idleN*99/100, line)
	time.Sleep(500 * time.Millisecond) // the broker's ends settle
	idleHeap, idleStacks := settledNow(), stacksNow()
	perConn := func(a, b uint64) int64 { return (int64(b) - int64(a)) / int64(max(nIdle, 1)) }
	t.Logf("%d idle connections open in %v (%d failed to connect): live heap and stacks %d MiB -> %d MiB (%d bytes each, %d of them stacks)",
		nIdle, time.Since(start).Round(time.Millisecond), nFailed, baseHeap>>20, idleHeap>>20, perConn(baseHeap, idleHeap), perConn(baseStacks, idleStacks))

	// The attack.
	var bombs, bigFetches, fakeFetches, logins atomic.Int64
	var attackErrs sync.Map
	fail := func(what string, err error) { attackErrs.LoadOrStore(what, err) }
	attackCtx, stopAttack := context.WithCancel(ctx)
	var attackers sync.WaitGroup
	attack := func(n int, fn func()) {
		for range n {
			attackers.Add(1)
			go func() {
				defer attackers.Done()
				for attackCtx.Err() == nil {
					fn()
				}
			}()
		}
	}
	hostile := brokertest.Client(t, leader.Addr, kgo.RequestRetries(0), kgo.RetryTimeout(time.Second), namedFetches())
	bomb := zstdBomb(1<<20-100, time.Now().UnixMilli(), registerSchema(t, vlead, "validated-value"))
	vcl := brokertest.Client(t, vlead.Addr, kgo.RequestRetries(0))
	attack(2, func() {
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = 1, 5000
		req.Topics = []kmsg.ProduceRequestTopic{{Topic: "validated", Partitions: []kmsg.ProduceRequestTopicPartition{{Partition: 0, Records: bomb}}}}
		resp, err := req.RequestWith(attackCtx, vcl)
		if err != nil {
			if attackCtx.Err() == nil {
				fail("bomb", err)
			}
			return
		}
		if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.InvalidRecord.Code {
			fail("bomb", kerr.ErrorForCode(code))
		}
		bombs.Add(1)
	})
	lb := hostile.Broker(int(pm.Leader))
	attack(3, func() {
		resp, err := fetchReq("orders", []int32{0}, 0, 0, 1, math.MaxInt32, math.MaxInt32).RequestWith(attackCtx, hostile)
		if err != nil {
			if attackCtx.Err() == nil {
				fail("big fetch", err)
			}
			return
		}
		if n := len(resp.Topics[0].Partitions[0].RecordBatches); n > 4<<20+64<<10 {
			fail("big fetch", fmt.Errorf("%d bytes answered past fetch.max.bytes", n))
		}
		bigFetches.Add(1)
	})
	fakeFollower := func(id int32, offset int64) error {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID, req.MaxBytes, req.SessionEpoch = id, math.MaxInt32, -1
		req.Topics = []kmsg.FetchRequestTopic{{Topic: "orders", Partitions: []kmsg.FetchRequestTopicPartition{
			{Partition: 0, FetchOffset: offset, PartitionMaxBytes: math.MaxInt32, CurrentLeaderEpoch: -1, LogStartOffset: -1}}}}
		raw, err := lb.RetriableRequest(attackCtx, req)
		if err != nil {
			return err
		}
		if code := raw.(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode; code != kerr.OffsetOutOfRange.Code {
			return fmt.Errorf("fake follower at %d: %v", offset, kerr.ErrorForCode(code))
		}
		fakeFetches.Add(1)
		return nil
	}
	attack(2, func() {
		leo, _, _, _ := broker.LocalLog(leader.Broker, "orders", 0)
		for _, off := range []int64{1 << 62, leo + 1_000_000} {
			if err := fakeFollower(followers[0], off); err != nil && attackCtx.Err() == nil {
				fail("fake follower", err)
			}
		}
	})
	attack(64, func() {
		dctx, dcancel := context.WithTimeout(attackCtx, 10*time.Second)
		defer dcancel()
		c, err := kwire.Dial(dctx, nil, saslAddrs[pm.Leader], "flood", 0)
		if err != nil {
			return
		}
		defer c.Close()
		user := "alice"
		if logins.Load()%2 == 0 {
			user = "mallory-" + strconv.Itoa(int(logins.Load()))
		}
		if _, err := security.Authenticate(dctx, c, security.SASLCredentials{Mechanism: security.MechSCRAM512, User: user, Password: "guess"}); err == nil {
			fail("sasl flood", errors.New("a wrong password logged in"))
		}
		logins.Add(1)
	})

	attackP, attackC := w.rate(10 * time.Second)
	attackHeap, _ := mem.peaks()

	// The follower the fake one names is cut off: the high watermark waits
	// for it (until it leaves the ISR), whatever the fake reports.
	cut := followers[0]
	links.Cut(strconv.Itoa(int(cut)), leader.Addr)
	attack(2, func() {
		leo, _, _, _ := broker.LocalLog(leader.Broker, "orders", 0)
		for _, off := range []int64{leo + 100_000, 1 << 40} { // never reached while the attack lasts
			if err := fakeFollower(cut, off); err != nil && attackCtx.Err() == nil {
				fail("fake follower of a cut follower", err)
			}
		}
	})
	time.Sleep(4 * time.Second)
	links.Restore(strconv.Itoa(int(cut)), leader.Addr)
	time.Sleep(time.Second)
	stopAttack()
	attackers.Wait()
	stdin.Close()
	require.NoError(t, child.Wait())

	finish()
	stopSampling()
	<-sampled
	heapPeak, rssPeak := mem.peaks()
	attackErrs.Range(func(k, v any) bool {
		t.Errorf("%s: %v", k, v)
		return true
	})
	t.Logf("well-behaved clients, records of 1 KB per second: before the attack %.0f produced, %.0f consumed; during it %.0f produced, %.0f consumed",
		baseP, baseC, attackP, attackC)
	t.Logf("attack: %d bombs refused, %d 2 GiB fetches capped, %d fake follower fetches refused, %d failed logins; %d high watermark samples",
		bombs.Load(), bigFetches.Load(), fakeFetches.Load(), logins.Load(), samples.Load())
	t.Logf("memory of the test process (live heap and stacks): %d MiB before, %d MiB with the idle connections, peak %d MiB during the attack, peak %d MiB overall (bound %d MiB); resident peak %d MiB (bound %d MiB, GOMEMLIMIT %d MiB)",
		baseHeap>>20, idleHeap>>20, attackHeap>>20, heapPeak>>20, hostileHeldBound>>20, rssPeak>>20, hostileRSSBound>>20, hostileMemoryLimit>>20)

	require.Zero(t, violations.Load(), "the high watermark passed what an in-sync follower holds: %v", firstViolation.Load())
	require.Positive(t, samples.Load())
	require.Less(t, heapPeak, uint64(hostileHeldBound))
	if raceEnabled {
		t.Logf("race detector on: resident size not bounded (its shadow memory inflates it); the live heap bound holds")
	} else {
		require.Less(t, rssPeak, uint64(hostileRSSBound))
	}
	require.Positive(t, bombs.Load())
	require.Positive(t, bigFetches.Load())
	require.Positive(t, fakeFetches.Load())
	require.Positive(t, logins.Load())
	require.Positive(t, attackP, "the producer stalled during the attack")
	require.Positive(t, attackC, "the consumer stalled during the attack")
	w.mu.Lock()
	defer w.mu.Unlock()
	require.Empty(t, w.errs, "produce errors")
	lost := 0
	for off, v := range w.acked {
		if w.seen[off] != v {
			if lost < 5 {
				t.Logf("offset %d: acknowledged %q, read %q", off, v, w.seen[off])
			}
			lost++
		}
	}
	require.Zero(t, lost, "of %d acknowledged records, %d not read back at their offset", len(w.acked), lost)
	t.Logf("%d acknowledged records, all read back at their offsets", len(w.acked))
}

//go:build chaos

package chaos

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratamq/strata/pkg/metastore/dynamo/dynamolocal"
	"github.com/stratamq/strata/pkg/metastore/dynamo/dynamotest"
	"github.com/stratamq/strata/pkg/objstore/s3local"
	"github.com/stratamq/strata/pkg/segment"
)

// logLevelEnv sets the brokers' -log-level (default info).
const logLevelEnv = "STRATA_CHAOS_LOGLEVEL"

const (
	brokers    = 3
	topicName  = "chaos"
	partitions = 6
	lease      = 3 * time.Second
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// brokerBinary builds ./brokerfleet once per test binary.
func brokerBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "strata-chaos-bin")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "brokerfleet")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/stratamq/strata/brokerfleet").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build ./brokerfleet: %v\n%s", err, out)
		}
	})
	require.NoError(t, buildErr)
	return binPath
}

// clusterOpts vary the cluster per scenario.
type clusterOpts struct {
	unsafeAck      bool            // -test-unsafe-ack on every broker
	unsafeShareAck bool            // -test-unsafe-share-ack on every broker
	skew           [brokers]string // -test-clock-skew per broker ("" none)
	// compaction: the compacted topic tableTopic too, and brokers whose
	// cleaners and segment.ms rolls act within a second.
	compaction bool
}

// cluster is three `brokerfleet serve` processes over one minidyn and one
// s3local, every link through a Proxy:
//
//	client → client[j] → broker j          (advertised address of j)
//	broker i → peer[i][j] → broker j        (i fetching from j)
//	broker i → dyn[i] → minidyn             (-aws-endpoint)
//	broker i → s3[i] → s3local              (-s3-endpoint)
type cluster struct {
	t      *testing.T
	opts   clusterOpts
	dir    string
	listen [brokers]string
	http   [brokers]string // -http: metrics, /healthz, /readyz
	client [brokers]*Proxy
	peer   [brokers][brokers]*Proxy
	dyn    [brokers]*Proxy
	s3     [brokers]*Proxy

	DynFaults *dynamotest.Faults
	S3Faults  *s3local.Faults

	mu     sync.Mutex
	procs  [brokers]*proc
	paused [brokers]bool
}

type proc struct {
	cmd    *exec.Cmd
	exited chan error
}

// freeAddr returns a free address for a broker to listen on for the whole
// test, across restarts. The port lies below Linux's ephemeral range
// (32768-60999), which the kernel hands out for port 0 and for the source
// ports of outgoing connections: an ephemeral port freed here could be
// taken by a proxy or a connection before the broker binds it, or while a
// killed broker is down.
//
// A port is handed out once per process: the listener is closed before
// the caller binds it, so without that two callers of one test (a broker
// and a proxy) could be given the same free port, and the second to bind
// fails (it did, once in a run of 17 scenarios).
func freeAddr(t *testing.T) string {
	t.Helper()
	for range 1000 {
		port := 20000 + rand.IntN(12000)
		if _, taken := handedOut.LoadOrStore(port, true); taken {
			continue
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		ln, err := net.Listen("tcp", addr)
		if err == nil {
			ln.Close()
			return addr
		}
	}
	t.Fatal("no free port in 20000-31999")
	return ""
}

// handedOut holds the ports freeAddr has returned.
var handedOut sync.Map

func newProxy(t *testing.T, name, target string) *Proxy {
	t.Helper()
	p, err := NewProxy(name, "", target)
	require.NoError(t, err)
	t.Cleanup(func() { p.Close() })
	return p
}

// startCluster starts the stand-ins, the proxies and three brokers and
// creates the topic: 6 partitions, 3 replicas, min.insync.replicas=2,
// small segments so the tier uploads all the time.
func startCluster(t *testing.T, opts clusterOpts) *cluster {
	t.Helper()
	bin := brokerBinary(t)
	c := &cluster{t: t, opts: opts, dir: t.TempDir(), DynFaults: &dynamotest.Faults{}, S3Faults: &s3local.Faults{}}
	dsrv := httptest.NewServer(c.DynFaults.Wrap(dynamolocal.NewHandler()))
	t.Cleanup(dsrv.Close)
	s3srv, err := s3local.Start("", s3local.WithWrap(c.S3Faults.Wrap), s3local.WithBuckets("strata"))
	require.NoError(t, err)
	t.Cleanup(func() { s3srv.Close() })
	for i := range brokers {
		c.listen[i] = freeAddr(t)
		c.http[i] = freeAddr(t)
	}
	for i := range brokers {
		c.client[i] = newProxy(t, fmt.Sprintf("client→%d", i), c.listen[i])
		c.dyn[i] = newProxy(t, fmt.Sprintf("%d→dynamodb", i), strings.TrimPrefix(dsrv.URL, "http://"))
		c.s3[i] = newProxy(t, fmt.Sprintf("%d→s3", i), strings.TrimPrefix(s3srv.URL(), "http://"))
		for j := range brokers {
			if i != j {
				c.peer[i][j] = newProxy(t, fmt.Sprintf("%d→%d", i, j), c.listen[j])
			}
		}
	}
	_ = bin
	for i := range brokers {
		c.start(i)
	}
	t.Cleanup(func() {
		for i := range brokers {
			c.mu.Lock()
			p := c.procs[i]
			c.mu.Unlock()
			if p != nil {
				p.cmd.Process.Signal(syscall.SIGCONT)
				p.cmd.Process.Kill()
				<-p.exited
			}
		}
		if t.Failed() {
			for i := range brokers {
				b, _ := os.ReadFile(c.logPath(i))
				t.Logf("broker %d log tail:\n%s", i, tail(string(b), 40))
			}
		}
	})
	adm, done := c.admin()
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	waitFor(t, time.Minute, "three brokers", func() bool {
		md, err := adm.Metadata(ctx)
		return err == nil && len(md.Brokers) == brokers
	})
	resp, err := adm.CreateTopic(ctx, partitions, brokers, map[string]*string{
		"min.insync.replicas": kadm.StringPtr("2"),
		"segment.bytes":       kadm.StringPtr("32768"),
	}, topicName)
	require.NoError(t, err)
	require.NoError(t, resp.Err)
	if opts.compaction {
		resp, err := adm.CreateTopic(ctx, partitions, brokers, tableConfigs, tableTopic)
		require.NoError(t, err)
		require.NoError(t, resp.Err)
	}
	waitFor(t, time.Minute, "every partition led with a full ISR", func() bool { return c.healthy(ctx) })
	return c
}

func (c *cluster) logPath(i int) string { return filepath.Join(c.dir, fmt.Sprintf("broker-%d.log", i)) }

// Bootstrap is the client-facing proxies' addresses.
func (c *cluster) Bootstrap() []string {
	var out []string
	for _, p := range c.client {
		out = append(out, p.Addr())
	}
	return out
}

// start runs broker i (again), on its fixed listen address and data
// directory.
func (c *cluster) start(i int) {
	t := c.t
	var dial []string
	for j := range brokers {
		if j != i {
			dial = append(dial, c.client[j].Addr()+"="+c.peer[i][j].Addr())
		}
	}
	args := []string{"serve", "-node-id", strconv.Itoa(i), "-listen", c.listen[i], "-advertise", c.client[i].Addr(),
		"-data", filepath.Join(c.dir, fmt.Sprintf("data-%d", i)),
		"-metastore", "dynamodb://strata-chaos", "-aws-endpoint", "http://" + c.dyn[i].Addr(), "-create-table",
		"-bucket", "s3://strata/chaos", "-s3-endpoint", "http://" + c.s3[i].Addr(), "-tier-interval", "200ms",
		"-lease", lease.String(), "-lease-margin", "500ms", "-replica-lag-max", "2s", "-watch-interval", "200ms",
		"-leader-rebalance-interval", "10s", "-log-level", cmp.Or(os.Getenv(logLevelEnv), "info"),
		"-transaction-check-interval", "500ms",
		// Consumer-protocol members as the classic ones: fenced after 6 s,
		// heartbeating every 500 ms.
		"-group-consumer-min-session-timeout", "1s", "-group-consumer-session-timeout", "6s",
		"-group-consumer-min-heartbeat-interval", "100ms", "-group-consumer-heartbeat-interval", "500ms",
		"-http", c.http[i],
		"-test-peer-dial", strings.Join(dial, ","),
	}
	if c.opts.unsafeAck {
		args = append(args, "-test-unsafe-ack")
	}
	if c.opts.unsafeShareAck {
		args = append(args, "-test-unsafe-share-ack")
	}
	if c.opts.compaction {
		args = append(args, "-cleaner-backoff", "200ms", "-maintenance-interval", "500ms")
	}
	if s := c.opts.skew[i]; s != "" {
		args = append(args, "-test-clock-skew", s)
	}
	cmd := exec.Command(binPath, args...)
	cmd.Env = append(os.Environ(), "STRATA_TEST_HOOKS=1")
	cmd.SysProcAttr = deathSignal()
	logf, err := os.OpenFile(c.logPath(i), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	require.NoError(t, err)
	defer logf.Close()
	fmt.Fprintf(logf, "==== chaos: start broker %d at %s\n", i, time.Now().Format(time.RFC3339Nano))
	cmd.Stderr = logf
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	p := &proc{cmd: cmd, exited: make(chan error, 1)}
	go func() { p.exited <- cmd.Wait() }()
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "ready") {
				select {
				case ready <- true:
				default:
				}
			}
		}
	}()
	select {
	case <-ready:
	case err := <-p.exited:
		b, _ := os.ReadFile(c.logPath(i))
		t.Fatalf("broker %d exited before ready: %v\n%s", i, err, tail(string(b), 30))
	case <-time.After(60 * time.Second):
		t.Fatalf("broker %d not ready in 60 s", i)
	}
	c.mu.Lock()
	c.procs[i] = p
	c.paused[i] = false
	c.mu.Unlock()
}

// Kill stops broker i with SIGKILL; it stays down until Start.
func (c *cluster) Kill(i int) {
	c.mu.Lock()
	p := c.procs[i]
	c.procs[i] = nil
	c.mu.Unlock()
	if p == nil {
		return
	}
	p.cmd.Process.Kill()
	<-p.exited
}

// Stop stops broker i with SIGTERM (a clean stop), SIGKILL after 30 s.
func (c *cluster) Stop(i int) error {
	c.mu.Lock()
	p := c.procs[i]
	c.procs[i] = nil
	c.mu.Unlock()
	if p == nil {
		return nil
	}
	p.cmd.Process.Signal(syscall.SIGCONT)
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.exited:
		return err
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("broker %d did not stop within 30 s of SIGTERM", i)
	}
}

// Up reports whether broker i runs.
func (c *cluster) Up(i int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.procs[i] != nil
}

// Pause sends SIGSTOP, Resume SIGCONT.
func (c *cluster) Pause(i int)  { c.signal(i, syscall.SIGSTOP, true) }
func (c *cluster) Resume(i int) { c.signal(i, syscall.SIGCONT, false) }

func (c *cluster) signal(i int, sig syscall.Signal, paused bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.procs[i]; p != nil {
		p.cmd.Process.Signal(sig)
		c.paused[i] = paused
	}
}

// Isolate cuts broker i from the other brokers, both ways.
func (c *cluster) Isolate(i int, cut bool) {
	for j := range brokers {
		if j == i {
			continue
		}
		for _, p := range []*Proxy{c.peer[i][j], c.peer[j][i]} {
			if cut {
				p.Cut()
			} else {
				p.Heal()
			}
		}
	}
}

// proxies lists every link.
func (c *cluster) proxies() []*Proxy {
	var out []*Proxy
	for i := range brokers {
		out = append(out, c.client[i], c.dyn[i], c.s3[i])
		for j := range brokers {
			if i != j {
				out = append(out, c.peer[i][j])
			}
		}
	}
	return out
}

// HealAll ends every fault: links forward again, the stand-ins stop
// failing, paused brokers continue and dead ones restart.
func (c *cluster) HealAll() {
	for _, p := range c.proxies() {
		p.Heal()
		p.Delay(0)
	}
	c.DynFaults.Fail("", 0, 0)
	c.DynFaults.Delay(0)
	c.S3Faults.Fail("", 0, 0)
	c.S3Faults.FailFraction("", 0, 0)
	c.S3Faults.Delay(0)
	for i := range brokers {
		if c.Up(i) {
			c.Resume(i)
		} else {
			c.start(i)
		}
	}
}

// admin returns an admin client on the client proxies.
func (c *cluster) admin() (*kadm.Client, func()) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...), kgo.RequestTimeoutOverhead(3*time.Second), kgo.RetryTimeout(5*time.Second))
	require.NoError(c.t, err)
	return kadm.NewClient(cl), cl.Close
}

// Leader returns the leader of partition p as some broker reports it, or
// -1 when none answers within a few seconds.
func (c *cluster) Leader(p int32) int {
	adm, done := c.admin()
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	md, err := adm.Metadata(ctx, topicName)
	if err != nil {
		return -1
	}
	pd, ok := md.Topics[topicName].Partitions[p]
	if !ok || pd.Leader < 0 || int(pd.Leader) >= brokers {
		return -1
	}
	return int(pd.Leader)
}

// healthy reports whether every running broker sees every partition led
// with all three replicas in the ISR.
func (c *cluster) healthy(ctx context.Context) bool {
	for i := range brokers {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.client[i].Addr()))
		if err != nil {
			return false
		}
		topics := []string{topicName}
		if c.opts.compaction {
			topics = append(topics, tableTopic)
		}
		mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		md, err := kadm.NewClient(cl).Metadata(mctx, topics...)
		cancel()
		cl.Close()
		if err != nil {
			return false
		}
		for _, tp := range topics {
			if len(md.Topics[tp].Partitions) != partitions {
				return false
			}
			for _, p := range md.Topics[tp].Partitions {
				if p.Leader < 0 || len(p.ISR) != brokers {
					return false
				}
			}
		}
	}
	return true
}

// StopAndCompare stops every broker cleanly and compares the replicas of
// each partition byte for byte up to ends[p] (the high watermark of the
// final read). It returns the differences found.
func (c *cluster) StopAndCompare(ends map[int32]int64) []string {
	return c.StopAndCompareTopics(map[string]map[int32]int64{topicName: ends})
}

// StopAndCompareTopics is StopAndCompare for several topics, each with
// its partitions' high watermarks.
func (c *cluster) StopAndCompareTopics(ends map[string]map[int32]int64) []string {
	for i := range brokers {
		if err := c.Stop(i); err != nil {
			c.t.Logf("stop broker %d: %v", i, err)
		}
	}
	var diffs []string
	for name, e := range ends {
		for _, d := range c.compare(name, e) {
			if name != topicName {
				d = name + " " + d
			}
			diffs = append(diffs, d)
		}
	}
	return diffs
}

// compare compares the stopped brokers' replicas of a topic.
func (c *cluster) compare(name string, ends map[int32]int64) []string {
	var diffs []string
	for p := int32(0); p < partitions; p++ {
		var logs [][]byte
		var starts []int64
		for i := range brokers {
			// <topic>-<32 hex digits of its id>/<partition>
			dir := name + "-" + strings.Repeat("[0-9a-f]", 32)
			matches, _ := filepath.Glob(filepath.Join(c.dir, fmt.Sprintf("data-%d", i), "logs", dir, strconv.Itoa(int(p))))
			if len(matches) != 1 {
				diffs = append(diffs, fmt.Sprintf("partition %d: %d logs on broker %d", p, len(matches), i))
				continue
			}
			lg, err := segment.Open(segment.Options{FS: segment.OS(), Dir: matches[0]})
			if err != nil {
				diffs = append(diffs, fmt.Sprintf("partition %d on broker %d: %v", p, i, err))
				continue
			}
			data, err := lg.Read(nil, lg.StartOffset(), 1<<30, ends[p])
			if err != nil {
				diffs = append(diffs, fmt.Sprintf("partition %d on broker %d: read: %v", p, i, err))
			}
			if lg.NextOffset() < ends[p] {
				diffs = append(diffs, fmt.Sprintf("partition %d on broker %d: log ends at %d, below the high watermark %d", p, i, lg.NextOffset(), ends[p]))
			}
			starts = append(starts, lg.StartOffset())
			lg.Close()
			logs = append(logs, data)
		}
		for i := 1; i < len(logs); i++ {
			if starts[i] != starts[0] {
				diffs = append(diffs, fmt.Sprintf("partition %d: log start %d on one replica, %d on another", p, starts[0], starts[i]))
			} else if !bytes.Equal(logs[0], logs[i]) {
				diffs = append(diffs, fmt.Sprintf("partition %d: replicas differ below the high watermark %d (%d vs %d bytes); %s", p, ends[p], len(logs[0]), len(logs[i]), firstDiff(logs[0], logs[i])))
			}
		}
	}
	return diffs
}

// firstDiff describes the first batch where two replicas' logs differ.
func firstDiff(a, b []byte) string {
	type batch struct {
		h segment.Header
		b []byte
	}
	split := func(l []byte) []batch {
		var out []batch
		segment.Split(l, func(h segment.Header, b []byte) error {
			out = append(out, batch{h, b})
			return nil
		})
		return out
	}
	x, y := split(a), split(b)
	desc := func(h segment.Header) string {
		return fmt.Sprintf("offset %d+%d epoch %d producer %d/%d seq %d crc %08x", h.BaseOffset, h.LastOffsetDelta, h.PartitionLeaderEpoch, h.ProducerID, h.ProducerEpoch, h.BaseSequence, h.CRC)
	}
	for i := 0; i < min(len(x), len(y)); i++ {
		if !bytes.Equal(x[i].b, y[i].b) {
			return fmt.Sprintf("first difference at batch %d: [%s] vs [%s]", i, desc(x[i].h), desc(y[i].h))
		}
	}
	return fmt.Sprintf("%d vs %d batches", len(x), len(y))
}

func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

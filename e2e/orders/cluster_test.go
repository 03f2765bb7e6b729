package orders_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
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

	"github.com/stratamq/strata/pkg/metastore/dynamo/dynamotest"
)

// buildBinaries builds brokerfleet and the orders command into a temporary
// directory, in one go build.
func buildBinaries(t *testing.T) (brokerfleet, ordersCmd string) {
	t.Helper()
	dir := t.TempDir()
	start := time.Now()
	out, err := exec.Command("go", "build", "-o", dir+string(filepath.Separator),
		"github.com/stratamq/strata/brokerfleet", "github.com/stratamq/strata/e2e/orders/cmd/orders").CombinedOutput()
	require.NoError(t, err, "build: %s", out)
	t.Logf("built brokerfleet and orders in %v", time.Since(start).Round(time.Millisecond))
	return filepath.Join(dir, "brokerfleet"), filepath.Join(dir, "orders")
}

// proc is a child process with its stderr kept.
type proc struct {
	name   string
	cmd    *exec.Cmd
	stderr *syncBuffer
	exited chan error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startProc starts bin; when ready is not empty it waits (30 s) for a
// stdout line containing it.
func startProc(t *testing.T, name, ready, bin string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	p := &proc{name: name, cmd: cmd, stderr: &syncBuffer{}, exited: make(chan error, 1)}
	cmd.Stderr = p.stderr
	require.NoError(t, cmd.Start())
	go func() { p.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if t.Failed() || os.Getenv("STRATA_ORDERS_LOGS") != "" {
			t.Logf("--- %s (pid %d) stderr, last lines:\n%s", name, cmd.Process.Pid, tail(p.stderr.String(), 40))
		}
	})
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
	}()
	if ready == "" {
		return p
	}
	timeout := time.After(30 * time.Second)
	for {
		select {
		case l := <-lines:
			if strings.Contains(l, ready) {
				return p
			}
		case err := <-p.exited:
			t.Fatalf("%s exited before ready: %v\n%s", name, err, p.stderr.String())
		case <-timeout:
			t.Fatalf("%s not ready in 30s\n%s", name, p.stderr.String())
		}
	}
}

// kill9 sends SIGKILL and waits for the exit.
func (p *proc) kill9(t *testing.T) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	<-p.exited
}

// stop sends SIGTERM and waits (15 s) for a clean exit.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-p.exited:
		require.NoError(t, err, "%s exit\n%s", p.name, tail(p.stderr.String(), 20))
	case <-time.After(15 * time.Second):
		t.Fatalf("%s did not stop within 15s of SIGTERM", p.name)
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// fleet is three `brokerfleet serve` processes over one minidyn table,
// each with the schema registry. Ports are fixed for the test's duration,
// so a restarted broker comes back at the address clients know.
type fleet struct {
	t        *testing.T
	bin      string
	endpoint string
	dirs     [3]string
	addrs    [3]string // Kafka
	regs     [3]string // schema registry host:port
	procs    [3]*proc
}

func startFleet(t *testing.T, bin string) *fleet {
	t.Helper()
	f := &fleet{t: t, bin: bin, endpoint: dynamotest.StartMinidyn(t)}
	for i := range f.procs {
		f.dirs[i] = t.TempDir()
		f.addrs[i] = freeAddr(t)
		f.regs[i] = freeAddr(t)
	}
	var wg sync.WaitGroup
	for i := range f.procs {
		wg.Add(1)
		go func() { defer wg.Done(); f.start(i) }()
	}
	wg.Wait()
	adm := f.admin()
	waitFor(t, 30*time.Second, "three brokers in the metadata", func() (bool, string) {
		md, err := adm.Metadata(context.Background())
		if err != nil {
			return false, err.Error()
		}
		return len(md.Brokers) == 3, fmt.Sprintf("brokers %v", md.Brokers.NodeIDs())
	})
	return f
}

func (f *fleet) start(i int) {
	f.procs[i] = startProc(f.t, fmt.Sprintf("broker %d", i), "ready", f.bin, "serve", "-node-id", strconv.Itoa(i),
		"-listen", f.addrs[i], "-registry", f.regs[i], "-data", f.dirs[i],
		"-metastore", "dynamodb://strata-orders", "-aws-endpoint", f.endpoint, "-create-table",
		"-lease", "3s", "-lease-margin", "500ms", "-replica-lag-max", "2s", "-watch-interval", "200ms")
}

func (f *fleet) seeds() []string { return f.addrs[:] }

func (f *fleet) registryURLs() []string {
	out := make([]string, len(f.regs))
	for i, r := range f.regs {
		out[i] = "http://" + r
	}
	return out
}

// admin is a kadm client over the fleet, closed with the test.
func (f *fleet) admin() *kadm.Client {
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.seeds()...))
	require.NoError(f.t, err)
	f.t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// freeAddr returns a free address below Linux's ephemeral port range
// (32768-60999), so no outgoing connection or port-0 listener takes it
// while its broker is down between a kill and a restart.
func freeAddr(t *testing.T) string {
	t.Helper()
	for range 1000 {
		addr := fmt.Sprintf("127.0.0.1:%d", 20000+rand.IntN(12000))
		if l, err := net.Listen("tcp", addr); err == nil {
			l.Close()
			return addr
		}
	}
	t.Fatal("no free port in 20000-31999")
	return ""
}

// waitFor polls cond every 100 ms; on timeout it fails with cond's last
// note.
func waitFor(t *testing.T, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ok, note := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s: %s", d, what, note)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

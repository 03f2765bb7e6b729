// Package testbroker starts a real Strata broker for the functions' tests:
// Main builds the brokerfleet binary once per test binary, and Start and
// StartCluster run `brokerfleet dev` with one broker on a random 127.0.0.1
// port (StartCluster can add the schema registry and DLQ console).
package testbroker

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var binPath string

// Main builds brokerfleet, runs the tests and removes the build; call it
// from TestMain: os.Exit(testbroker.Main(m)).
func Main(m *testing.M) int {
	dir, err := os.MkdirTemp("", "strata-testbroker-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "testbroker:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	binPath = filepath.Join(dir, "brokerfleet")
	out, err := exec.Command("go", "build", "-o", binPath, "github.com/stratamq/strata/brokerfleet").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "testbroker: build brokerfleet: %v\n%s", err, out)
		return 1
	}
	return m.Run()
}

// Start runs a one-broker Strata cluster (topics auto-created) for the
// test's duration and returns its bootstrap address.
func Start(t testing.TB) string {
	t.Helper()
	return StartCluster(t, false).Bootstrap
}

// Cluster is a running one-broker dev cluster.
type Cluster struct {
	Bootstrap string // host:port
	Registry  string // http://host:port of the schema registry (and /console/); "" without
}

// StartCluster is Start, with the schema registry and DLQ console served
// when registry is set.
func StartCluster(t testing.TB, registry bool) Cluster {
	t.Helper()
	return StartClusterArgs(t, registry)
}

// StartClusterArgs is StartCluster with more `brokerfleet dev` flags
// (such as -group-stats-interval).
func StartClusterArgs(t testing.TB, registry bool, args ...string) Cluster {
	t.Helper()
	if binPath == "" {
		t.Fatal("testbroker: call testbroker.Main from TestMain")
	}
	regAddr := ""
	if registry {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		regAddr = l.Addr().String()
		l.Close()
	}
	cmd := exec.Command(binPath, append([]string{"dev", "-brokers", "1", "-listen", "127.0.0.1:0", "-http", "", "-registry", regAddr,
		"-tier=false", "-data", t.TempDir()}, args...)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var stderr bytes.Buffer
	cmd.Stderr = &lockedWriter{mu: &mu, w: &stderr}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if l := sc.Text(); strings.Contains(l, "strata ready: bootstrap ") {
				select {
				case ready <- l:
				default:
				}
			}
		}
	}()
	select {
	case l := <-ready:
		c := Cluster{Bootstrap: strings.Split(l[strings.LastIndex(l, " ")+1:], ",")[0]}
		if registry {
			c.Registry = "http://" + regAddr
		}
		return c
	case err := <-exited:
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("testbroker: dev exited before ready: %v\n%s", err, stderr.String())
	case <-time.After(30 * time.Second):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("testbroker: dev not ready in 30s\n%s", stderr.String())
	}
	return Cluster{}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Package testbroker starts a real Strata broker for the functions' tests:
// Main builds the brokerfleet binary once per test binary and Start runs
// `brokerfleet dev` with one broker on a random 127.0.0.1 port.
package testbroker

import (
	"bufio"
	"bytes"
	"fmt"
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
	if binPath == "" {
		t.Fatal("testbroker: call testbroker.Main from TestMain")
	}
	cmd := exec.Command(binPath, "dev", "-brokers", "1", "-listen", "127.0.0.1:0", "-http", "", "-registry", "",
		"-tier=false", "-data", t.TempDir())
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
		addr := l[strings.LastIndex(l, " ")+1:]
		return strings.Split(addr, ",")[0]
	case err := <-exited:
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("testbroker: dev exited before ready: %v\n%s", err, stderr.String())
	case <-time.After(30 * time.Second):
		mu.Lock()
		defer mu.Unlock()
		t.Fatalf("testbroker: dev not ready in 30s\n%s", stderr.String())
	}
	return ""
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

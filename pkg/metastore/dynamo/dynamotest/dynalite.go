package dynamotest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stratamq/strata/pkg/testenv"
)

// DynaliteCLI is where the dynalite module lives, relative to the
// repository root (`npm ci --prefix localstack` installs it).
const DynaliteCLI = "localstack/node_modules/dynalite/cli.js"

var dynalite struct {
	once     sync.Once
	endpoint string
	missing  testenv.Tool // what dynalite cannot run without here, if anything
	skip     string       // how it was looked for
	err      error        // why it failed to start
	cmd      *exec.Cmd
	done     chan struct{}
}

// StartDynalite returns the endpoint of the test binary's dynalite, which
// it starts on first use: `node localstack/node_modules/dynalite/cli.js
// --host 127.0.0.1 --port <free> --createTableMs 0 --deleteTableMs 0
// --updateTableMs 0`, in memory. Give each test its own table (NewTable).
// Without node or the module the test is skipped, or fails when
// STRATA_REQUIRE_ALL is set (testenv.Missing). The process dies with the
// test binary; call StopDynalite from TestMain to end it sooner.
func StartDynalite(t testing.TB) string {
	t.Helper()
	dynalite.once.Do(startDynalite)
	switch {
	case dynalite.skip != "":
		testenv.Missing(t, dynalite.missing, dynalite.skip)
	case dynalite.err != nil:
		t.Fatalf("dynalite: %v", dynalite.err)
	}
	return dynalite.endpoint
}

// StopDynalite ends the dynalite process if one was started.
func StopDynalite() {
	if dynalite.cmd != nil && dynalite.cmd.Process != nil {
		dynalite.cmd.Process.Kill()
		<-dynalite.done
	}
}

// repoRoot walks up from the working directory (a test's package
// directory) to the directory holding go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

func startDynalite() {
	node, err := exec.LookPath("node")
	if err != nil {
		dynalite.missing, dynalite.skip = testenv.Node, "no node on PATH, needed to run dynalite"
		return
	}
	root, err := repoRoot()
	if err != nil {
		dynalite.err = err
		return
	}
	cli := filepath.Join(root, DynaliteCLI)
	if _, err := os.Stat(cli); err != nil {
		dynalite.missing, dynalite.skip = testenv.Dynalite, "no "+cli
		return
	}
	// A free port can be taken between our probe and node's listen: try
	// a few.
	for try := 0; try < 3; try++ {
		if dynalite.err = launch(node, cli); dynalite.err == nil {
			return
		}
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// launch starts dynalite from a goroutine locked to its OS thread: on
// Linux the child gets SIGKILL when that thread ends (see dieWithParent),
// which then happens only when the test binary exits or the child has
// already ended.
func launch(node, cli string) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	type started struct {
		cmd    *exec.Cmd
		stdout io.ReadCloser
		err    error
	}
	ch := make(chan started, 1)
	done := make(chan struct{})
	go func() {
		runtime.LockOSThread()
		cmd := exec.Command(node, cli, "--host", "127.0.0.1", "--port", strconv.Itoa(port),
			"--createTableMs", "0", "--deleteTableMs", "0", "--updateTableMs", "0")
		dieWithParent(cmd)
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		if err == nil {
			err = cmd.Start()
		}
		ch <- started{cmd, stdout, err}
		if err == nil {
			cmd.Wait()
		}
		close(done)
	}()
	s := <-ch
	if s.err != nil {
		return fmt.Errorf("start %s: %w", cli, s.err)
	}
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(s.stdout)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "listening at") {
				ready <- nil
				io.Copy(io.Discard, s.stdout)
				return
			}
		}
		ready <- errors.New("exited before listening")
	}()
	select {
	case err = <-ready:
	case <-time.After(20 * time.Second):
		err = errors.New("not listening after 20 s")
	}
	if err != nil {
		s.cmd.Process.Kill()
		<-done
		return fmt.Errorf("dynalite on 127.0.0.1:%d: %w", port, err)
	}
	dynalite.cmd, dynalite.done = s.cmd, done
	dynalite.endpoint = fmt.Sprintf("http://127.0.0.1:%d", port)
	return nil
}

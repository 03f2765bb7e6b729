// Command compat runs franz-go's own kgo integration tests (the version in
// go.mod, copied out of the module cache) against a fresh `brokerfleet
// dev` and judges the run against e2e/compat/expected-failures.txt: it
// exits non-zero when a test fails that is not listed, or a listed test
// passes (take it off the list) or no longer exists. `make compat` runs
// it; .ci/run runs that.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/stratamq/strata/e2e/compat"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "compat:", err)
		os.Exit(1)
	}
}

func run() error {
	expectedPath := flag.String("expected", "e2e/compat/expected-failures.txt", "the list of tests expected to fail, with reasons")
	records := flag.Int("records", 20000, "KGO_TEST_RECORDS: records each produce/consume test moves")
	timeout := flag.Duration("timeout", 12*time.Minute, "go test -timeout of the main run (about 2 minutes on the 2-core VM; listed expected failures are skipped here and run alone under -hang-timeout, so a test waiting on a missing feature cannot hold CI)")
	hangTimeout := flag.Duration("hang-timeout", 90*time.Second, "go test -timeout of each listed expected failure, run alone")
	run := flag.String("run", "", "only these tests (go test -run), for working on one; the verdict then covers only them")
	keep := flag.Bool("keep", false, "keep the temporary directory (the suite's copy, the cluster's data and logs)")
	flag.Parse()

	f, err := os.Open(*expectedPath)
	if err != nil {
		return err
	}
	expected, err := compat.ParseExpected(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", *expectedPath, err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir, err := os.MkdirTemp("", "strata-compat-")
	if err != nil {
		return err
	}
	if *keep {
		fmt.Println("keeping", dir)
	} else {
		defer os.RemoveAll(dir)
	}

	suite, version, err := copySuite(dir)
	if err != nil {
		return err
	}
	fmt.Printf("franz-go %s's pkg/kgo tests, copied to %s\n", version, suite)

	bin := filepath.Join(dir, "brokerfleet")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "./brokerfleet").CombinedOutput(); err != nil {
		return fmt.Errorf("build brokerfleet: %v\n%s", err, out)
	}
	seeds, shutdown, err := startDev(ctx, bin, dir)
	if err != nil {
		return err
	}
	defer shutdown()
	fmt.Println("brokerfleet dev:", seeds)

	env := append(os.Environ(),
		"KGO_SEEDS="+seeds,
		"KGO_TEST_RF=3",
		fmt.Sprintf("KGO_TEST_RECORDS=%d", *records),
		"GOFLAGS=-mod=mod",
	)
	// Every listed test is skipped in the main run and run alone under
	// -hang-timeout: a test that waits on a missing feature (franz-go's
	// TestTxnEtl waited 24 minutes before transactions) cannot hold the
	// run, and one that starts passing is still seen.
	var listed []string
	for _, e := range expected {
		listed = append(listed, e.Test)
	}
	args := []string{"test", "./pkg/kgo/", "-count=1", "-json", "-timeout", timeout.String()}
	if *run != "" {
		args = append(args, "-run", *run)
	}
	if len(listed) > 0 {
		args = append(args, "-skip", "^("+strings.Join(listed, "|")+")$")
	}
	start := time.Now()
	results, err := goTest(ctx, suite, env, args, filepath.Join(dir, "kgo-test.json"))
	if err != nil {
		return err
	}
	fmt.Printf("main run: %d tests in %v\n", len(results), time.Since(start).Round(time.Second))
	for _, name := range listed {
		if *run != "" && !regexp.MustCompile(*run).MatchString(name) {
			continue
		}
		start := time.Now()
		one, err := goTest(ctx, suite, env, []string{"test", "./pkg/kgo/", "-count=1", "-json", "-timeout", hangTimeout.String(), "-run", "^" + name + "$"}, filepath.Join(dir, name+".json"))
		if err != nil {
			return err
		}
		results[name] = one[name]
		if results[name] == "" {
			results[name] = compat.Fail // the binary timed out before the test reported
		}
		fmt.Printf("%s (listed) run alone: %s in %v\n", name, results[name], time.Since(start).Round(time.Second))
	}
	if *run != "" {
		var only []compat.Expectation
		for _, e := range expected {
			if _, ran := results[e.Test]; ran {
				only = append(only, e)
			}
		}
		expected = only
	}

	v := compat.Judge(results, expected)
	fmt.Printf("franz-go %s kgo suite against Strata: %d passed, %d failed (%d expected), %d skipped\n",
		version, v.Passed, v.Failed, v.Failed-len(v.Unexpected), v.Skipped)
	reasons := map[string]string{}
	for _, e := range expected {
		reasons[e.Test] = e.Reason
	}
	for _, name := range v.Unexpected {
		fmt.Printf("UNEXPECTED FAILURE %s (a Strata bug until shown otherwise; output in the -json log, -keep)\n", name)
		printFailure(filepath.Join(dir, "kgo-test.json"), name)
	}
	for _, name := range v.NowPassing {
		fmt.Printf("NOW PASSES %s: take it off %s (it was listed for: %s)\n", name, *expectedPath, reasons[name])
	}
	for _, name := range v.NotRun {
		fmt.Printf("NOT RUN %s: listed in %s but the suite has no such test\n", name, *expectedPath)
	}
	if !v.OK() {
		return errors.New("the run does not match the expected-failure list")
	}
	return nil
}

// copySuite copies franz-go's module (the version go.mod requires) out of
// the read-only module cache.
func copySuite(dir string) (suite, version string, err error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Version}} {{.Dir}}", "github.com/twmb/franz-go").Output()
	if err != nil {
		return "", "", fmt.Errorf("go list -m github.com/twmb/franz-go: %w", err)
	}
	version, src, ok := strings.Cut(strings.TrimSpace(string(out)), " ")
	if !ok || src == "" {
		return "", "", fmt.Errorf("franz-go is not in the module cache (go mod download github.com/twmb/franz-go): %q", out)
	}
	suite = filepath.Join(dir, "franz-go")
	if out, err := exec.Command("cp", "-r", src, suite).CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("copy %s: %v %s", src, err, out)
	}
	if out, err := exec.Command("chmod", "-R", "u+w", suite).CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("chmod %s: %v %s", suite, err, out)
	}
	return suite, version, nil
}

// startDev runs `brokerfleet dev` on random ports and returns its
// bootstrap addresses once it is ready. It keeps the __consumer_offsets
// copy of commits (-offsets-topic-partitions): TestConsumeRegex needs
// Kafka's internal topic to exist.
func startDev(ctx context.Context, bin, dir string) (string, func(), error) {
	logf, err := os.Create(filepath.Join(dir, "dev.log"))
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command(bin, "dev", "-data", filepath.Join(dir, "data"), "-listen", "127.0.0.1:0", "-http", "", "-registry", "", "-log-level", "warn", "-offsets-topic-partitions", "5")
	cmd.Stderr = logf
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	shutdown := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		logf.Close()
	}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if line := sc.Text(); strings.Contains(line, "ready") {
				if _, seeds, ok := strings.Cut(line, "bootstrap "); ok {
					ready <- strings.TrimSpace(seeds)
				}
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case seeds := <-ready:
		return seeds, shutdown, nil
	case <-time.After(2 * time.Minute):
	case <-ctx.Done():
	}
	shutdown()
	return "", nil, fmt.Errorf("brokerfleet dev printed no ready line (log: %s)", logf.Name())
}

// goTest runs go test in the suite's pkg/kgo with args, keeps its JSON
// output in logPath and returns each top-level test's outcome. A failing
// test run is not an error; a run that could not start is.
func goTest(ctx context.Context, suite string, env, args []string, logPath string) (map[string]compat.Outcome, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = suite, env, logf, &stderr
	runErr := cmd.Run()
	if _, err := logf.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	results, err := compat.Results(logf)
	if err != nil {
		return nil, err
	}
	var exit *exec.ExitError
	if runErr != nil && (!errors.As(runErr, &exit) || (len(results) == 0 && ctx.Err() == nil)) {
		return nil, fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), runErr, stderr.String())
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return results, nil
}

// printFailure prints the last lines a failed test wrote.
func printFailure(logPath, name string) {
	f, err := os.Open(logPath)
	if err != nil {
		return
	}
	defer f.Close()
	lines := compat.Output(f, name)
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	for _, l := range lines {
		fmt.Print("    ", l)
	}
}

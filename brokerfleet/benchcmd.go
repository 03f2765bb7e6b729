package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratamq/strata/brokerfleet/internal/bench"
	"github.com/stratamq/strata/pkg/latency"
)

const benchHelp = `usage: brokerfleet bench [flags]

Measures produce and consume throughput, produce latency (HDR histogram:
p50, p99, p99.9, max) and the CPU and peak memory of the serving process,
for every combination of the workload lists below, against each target:

  dev        'brokerfleet dev' (three brokers in one process, RF 3, logs on
             disk, S3 tier on its stand-in), started as a child process
  kfake      franz-go's in-memory kfake (one broker, RF 1), as a child
             process: the baseline every ratio (×) divides by
  jetstream  NATS JetStream, three nodes in one child process, a stream
             of 3 replicas on file storage: acknowledged publishes (async
             for throughput, one at a time for latency) and an ordered
             consumer; not in the default -targets
  -bootstrap any running Kafka-compatible cluster (no CPU or memory figures)

Every workload starts on a settled disk: after each one the bench waits
for the dev target to remove its topic's logs and syncs the disk, so no
workload shares the cores and the disk with the writeback of the one
before (1 GiB at RF 3 leaves up to 3 GiB in the page cache).

It prints a table (and -json writes every figure). Lists are comma
separated; sizes take B, KiB, MiB and GiB. -matrix runs the whole matrix
(100B,1KiB,64KiB × unkeyed,keyed × 1,12,96 partitions × acks all,1 ×
durability replicated,fsync,object) at -bytes 64MiB unless set.

flags:
`

// benchFlags are bench's command line.
type benchFlags struct {
	targets, bootstrap        string
	rf, brokers               int
	bytes                     string
	recordBytes, keyed, parts string
	acks, durability          string
	matrix, progress          bool
	latency                   int
	timeout                   time.Duration
	compression               string
	text                      bool
	dataDir, jsonOut, profile string
	diskBytes                 string
	idleParts                 int
	idleFor                   time.Duration
	tier, tierOnly            bool
	tierSegment               int64
	objectLatency             string
	compaction, compactOnly   bool
	compactSegment            int64
	restartBytes              string
	groups                    string
	restartSegment            string
	restartSegmentBytes       int64 // restartSegment parsed
	share, shareBytes         string
	shareCounts               []int // share parsed: the dev target serves metrics when set
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	def := bench.DefaultConfig()
	f := benchFlags{}
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), benchHelp)
		fs.PrintDefaults()
	}
	fs.StringVar(&f.targets, "targets", "dev,kfake", "targets to run: dev, kfake, jetstream (any of them; empty with -bootstrap for only that)")
	fs.StringVar(&f.bootstrap, "bootstrap", "", "also run against the cluster at this bootstrap address (host:port[,host:port])")
	fs.IntVar(&f.rf, "rf", 3, "replication factor of the topics on the -bootstrap cluster")
	fs.IntVar(&f.brokers, "brokers", 3, "brokers of the dev target (its replication factor is min(3, brokers))")
	fs.StringVar(&f.bytes, "bytes", "1GiB", "volume of record values produced (and consumed) per workload and target (default 64MiB with -matrix)")
	fs.StringVar(&f.recordBytes, "record-bytes", "1KiB", "record value sizes")
	fs.StringVar(&f.keyed, "keyed", "false", "keyed records (true: one of 10,000 keys, hash partitioned; false: no key)")
	fs.StringVar(&f.parts, "partitions", "12", "partitions of the benchmark topic")
	fs.StringVar(&f.acks, "acks", "all", "producer acks: all (idempotent), 1, or transactional: txn-100ms (commit every 100 ms), txn-1000 (every 1,000 records)")
	fs.StringVar(&f.durability, "durability", "replicated", "strata.durability of the topics: replicated, fsync or object (not sent to kfake)")
	fs.BoolVar(&f.matrix, "matrix", false, "run the whole workload matrix (overrides the five lists above)")
	fs.IntVar(&f.latency, "latency-samples", def.Latency, "one-in-flight produces timed per workload")
	fs.DurationVar(&f.timeout, "timeout", def.Timeout, "limit for each workload on each target")
	fs.StringVar(&f.compression, "compression", def.Compression, "producer compression: none, gzip, snappy, lz4 or zstd")
	fs.BoolVar(&f.text, "text", false, "compressible values (random letters) instead of random bytes")
	fs.StringVar(&f.dataDir, "data", "", "directory for the dev target's data and the disk measurement (default: a temporary directory, removed afterwards)")
	fs.StringVar(&f.diskBytes, "disk-bytes", "1GiB", "bytes written to measure the disk's sequential write bandwidth under -data (0: skip)")
	fs.IntVar(&f.idleParts, "idle-partitions", 0, "afterwards, create this many partitions (RF 3) on the dev target and measure its idle CPU and memory")
	fs.DurationVar(&f.idleFor, "idle-for", 30*time.Second, "how long the idle measurement lasts")
	fs.StringVar(&f.jsonOut, "json", "", "write the full report as JSON to this file ('-': stdout, instead of the table)")
	fs.StringVar(&f.profile, "profile", "", "write the dev target's CPU and allocation profiles (dev.cpu.pprof, dev.allocs.pprof) and the bench client's CPU profile (client.cpu.pprof) to this directory")
	fs.BoolVar(&f.progress, "progress", true, "show a progress bar on stderr")
	fs.BoolVar(&f.tier, "tier", false, "afterwards, measure the S3 tier (one in-process broker on an S3 stand-in: PUTs per GiB, consume from S3, object durability)")
	fs.BoolVar(&f.tierOnly, "tier-only", false, "measure only the S3 tier")
	fs.Int64Var(&f.tierSegment, "tier-segment-bytes", 64<<20, "segment.bytes of the S3-tier measurement")
	fs.StringVar(&f.objectLatency, "object-latency", "s3-standard,s3-express", "the S3-tier measurement also times strata.durability=object with the stand-ins behind these S3 latency models (presets s3-standard, s3-express, or p50/p99 as 25ms/80ms), separated by commas, each with DynamoDB's latency (p50 4ms, p99 12ms) on the metastore; empty: none")
	fs.StringVar(&f.groups, "groups", "", "afterwards, on the dev target: for each group size in this list (such as 1,10,50), classic and consumer protocol, the time from a member joining to its first record and the longest pause of the members already there")
	fs.StringVar(&f.restartBytes, "restart-bytes", "0", "afterwards, write this much (RF 3, 12 partitions) to the dev target, kill -9 it, start it on the same data and time until it serves and until every partition is led with a full ISR (0: skip)")
	fs.StringVar(&f.restartSegment, "restart-segment-bytes", "128MiB", "segment.bytes of the restart measurement's topic")
	fs.StringVar(&f.share, "share", "", "afterwards, on the dev target: for each consumer count in this list (such as 1,4,16), a share group and then a classic group of that many consumers read a 12-partition topic (RF 3) in full, acknowledging every poll; consume MB/s and records/s, acknowledgement latency p50/p99 and metastore writes per 1,000 records (empty: skip)")
	fs.StringVar(&f.shareBytes, "share-bytes", "256MiB", "records (1 KiB values) the -share measurement's topic holds")
	fs.BoolVar(&f.compaction, "compaction", false, "afterwards, measure compacted topics (one in-process broker: produce throughput to a cleanup.policy=delete topic and to a compact one while its cleaner runs, the cleaner's throughput)")
	fs.BoolVar(&f.compactOnly, "compaction-only", false, "measure only compacted topics")
	fs.Int64Var(&f.compactSegment, "compaction-segment-bytes", 8<<20, "segment.bytes of the compaction measurement")
	if err := parseFlags(fs, args, stderr, false); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	cfgs, err := f.workloads(def, set)
	if err != nil {
		return usageError{err}
	}
	if _, err := parseObjectLatency(f.objectLatency); err != nil {
		return err
	}
	if f.compactOnly {
		if f.compaction || f.tier || f.tierOnly {
			return usageError{errors.New("flag -compaction-only excludes -compaction, -tier and -tier-only")}
		}
		return runCompactionBench(ctx, cfgs[0], f.compactSegment, stdout, stderr)
	}
	if f.tierOnly {
		if f.tier || f.compaction {
			return usageError{errors.New("flag -tier-only excludes -tier and -compaction")}
		}
		cfg := cfgs[0]
		cfg.Partitions = 6
		return runTierBench(ctx, cfg, f.tierSegment, f.objectLatency, stdout, stderr)
	}
	targets := splitList(f.targets)
	for _, t := range targets {
		if t != "dev" && t != "kfake" && t != "jetstream" {
			return usageError{fmt.Errorf("invalid value %q for flag -targets: %q is not dev, kfake or jetstream", f.targets, t)}
		}
	}
	if len(targets) == 0 && f.bootstrap == "" {
		return usageError{errors.New("no target: give -targets or -bootstrap")}
	}
	if f.brokers < 1 || f.brokers > 16 {
		return usageError{fmt.Errorf("invalid value %d for flag -brokers: want 1 to 16", f.brokers)}
	}
	if f.rf < 1 {
		return usageError{fmt.Errorf("invalid value %d for flag -rf: below 1", f.rf)}
	}
	diskBytes, err := parseSize(f.diskBytes)
	if err != nil || diskBytes < 0 {
		return usageError{fmt.Errorf("invalid value %q for flag -disk-bytes: %v", f.diskBytes, err)}
	}
	groupSizes, err := parseGroupSizes(f.groups)
	if err != nil || (len(groupSizes) > 0 && !slices.Contains(targets, "dev")) {
		return usageError{fmt.Errorf("invalid value %q for flag -groups: needs member counts and the dev target (%v)", f.groups, err)}
	}
	restartBytes, err := parseSize(f.restartBytes)
	if err != nil || restartBytes < 0 || (restartBytes > 0 && !slices.Contains(targets, "dev")) {
		return usageError{fmt.Errorf("invalid value %q for flag -restart-bytes: needs a size and the dev target (%v)", f.restartBytes, err)}
	}
	if f.restartSegmentBytes, err = parseSize(f.restartSegment); err != nil || f.restartSegmentBytes < 1<<20 {
		return usageError{fmt.Errorf("invalid value %q for flag -restart-segment-bytes: want a size of 1MiB or more (%v)", f.restartSegment, err)}
	}
	if f.shareCounts, err = parseShareCounts(f.share); err != nil || (len(f.shareCounts) > 0 && !slices.Contains(targets, "dev")) {
		return usageError{fmt.Errorf("invalid value %q for flag -share: needs consumer counts and the dev target (%v)", f.share, err)}
	}
	shareBytes, err := parseSize(f.shareBytes)
	if err != nil || shareBytes < 1<<20 {
		return usageError{fmt.Errorf("invalid value %q for flag -share-bytes: want a size of 1MiB or more (%v)", f.shareBytes, err)}
	}
	if f.idleParts < 0 || (f.idleParts > 0 && !slices.Contains(targets, "dev")) {
		return usageError{fmt.Errorf("invalid value %d for flag -idle-partitions: needs a positive count and the dev target", f.idleParts)}
	}
	if f.idleFor <= 0 {
		return usageError{fmt.Errorf("invalid value %v for flag -idle-for: not positive", f.idleFor)}
	}

	dir := f.dataDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "strata-bench-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return usageError{fmt.Errorf("flag -data: %w", err)}
	}
	if f.profile != "" {
		if err := os.MkdirAll(f.profile, 0o755); err != nil {
			return usageError{fmt.Errorf("flag -profile: %w", err)}
		}
	}

	rep := &bench.Report{Started: time.Now().UTC().Format(time.RFC3339), Command: "brokerfleet bench " + strings.Join(args, " "), CPUs: runtime.NumCPU()}
	if diskBytes > 0 {
		fmt.Fprintf(stderr, "measuring the disk under %s (%s)\n", dir, bench.Size(diskBytes))
		bw, err := bench.SeqWrite(dir, diskBytes)
		if err != nil {
			return err
		}
		rep.DiskWriteMBps = bw / 1e6
	}

	// Start every target first: all run in one invocation, one at a time.
	var live []*benchTarget
	defer func() {
		for _, t := range live {
			t.stop(stderr)
		}
	}()
	for _, name := range targets {
		t, err := startTarget(ctx, name, f, dir)
		if err != nil {
			return err
		}
		live = append(live, t)
		if name == "kfake" {
			rep.Baseline = "kfake"
		}
	}
	if f.bootstrap != "" {
		live = append(live, &benchTarget{Target: bench.Target{Name: "bootstrap", Addrs: splitList(f.bootstrap), RF: f.rf, Strata: true}})
	}

	var bar *progressbar.ProgressBar
	if f.progress {
		var total int64
		for _, c := range cfgs {
			for _, t := range live {
				if t.Strata || firstDurability(cfgs, c) {
					total += 2 * c.Records() * int64(c.RecordBytes)
				}
			}
		}
		bar = progressbar.NewOptions64(total, progressbar.OptionSetWriter(stderr), progressbar.OptionShowBytes(true),
			progressbar.OptionThrottle(200*time.Millisecond), progressbar.OptionSetWidth(30),
			progressbar.OptionShowElapsedTimeOnFinish(), progressbar.OptionClearOnFinish())
	}
	progress := func(n int64) {
		if bar != nil {
			bar.Add64(n)
		}
	}
	stopClientProfile := func() {}
	if f.profile != "" {
		if stopClientProfile, err = startCPUProfile(filepath.Join(f.profile, "client.cpu.pprof")); err != nil {
			return err
		}
	}
	var failed error
	for _, cfg := range cfgs {
		for _, t := range live {
			if !t.Strata && !firstDurability(cfgs, cfg) {
				continue // kfake and JetStream have no durability modes: run them once per workload
			}
			if bar != nil {
				bar.Describe(fmt.Sprintf("%-34s %-9s", cfg.Name(), t.Name))
			}
			run := bench.Run
			if t.JetStream {
				run = bench.RunJetStream
			}
			res, err := run(ctx, cfg, t.Target, progress)
			rep.Results = append(rep.Results, res)
			if err != nil {
				failed = errors.Join(failed, fmt.Errorf("%s on %s: %w", cfg.Name(), t.Name, err))
				if ctx.Err() != nil {
					break
				}
			}
			if t.Name == "dev" {
				settle(ctx, dir)
			}
			runtime.GC()
		}
	}
	stopClientProfile()
	if bar != nil {
		bar.Finish()
	}
	if f.idleParts > 0 && ctx.Err() == nil {
		for _, t := range live {
			if t.Name == "dev" {
				if rep.Idle, err = idleRun(ctx, t, f.idleParts, min(3, f.brokers), f.idleFor, stderr); err != nil {
					failed = errors.Join(failed, fmt.Errorf("idle: %w", err))
				}
			}
		}
	}
	if len(groupSizes) > 0 && ctx.Err() == nil {
		for _, t := range live {
			if t.Name == "dev" {
				if rep.Groups, err = groupRun(ctx, t, groupSizes, stderr); err != nil {
					failed = errors.Join(failed, fmt.Errorf("groups: %w", err))
				}
			}
		}
	}
	if len(f.shareCounts) > 0 && ctx.Err() == nil {
		for _, t := range live {
			if t.Name == "dev" {
				if rep.Share, err = shareRun(ctx, t, f.shareCounts, shareBytes, f.timeout, stderr); err != nil {
					failed = errors.Join(failed, err)
				}
			}
		}
	}
	if restartBytes > 0 && ctx.Err() == nil {
		for i, t := range live {
			if t.Name == "dev" {
				var nt *benchTarget
				rep.Restart, nt, err = restartRun(ctx, t, f, dir, restartBytes, min(3, f.brokers), stderr)
				live[i] = nt
				if err != nil {
					failed = errors.Join(failed, err)
				}
			}
		}
	}
	for _, t := range live {
		t.stop(stderr)
	}
	live = nil

	if f.jsonOut == "-" {
		if err := rep.JSON(stdout); err != nil {
			return err
		}
	} else {
		rep.Table(stdout)
		if f.jsonOut != "" {
			out, err := os.Create(f.jsonOut)
			if err != nil {
				return fmt.Errorf("flag -json: %w", err)
			}
			if err := rep.JSON(out); err != nil {
				out.Close()
				return err
			}
			if err := out.Close(); err != nil {
				return err
			}
		}
	}
	if failed == nil && f.tier {
		cfg := cfgs[0]
		cfg.Partitions = 6
		failed = runTierBench(ctx, cfg, f.tierSegment, f.objectLatency, stdout, stderr)
	}
	if failed == nil && f.compaction {
		failed = runCompactionBench(ctx, cfgs[0], f.compactSegment, stdout, stderr)
	}
	return failed
}

// workloads expands the workload lists (or -matrix) into configs.
func (f benchFlags) workloads(def bench.Config, set map[string]bool) ([]bench.Config, error) {
	if f.matrix {
		f.recordBytes, f.keyed, f.parts, f.acks, f.durability = "100B,1KiB,64KiB", "false,true", "1,12,96", "all,1", "replicated,fsync,object"
		if !set["bytes"] {
			f.bytes = "64MiB"
		}
	}
	total, err := parseSize(f.bytes)
	if err != nil {
		return nil, fmt.Errorf("invalid value %q for flag -bytes: %v", f.bytes, err)
	}
	var sizes, parts []int64
	var keyed []bool
	lists := []struct {
		name, v string
		each    func(string) error
	}{
		{"record-bytes", f.recordBytes, func(s string) error { n, err := parseSize(s); sizes = append(sizes, n); return err }},
		{"keyed", f.keyed, func(s string) error { b, err := strconv.ParseBool(s); keyed = append(keyed, b); return err }},
		{"partitions", f.parts, func(s string) error { n, err := strconv.ParseInt(s, 10, 32); parts = append(parts, n); return err }},
		{"acks", f.acks, func(string) error { return nil }},
		{"durability", f.durability, func(s string) error {
			if s != "replicated" && s != "fsync" && s != "object" {
				return errors.New("not replicated, fsync or object")
			}
			return nil
		}},
	}
	for _, l := range lists {
		items := splitList(l.v)
		var err error
		if len(items) == 0 {
			err = errors.New("empty list")
		}
		for _, it := range items {
			if err == nil {
				if err = l.each(it); err != nil {
					err = fmt.Errorf("%q: %v", it, err)
				}
			}
		}
		if err != nil {
			return nil, fmt.Errorf("invalid value %q for flag -%s: %v", l.v, l.name, err)
		}
	}
	acks, durs := splitList(f.acks), splitList(f.durability)
	var out []bench.Config
	for _, size := range sizes {
		for _, k := range keyed {
			for _, p := range parts {
				for _, a := range acks {
					for _, d := range durs {
						c := def
						c.RecordBytes, c.Keyed, c.Partitions, c.Acks, c.Durability = int(size), k, int32(p), a, d
						c.TotalBytes, c.Latency, c.Timeout, c.Compression, c.Text = total, f.latency, f.timeout, f.compression, f.text
						if err := c.Validate(); err != nil {
							return nil, fmt.Errorf("flag -%v", err)
						}
						out = append(out, c)
					}
				}
			}
		}
	}
	return out, nil
}

// firstDurability reports whether cfg is the first of its workload's
// durability variants in cfgs.
func firstDurability(cfgs []bench.Config, cfg bench.Config) bool {
	for _, c := range cfgs {
		if c.RecordBytes == cfg.RecordBytes && c.Keyed == cfg.Keyed && c.Partitions == cfg.Partitions && c.Acks == cfg.Acks {
			return c.Durability == cfg.Durability
		}
	}
	return true
}

// benchTarget is a target and, for dev and kfake, the child process
// serving it.
type benchTarget struct {
	bench.Target
	cmd *exec.Cmd
}

// startTarget starts dev or kfake as a child process of this binary and
// waits for its bootstrap address. Running it apart from the bench client
// gives its own CPU and memory figures.
func startTarget(ctx context.Context, name string, f benchFlags, dir string) (*benchTarget, error) {
	return startTargetOn(ctx, name, f, dir, true)
}

// startTargetOn starts a target; fresh removes the dev target's data
// first (a restart keeps it). The dev target serves its brokers' metrics
// on ports the bench picks (for the stage breakdown); one taken meanwhile
// fails the start, which is tried again on others.
func startTargetOn(ctx context.Context, name string, f benchFlags, dir string, fresh bool) (*benchTarget, error) {
	for try := 1; ; try++ {
		t, err := startTargetOnce(ctx, name, f, dir, fresh)
		if err == nil || name != "dev" || try == 3 || ctx.Err() != nil {
			return t, err
		}
	}
}

// freePorts returns the first of n consecutive ports on 127.0.0.1 that
// were free a moment ago, below the kernel's ephemeral range (so no
// outgoing connection takes one before the target binds it).
func freePorts(n int) (int, error) {
	for range 100 {
		base := 12000 + mrand.IntN(2000)*4 // 12000-19999: apart from e2e's 20000-31999 too
		var lns []net.Listener
		for i := range n {
			ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(base+i)))
			if err != nil {
				break
			}
			lns = append(lns, ln)
		}
		for _, ln := range lns {
			ln.Close()
		}
		if len(lns) == n {
			return base, nil
		}
	}
	return 0, errors.New("no free ports for the dev target's metrics")
}

func startTargetOnce(ctx context.Context, name string, f benchFlags, dir string, fresh bool) (*benchTarget, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	var args []string
	t := &benchTarget{Target: bench.Target{Name: name}}
	switch name {
	case "dev":
		data := filepath.Join(dir, "dev")
		if fresh {
			os.RemoveAll(data) // every invocation starts on an empty cluster
		}
		base, err := freePorts(f.brokers)
		if err != nil {
			return nil, err
		}
		args = []string{"dev", "-listen", "127.0.0.1:0", "-http", net.JoinHostPort("127.0.0.1", strconv.Itoa(base)), "-registry", "", "-data", data,
			"-log-level", "warn", "-brokers", strconv.Itoa(f.brokers)}
		for i := range f.brokers {
			t.Metrics = append(t.Metrics, fmt.Sprintf("http://127.0.0.1:%d/metrics", base+i))
		}
		if f.profile != "" {
			args = append(args, "-cpuprofile", filepath.Join(f.profile, "dev.cpu.pprof"), "-memprofile", filepath.Join(f.profile, "dev.allocs.pprof"))
		}
		t.RF, t.Strata = min(3, f.brokers), true
	case "kfake":
		args = []string{benchKfakeCmd}
		t.RF = 1
	case "jetstream":
		data := filepath.Join(dir, "jetstream")
		os.RemoveAll(data)
		args = []string{benchJetStreamCmd, data}
		t.RF, t.JetStream = 3, true
	}
	logPath := filepath.Join(dir, name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(exe, args...)
	cmd.Stderr = logf
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	t.cmd, t.Proc = cmd, &bench.Proc{Pid: cmd.Process.Pid}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if _, a, ok := strings.Cut(sc.Text(), "ready: bootstrap "); ok {
				addr <- a
			}
		}
		close(addr)
	}()
	select {
	case a, ok := <-addr:
		if !ok {
			cmd.Process.Kill()
			cmd.Wait()
			return nil, fmt.Errorf("%s exited before it served; its log is %s", name, logPath)
		}
		t.Addrs = strings.Split(a, ",")
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		return nil, fmt.Errorf("%s did not serve within 60 s; its log is %s", name, logPath)
	case <-ctx.Done():
		cmd.Process.Kill()
		cmd.Wait()
		return nil, ctx.Err()
	}
	return t, nil
}

// stop shuts the child down with SIGTERM (dev writes its profiles then),
// killing it after 60 s.
func (t *benchTarget) stop(stderr io.Writer) {
	if t.cmd == nil || t.cmd.Process == nil {
		return
	}
	t.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { t.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		fmt.Fprintf(stderr, "%s did not stop within 60 s: killed\n", t.Name)
		t.cmd.Process.Kill()
		<-done
	}
	t.cmd = nil
}

// idleRun creates parts partitions of RF rf on the target, waits until
// each has a leader and a full ISR, lets it settle, and measures CPU and
// memory for d.
func idleRun(ctx context.Context, t *benchTarget, parts, rf int, d time.Duration, stderr io.Writer) (*bench.Idle, error) {
	res := &bench.Idle{Target: t.Name, Partitions: parts, RF: rf}
	rss, _, err := t.Proc.Memory()
	if err != nil {
		return nil, err
	}
	res.RSSBefore = rss
	cl, err := kgo.NewClient(kgo.SeedBrokers(t.Addrs...))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	fmt.Fprintf(stderr, "idle: creating %d partitions\n", parts)
	start := time.Now()
	const topic = "bench-idle"
	// A creation slower than the client's request timeout is retried by
	// kadm, and the retry finds the topic the first attempt made.
	if r, err := adm.CreateTopic(ctx, int32(parts), int16(rf), nil, topic); !errors.Is(errors.Join(err, r.Err), kerr.TopicAlreadyExists) && (err != nil || r.Err != nil) {
		return nil, fmt.Errorf("create %d partitions: %v", parts, errors.Join(err, r.Err))
	}
	for {
		md, err := adm.Metadata(ctx, topic)
		full := 0
		if err == nil {
			for _, p := range md.Topics[topic].Partitions {
				if p.Leader >= 0 && len(p.ISR) == rf {
					full++
				}
			}
		}
		if full == parts {
			break
		}
		if time.Since(start) > 5*time.Minute || ctx.Err() != nil {
			return nil, fmt.Errorf("%d of %d partitions led with a full ISR after %v", full, parts, time.Since(start).Round(time.Second))
		}
		time.Sleep(200 * time.Millisecond)
	}
	res.StartupSecond = time.Since(start).Seconds()
	cl.Close()
	fmt.Fprintf(stderr, "idle: settling 10 s, then measuring for %v\n", d)
	select {
	case <-time.After(10 * time.Second):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	c0, err := t.Proc.CPU()
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	select {
	case <-time.After(d):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	c1, err := t.Proc.CPU()
	if err != nil {
		return nil, err
	}
	res.Seconds = time.Since(t0).Seconds()
	res.CPUPercent = 100 * (c1 - c0).Seconds() / res.Seconds
	if res.RSSAfter, _, err = t.Proc.Memory(); err != nil {
		return nil, err
	}
	res.BytesPerPart = (res.RSSAfter - res.RSSBefore) / int64(parts)
	return res, nil
}

// benchKfakeCmd is the hidden subcommand bench starts as its baseline
// target: franz-go's kfake with one broker, in its own process.
const benchKfakeCmd = "bench-kfake"

func runBenchKfake(ctx context.Context, stdout io.Writer) error {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		return err
	}
	defer c.Close()
	fmt.Fprintf(stdout, "kfake ready: bootstrap %s\n", c.ListenAddrs()[0])
	<-ctx.Done()
	return nil
}

// parseObjectLatency reads -object-latency: latency models separated by
// commas, each a preset or p50/p99.
func parseObjectLatency(list string) ([]latency.Model, error) {
	var models []latency.Model
	for _, spec := range strings.Split(list, ",") {
		if strings.TrimSpace(spec) == "" {
			continue
		}
		m, err := latency.Parse(strings.ReplaceAll(spec, "/", ","))
		if err != nil {
			return nil, usageError{fmt.Errorf("invalid value %q for flag -object-latency: %w", list, err)}
		}
		models = append(models, m)
	}
	return models, nil
}

func runTierBench(ctx context.Context, cfg bench.Config, segmentBytes int64, objectLatency string, stdout, stderr io.Writer) error {
	if segmentBytes < 1024 {
		return usageError{fmt.Errorf("invalid value %d for flag -tier-segment-bytes: below 1024", segmentBytes)}
	}
	models, err := parseObjectLatency(objectLatency)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, "== strata: S3 tier")
	tr, err := benchTier(ctx, cfg, segmentBytes, models, stdout, stderr)
	if err != nil {
		return err
	}
	reportTier(stdout, tr)
	return nil
}

// parseSize reads 100, 100B, 1KiB, 64MiB or 1GiB.
func parseSize(s string) (int64, error) {
	mult := int64(1)
	num := strings.TrimSpace(s)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}} {
		if strings.HasSuffix(num, u.suffix) {
			num, mult = strings.TrimSuffix(num, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("not a size (100B, 1KiB, 64MiB, 1GiB)")
	}
	if n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("out of range")
	}
	return n * mult, nil
}

// splitList splits a comma-separated list, dropping blanks.
func splitList(s string) []string {
	var out []string
	for _, it := range strings.Split(s, ",") {
		if it = strings.TrimSpace(it); it != "" {
			out = append(out, it)
		}
	}
	return out
}

// startCPUProfile writes a CPU profile of this process to path until the
// returned function is called.
func startCPUProfile(path string) (func(), error) {
	out, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(out); err != nil {
		out.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); out.Close() }, nil
}

// settle waits (up to two minutes) for the dev target's brokers to remove
// the benchmark topics' logs under dir, which they do after the topic's
// deletion returns, and then syncs the disk: the next workload starts
// with neither still running.
func settle(ctx context.Context, dir string) {
	pattern := filepath.Join(dir, "dev", "broker-*", "logs", "bench-*")
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline) && ctx.Err() == nil; {
		if m, _ := filepath.Glob(pattern); len(m) == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	syncDisks()
}

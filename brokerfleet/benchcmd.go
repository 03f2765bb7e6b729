package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/stratamq/strata/brokerfleet/internal/bench"
	"github.com/stratamq/strata/brokerfleet/internal/broker"
)

const benchHelp = `usage: brokerfleet bench [flags]

Measures produce and fetch throughput and one-in-flight produce latency
(acks=all) against Strata writing its logs to disk, as one broker and as
three brokers replicating three ways, and, in the same run, against
franz-go's in-memory kfake as the baseline, and prints them with ratios.

flags:
`

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := bench.DefaultConfig()
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), benchHelp)
		fs.PrintDefaults()
	}
	fs.Int64Var(&cfg.TotalBytes, "bytes", cfg.TotalBytes, "bytes of record values produced per target")
	fs.IntVar(&cfg.RecordBytes, "record-bytes", cfg.RecordBytes, "value size of each record")
	partitions := int(cfg.Partitions)
	fs.IntVar(&partitions, "partitions", partitions, "partitions of the benchmark topic")
	fs.IntVar(&cfg.Latency, "latency-samples", cfg.Latency, "one-in-flight produces timed for the latency percentiles")
	fs.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "limit for each phase")
	fs.StringVar(&cfg.Compression, "compression", cfg.Compression, "producer compression: none, gzip, snappy, lz4 or zstd")
	fs.BoolVar(&cfg.Text, "text", false, "compressible values (random letters) instead of random bytes")
	dataDir := fs.String("data", "", "directory for the Strata broker's log (default: a temporary directory, removed afterwards)")
	tierSegment := fs.Int64("tier-segment-bytes", 64<<20, "segment.bytes of the S3-tier run (its volume is -bytes per topic)")
	skipTier := fs.Bool("skip-tier", false, "skip the S3-tier run")
	tierOnly := fs.Bool("tier-only", false, "run only the S3-tier part")
	cpuProfile := fs.String("cpuprofile", "", "write CPU profiles of the Strata runs (brokers and client) to FILE.1brokers and FILE.3brokers")
	if err := parseFlags(fs, args, stderr, false); err != nil {
		return err
	}
	cfg.Partitions = int32(partitions)
	if err := cfg.Validate(); err != nil {
		return usageError{err}
	}

	if *tierOnly && *skipTier {
		return usageError{fmt.Errorf("flags -tier-only and -skip-tier exclude each other")}
	}
	if *tierOnly {
		return runTierBench(ctx, cfg, *tierSegment, stdout, stderr)
	}
	fmt.Fprintln(stdout, "baseline: kfake (in memory, one broker)")
	fake, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		return err
	}
	base, err := bench.Run(ctx, cfg, "kfake", 1, fake.ListenAddrs()[0])
	fake.Close()
	if err != nil {
		return err
	}
	runtime.GC()

	for _, shape := range []struct{ brokers, rf int }{{1, 1}, {3, 3}} {
		res, err := benchStrata(ctx, cfg, shape.brokers, shape.rf, *dataDir, *cpuProfile, stderr, stdout)
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout)
		fmt.Fprintf(stdout, "== strata: %d broker(s) in this process, replication factor %d, logs on disk\n", shape.brokers, shape.rf)
		bench.Report(stdout, cfg, res, base)
		fmt.Fprintln(stdout)
		runtime.GC()
	}
	if *skipTier {
		return nil
	}
	return runTierBench(ctx, cfg, *tierSegment, stdout, stderr)
}

func runTierBench(ctx context.Context, cfg bench.Config, segmentBytes int64, stdout, stderr io.Writer) error {
	if segmentBytes < 1024 {
		return usageError{fmt.Errorf("invalid value %d for flag -tier-segment-bytes: below 1024", segmentBytes)}
	}
	fmt.Fprintln(stdout, "== strata: S3 tier")
	tr, err := benchTier(ctx, cfg, segmentBytes, stdout, stderr)
	if err != nil {
		return err
	}
	reportTier(stdout, tr)
	return nil
}

// benchStrata runs the workload against n in-process brokers sharing an
// embedded metastore.
func benchStrata(ctx context.Context, cfg bench.Config, n, rf int, dataDir, cpuProfile string, stderr, stdout io.Writer) (bench.Result, error) {
	dir := dataDir
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "strata-bench-"); err != nil {
			return bench.Result{}, err
		}
		defer os.RemoveAll(dir)
	} else {
		dir = filepath.Join(dir, fmt.Sprintf("%d-brokers-rf%d", n, rf))
	}
	fmt.Fprintf(stdout, "strata: %d broker(s), replication factor %d, logs under %s\n", n, rf, dir)
	mf := metaFlags{spec: "embedded"}
	meta, closer, err := mf.open(ctx, dir)
	if err != nil {
		return bench.Result{}, err
	}
	defer closer.Close()
	var addrs []string
	for i := 0; i < n; i++ {
		bcfg := broker.DefaultConfig()
		bcfg.NodeID = int32(i)
		bcfg.DataDir = filepath.Join(dir, fmt.Sprintf("broker-%d", i))
		bcfg.Meta = meta
		bcfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return bench.Result{}, err
		}
		bcfg.Advertise = ln.Addr().String()
		b, err := broker.New(bcfg)
		if err != nil {
			ln.Close()
			return bench.Result{}, err
		}
		defer b.Close()
		go b.Serve(ln)
		addrs = append(addrs, ln.Addr().String())
	}
	if cpuProfile != "" {
		f, err := os.Create(fmt.Sprintf("%s.%dbrokers", cpuProfile, n))
		if err != nil {
			return bench.Result{}, fmt.Errorf("flag -cpuprofile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return bench.Result{}, err
		}
		defer pprof.StopCPUProfile()
	}
	return bench.Run(ctx, cfg, "strata", rf, addrs...)
}

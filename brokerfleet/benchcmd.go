package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"runtime/pprof"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/stratamq/strata/brokerfleet/internal/bench"
	"github.com/stratamq/strata/brokerfleet/internal/broker"
)

const benchHelp = `usage: brokerfleet bench [flags]

Measures produce and fetch throughput and one-in-flight produce latency
(acks=all) against a Strata broker writing its log to disk and, in the same
run, against franz-go's in-memory kfake as the baseline, and prints both
with their ratio.

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
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the Strata run (broker and client) to this file")
	if err := parseFlags(fs, args, stderr, false); err != nil {
		return err
	}
	cfg.Partitions = int32(partitions)
	if err := cfg.Validate(); err != nil {
		return usageError{err}
	}

	fmt.Fprintln(stdout, "baseline: kfake (in memory, one broker)")
	fake, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		return err
	}
	base, err := bench.Run(ctx, cfg, "kfake", fake.ListenAddrs()[0])
	fake.Close()
	if err != nil {
		return err
	}
	runtime.GC()

	dir := *dataDir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "strata-bench-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}
	fmt.Fprintf(stdout, "strata: one broker, log on disk under %s\n", dir)
	bcfg := broker.DefaultConfig()
	bcfg.DataDir = dir
	mf := metaFlags{spec: "embedded"}
	meta, closer, err := mf.open(ctx, dir)
	if err != nil {
		return err
	}
	defer closer.Close()
	bcfg.Meta = meta
	bcfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	b, err := broker.New(bcfg)
	if err != nil {
		ln.Close()
		return err
	}
	defer b.Close()
	go b.Serve(ln)
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return fmt.Errorf("flag -cpuprofile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}
	res, err := bench.Run(ctx, cfg, "strata", ln.Addr().String())
	if *cpuProfile != "" {
		pprof.StopCPUProfile()
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout)
	bench.Report(stdout, cfg, res, base)
	return nil
}

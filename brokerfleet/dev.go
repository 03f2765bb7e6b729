package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stratamq/strata/brokerfleet/internal/broker"
	"github.com/stratamq/strata/pkg/latency"
	"github.com/stratamq/strata/pkg/objstore"
)

const devHelp = `usage: brokerfleet dev [flags]

Runs a local Strata cluster with nothing else to install: three brokers
on 127.0.0.1:9092-9094 (ids 0-2) sharing an embedded metastore, with
their data under --data (kept across restarts), topics auto-created on
first use with three replicas. Prints one line containing "ready" and the
bootstrap address once it serves; SIGINT or SIGTERM shuts it down cleanly.
With -racks each broker gets a rack (an availability zone), so consumers
that set client.rack read from the replica in their rack (KIP-392).

flags:
`

func runDev(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := broker.DefaultConfig()
	cfg.AutoCreateTopics = true
	cfg.ClusterID = "strata-dev"
	cfg.MaintenanceInterval = 10 * time.Second
	cfg.DefaultReplicationFactor = 0   // min(3, -brokers) unless set
	cfg.GroupInitialRebalanceDelay = 0 // Kafka's advice for development: groups form at once
	listen, logLevel := "127.0.0.1:9092", "info"
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), devHelp)
		fs.PrintDefaults()
	}
	brokerFlags(fs, &cfg, &listen, &logLevel)
	httpAddr := fs.String("http", "127.0.0.1:9644", "address of broker 0's Prometheus metrics (/metrics) and health check (/healthz); broker i uses the port + i (random ports when it is 0; empty: off)")
	registryAddr := fs.String("registry", "127.0.0.1:8081", "address of the schema registry (Confluent REST API at the root path) and the DLQ console (/console/); empty: off")
	tiered := fs.Bool("tier", true, "run an in-process S3 stand-in (persistent in <data>/s3.db) as the long-term tier")
	brokers := fs.Int("brokers", 3, "number of brokers; broker i listens on the -listen port + i (all on random ports when it is 0)")
	racksFlag := fs.String("racks", "", "comma-separated racks, one per broker: broker i gets the i-th (e.g. az-a,az-b,az-c; empty: no racks)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file at shutdown")
	memProfile := fs.String("memprofile", "", "write an allocation profile (pprof allocs: every allocation since start) to this file at shutdown")
	s3Latency := fs.String("s3-latency", "none", "latency the S3 stand-in adds to each request, to see what a deployment would: a model (s3-standard: p50 25ms, p99 80ms; s3-express: 4ms, 10ms; none) or p50,p99 (e.g. 25ms,80ms), log-normal")
	metaLatency := fs.String("metastore-latency", "none", "latency the embedded metastore adds to each request: a model (dynamodb: p50 4ms, p99 12ms; none) or p50,p99, log-normal")
	if err := parseFlags(fs, args, stderr, false); err != nil {
		return err
	}
	if *cpuProfile != "" {
		stop, err := startCPUProfile(*cpuProfile)
		if err != nil {
			return usageError{fmt.Errorf("flag -cpuprofile: %w", err)}
		}
		defer stop()
	}
	if *memProfile != "" {
		out, err := os.Create(*memProfile)
		if err != nil {
			return usageError{fmt.Errorf("flag -memprofile: %w", err)}
		}
		defer func() {
			if err := pprof.Lookup("allocs").WriteTo(out, 0); err != nil {
				fmt.Fprintf(stderr, "write -memprofile: %v\n", err)
			}
			out.Close()
		}()
	}
	if *brokers < 1 || *brokers > 16 {
		return usageError{fmt.Errorf("invalid value %d for flag -brokers: want 1 to 16", *brokers)}
	}
	var racks []string
	if *racksFlag != "" {
		racks = strings.Split(*racksFlag, ",")
		if len(racks) != *brokers || slices.Contains(racks, "") {
			return usageError{fmt.Errorf("invalid value %q for flag -racks: want %d non-empty racks, one per broker (-brokers)", *racksFlag, *brokers)}
		}
	}
	if cfg.DefaultReplicationFactor == 0 {
		cfg.DefaultReplicationFactor = int16(min(3, *brokers))
	}
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return usageError{fmt.Errorf("invalid value %q for flag -listen: %v", listen, err)}
	}
	basePort, err := strconv.Atoi(port)
	if err != nil || basePort < 0 || basePort+*brokers > 65536 {
		return usageError{fmt.Errorf("invalid value %q for flag -listen: bad port", listen)}
	}
	httpHost, httpPort := "", 0
	if *httpAddr != "" {
		h, p, err := net.SplitHostPort(*httpAddr)
		if err == nil {
			httpPort, err = strconv.Atoi(p)
		}
		if err != nil || httpPort < 0 || httpPort+*brokers > 65536 {
			return usageError{fmt.Errorf("invalid value %q for flag -http: want host:port", *httpAddr)}
		}
		httpHost = h
	}
	logger, err := newLogger(stderr, logLevel)
	if err != nil {
		return err
	}
	cfg.Logger = logger
	if err := cfg.ValidateSettings(); err != nil {
		return usageError{err}
	}
	s3Model, err := latency.Parse(*s3Latency)
	if err != nil {
		return usageError{fmt.Errorf("invalid value for flag -s3-latency: %w", err)}
	}
	metaModel, err := latency.Parse(*metaLatency)
	if err != nil {
		return usageError{fmt.Errorf("invalid value for flag -metastore-latency: %w", err)}
	}
	mf := metaFlags{spec: "embedded"}
	if !metaModel.IsZero() {
		mf.latency = latency.NewInjector(metaModel)
		logger.Info("metastore latency", "model", metaModel.String(), "p50", metaModel.P50, "p99", metaModel.P99)
	}
	meta, closer, err := mf.open(ctx, cfg.DataDir)
	if err != nil {
		return err
	}
	defer closer.Close()
	cfg.Meta = meta
	if *tiered {
		objects, s3closer, url, err := startDevS3(ctx, cfg.DataDir)
		if err != nil {
			return err
		}
		defer s3closer.Close()
		cfg.Objects = objects
		if !s3Model.IsZero() {
			cfg.Objects = objstore.NewDelayed(objects, latency.NewInjector(s3Model))
			logger.Info("S3 stand-in latency", "model", s3Model.String(), "p50", s3Model.P50, "p99", s3Model.P99)
		}
		logger.Info("S3 tier on an in-process stand-in", "endpoint", url, "bucket", devBucket)
	}
	var specs []brokerSpec
	for i := 0; i < *brokers; i++ {
		c := cfg
		c.NodeID = int32(i)
		if racks != nil {
			c.Rack = racks[i]
		}
		c.DataDir = filepath.Join(cfg.DataDir, fmt.Sprintf("broker-%d", i))
		p := 0
		if basePort != 0 {
			p = basePort + i
		}
		if err := c.Validate(); err != nil {
			return usageError{err}
		}
		spec := brokerSpec{cfg: c, listen: net.JoinHostPort(host, strconv.Itoa(p)), settle: true}
		if *httpAddr != "" {
			hp := 0
			if httpPort != 0 {
				hp = httpPort + i
			}
			spec.http = net.JoinHostPort(httpHost, strconv.Itoa(hp))
		}
		if i == 0 {
			spec.registry = *registryAddr // one registry serves all: its state is in the metastore
			spec.console = true           // and the DLQ console beside it, at /console/
		}
		specs = append(specs, spec)
	}
	return serveBrokers(ctx, stdout, logger, specs)
}

package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/stratamq/strata/brokerfleet/internal/broker"
)

const devHelp = `usage: brokerfleet dev [flags]

Runs a local Strata cluster with nothing else to install: a broker on
127.0.0.1:9092 with its data and an embedded metastore under --data (kept
across restarts), topics auto-created on first use. Prints one line containing "ready" and the
bootstrap address once it serves; SIGINT or SIGTERM shuts it down cleanly.

flags:
`

func runDev(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := broker.DefaultConfig()
	cfg.AutoCreateTopics = true
	cfg.ClusterID = "strata-dev"
	cfg.MaintenanceInterval = 10 * time.Second
	listen, logLevel := "127.0.0.1:9092", "info"
	fs := flag.NewFlagSet("dev", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), devHelp)
		fs.PrintDefaults()
	}
	brokerFlags(fs, &cfg, &listen, &logLevel)
	if err := parseFlags(fs, args, stderr, false); err != nil {
		return err
	}
	logger, err := newLogger(stderr, logLevel)
	if err != nil {
		return err
	}
	cfg.Logger = logger
	if err := cfg.ValidateSettings(); err != nil {
		return usageError{err}
	}
	mf := metaFlags{spec: "embedded"}
	meta, closer, err := mf.open(ctx, cfg.DataDir)
	if err != nil {
		return err
	}
	defer closer.Close()
	cfg.Meta = meta
	if err := cfg.Validate(); err != nil {
		return usageError{err}
	}
	return serveBrokers(ctx, stdout, logger, []brokerSpec{{cfg: cfg, listen: listen}})
}

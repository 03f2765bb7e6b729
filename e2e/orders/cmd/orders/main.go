// Command orders runs the pieces of the order pipeline (e2e/orders) as
// separate processes, or all of them at once against a running cluster:
//
//	orders produce   -count N [-rate R] [-run ID]   the order service
//	orders billing                                   the billing consumer (group billing)
//	orders analytics                                 the analytics consumer (group analytics)
//	orders retryworker                               redelivers orders.retry when due
//	orders demo      [-postgres URL] [-clickhouse URL] [-count N]
//	                                                 everything, against `brokerfleet dev`
//
// Every command takes -bootstrap (default 127.0.0.1:9092) and -registry
// (default http://127.0.0.1:8081); billing takes -postgres (default
// $STRATA_POSTGRES_URL), analytics -clickhouse (default
// $STRATA_CLICKHOUSE_URL, clickhouse://host:port: the native protocol).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/stratamq/strata/e2e/orders"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `usage: orders produce|billing|analytics|retryworker|demo [flags]  (orders CMD -h for flags)`

type common struct {
	bootstrap, registry     string
	postgres, billingSchema string
	clickhouse, analyticsDB string
	retryBase               time.Duration
	session                 time.Duration
	logLevel                string
}

func (c *common) register(fs *flag.FlagSet) {
	fs.StringVar(&c.bootstrap, "bootstrap", "127.0.0.1:9092", "Kafka bootstrap brokers, host:port[,host:port...]")
	fs.StringVar(&c.registry, "registry", "http://127.0.0.1:8081", "schema registry URLs, comma-separated, tried in order")
	fs.StringVar(&c.postgres, "postgres", os.Getenv("STRATA_POSTGRES_URL"), "PostgreSQL URL (default $STRATA_POSTGRES_URL)")
	fs.StringVar(&c.billingSchema, "billing-schema", orders.DefaultBillingSchema, "PostgreSQL schema of billing's tables")
	fs.StringVar(&c.clickhouse, "clickhouse", os.Getenv("STRATA_CLICKHOUSE_URL"), "ClickHouse URL, clickhouse://[user[:password]@]host:port[/database] (the native protocol; default $STRATA_CLICKHOUSE_URL)")
	fs.StringVar(&c.analyticsDB, "analytics-db", orders.DefaultAnalyticsDB, "ClickHouse database of analytics' order facts")
	fs.DurationVar(&c.retryBase, "retry-base", 500*time.Millisecond, "backoff before the first retry of a failed order (doubles per attempt; 3 attempts, then the DLQ)")
	fs.DurationVar(&c.session, "session-timeout", 6*time.Second, "consumer group session timeout")
	fs.StringVar(&c.logLevel, "log-level", "info", "debug, info, warn or error")
}

func (c *common) logger(w io.Writer) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(c.logLevel)); err != nil {
		return nil, fmt.Errorf("-log-level: %w", err)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

func (c *common) consumer(log *slog.Logger) orders.ConsumerConfig {
	t := orders.DefaultGroupTiming()
	t.Session = c.session
	return orders.ConsumerConfig{Seeds: split(c.bootstrap), Registries: split(c.registry),
		PostgresURL: c.postgres, BillingSchema: c.billingSchema, ClickHouseURL: c.clickhouse, AnalyticsDB: c.analyticsDB,
		Policy: orders.PipelinePolicy(c.retryBase), Timing: t, Logger: log}
}

func split(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	cmd := args[0]
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c common
	c.register(fs)
	count := fs.Int("count", 10000, "produce, demo: number of orders")
	from := fs.Int("from", 0, "produce: first order number")
	rate := fs.Float64("rate", 0, "produce, demo: orders per second (0: as fast as acks allow)")
	runID := fs.String("run", "", "produce, demo: order id prefix (produce: required; demo: default from the time)")
	console := fs.String("console", "http://127.0.0.1:8081/console/dlq/", "demo: the DLQ console's URL, printed for you")
	timeout := fs.Duration("timeout", 5*time.Minute, "demo: give up after this long")
	partitions := fs.Int("partitions", 6, "demo: partitions of the topics it creates")
	switch cmd {
	case "produce", "billing", "analytics", "retryworker", "demo":
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "unknown command %q\n%s\n", cmd, usage)
		return 2
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	log, err := c.logger(stderr)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	switch cmd {
	case "produce":
		if *runID == "" {
			fmt.Fprintln(stderr, "produce: -run is required")
			return 2
		}
		start := time.Now()
		err = orders.Produce(ctx, orders.ProducerConfig{Seeds: split(c.bootstrap), Registries: split(c.registry), Run: *runID,
			From: *from, Count: *count, Rate: *rate}, nil)
		if err == nil {
			d := time.Since(start)
			fmt.Fprintf(stdout, "produced %d orders in %v (%.0f/s)\n", *count, d.Round(time.Millisecond), float64(*count)/d.Seconds())
		}
	case "billing":
		cfg := c.consumer(log)
		if err := cfg.ValidateBilling(); err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
		err = orders.Supervise(ctx, "billing", log, 0, func(ctx context.Context) error { return orders.RunBilling(ctx, cfg, nil) })
	case "analytics":
		cfg := c.consumer(log)
		if err := cfg.ValidateAnalytics(); err != nil {
			fmt.Fprintln(stderr, err)
			return 2
		}
		err = orders.Supervise(ctx, "analytics", log, 0, func(ctx context.Context) error { return orders.RunAnalytics(ctx, cfg, nil) })
	case "retryworker":
		cfg := c.consumer(log)
		err = orders.Supervise(ctx, "retryworker", log, 0, func(ctx context.Context) error {
			return orders.RunRetryWorker(ctx, cfg.Seeds, cfg.Policy, cfg.Timing)
		})
	case "demo":
		cfg := c.consumer(log)
		err = orders.RunDemo(ctx, orders.DemoConfig{Seeds: cfg.Seeds, Registries: cfg.Registries, ConsoleURL: *console,
			PostgresURL: c.postgres, BillingSchema: c.billingSchema, ClickHouseURL: c.clickhouse, AnalyticsDB: c.analyticsDB, Count: *count, Rate: *rate, Run: *runID, RetryBase: c.retryBase,
			Partitions: int32(*partitions), Timeout: *timeout, Logger: log}, stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "orders %s: %v\n", cmd, err)
		return 1
	}
	return 0
}

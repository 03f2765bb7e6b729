package main

// brokerfleet trigger: runs functions/trigger in-process, invoking a Lambda
// function with the records of topics like AWS's Kafka event source.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/stratamq/strata/functions/trigger"
)

const triggerHelp = `usage: brokerfleet trigger --function NAME --topic T [--topic T...] --group G [flags]

Consumes topics in a consumer group and invokes a Lambda function
synchronously with the payload of AWS's Kafka event source
(events.KafkaEvent), in batches of up to -batch-size records collected for
up to -batch-window, each under -max-payload bytes. A failing batch is
invoked -retries more times, then (with -bisect) split in halves to isolate
the failing records, which go to <topic>.retry (<topic>.dlq after
-max-attempts) so the partition moves on; offsets are committed after that.
Runs until SIGINT or SIGTERM, then prints what it did as JSON.

AWS credentials and region come from the usual AWS environment and files.

flags:
`

// stringsFlag collects a repeated flag, each value possibly comma-separated.
type stringsFlag []string

func (f *stringsFlag) String() string { return strings.Join(*f, ",") }

func (f *stringsFlag) Set(s string) error {
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			*f = append(*f, v)
		}
	}
	return nil
}

func runTrigger(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := trigger.DefaultConfig()
	fs := flag.NewFlagSet("trigger", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), triggerHelp)
		fs.PrintDefaults()
	}
	bootstrap := defaultBootstrap
	if v := os.Getenv("STRATA_BOOTSTRAP"); v != "" {
		bootstrap = v
	}
	var topics stringsFlag
	var endpoint string
	fs.StringVar(&cfg.Function, "function", "", "Lambda function to invoke, name or ARN (required)")
	fs.Var(&topics, "topic", "topic to consume; repeat or separate with commas (required)")
	fs.StringVar(&cfg.Group, "group", "", "consumer group (required)")
	fs.StringVar(&bootstrap, "bootstrap", bootstrap, "brokers to contact, `host:port[,host:port...]`; STRATA_BOOTSTRAP sets the default")
	fs.StringVar(&endpoint, "lambda-endpoint", "", "Lambda API endpoint `URL` (default: AWS's for the configured region)")
	fs.IntVar(&cfg.BatchSize, "batch-size", cfg.BatchSize, "most records per invocation (1 to 10000)")
	fs.DurationVar(&cfg.BatchWindow, "batch-window", cfg.BatchWindow, "longest wait to fill a batch")
	fs.IntVar(&cfg.MaxPayload, "max-payload", cfg.MaxPayload, "largest payload in bytes; bigger batches are split")
	fs.IntVar(&cfg.Retries, "retries", cfg.Retries, "invocations of a failing batch after the first")
	fs.BoolVar(&cfg.Bisect, "bisect", cfg.Bisect, "split a failing batch in halves to isolate failing records")
	fs.IntVar(&cfg.Policy.MaxAttempts, "max-attempts", cfg.Policy.MaxAttempts, "failed deliveries before a record goes to <topic>.dlq")
	fs.StringVar(&cfg.EventSourceARN, "event-source-arn", "", "eventSourceArn in the payload")
	if err := parseFlags(fs, args, stderr, false); err != nil {
		return err
	}
	switch {
	case cfg.Function == "":
		return usageError{errors.New("missing flag -function")}
	case len(topics) == 0:
		return usageError{errors.New("missing flag -topic")}
	case cfg.Group == "":
		return usageError{errors.New("missing flag -group")}
	case cfg.BatchSize < 1 || cfg.BatchSize > 10000:
		return usageError{fmt.Errorf("invalid value %d for flag -batch-size: want 1 to 10000", cfg.BatchSize)}
	case cfg.BatchWindow < 0:
		return usageError{fmt.Errorf("invalid value %s for flag -batch-window: must not be negative", cfg.BatchWindow)}
	case cfg.MaxPayload < 1024:
		return usageError{fmt.Errorf("invalid value %d for flag -max-payload: want at least 1024", cfg.MaxPayload)}
	case cfg.Retries < 0:
		return usageError{fmt.Errorf("invalid value %d for flag -retries: must not be negative", cfg.Retries)}
	case cfg.Policy.MaxAttempts < 1:
		return usageError{fmt.Errorf("invalid value %d for flag -max-attempts: want at least 1", cfg.Policy.MaxAttempts)}
	}
	cfg.Topics = topics
	seeds, err := parseBootstrap(bootstrap, "flag -bootstrap")
	if err != nil {
		return err
	}
	cfg.Bootstrap = seeds
	if err := cfg.Validate(); err != nil {
		return usageError{err}
	}

	inv, err := trigger.NewLambdaClient(ctx, endpoint)
	if err != nil {
		return err
	}
	tr, err := trigger.New(cfg, inv)
	if err != nil {
		return err
	}
	defer tr.Close()
	fmt.Fprintf(stdout, "trigger running: topics %s, group %s, function %s\n", strings.Join(cfg.Topics, ","), cfg.Group, cfg.Function)
	st, err := tr.Run(ctx)
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if eerr := enc.Encode(st); err == nil {
		err = eerr
	}
	return err
}

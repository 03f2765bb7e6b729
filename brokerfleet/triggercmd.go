package main

// brokerfleet trigger: runs functions/trigger in-process, invoking a Lambda
// function with the records of topics like AWS's Kafka event source.

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/stratamq/strata/brokerfleet/internal/cli"
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

func runTrigger(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := trigger.DefaultConfig()
	fs := cli.NewFlagSet("trigger", triggerHelp)
	var bootstrap, endpoint string
	var topics cli.Strings
	fs.StringVar(&cfg.Function, "function", "", "Lambda function to invoke, name or ARN (required)")
	fs.Var(&topics, "topic", "topic to consume; repeat or separate with commas (required)")
	fs.StringVar(&cfg.Group, "group", "", "consumer group (required)")
	cli.BootstrapVar(fs, &bootstrap)
	fs.StringVar(&endpoint, "lambda-endpoint", "", "Lambda API endpoint `URL` (default: AWS's for the configured region)")
	fs.IntVar(&cfg.BatchSize, "batch-size", cfg.BatchSize, "most records per invocation (1 to 10000)")
	fs.DurationVar(&cfg.BatchWindow, "batch-window", cfg.BatchWindow, "longest wait to fill a batch")
	fs.IntVar(&cfg.MaxPayload, "max-payload", cfg.MaxPayload, "largest payload in bytes; bigger batches are split")
	fs.IntVar(&cfg.Retries, "retries", cfg.Retries, "invocations of a failing batch after the first")
	fs.BoolVar(&cfg.Bisect, "bisect", cfg.Bisect, "split a failing batch in halves to isolate failing records")
	fs.IntVar(&cfg.Policy.MaxAttempts, "max-attempts", cfg.Policy.MaxAttempts, "failed deliveries before a record goes to <topic>.dlq")
	fs.StringVar(&cfg.EventSourceARN, "event-source-arn", "", "eventSourceArn in the payload")
	fs.BoolVar(&cfg.Queue, "queue", false, "queue mode: read through the share group -group and acknowledge per record from the function's batchItemFailures")
	if err := parseFlags(fs, args, stderr, false); err != nil {
		return err
	}
	switch {
	case cfg.Function == "":
		return cli.Usagef("missing flag -function")
	case len(topics) == 0:
		return cli.Usagef("missing flag -topic")
	case cfg.Group == "":
		return cli.Usagef("missing flag -group")
	case cfg.BatchSize < 1 || cfg.BatchSize > 10000:
		return cli.BadFlag("batch-size", cfg.BatchSize, "want 1 to 10000")
	case cfg.BatchWindow < 0:
		return cli.BadFlag("batch-window", cfg.BatchWindow, "must not be negative")
	case cfg.MaxPayload < 1024:
		return cli.BadFlag("max-payload", cfg.MaxPayload, "want at least 1024")
	case cfg.Retries < 0:
		return cli.BadFlag("retries", cfg.Retries, "must not be negative")
	case cfg.Policy.MaxAttempts < 1:
		return cli.BadFlag("max-attempts", cfg.Policy.MaxAttempts, "want at least 1")
	}
	cfg.Topics = topics
	seeds, err := cli.ParseBootstrap(bootstrap, "flag -bootstrap")
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
	if eerr := cli.WriteJSON(stdout, st); err == nil {
		err = eerr
	}
	return err
}

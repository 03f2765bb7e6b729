// Command brokerfleet runs Strata brokers.
//
//	brokerfleet dev     a local cluster with nothing else to install
//	brokerfleet serve   one broker, configured by flags and STRATA_* variables
//	brokerfleet bench   throughput and latency, side by side with kfake
//	brokerfleet groups  list, describe, delete and reset consumer groups
//	brokerfleet users   list, set and delete SASL/SCRAM users
//	brokerfleet topics  list, describe, create, alter and delete topics
//	brokerfleet brokers list brokers; drain one before stopping it
//	brokerfleet partitions reassign partitions, list reassignments, elect leaders
//	brokerfleet lag     a live view of consumer group lag
//	brokerfleet health  check a broker's /healthz (the container health check)
//	brokerfleet dlq     list, show, replay or purge dead letters
//	brokerfleet trigger invoke a Lambda function with a topic's records
//
// Run `brokerfleet <command> -help` for each command's flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/stratamq/strata/brokerfleet/internal/cli"
)

const usage = `usage: brokerfleet <command> [flags]

commands:
  dev     run a local Strata cluster on 127.0.0.1:9092 (data under --data)
  serve   run one broker, configured by flags or STRATA_* environment variables
  bench   measure throughput and latency against kfake as the baseline
  groups  list, describe, delete or reset consumer groups (admin API, -bootstrap)
  users   list, set or delete SASL/SCRAM users (admin API, -bootstrap)
  topics  list, describe, create, alter or delete topics (admin API, -bootstrap)
  brokers list brokers, or drain one (move its replicas off) before stopping it
  partitions reassign partitions, list reassignments or elect leaders
  lag     a live view of consumer group lag per group, topic and partition
  transactions list, describe, find hanging or abort transactions (admin API, -bootstrap)
  health  exit 0 if a broker is healthy (its -http /healthz answers 200), else 1
  dlq     list, show, replay or purge dead letters (via the DLQ console, -console)
  trigger invoke a Lambda function with a topic's records, as AWS's Kafka event source

Run 'brokerfleet <command> -help' for the flags of a command.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes a subcommand and returns the process exit code: 0 on
// success, 2 for usage errors, 1 for failures.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch args[0] {
	case "dev":
		err = runDev(ctx, args[1:], stdout, stderr)
	case "serve":
		err = runServe(ctx, args[1:], stdout, stderr)
	case "bench":
		err = runBench(ctx, args[1:], stdout, stderr)
	case benchKfakeCmd:
		err = runBenchKfake(ctx, stdout)
	case benchJetStreamCmd:
		err = runBenchJetStream(ctx, args[1:], stdout)
	case "dlq":
		err = runDLQ(ctx, args[1:], stdout, stderr)
	case "trigger":
		err = runTrigger(ctx, args[1:], stdout, stderr)
	case "health":
		err = runHealth(ctx, args[1:], stdout, stderr)
	case "groups":
		err = runGroups(ctx, args[1:], stdout, stderr)
	case "users":
		err = runUsers(ctx, args[1:], stdout, stderr)
	case "topics":
		err = runTopics(ctx, args[1:], stdout, stderr)
	case "brokers":
		err = runBrokers(ctx, args[1:], stdout, stderr)
	case "partitions":
		err = runPartitions(ctx, args[1:], stdout, stderr)
	case "lag":
		err = runLag(ctx, args[1:], stdout, stderr)
	case "transactions":
		err = runTransactions(ctx, args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "brokerfleet: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
	var ue usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue), cli.IsUsage(err):
		fmt.Fprintf(stderr, "brokerfleet %s: %v\n", args[0], err)
		return 2
	default:
		fmt.Fprintf(stderr, "brokerfleet %s: %v\n", args[0], err)
		return 1
	}
}

// usageError marks an error in the command line or environment of serve,
// dev and bench; the admin commands return cli.UsageError.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

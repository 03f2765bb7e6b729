// Command trigger is the trigger's Lambda function (see package trigger
// for its environment variables); `make lambdas` builds it to
// functions/trigger/bootstrap.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/stratamq/strata/functions/internal/lambdaenv"
	"github.com/stratamq/strata/functions/kafkaauth"
	"github.com/stratamq/strata/functions/trigger"
)

func main() {
	cfg := trigger.DefaultConfig()
	margin := 10 * time.Second
	var endpoint string
	var env lambdaenv.Env
	env.List(&cfg.Bootstrap, "STRATA_BOOTSTRAP")
	env.List(&cfg.Topics, "STRATA_TOPICS")
	env.String(&cfg.Group, "STRATA_GROUP")
	env.String(&cfg.Function, "STRATA_FUNCTION")
	env.Int(&cfg.BatchSize, "STRATA_BATCH_SIZE")
	env.Duration(&cfg.BatchWindow, "STRATA_BATCH_WINDOW")
	env.Int(&cfg.MaxPayload, "STRATA_MAX_PAYLOAD")
	env.Int(&cfg.Retries, "STRATA_RETRIES")
	env.Bool(&cfg.Bisect, "STRATA_BISECT")
	env.Int(&cfg.Policy.MaxAttempts, "STRATA_MAX_ATTEMPTS")
	env.String(&cfg.EventSourceARN, "STRATA_EVENT_SOURCE_ARN")
	env.Duration(&cfg.Idle, "STRATA_IDLE")
	env.Duration(&margin, "STRATA_MARGIN")
	env.Bool(&cfg.Queue, "STRATA_QUEUE")
	env.String(&endpoint, "STRATA_LAMBDA_ENDPOINT")
	err := env.Err
	if err == nil {
		err = cfg.Validate()
	}
	var auth kafkaauth.Settings
	if err == nil {
		auth, err = kafkaauth.FromEnv(os.LookupEnv)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "trigger:", err)
		os.Exit(1)
	}
	// TLS and SASL from Secrets Manager, once per cold start.
	kopts, err := kafkaauth.ClientOpts(context.Background(), auth)
	if err != nil {
		fmt.Fprintln(os.Stderr, "trigger:", err)
		os.Exit(1)
	}
	inv, err := lambdaenv.LambdaClient(context.Background(), endpoint)
	if err != nil {
		fmt.Fprintln(os.Stderr, "trigger:", err)
		os.Exit(1)
	}
	lambda.Start(trigger.Handler(cfg, inv, margin, kopts...))
}

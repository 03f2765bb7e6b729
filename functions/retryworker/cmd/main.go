// Command retryworker is the retry worker's Lambda function (see package
// retryworker for its environment variables); `make lambdas` builds it to
// functions/retryworker/bootstrap.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/stratamq/strata/functions/internal/kafkaevent"
	"github.com/stratamq/strata/functions/internal/lambdaenv"
	"github.com/stratamq/strata/functions/kafkaauth"
	"github.com/stratamq/strata/functions/retryworker"
)

func main() {
	cfg := retryworker.DefaultConfig()
	margin := 10 * time.Second
	var endpoint string
	var env lambdaenv.Env
	env.List(&cfg.Bootstrap, "STRATA_BOOTSTRAP")
	env.List(&cfg.Topics, "STRATA_TOPICS")
	env.String(&cfg.TopicRegex, "STRATA_TOPIC_REGEX")
	env.String(&cfg.Group, "STRATA_GROUP")
	env.String(&cfg.Function, "STRATA_FUNCTION")
	env.Int(&cfg.Policy.MaxAttempts, "STRATA_MAX_ATTEMPTS")
	env.String(&cfg.EventSourceARN, "STRATA_EVENT_SOURCE_ARN")
	env.Duration(&cfg.Idle, "STRATA_IDLE")
	env.Duration(&margin, "STRATA_MARGIN")
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
		fmt.Fprintln(os.Stderr, "retryworker:", err)
		os.Exit(1)
	}
	// TLS and SASL from Secrets Manager, once per cold start.
	kopts, err := kafkaauth.ClientOpts(context.Background(), auth)
	if err != nil {
		fmt.Fprintln(os.Stderr, "retryworker:", err)
		os.Exit(1)
	}
	var inv kafkaevent.Invoker
	if cfg.Function != "" {
		if inv, err = lambdaenv.LambdaClient(context.Background(), endpoint); err != nil {
			fmt.Fprintln(os.Stderr, "retryworker:", err)
			os.Exit(1)
		}
	}
	lambda.Start(retryworker.Handler(cfg, inv, margin, kopts...))
}

// Command cmd is the console's Lambda function, served behind a Lambda
// Function URL. It only wires dependencies: configuration comes from
// STRATA_BOOTSTRAP, STRATA_REGISTRY_URL and STRATA_DLQ_GROUP (see package
// dlqconsole), and TLS and SASL from package kafkaauth's variables.
package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/stratamq/strata/functions/dlqconsole"
	"github.com/stratamq/strata/functions/kafkaauth"
)

func main() {
	opts, err := optionsFromEnv(os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "dlqconsole:", err)
		os.Exit(2)
	}
	auth, err := kafkaauth.FromEnv(os.LookupEnv)
	if err == nil {
		// TLS and SASL from Secrets Manager, once per cold start; the
		// registry takes the same CA and user.
		var r kafkaauth.Resolved
		if r, err = kafkaauth.ResolveFromAWS(context.Background(), auth); err == nil {
			opts.KgoOpts, opts.RegistryOpts = r.KgoOpts(), r.RegistryOpts()
			// The lag history beside each broker's registry: the same
			// user and CA.
			opts.AdminUser, opts.AdminPassword, opts.AdminTLS = r.User, r.Password, r.TLS
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dlqconsole:", err)
		os.Exit(2)
	}
	h, err := dlqconsole.New(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	lambda.Start(dlqconsole.FunctionURLHandler(h))
}

func optionsFromEnv(getenv func(string) string) (dlqconsole.Options, error) {
	var opts dlqconsole.Options
	for _, s := range strings.Split(getenv("STRATA_BOOTSTRAP"), ",") {
		if s = strings.TrimSpace(s); s != "" {
			opts.Seeds = append(opts.Seeds, s)
		}
	}
	if len(opts.Seeds) == 0 {
		return opts, fmt.Errorf("STRATA_BOOTSTRAP is not set: want host:port[,host:port...]")
	}
	opts.RegistryURL = getenv("STRATA_REGISTRY_URL")
	opts.Group = getenv("STRATA_DLQ_GROUP")
	return opts, nil
}

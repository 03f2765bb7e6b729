// Command certissuer is the custom resource function of the Strata CDK
// stack that creates the private CA and the brokers' certificate (see
// package certissuer); `make lambdas` builds it to
// functions/certissuer/bootstrap.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/aws/aws-lambda-go/cfn"
	"github.com/aws/aws-lambda-go/lambda"

	"github.com/stratamq/strata/functions/certissuer"
	"github.com/stratamq/strata/functions/internal/lambdaenv"
)

func main() {
	var endpoint string
	var env lambdaenv.Env
	env.String(&endpoint, "STRATA_SECRETS_ENDPOINT")
	sm, err := lambdaenv.SecretsManagerClient(context.Background(), endpoint)
	if err != nil {
		fmt.Fprintln(os.Stderr, "certissuer:", err)
		os.Exit(1)
	}
	is := &certissuer.Issuer{Store: sm}
	lambda.Start(cfn.LambdaWrap(is.Handle))
}

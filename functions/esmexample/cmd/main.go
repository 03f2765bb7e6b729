// Command esmexample is the example consumer of AWS Lambda's Kafka event
// source mapping (see package esmexample); `make lambdas` builds it to
// functions/esmexample/bootstrap.
package main

import (
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/stratamq/strata/functions/esmexample"
)

func main() {
	lambda.Start(esmexample.Handler(os.Stdout))
}

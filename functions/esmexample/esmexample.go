// Package esmexample is the smallest consumer of AWS Lambda's own event
// source mapping for self-managed Kafka: the function the CDK app deploys
// with the context esmExample=true, wired to a Strata topic through the
// stack's KafkaEventSource construct (SASL_SCRAM_512_AUTH, the private CA
// as SERVER_ROOT_CA_CERTIFICATE, the VPC). It logs one line per batch and
// fails the whole batch when a record's value is "fail", so the mapping's
// retries and its on-failure destination (<topic>.dlq) can be seen at work.
// cmd/ is the Lambda main, built to functions/esmexample/bootstrap by
// `make lambdas`.
package esmexample

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"sort"

	"github.com/aws/aws-lambda-go/events"
)

// Summary is what the function returns for a batch.
type Summary struct {
	Records    int            `json:"records"`
	Partitions map[string]int `json:"partitions"` // records per "topic-partition"
}

// Handler returns the function's handler; it logs to log.
func Handler(log io.Writer) func(context.Context, events.KafkaEvent) (Summary, error) {
	return func(_ context.Context, ev events.KafkaEvent) (Summary, error) {
		s := Summary{Partitions: map[string]int{}}
		keys := make([]string, 0, len(ev.Records))
		for k := range ev.Records {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			for _, r := range ev.Records[k] {
				v, err := base64.StdEncoding.DecodeString(r.Value)
				if err != nil {
					return s, fmt.Errorf("%s@%d: value is not base64: %w", k, r.Offset, err)
				}
				if string(v) == "fail" {
					return s, fmt.Errorf("%s@%d: asked to fail", k, r.Offset)
				}
				s.Records++
				s.Partitions[k]++
			}
		}
		fmt.Fprintf(log, "esmexample: %d records from %s (%s)\n", s.Records, ev.EventSource, ev.BootstrapServers)
		return s, nil
	}
}

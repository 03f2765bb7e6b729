// Package kafkaevent builds the payload AWS's Kafka event source sends to
// Lambda functions (events.KafkaEvent) from franz-go records, and invokes a
// function with it synchronously.
package kafkaevent

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/twmb/franz-go/pkg/kgo"
)

// EventSource is the eventSource of events for self-managed Kafka, which
// is what Strata is to Lambda.
const EventSource = "aws:SelfManagedKafka"

// MaxPayload is Lambda's limit on a synchronous invocation's request.
const MaxPayload = 6 << 20

// Record converts r to the event source's record: timestamp in
// milliseconds, key and value base64, headers as one single-key map each,
// in order.
func Record(r *kgo.Record) events.KafkaRecord {
	kr := events.KafkaRecord{
		Topic:         r.Topic,
		Partition:     int64(r.Partition),
		Offset:        r.Offset,
		Timestamp:     events.MilliSecondsEpochTime{Time: r.Timestamp},
		TimestampType: "CREATE_TIME",
		Headers:       make([]map[string]events.JSONNumberBytes, 0, len(r.Headers)),
	}
	if r.Attrs.TimestampType() == 1 {
		kr.TimestampType = "LOG_APPEND_TIME"
	}
	if r.Key != nil {
		kr.Key = base64.StdEncoding.EncodeToString(r.Key)
	}
	if r.Value != nil {
		kr.Value = base64.StdEncoding.EncodeToString(r.Value)
	}
	for _, h := range r.Headers {
		v := h.Value
		if v == nil {
			v = []byte{}
		}
		kr.Headers = append(kr.Headers, map[string]events.JSONNumberBytes{h.Key: v})
	}
	return kr
}

// Key is the "topic-partition" key of the event's records map.
func Key(topic string, partition int32) string {
	return topic + "-" + strconv.Itoa(int(partition))
}

// New builds the event for records (in their order within each
// topic-partition).
func New(records []*kgo.Record, bootstrap, sourceARN string) events.KafkaEvent {
	ev := events.KafkaEvent{EventSource: EventSource, EventSourceARN: sourceARN, BootstrapServers: bootstrap,
		Records: map[string][]events.KafkaRecord{}}
	for _, r := range records {
		k := Key(r.Topic, r.Partition)
		ev.Records[k] = append(ev.Records[k], Record(r))
	}
	return ev
}

// Invoker is the part of the Lambda API the functions use;
// *lambda.Client implements it.
type Invoker interface {
	Invoke(ctx context.Context, in *lambda.InvokeInput, optFns ...func(*lambda.Options)) (*lambda.InvokeOutput, error)
}

var _ Invoker = (*lambda.Client)(nil)

// FunctionError is returned by Invoke when the function ran and failed
// (the response's FunctionError field was set).
type FunctionError struct {
	Function string
	Kind     string // "Unhandled" or "Handled"
	Payload  []byte // the function's error document
}

func (e *FunctionError) Error() string {
	var doc struct {
		ErrorMessage string `json:"errorMessage"`
	}
	msg := string(e.Payload)
	if json.Unmarshal(e.Payload, &doc) == nil && doc.ErrorMessage != "" {
		msg = doc.ErrorMessage
	}
	return fmt.Sprintf("function %s: %s error: %s", e.Function, e.Kind, msg)
}

// Invoke calls function synchronously (RequestResponse) with payload and
// returns its response, a *FunctionError if it failed, or the API's error.
func Invoke(ctx context.Context, inv Invoker, function string, payload []byte) ([]byte, error) {
	out, err := inv.Invoke(ctx, &lambda.InvokeInput{
		FunctionName:   aws.String(function),
		InvocationType: types.InvocationTypeRequestResponse,
		Payload:        payload,
	})
	if err != nil {
		return nil, fmt.Errorf("invoke %s: %w", function, err)
	}
	if out.FunctionError != nil {
		return nil, &FunctionError{Function: function, Kind: *out.FunctionError, Payload: out.Payload}
	}
	return out.Payload, nil
}

package esmexample

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
)

// TestHandler invokes the handler as the Lambda runtime does, with the
// trigger's sample payload (AWS's self-managed Kafka event shape).
func TestHandler(t *testing.T) {
	payload, err := os.ReadFile("../trigger/testdata/event.json")
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	out, err := lambda.NewHandler(Handler(&log)).Invoke(context.Background(), payload)
	if err != nil {
		t.Fatal(err)
	}
	var s Summary
	if err := json.Unmarshal(out, &s); err != nil {
		t.Fatal(err)
	}
	var ev events.KafkaEvent
	json.Unmarshal(payload, &ev)
	want := 0
	for _, rs := range ev.Records {
		want += len(rs)
	}
	if s.Records != want || want == 0 || !strings.Contains(log.String(), "records from") {
		t.Fatalf("summary %+v (want %d records), log %q", s, want, log.String())
	}

	ev.Records = map[string][]events.KafkaRecord{"orders-0": {{Topic: "orders", Offset: 7, Value: "ZmFpbA=="}}} // "fail"
	if _, err := Handler(&log)(context.Background(), ev); err == nil || !strings.Contains(err.Error(), "orders-0@7") {
		t.Fatalf("a failing record: %v", err)
	}
}

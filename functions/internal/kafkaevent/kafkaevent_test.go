package kafkaevent_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stratamq/strata/functions/internal/kafkaevent"
	"github.com/stratamq/strata/functions/internal/testlambda"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestInvokeDetectsFunctionError(t *testing.T) {
	fake := testlambda.NewInvoke(t, testlambda.FailTimes(1))
	cl := testlambda.Client(fake.URL)
	ev := kafkaevent.New([]*kgo.Record{{Topic: "t", Partition: 2, Offset: 7, Value: []byte("v"), Timestamp: time.UnixMilli(5)}}, "b:9092", "")
	payload := []byte(`{"eventSource":"aws:SelfManagedKafka","records":{}}`)
	_, err := kafkaevent.Invoke(context.Background(), cl, "fn", payload)
	var fe *kafkaevent.FunctionError
	require.True(t, errors.As(err, &fe), "%v", err)
	require.Equal(t, "Unhandled", fe.Kind)
	require.Contains(t, err.Error(), "failure 1 of 1")
	out, err := kafkaevent.Invoke(context.Background(), cl, "fn", payload)
	require.NoError(t, err)
	require.JSONEq(t, `{"ok":true}`, string(out))

	require.Equal(t, kafkaevent.EventSource, ev.EventSource)
	require.Equal(t, []events.KafkaRecord{{Topic: "t", Partition: 2, Offset: 7, Timestamp: events.MilliSecondsEpochTime{Time: time.UnixMilli(5)},
		TimestampType: "CREATE_TIME", Value: "dg==", Headers: []map[string]events.JSONNumberBytes{}}}, ev.Records["t-2"])
}

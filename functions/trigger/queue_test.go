package trigger_test

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/functions/trigger"
	"github.com/stratamq/strata/pkg/retry"
)

// flakyFunction fails each record it is given with probability 10% and
// answers a partial batch response naming them; it counts successes.
type flakyFunction struct {
	mu        sync.Mutex
	rng       *rand.Rand
	succeeded map[string]int // "partition:offset" -> successful handlings
	failures  int
}

func (f *flakyFunction) Invoke(_ context.Context, in *lambda.InvokeInput, _ ...func(*lambda.Options)) (*lambda.InvokeOutput, error) {
	var ev events.KafkaEvent
	if err := json.Unmarshal(in.Payload, &ev); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	type item struct {
		ItemIdentifier string `json:"itemIdentifier"`
	}
	var failed []item
	for key, recs := range ev.Records {
		for _, r := range recs {
			id := key + ":" + strconv.FormatInt(r.Offset, 10)
			if f.rng.IntN(10) == 0 {
				failed = append(failed, item{id})
				f.failures++
				continue
			}
			f.succeeded[id]++
		}
	}
	out, _ := json.Marshal(map[string]any{"batchItemFailures": failed})
	return &lambda.InvokeOutput{StatusCode: 200, Payload: out}, nil
}

// Queue mode with a function that fails 10% of records at random: every
// record succeeds exactly once or is dead-lettered after the attempt
// limit, and the partition does not stall behind a failing record.
func TestQueueModePartialFailures(t *testing.T) {
	const topic, n = "q-orders", 300
	addr, cl := setup(t, topic, 2)
	for i := range n {
		cl.Produce(context.Background(), &kgo.Record{Topic: topic, Partition: int32(i % 2), Value: []byte(strconv.Itoa(i))}, nil)
	}
	require.NoError(t, cl.Flush(context.Background()))
	cfg := config(addr, topic)
	cfg.Queue, cfg.Group, cfg.BatchSize, cfg.Idle = true, "q-workers", 20, 4*time.Second
	cfg.Policy.MaxAttempts = 2 // more records reach the limit

	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, cfg.Group
	for k, v := range map[string]string{"share.auto.offset.reset": "earliest", "errors.deadletterqueue.enable": "true",
		"share.record.lock.duration.ms": "5000"} {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		res.Configs = append(res.Configs, c)
	}
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(context.Background(), cl)
	require.NoError(t, err)
	require.NoError(t, kerr.ErrorForCode(resp.Resources[0].ErrorCode))

	fn := &flakyFunction{rng: rand.New(rand.NewPCG(7, 7)), succeeded: map[string]int{}}
	tr, err := trigger.New(cfg, fn)
	require.NoError(t, err)
	defer tr.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	st, err := tr.Run(ctx)
	require.NoError(t, err)

	dead := map[string]bool{}
	if st.Routed > 0 {
		for _, r := range consumeAll(t, addr, topic+".dlq", st.Routed) {
			s, ok, err := retry.Parse(r.Headers)
			require.NoError(t, err)
			require.True(t, ok)
			require.Equal(t, cfg.Policy.MaxAttempts, s.Attempts)
			dead[topic+"-"+strconv.Itoa(int(s.OriginPartition))+":"+strconv.FormatInt(s.OriginOffset, 10)] = true
		}
	}
	fn.mu.Lock()
	defer fn.mu.Unlock()
	for i := range n {
		id := topic + "-" + strconv.Itoa(i%2) + ":" + strconv.Itoa(i/2)
		switch {
		case dead[id]:
			require.Zero(t, fn.succeeded[id], "%s succeeded and was dead-lettered", id)
		default:
			require.Equal(t, 1, fn.succeeded[id], "%s: successful handlings", id)
		}
	}
	require.Greater(t, fn.failures, 0)
	t.Logf("%d records: %d invocations, %d record failures, %d dead-lettered", n, st.Invocations, fn.failures, len(dead))
}

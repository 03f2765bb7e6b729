package dlqconsole

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratamq/strata/pkg/retry"
)

// TestReplayRefusesForeignOrigin: a letter of orders.dlq whose origin
// header names payments is not replayed, not even with force, and keeps
// its place; a replay naming it with a valid letter produces neither.
func TestReplayRefusesForeignOrigin(t *testing.T) {
	srv, c, s := newTestConsole(t)
	api := apiClient{t, srv.URL + "/console"}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	defer cl.Close()
	st := retry.State{Attempts: 3, OriginTopic: "payments", OriginPartition: 0, OriginOffset: 1, LastError: "boom"}
	rec := &kgo.Record{Topic: "orders.dlq", Partition: 0, Value: []byte("forged"), Headers: st.Headers(nil)}
	require.NoError(t, cl.ProduceSync(ctx, rec).FirstErr())

	var l Letter
	require.Equal(t, 200, api.do("GET", fmt.Sprintf("/api/topics/orders.dlq/letters/0/%d", rec.Offset), "", &l))
	require.Equal(t, "payments", l.OriginTopic)
	require.Contains(t, l.HeaderError, retry.ErrForeignOrigin.Error(), "the letter says why it cannot be replayed")

	var e struct{ Error string }
	forced := fmt.Sprintf(`{"letters":[{"partition":0,"offset":%d}],"force":true}`, rec.Offset)
	require.Equal(t, 409, api.do("POST", "/api/topics/orders.dlq/replay", forced, &e))
	require.Contains(t, e.Error, `"payments"`)
	require.Contains(t, e.Error, retry.ErrForeignOrigin.Error())
	both := fmt.Sprintf(`{"letters":[{"partition":0,"offset":%d},{"partition":0,"offset":%d}]}`, s.avro.Offset, rec.Offset)
	require.Equal(t, 409, api.do("POST", "/api/topics/orders.dlq/replay", both, nil))

	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, "payments", "orders")
	require.NoError(t, err)
	ends.Each(func(o kadm.ListedOffset) {
		require.NoError(t, o.Err)
		require.Zero(t, o.Offset, "nothing was produced to %s/%d", o.Topic, o.Partition)
	})
	var page LetterPage
	require.Equal(t, 200, api.do("GET", "/api/topics/orders.dlq/letters", "", &page))
	require.Len(t, page.Letters, 5, "every letter keeps its place")
}

package dlqconsole

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratamq/strata/pkg/retry"
)

// A record that failed for good is replayed from the console to its origin
// partition, and the fixed handler (pkg/retry's consumer, as the billing
// service would run it) processes it there once.
func TestReplayedLetterReachesAFixedHandler(t *testing.T) {
	srv, c, s := newTestConsole(t)
	api := apiClient{t: t, base: srv.URL}
	require.Equal(t, 200, api.do("POST", "/console/api/topics/orders.dlq/replay",
		`{"letters":[{"partition":1,"offset":`+strconv.FormatInt(s.script.Offset, 10)+`}]}`, nil))

	var mu sync.Mutex
	var seen []*kgo.Record
	fixed := func(_ context.Context, r *kgo.Record) error {
		if !strings.Contains(string(r.Value), "script") {
			return errors.New("not the replayed record")
		}
		mu.Lock()
		seen = append(seen, r)
		mu.Unlock()
		return nil
	}
	cons, err := retry.NewConsumer("billing", []string{"orders"}, fixed,
		retry.WithClientOpts(kgo.SeedBrokers(c.bootstrap), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cons.Run(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		if n > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	<-done
	cons.Close()
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, seen, 1, "the replayed record is processed once")
	r := seen[0]
	require.Equal(t, int32(0), r.Partition, "back on its origin partition")
	require.Equal(t, "<script>alert(1)</script>", string(r.Value))
	st, ok, err := retry.Parse(r.Headers)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, 1, st.Replays, "the replay is recorded in its headers")
	require.Equal(t, int64(7), st.OriginOffset)
}

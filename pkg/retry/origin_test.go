package retry

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestOriginOf(t *testing.T) {
	for topic, want := range map[string]string{
		"orders": "orders", "orders.retry": "orders", "orders.dlq": "orders",
		"orders.retry.dlq": "orders.retry", ".retry": ".retry", "a.b.c": "a.b.c",
	} {
		require.Equal(t, want, OriginOf(topic), topic)
	}
}

func TestCheckOrigin(t *testing.T) {
	for _, tc := range []struct {
		topic, origin string
		ok            bool
	}{
		{"orders.retry", "orders", true},
		{"orders.dlq", "orders", true},
		{"orders", "orders", true},
		{"orders.retry", "payments", false},
		{"orders.dlq", "payments", false},
		{"orders", "payments", false},
		{"orders.retry", "orders.retry", false}, // would loop on itself
		{"orders.retry", "", false},
	} {
		err := State{OriginTopic: tc.origin}.CheckOrigin(tc.topic)
		if tc.ok {
			require.NoError(t, err, "%s naming %q", tc.topic, tc.origin)
			continue
		}
		require.ErrorIs(t, err, ErrForeignOrigin, "%s naming %q", tc.topic, tc.origin)
		require.ErrorContains(t, err, HeaderOriginTopic)
	}
}

// TestRouterRefusesForeignOrigins: a record whose origin header names
// another topic than its own topic's is never sent there: Redeliver and
// DeadLetter refuse it before producing, and Next dead-letters it to its
// own topic's DLQ with the reason.
func TestRouterRefusesForeignOrigins(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	r, err := NewRouter(nil, Policy{MaxAttempts: 5, Backoff: func(int) time.Duration { return time.Minute }}, "fn",
		func() time.Time { return at })
	require.NoError(t, err)
	forged := State{Attempts: 1, OriginTopic: "payments", OriginPartition: 2, OriginOffset: 7, FirstFailure: at}
	rec := &kgo.Record{Topic: "orders.retry", Partition: 1, Offset: 40, Headers: forged.Headers(nil)}
	ctx := context.Background()
	// The router has no client: a refusal must come before any produce.
	require.ErrorIs(t, r.Redeliver(ctx, rec, forged), ErrForeignOrigin)
	require.ErrorIs(t, r.DeadLetter(ctx, rec, forged), ErrForeignOrigin)

	st, exhausted := r.Next(rec, errors.New("handler failed"))
	require.True(t, exhausted, "a forged record goes to the DLQ at once")
	require.Equal(t, "orders", st.OriginTopic, "the DLQ of the topic the retry topic belongs to")
	require.EqualValues(t, 1, st.OriginPartition)
	require.EqualValues(t, -1, st.OriginOffset, "its offset in orders is unknown")
	require.Equal(t, 1, st.Attempts, "its forged history is dropped")
	require.Contains(t, st.LastError, "handler failed")
	require.Contains(t, st.LastError, `"payments"`)

	// The reason alone, when it is the cause (as the retry worker passes it).
	cause := forged.CheckOrigin(rec.Topic)
	st, _ = r.Next(rec, cause)
	require.Equal(t, cause.Error(), st.LastError)

	// On an origin topic, headers naming another origin are not followed
	// either: its own DLQ, at its own position.
	onOrigin := &kgo.Record{Topic: "orders", Partition: 0, Offset: 3, Headers: forged.Headers(nil)}
	st, exhausted = r.Next(onOrigin, errors.New("e"))
	require.True(t, exhausted)
	require.Equal(t, State{Attempts: 1, OriginTopic: "orders", OriginPartition: 0, OriginOffset: 3, FirstFailure: at,
		LastError: st.LastError, Function: "fn", History: []Failure{{1, at, st.LastError}}}, st)
}

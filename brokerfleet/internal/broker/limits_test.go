package broker

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestByteBudget(t *testing.T) {
	ctx := context.Background()
	b := newByteBudget(100)
	require.True(t, b.try(60, false))
	require.True(t, b.try(60, false), "Kafka's pool: admitted while anything is left")
	require.False(t, b.try(1, false), "nothing left")
	b.release(60)
	require.False(t, b.try(50, true), "strict: 60+50 passes the limit")
	require.True(t, b.try(40, true))
	b.release(100)
	require.True(t, b.try(500, true), "a request alone in the budget always fits")
	require.EqualValues(t, 500, b.held())

	got := make(chan error, 1)
	go func() { got <- b.acquire(ctx, 10, false) }()
	select {
	case <-got:
		t.Fatal("acquired past the budget")
	case <-time.After(50 * time.Millisecond):
	}
	b.release(500)
	require.NoError(t, <-got, "woken when bytes were released")

	cctx, cancel := context.WithCancel(ctx)
	require.True(t, b.try(200, false))
	go func() { got <- b.acquire(cctx, 10, false) }()
	cancel()
	require.ErrorIs(t, <-got, context.Canceled)

	var unlimited *byteBudget
	require.True(t, unlimited.try(1<<40, true))
	require.NoError(t, newByteBudget(0).acquire(ctx, 1<<40, true))
}

func TestConnLimits(t *testing.T) {
	ctx := context.Background()
	l := newConnLimits(3, 2)
	require.True(t, l.admit(ctx, "a", false))
	require.True(t, l.admit(ctx, "a", false))
	require.False(t, l.admit(ctx, "a", false), "over max.connections.per.ip: closed")
	require.True(t, l.admit(ctx, "b", false))
	require.True(t, l.admit(ctx, "c", true), "the inter-broker listener does not wait")

	got := make(chan bool, 1)
	go func() { got <- l.admit(ctx, "d", false) }()
	select {
	case <-got:
		t.Fatal("admitted past max.connections")
	case <-time.After(50 * time.Millisecond):
	}
	l.release("a")
	l.release("c")
	require.True(t, <-got, "admitted once a connection closed")

	cctx, cancel := context.WithCancel(ctx)
	go func() { got <- l.admit(cctx, "e", false) }()
	cancel()
	require.False(t, <-got)

	unlimited := newConnLimits(0, 0)
	for range 100 {
		require.True(t, unlimited.admit(ctx, "x", false))
	}
}

func TestAcceptBackoff(t *testing.T) {
	require.Equal(t, 5*time.Millisecond, acceptBackoff(0))
	require.Equal(t, 10*time.Millisecond, acceptBackoff(1))
	require.Equal(t, 640*time.Millisecond, acceptBackoff(7))
	require.Equal(t, time.Second, acceptBackoff(8))
	require.Equal(t, time.Second, acceptBackoff(1000))
}

func TestMaxConnectionsDefault(t *testing.T) {
	require.Equal(t, 7, maxConnections(7))
	require.Equal(t, 0, maxConnections(-1), "no cap")
	if fileLimit() > 0 {
		require.Equal(t, fileLimit()*3/4, maxConnections(0))
	}
}

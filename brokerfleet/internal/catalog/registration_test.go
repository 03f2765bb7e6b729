package catalog

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratamq/strata/brokerfleet/internal/topic"
	"github.com/stratamq/strata/pkg/clock"
	"github.com/stratamq/strata/pkg/metastore"
	"github.com/stratamq/strata/pkg/metastore/embedded"
	"github.com/stratamq/strata/pkg/segment"
)

// gatedStore holds every Query while gate is armed (a metastore too slow
// to answer a reconcile), and counts writes.
type gatedStore struct {
	metastore.Store
	armed atomic.Bool
	gate  chan struct{}
	puts  atomic.Int64
}

func (g *gatedStore) Query(ctx context.Context, pk, prefix string) ([]metastore.Item, error) {
	if g.armed.Load() {
		select {
		case <-g.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return g.Store.Query(ctx, pk, prefix)
}

func (g *gatedStore) Put(ctx context.Context, it metastore.Item, c metastore.Cond) (metastore.Item, error) {
	// Counted once written: a test that waits for a renewal then reads
	// the broker's record must see the renewal's version.
	defer g.puts.Add(1)
	return g.Store.Put(ctx, it, c)
}

// A broker fenced while it was paused re-registers under a new epoch and
// re-reads its partitions; while that reconcile is slow, its heartbeat
// keeps renewing the lease, so it is not declared dead a second time.
func TestReregisteringDoesNotStopRenewals(t *testing.T) {
	s, err := embedded.Open(filepath.Join(t.TempDir(), "meta.db"))
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	g := &gatedStore{Store: s, gate: make(chan struct{})}
	meta := metastore.New(g)
	fake := clock.NewFake(time.Unix(1_700_000_000, 0))
	const lease, interval = 6 * time.Second, 2 * time.Second
	l, err := meta.BrokerLease(metastore.Broker{ID: 1, Endpoint: "h:1", Incarnation: "x"}, metastore.LeaseOptions{Duration: lease, Margin: time.Second, Clock: fake})
	require.NoError(t, err)
	defaults, err := topic.NewDefaults(nil)
	require.NoError(t, err)
	c, err := New(Options{Meta: meta, NodeID: 1, Incarnation: "x", Lease: l, DataDir: "/d", FS: segment.NewMemFS(), Defaults: defaults,
		Clock: fake, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); c.Close() }()
	c.Register(ctx)
	require.True(t, c.LeaseValid())

	hb := make(chan struct{})
	go func() { defer close(hb); c.Heartbeat(ctx, interval) }()
	defer func() { cancel(); <-hb }()
	// tick moves the clock one interval and waits (a second at most: less
	// than the real-time bound of a blocked reconcile) until the heartbeat
	// wrote its renewal.
	tick := func() {
		t.Helper()
		before := g.puts.Load()
		wctx, stop := context.WithTimeout(ctx, time.Second)
		defer stop()
		require.True(t, fake.WaitForPending(wctx, 1), "the heartbeat stopped ticking")
		fake.Advance(interval)
		for g.puts.Load() == before {
			require.NoError(t, wctx.Err(), "no renewal after a tick")
			time.Sleep(time.Millisecond)
		}
	}
	tick()

	// The controller fenced it (it was paused); reconciles hang from now.
	brokers, err := meta.Brokers(ctx)
	require.NoError(t, err)
	require.NoError(t, meta.FenceBroker(ctx, 1, brokers[0].Version))
	g.armed.Store(true)
	tick() // re-acquires under a new epoch; re-registering blocks on the metastore
	epoch, held := l.Valid()
	require.True(t, held)
	require.False(t, c.LeaseValid(), "no acting before the partitions are re-read")
	for range 6 { // three leases' worth of renewals
		tick()
		e, ok := l.Valid()
		require.True(t, ok, "the lease lapsed while re-registering")
		require.Equal(t, epoch, e, "fenced again")
	}
	// The metastore answers again: the broker may act under the new epoch.
	g.armed.Store(false)
	close(g.gate)
	deadline := time.Now().Add(10 * time.Second)
	for !c.LeaseValid() {
		require.True(t, time.Now().Before(deadline), "never re-registered")
		time.Sleep(time.Millisecond)
	}
}

// Package brokertest starts Strata brokers inside tests and connects real
// Kafka clients to them. It is imported only by tests.
package brokertest

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratamq/strata/brokerfleet/internal/broker"
	"github.com/stratamq/strata/pkg/metastore"
	"github.com/stratamq/strata/pkg/metastore/embedded"
	"github.com/stratamq/strata/pkg/testenv"
)

// Broker is a broker running in the test process.
type Broker struct {
	*broker.Broker
	Addr string        // bootstrap address
	Cfg  broker.Config // the config it was started with
	done chan error
}

// Option adjusts the broker config before start.
type Option func(*broker.Config)

// Start runs a broker on 127.0.0.1 with a fresh data directory and
// auto-creation on; it is closed when the test ends.
func Start(t testing.TB, opts ...Option) *Broker {
	t.Helper()
	cfg := broker.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.AutoCreateTopics = true
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: testLogLevel()}))
	}
	cfg.Meta = NewMeta(t)
	cfg.WatchInterval = 50 * time.Millisecond
	cfg.GroupStatsInterval = 100 * time.Millisecond
	// Consumer groups form fast in tests: no initial rebalance delay worth
	// waiting for, and short sessions allowed.
	cfg.GroupInitialRebalanceDelay = 100 * time.Millisecond
	cfg.GroupMinSessionTimeout = 500 * time.Millisecond
	// The consumer protocol's too: members fenced after 6 s without a
	// heartbeat, told to heartbeat every 500 ms.
	cfg.GroupConsumerMinSessionTimeout, cfg.GroupConsumerSessionTimeout = 500*time.Millisecond, 6*time.Second
	cfg.GroupConsumerMinHeartbeatInterval, cfg.GroupConsumerHeartbeatInterval = 100*time.Millisecond, 500*time.Millisecond
	for _, o := range opts {
		o(&cfg)
	}
	return StartConfig(t, cfg, "127.0.0.1:0")
}

// NewMeta opens an embedded metastore in a temporary directory, closed
// after everything registered later with t.Cleanup (brokers using it).
func NewMeta(t testing.TB) *metastore.Meta {
	t.Helper()
	// A test's metastore file is thrown away: no fsync per commit.
	store, err := embedded.Open(filepath.Join(t.TempDir(), "metastore.db"), embedded.WithoutSync())
	if err != nil {
		t.Fatalf("open metastore: %v", err)
	}
	t.Cleanup(func() { store.Close() })
	return metastore.New(store)
}

// StartConfig runs a broker with exactly cfg, listening on listen.
func StartConfig(t testing.TB, cfg broker.Config, listen string) *Broker {
	t.Helper()
	var ln net.Listener
	var err error
	// A restarted broker reuses its port; the old socket may linger briefly.
	for i := 0; i < 50; i++ {
		if ln, err = net.Listen("tcp", listen); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	if cfg.Advertise == "" {
		cfg.Advertise = ln.Addr().String()
	}
	b, err := broker.New(cfg)
	if err != nil {
		ln.Close()
		t.Fatalf("start broker: %v", err)
	}
	tb := &Broker{Broker: b, Addr: ln.Addr().String(), Cfg: cfg, done: make(chan error, 1)}
	go func() { tb.done <- b.Serve(ln) }()
	t.Cleanup(func() { tb.Broker.Close() })
	// Group coordinator shards are assigned by the controller's first
	// round; admin tools (kadm) do not retry COORDINATOR_NOT_AVAILABLE.
	for deadline := time.Now().Add(10 * time.Second); !b.CoordinatorShardsAssigned() && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	return tb
}

// Restart closes the broker cleanly and starts a new one on the same data
// directory and address.
func (b *Broker) Restart(t testing.TB) *Broker {
	t.Helper()
	if err := b.Broker.Close(); err != nil {
		t.Fatalf("close broker: %v", err)
	}
	return StartConfig(t, b.Cfg, b.Addr)
}

// Client returns a franz-go client for the broker, closed when the test ends.
func Client(t testing.TB, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Admin returns a kadm client for the broker.
func Admin(t testing.TB, addr string) *kadm.Client {
	return kadm.NewClient(Client(t, addr))
}

// CreateTopic creates a topic with one replica and fails the test on error.
func CreateTopic(t testing.TB, addr, name string, partitions int32, configs map[string]*string) {
	t.Helper()
	CreateTopicRF(t, addr, name, partitions, 1, configs)
}

// CreateTopicRF creates a topic with rf replicas per partition.
func CreateTopicRF(t testing.TB, addr, name string, partitions int32, rf int16, configs map[string]*string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := Admin(t, addr).CreateTopic(ctx, partitions, rf, configs, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
}

// RequireTool returns the path of an outside program, one of
// testenv.Tools. When it is missing the test skips with how to install
// it, or fails when STRATA_REQUIRE_ALL is set (testenv.Path).
func RequireTool(t testing.TB, name string) string {
	t.Helper()
	return testenv.Path(t, testenv.ByName(t, name))
}

// testLogLevel is Warn, or STRATA_TEST_LOG (debug, info, warn, error) to
// see more of what brokers in a verbose test run do.
func testLogLevel() slog.Level {
	var l slog.Level = slog.LevelWarn
	if v := os.Getenv("STRATA_TEST_LOG"); v != "" {
		_ = l.UnmarshalText([]byte(v))
	}
	return l
}

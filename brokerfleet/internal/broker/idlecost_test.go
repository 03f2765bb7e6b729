package broker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratamq/strata/brokerfleet/internal/broker"
	"github.com/stratamq/strata/brokerfleet/internal/brokertest"
	"github.com/stratamq/strata/pkg/metastore"
	"github.com/stratamq/strata/pkg/metastore/dynamo/dynamotest"
)

// TestIdleClusterDynamoCost counts the DynamoDB requests (at the SDK's HTTP
// layer, retries included) of an idle 3-broker cluster with 1,000
// partitions, with production lease and watch settings: at most one write
// per second per broker, and nothing that grows with partitions.
func TestIdleClusterDynamoCost(t *testing.T) {
	if testing.Short() {
		t.Skip("measures a 6 s idle window")
	}
	counter := dynamotest.NewCounter()
	store := dynamotest.NewStore(t, dynamotest.StartMinidyn(t), counter.Option())
	meta := metastore.New(store)
	defaults := broker.DefaultConfig()
	var brokers []*brokertest.Broker
	for id := int32(1); id <= 3; id++ {
		brokers = append(brokers, brokertest.Start(t, func(c *broker.Config) {
			c.Meta, c.NodeID = meta, id
			c.Lease, c.WatchInterval, c.GroupStatsInterval = defaults.Lease, defaults.WatchInterval, defaults.GroupStatsInterval
			c.MaintenanceInterval = time.Hour
		}))
	}
	for i := 0; i < 10; i++ {
		brokertest.CreateTopic(t, brokers[0].Addr, fmt.Sprintf("idle-%d", i), 100, nil)
	}
	// Let every broker pick the topics up and the controller finish
	// placing them (no metadata change for 2 s), then measure a quiet
	// window of one full lease.
	ctx := context.Background()
	last, err := meta.ChangeVersion(ctx)
	require.NoError(t, err)
	for quiet := time.Now(); time.Since(quiet) < 2*time.Second; time.Sleep(100 * time.Millisecond) {
		v, err := meta.ChangeVersion(ctx)
		require.NoError(t, err)
		if v != last {
			last, quiet = v, time.Now()
		}
	}
	// A window in which the metadata changed (an ISR flap on a loaded
	// machine) is not idle: measure again, up to three windows.
	window := defaults.Lease.Duration
	var counts map[string]int64
	var writes, total int64
	for try := 1; ; try++ {
		counter.Reset()
		time.Sleep(window)
		counts, writes, total = counter.Counts(), counter.Writes(), counter.Total()
		v, err := meta.ChangeVersion(ctx)
		require.NoError(t, err)
		if v == last {
			break
		}
		t.Logf("window %d: the metadata changed %d times (%v)", try, v-last, counts)
		require.Less(t, try, 3, "an idle cluster kept changing its metadata")
		last = v
	}
	perBrokerSecond := func(n int64) float64 { return float64(n) / 3 / window.Seconds() }
	t.Logf("idle 3 brokers, 1000 partitions, %v: %v; %.2f writes and %.2f requests per broker per second",
		window, counts, perBrokerSecond(writes), perBrokerSecond(total))
	require.LessOrEqual(t, perBrokerSecond(writes), 1.0, "writes per broker per second")
	// Reads: the change counter every watch interval, the lease reads
	// before each registration and controller heartbeat (every lease/3),
	// every broker's registration scan (every lease/6), and one coordinator
	// shard's group index per group stats round; nothing per partition or
	// topic.
	perLease := 3 / defaults.Lease.Duration.Seconds()
	maxReads := 1/defaults.WatchInterval.Seconds() + 2*perLease + 2*perLease + 1/defaults.GroupStatsInterval.Seconds() + 0.5
	require.LessOrEqual(t, perBrokerSecond(total-writes), maxReads, "reads per broker per second")
}

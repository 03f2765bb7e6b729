package broker_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratamq/strata/brokerfleet/internal/brokertest"
)

// A broker that starts behind (here: restarted while cut off from the
// leader) is healthy but not ready until it is back in the ISR of every
// partition it hosts; then it stays ready.
func TestReadyWaitsForCatchUp(t *testing.T) {
	rc := startReplCluster(t, time.Second)
	brokertest.CreateTopicRF(t, rc.brokers[0].Addr, "ready", 1, 3, map[string]*string{"min.insync.replicas": strp("2")})
	pm, _ := rc.partitionMeta(t, "ready", 0)
	var follower int32 = -1
	for _, r := range pm.Replicas {
		if r != pm.Leader {
			follower = r
			break
		}
	}
	leaderAddr := rc.brokers[pm.Leader].Addr
	waitFor(t, "every broker ready", func() bool {
		for _, b := range rc.brokers {
			if b.Broker.Ready() != nil {
				return false
			}
		}
		return true
	})
	rc.links.Cut(fmt.Sprint(follower), leaderAddr)
	prod := brokertest.Client(t, leaderAddr, kgo.DefaultProduceTopic("ready"))
	ctx := context.Background()
	for i := 0; i < 20; i++ {
		require.NoError(t, prod.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr())
	}
	waitFor(t, "the ISR to shrink", func() bool {
		pm, _ := rc.partitionMeta(t, "ready", 0)
		return !slices.Contains(pm.ISR, follower)
	})
	require.NoError(t, rc.brokers[follower].Broker.Ready(), "ready once stays ready")

	rc.brokers[follower] = rc.brokers[follower].Restart(t)
	b := rc.brokers[follower].Broker
	waitFor(t, "the restarted broker healthy", func() bool { return b.Healthy() == nil })
	time.Sleep(500 * time.Millisecond)
	require.ErrorContains(t, b.Ready(), "catching up")

	rc.links.Restore(fmt.Sprint(follower), leaderAddr)
	waitFor(t, "the restarted broker ready", func() bool { return b.Ready() == nil })
}

// A follower that comes back as a new incarnation leaves the ISR at once
// (its disk may have lost a tail, or everything), not after the replica
// lag timeout, so no election can pick it before it has caught up; it
// rejoins when it has.
func TestRestartedFollowerLeavesTheISR(t *testing.T) {
	rc := startReplCluster(t, time.Minute) // the leader alone would wait a minute
	brokertest.CreateTopicRF(t, rc.brokers[0].Addr, "rejoin", 1, 3, nil)
	pm, _ := rc.partitionMeta(t, "rejoin", 0)
	var follower int32 = -1
	for _, r := range pm.Replicas {
		if r != pm.Leader {
			follower = r
			break
		}
	}
	leaderAddr := rc.brokers[pm.Leader].Addr
	rc.links.Cut(fmt.Sprint(follower), leaderAddr)
	rc.brokers[follower] = rc.brokers[follower].Restart(t)
	waitFor(t, "the restarted follower out of the ISR", func() bool {
		pm, _ := rc.partitionMeta(t, "rejoin", 0)
		return len(pm.ISR) == 2 && !slices.Contains(pm.ISR, follower) && pm.Leader != follower
	})
	rc.links.Restore(fmt.Sprint(follower), leaderAddr)
	waitFor(t, "the follower back in the ISR", func() bool {
		pm, _ := rc.partitionMeta(t, "rejoin", 0)
		return len(pm.ISR) == 3
	})
}

package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/broker"
	"github.com/stratamq/strata/brokerfleet/internal/brokertest"
	"github.com/stratamq/strata/pkg/metastore"
)

// Every broker reports the same controller in Metadata and
// DescribeCluster: the broker holding the controller lease. When that
// broker dies (cut off from the metastore, so it can neither renew nor
// release), another takes the lease over and every survivor reports it.
func TestEveryBrokerReportsTheLeaseHolderAsController(t *testing.T) {
	shared := brokertest.NewMeta(t).Store()
	meta := metastore.New(shared)
	lease := metastore.LeaseOptions{Duration: 1500 * time.Millisecond, Margin: 300 * time.Millisecond}
	var brokers []*brokertest.Broker
	var stores []*brokertest.FlakyStore
	for id := int32(0); id < 3; id++ {
		fs := &brokertest.FlakyStore{Store: shared}
		stores = append(stores, fs)
		brokers = append(brokers, brokertest.Start(t, func(c *broker.Config) {
			c.Meta, c.NodeID, c.Lease = metastore.New(fs), id, lease
		}))
	}
	ctx := context.Background()
	reported := func(b *brokertest.Broker) (metadata, cluster int32) {
		md := metadataOnConn(t, b.Addr)
		cl := brokertest.Client(t, b.Addr)
		dc, err := kmsg.NewPtrDescribeClusterRequest().RequestWith(ctx, cl)
		require.NoError(t, err)
		return md.ControllerID, dc.ControllerID
	}
	agree := func(alive []*brokertest.Broker, not int32) int32 {
		t.Helper()
		var want int32
		waitFor(t, "every broker reporting the lease holder as controller", func() bool {
			id, ok, err := meta.Controller(ctx)
			if err != nil || !ok || id == not {
				return false
			}
			want = id
			for _, b := range alive {
				if md, dc := reported(b); md != id || dc != id {
					return false
				}
			}
			return true
		})
		return want
	}
	first := agree(brokers, -1)
	require.GreaterOrEqual(t, first, int32(0))

	// Kill the controller: its metastore goes away first, so its lease
	// lapses instead of being handed over.
	stores[first].Down.Store(true)
	require.NoError(t, brokers[first].Close())
	var alive []*brokertest.Broker
	for i, b := range brokers {
		if int32(i) != first {
			alive = append(alive, b)
		}
	}
	second := agree(alive, first)
	require.NotEqual(t, first, second)
}

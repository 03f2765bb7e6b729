package broker_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratamq/strata/brokerfleet/internal/broker"
	"github.com/stratamq/strata/brokerfleet/internal/brokertest"
)

// Brokers started together with AutoNodeID get distinct ids; a broker that
// stopped cleanly frees its id for the next one.
func TestAutoNodeID(t *testing.T) {
	meta := brokertest.NewMeta(t)
	var mu sync.Mutex
	var brokers []*brokertest.Broker
	var wg sync.WaitGroup
	for i := 0; i < 3; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b := brokertest.Start(t, func(c *broker.Config) { c.Meta, c.NodeID = meta, broker.AutoNodeID })
			mu.Lock()
			brokers = append(brokers, b)
			mu.Unlock()
		}()
	}
	wg.Wait()
	ids := map[int32]*brokertest.Broker{}
	for _, b := range brokers {
		_, port := b.Broker.Addr()
		require.NotZero(t, port)
		md := metadataOnConn(t, b.Addr)
		self := int32(-1)
		for _, br := range md.Brokers {
			if br.Port == port {
				self = br.NodeID
			}
		}
		require.GreaterOrEqual(t, self, int32(0))
		require.NotContains(t, ids, self, "two brokers claimed id %d", self)
		ids[self] = b
	}
	require.Len(t, ids, 3)
	for id := int32(0); id < 3; id++ {
		require.Contains(t, ids, id, "the lowest ids are used")
	}
	require.NoError(t, ids[1].Broker.Close())
	b := brokertest.Start(t, func(c *broker.Config) { c.Meta, c.NodeID = meta, broker.AutoNodeID })
	waitFor(t, "the newcomer registered", func() bool { return len(metadataOnConn(t, b.Addr).Brokers) == 3 })
	_, port := b.Broker.Addr()
	for _, br := range metadataOnConn(t, b.Addr).Brokers {
		if br.Port == port {
			require.Equal(t, int32(1), br.NodeID, "the freed id is reused")
		}
	}
}

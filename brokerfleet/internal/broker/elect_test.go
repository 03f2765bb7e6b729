package broker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratamq/strata/brokerfleet/internal/broker"
	"github.com/stratamq/strata/brokerfleet/internal/brokertest"
)

// After a broker restarts, its preferred partitions are led elsewhere;
// ElectLeaders (preferred) hands them back once it is in sync again.
func TestElectPreferredLeaders(t *testing.T) {
	brokers := startCluster(t, 3)
	brokertest.CreateTopicRF(t, brokers[1].Addr, "pref", 6, 3, nil)
	cl := brokertest.Client(t, brokers[1].Addr, kgo.DefaultProduceTopic("pref"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := 0; i < 60; i++ {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte("v")}).FirstErr())
	}
	brokers[0] = brokers[0].Restart(t) // a clean stop hands its leaderships over
	adm := brokertest.Admin(t, brokers[1].Addr)
	var preferred0 []int32
	waitFor(t, "broker 0 back in every ISR, leading nothing", func() bool {
		md, err := adm.Metadata(ctx, "pref")
		if err != nil {
			return false
		}
		preferred0 = preferred0[:0]
		for _, p := range md.Topics["pref"].Partitions {
			if len(p.ISR) != 3 || p.Leader == 0 {
				return false
			}
			if p.Replicas[0] == 0 {
				preferred0 = append(preferred0, p.Partition)
			}
		}
		return true
	})
	require.NotEmpty(t, preferred0)

	res, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, nil)
	require.NoError(t, err)
	moved := 0
	for _, ps := range res {
		for p, r := range ps {
			if r.Err == nil {
				moved++
				require.Contains(t, preferred0, p)
			} else {
				require.ErrorIs(t, r.Err, kerr.ElectionNotNeeded, "partition %d", p)
			}
		}
	}
	require.Equal(t, len(preferred0), moved)
	waitFor(t, "every partition led by its preferred replica", func() bool {
		md, err := adm.Metadata(ctx, "pref")
		if err != nil {
			return false
		}
		for _, p := range md.Topics["pref"].Partitions {
			if p.Leader != p.Replicas[0] {
				return false
			}
		}
		return true
	})
	// Produce still works on the moved partitions.
	for i := 0; i < 30; i++ {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte("after")}).FirstErr())
	}

	// Unclean election of a partition with a live leader is not needed;
	// an unknown partition is reported.
	set := make(kadm.TopicsSet)
	set.Add("pref", 0)
	set.Add("nope", 0)
	res, err = adm.ElectLeaders(ctx, kadm.ElectLiveReplica, set)
	require.NoError(t, err)
	require.ErrorIs(t, res["pref"][0].Err, kerr.ElectionNotNeeded)
	require.ErrorIs(t, res["nope"][0].Err, kerr.UnknownTopicOrPartition)
}

// The controller hands leadership back to preferred replicas on its own
// (auto.leader.rebalance.enable) once a restarted broker is in sync.
func TestLeadershipReturnsToPreferredReplicas(t *testing.T) {
	meta := brokertest.NewMeta(t)
	var brokers []*brokertest.Broker
	for id := 0; id < 3; id++ {
		brokers = append(brokers, brokertest.Start(t, func(c *broker.Config) {
			c.Meta, c.NodeID, c.LeaderRebalanceInterval = meta, int32(id), 300*time.Millisecond
		}))
	}
	for _, b := range brokers {
		waitFor(t, "all brokers registered", func() bool { return len(metadataOnConn(t, b.Addr).Brokers) == 3 })
	}
	brokertest.CreateTopicRF(t, brokers[1].Addr, "auto", 6, 3, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	adm := brokertest.Admin(t, brokers[1].Addr)
	epochs := map[int32]int32{}
	waitFor(t, "broker 0 leading its preferred partitions", func() bool {
		md, err := adm.Metadata(ctx, "auto")
		if err != nil || len(md.Topics["auto"].Partitions) != 6 {
			return false
		}
		for _, p := range md.Topics["auto"].Partitions {
			epochs[p.Partition] = p.LeaderEpoch
		}
		// Broker 0 must know the topic to hand its leaderships over.
		for _, mt := range metadataOnConn(t, brokers[0].Addr).Topics {
			if *mt.Topic == "auto" && len(mt.Partitions) == 6 {
				return true
			}
		}
		return false
	})
	brokers[0] = brokers[0].Restart(t) // hands its leaderships over, then comes back
	waitFor(t, "every partition led by its preferred replica again", func() bool {
		md, err := adm.Metadata(ctx, "auto")
		if err != nil || len(md.Topics["auto"].Partitions) != 6 {
			return false
		}
		for _, p := range md.Topics["auto"].Partitions {
			if p.Leader != p.Replicas[0] {
				return false
			}
			// Broker 0's partitions moved away and back: two elections.
			if p.Replicas[0] == 0 && p.LeaderEpoch < epochs[p.Partition]+2 {
				return false
			}
		}
		return true
	})
}

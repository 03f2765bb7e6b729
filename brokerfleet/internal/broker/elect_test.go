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

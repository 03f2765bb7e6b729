package interop_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/broker"
	"github.com/stratamq/strata/brokerfleet/internal/brokertest"
	"github.com/stratamq/strata/pkg/metastore"
)

// startCluster runs n brokers sharing one metastore, ids 0..n-1, and
// waits until every broker lists all of them (a Metadata request of its
// own: kadm's BrokerMetadata may answer from the client's cache).
func startCluster(t *testing.T, n int) []*brokertest.Broker {
	t.Helper()
	meta := brokertest.NewMeta(t)
	var out []*brokertest.Broker
	for id := 0; id < n; id++ {
		out = append(out, brokertest.Start(t, func(c *broker.Config) {
			c.Meta, c.NodeID = meta, int32(id)
		}))
	}
	for _, b := range out {
		cl := brokertest.Client(t, b.Addr)
		require.Eventually(t, func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			resp, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, cl)
			return err == nil && len(resp.Brokers) == n
		}, 30*time.Second, 20*time.Millisecond, "broker %s lists all %d brokers", b.Addr, n)
	}
	waitShardsBalanced(t, out)
	return out
}

// waitShardsBalanced waits until the group coordinator shards are spread
// evenly over the brokers (the controller moves some off the first
// broker once the others register). A shard that moves answers
// NOT_COORDINATOR, which clients that keep their coordinator connection
// for a whole generation (kafka-go's Reader) return to the application
// instead of looking the coordinator up again, so the tests start on a
// settled cluster.
func waitShardsBalanced(t *testing.T, bs []*brokertest.Broker) {
	t.Helper()
	require.Eventually(t, func() bool {
		total, lo, hi := 0, metastore.GroupShards, 0
		for _, b := range bs {
			n := 0
			fams, err := b.Gatherer().Gather()
			require.NoError(t, err)
			for _, f := range fams {
				if f.GetName() == "strata_group_coordinator_shards" {
					n = int(f.GetMetric()[0].GetGauge().GetValue())
				}
			}
			total, lo, hi = total+n, min(lo, n), max(hi, n)
		}
		return total == metastore.GroupShards && hi-lo <= 1
	}, 30*time.Second, 20*time.Millisecond, "group coordinator shards spread over %d brokers", len(bs))
}

// addrs returns the brokers' addresses.
func addrs(bs []*brokertest.Broker) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = b.Addr
	}
	return out
}

// record is what a test compares of a record, whichever client read it.
type record struct {
	Partition int32
	Offset    int64
	Key       string
	Value     string
	Headers   string // "k=v,k=v"
}

// readAll reads every record of topicName with franz-go, a client other
// than the one under test, until want records have arrived.
func readAll(t *testing.T, seeds []string, topicName string, want int) []record {
	t.Helper()
	cl := brokertest.Client(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topicName),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var out []record
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for len(out) < want {
		fs := cl.PollFetches(ctx)
		require.NoError(t, fs.Err(), "franz-go reading %s (%d of %d records)", topicName, len(out), want)
		fs.EachRecord(func(r *kgo.Record) {
			var hs []string
			for _, h := range r.Headers {
				hs = append(hs, h.Key+"="+string(h.Value))
			}
			out = append(out, record{r.Partition, r.Offset, string(r.Key), string(r.Value), strings.Join(hs, ",")})
		})
	}
	require.Len(t, out, want, "records in %s", topicName)
	return out
}

// committed returns the group's committed offsets of topicName by
// partition, read with franz-go's admin client.
func committed(t *testing.T, addr, group, topicName string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	offs, err := brokertest.Admin(t, addr).FetchOffsets(ctx, group)
	require.NoError(t, err)
	out := map[int32]int64{}
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == topicName {
			require.NoError(t, o.Err)
			out[o.Partition] = o.At
		}
	})
	return out
}

// endOffsets returns the log end offsets of topicName by partition.
func endOffsets(t *testing.T, addr, topicName string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ends, err := brokertest.Admin(t, addr).ListEndOffsets(ctx, topicName)
	require.NoError(t, err)
	out := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		require.NoError(t, o.Err)
		out[o.Partition] = o.Offset
	})
	return out
}

package broker_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratamq/strata/brokerfleet/internal/broker"
	"github.com/stratamq/strata/brokerfleet/internal/brokertest"
	"github.com/stratamq/strata/brokerfleet/internal/tier"
	"github.com/stratamq/strata/pkg/objstore/objstoretest"
	"github.com/stratamq/strata/pkg/objstore/s3store"
)

// compactCluster runs n brokers sharing a metastore whose cleaners look
// for work every 50 ms and whose maintenance (segment.ms rolls) runs every
// 50 ms.
func compactCluster(t *testing.T, n int, opts ...brokertest.Option) []*brokertest.Broker {
	meta := brokertest.NewMeta(t)
	var out []*brokertest.Broker
	for id := 0; id < n; id++ {
		out = append(out, brokertest.Start(t, append([]brokertest.Option{func(c *broker.Config) {
			c.Meta, c.NodeID = meta, int32(id)
			c.Cleaner.Backoff = 50 * time.Millisecond
			c.MaintenanceInterval = 50 * time.Millisecond
			c.DefaultReplicationFactor = int16(n)
		}}, opts...)...))
	}
	for _, b := range out {
		waitFor(t, "all brokers registered", func() bool { return len(metadataOnConn(t, b.Addr).Brokers) == n })
	}
	return out
}

// tableConfigs are the configs of a compacted topic that cleans at once:
// small segments rolled every 300 ms, any dirty share cleanable.
func tableConfigs(extra ...string) map[string]*string {
	c := map[string]*string{
		"cleanup.policy":            kadm.StringPtr("compact"),
		"segment.bytes":             kadm.StringPtr("16384"),
		"segment.ms":                kadm.StringPtr("300"),
		"min.cleanable.dirty.ratio": kadm.StringPtr("0.01"),
		"min.insync.replicas":       kadm.StringPtr("2"),
	}
	for i := 0; i+1 < len(extra); i += 2 {
		c[extra[i]] = kadm.StringPtr(extra[i+1])
	}
	return c
}

// tableState is what a consumer from offset 0 ends with: the last value
// of every key (a tombstone deletes it).
type tableState map[string]string

// replicaTable returns a broker's local replica of every partition of a
// topic, and checks that offsets increase.
func replicaRecords(t *testing.T, b *brokertest.Broker, topicName string, partitions int32) map[int32][]broker.LocalRecord {
	t.Helper()
	out := map[int32][]broker.LocalRecord{}
	for p := int32(0); p < partitions; p++ {
		recs, ok, err := broker.LocalRecords(b.Broker, topicName, p)
		require.NoError(t, err)
		if !ok {
			continue
		}
		for i := 1; i < len(recs); i++ {
			require.Greater(t, recs[i].Offset, recs[i-1].Offset, "partition %d: offsets increase", p)
		}
		out[p] = recs
	}
	return out
}

// cleaned reports whether every partition of recs holds exactly one
// record per key, none of them a tombstone, equal to want.
func cleaned(recs map[int32][]broker.LocalRecord, want tableState) bool {
	got := tableState{}
	for _, rs := range recs {
		for _, r := range rs {
			if r.Tombstone {
				return false
			}
			if _, dup := got[r.Key]; dup {
				return false
			}
			got[r.Key] = r.Value
		}
	}
	if len(got) != len(want) {
		return false
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// consumed is what a consumer saw of a topic.
type consumed struct {
	mu   sync.Mutex
	recs map[int32][]*kgo.Record
}

func (c *consumed) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, rs := range c.recs {
		n += len(rs)
	}
	return n
}

// follow consumes a topic from the start until ctx ends.
func follow(ctx context.Context, t *testing.T, addr, topicName string) *consumed {
	c := &consumed{recs: map[int32][]*kgo.Record{}}
	cl := brokertest.Client(t, addr, kgo.ConsumeTopics(topicName), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100*time.Millisecond))
	go func() {
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			c.mu.Lock()
			fs.EachRecord(func(r *kgo.Record) { c.recs[r.Partition] = append(c.recs[r.Partition], r) })
			c.mu.Unlock()
		}
	}()
	return c
}

// readTable consumes a topic from offset 0 with a fresh consumer up to the
// last record each partition's leader holds, and returns the state and
// the number of records read.
func readTable(t *testing.T, addr, topicName string, last map[int32]int64) (tableState, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := brokertest.Client(t, addr, kgo.ConsumeTopics(topicName), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100*time.Millisecond))
	state, n := tableState{}, 0
	prev := map[int32]int64{}
	done := func() bool {
		for p, l := range last {
			if o, ok := prev[p]; (!ok && l >= 0) || o < l {
				return false
			}
		}
		return true
	}
	for !done() {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "reading %s from offset 0: at %v, want %v", topicName, prev, last)
		fs.EachError(func(_ string, p int32, err error) { t.Fatalf("partition %d: %v", p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if o, ok := prev[r.Partition]; ok {
				require.Greater(t, r.Offset, o, "partition %d: offsets increase", r.Partition)
			}
			prev[r.Partition] = r.Offset
			n++
			if r.Value == nil {
				delete(state, string(r.Key))
			} else {
				state[string(r.Key)] = string(r.Value)
			}
		})
	}
	return state, n
}

// lastOffsets returns, per partition, the offset of the last record the
// leader's replica holds (-1: none).
func lastOffsets(t *testing.T, brokers []*brokertest.Broker, topicName string, partitions int32) map[int32]int64 {
	t.Helper()
	out := map[int32]int64{}
	leaders := map[int32]int32{}
	for _, tp := range metadataOnConn(t, brokers[0].Addr).Topics {
		if *tp.Topic == topicName {
			for _, p := range tp.Partitions {
				leaders[p.Partition] = p.Leader
			}
		}
	}
	for p := int32(0); p < partitions; p++ {
		recs := replicaRecords(t, brokers[leaders[p]], topicName, partitions)[p]
		out[p] = -1
		if len(recs) > 0 {
			out[p] = recs[len(recs)-1].Offset
		}
	}
	return out
}

// TestCompactedTopicAcrossReplicas is the first acceptance check:
// 200 keys × 50 versions on a 3-replica compacted topic, then tombstones
// for 20 keys. After cleaning, a consumer from offset 0 sees exactly one
// value per key, the latest; the deleted keys are gone once
// delete.retention.ms passed; every replica holds the same records at the
// same offsets; a consumer that kept up meanwhile saw every record in
// order.
func TestCompactedTopicAcrossReplicas(t *testing.T) {
	brokers := compactCluster(t, 3)
	addr := brokers[0].Addr
	const topicName, partitions, keys, versions, deleted = "table", 3, 200, 50, 20
	brokertest.CreateTopicRF(t, addr, topicName, partitions, 3, tableConfigs("delete.retention.ms", "2000"))

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	follower := follow(ctx, t, addr, topicName)

	cl := brokertest.Client(t, addr, kgo.DefaultProduceTopic(topicName), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(time.Millisecond))
	want := tableState{}
	produced := 0
	for v := 0; v < versions; v++ {
		var rs []*kgo.Record
		for k := 0; k < keys; k++ {
			key, value := fmt.Sprintf("key-%03d", k), fmt.Sprintf("key-%03d-version-%02d-%040d", k, v, 0)
			rs = append(rs, &kgo.Record{Key: []byte(key), Value: []byte(value)})
			want[key] = value
		}
		require.NoError(t, cl.ProduceSync(context.Background(), rs...).FirstErr())
		produced += len(rs)
	}
	var tombs []*kgo.Record
	for k := 0; k < deleted; k++ {
		key := fmt.Sprintf("key-%03d", k*7)
		tombs = append(tombs, &kgo.Record{Key: []byte(key)}) // a nil value: a tombstone
		delete(want, key)
	}
	require.NoError(t, cl.ProduceSync(context.Background(), tombs...).FirstErr())
	produced += len(tombs)

	// The keep-up consumer saw every record, in order per partition and
	// with every key's versions in order.
	waitFor(t, "the keep-up consumer saw every record", func() bool { return follower.count() >= produced })
	stop()
	follower.mu.Lock()
	require.Equal(t, produced, func() int {
		n := 0
		for _, rs := range follower.recs {
			n += len(rs)
		}
		return n
	}())
	lastVersion := map[string]int{}
	for p, rs := range follower.recs {
		for i, r := range rs {
			if i > 0 {
				require.Equal(t, rs[i-1].Offset+1, r.Offset, "partition %d: the keep-up consumer saw no gap", p)
			}
			if r.Value == nil {
				lastVersion[string(r.Key)] = versions
				continue
			}
			var k, v int
			_, err := fmt.Sscanf(string(r.Value), "key-%03d-version-%02d", &k, &v)
			require.NoError(t, err)
			if prev, ok := lastVersion[string(r.Key)]; ok {
				require.Equal(t, prev+1, v, "key %s: versions in order", r.Key)
			} else {
				require.Zero(t, v, "key %s starts at version 0", r.Key)
			}
			lastVersion[string(r.Key)] = v
		}
	}
	follower.mu.Unlock()

	// Every replica converges on exactly the latest value of every key
	// left, tombstones gone after delete.retention.ms.
	waitFor(t, "every replica cleaned", func() bool {
		for _, b := range brokers {
			if !cleaned(replicaRecords(t, b, topicName, partitions), want) {
				return false
			}
		}
		return true
	})
	base := replicaRecords(t, brokers[0], topicName, partitions)
	for _, b := range brokers[1:] {
		require.Equal(t, base, replicaRecords(t, b, topicName, partitions), "replicas hold the same records at the same offsets")
	}

	// A consumer from offset 0 reads the table: one record per key.
	state, n := readTable(t, addr, topicName, lastOffsets(t, brokers, topicName, partitions))
	require.Equal(t, want, state)
	require.Equal(t, len(want), n, "exactly one record per key")
	t.Logf("%d records produced; a consumer from offset 0 reads %d", produced, n)
}

// keysSorted returns a state's keys in order (for messages).
func keysSorted(s tableState) []string {
	out := make([]string, 0, len(s))
	for k := range s {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestCompactedTableInTheTier: the leader re-uploads what its cleaner
// rewrote, so the tier holds the compacted table; after every disk is
// wiped, a consumer from offset 0 reads exactly the latest value of every
// key from S3, far fewer records than were produced. With object
// durability too (acks wait for S3; the WAL entries are replaced by
// segment uploads, then by cleaned ones).
func TestCompactedTableInTheTier(t *testing.T) {
	for _, durability := range []string{"replicated", "object"} {
		t.Run(durability, func(t *testing.T) {
			s3 := objstoretest.StartS3(t, "")
			tc := startTiered(t, s3.Store(t, s3store.Options{}))
			addr := tc.brokers[0].Addr
			const topicName, keys, versions = "tiered-table", 100, 20
			brokertest.CreateTopicRF(t, addr, topicName, 1, 3, tableConfigs("segment.bytes", "4096", "strata.durability", durability))
			cl := brokertest.Client(t, addr, kgo.DefaultProduceTopic(topicName), kgo.ProducerLinger(time.Millisecond))
			want := tableState{}
			for v := 0; v < versions; v++ {
				var rs []*kgo.Record
				for k := 0; k < keys; k++ {
					key, value := fmt.Sprintf("key-%03d", k), fmt.Sprintf("v%02d-%060d", v, k)
					rs = append(rs, &kgo.Record{Key: []byte(key), Value: []byte(value)})
					want[key] = value
				}
				require.NoError(t, cl.ProduceSync(context.Background(), rs...).FirstErr())
			}
			produced := keys * versions

			// The leader cleaned its log and the tier holds what it cleaned.
			waitFor(t, "the tier holds the compacted table", func() bool {
				for _, b := range tc.brokers {
					if !cleaned(replicaRecords(t, b, topicName, 1), want) {
						return false
					}
				}
				// The leader's rewritten segments are all in the tier
				// (followers keep their marks until they lead).
				leader := tc.brokers[partitionLeader(t, addr, topicName, 0)]
				leo, _, _, _ := broker.LocalLog(leader.Broker, topicName, 0)
				cleanedTo, marked, _ := broker.CleanerState(leader.Broker, topicName, 0)
				ends, _ := manifestEnd(t, tc.meta, topicName, 1)
				return marked == 0 && cleanedTo >= leo && ends[0] >= leo
			})
			tp, err := tc.meta.Topic(context.Background(), topicName)
			require.NoError(t, err)
			man, err := tc.meta.Manifest(context.Background(), tp.ID, 0)
			require.NoError(t, err)
			require.Positive(t, tier.CleanedOf(man), "the objects carry the cleaned offset")

			lastRec := lastOffsets(t, tc.brokers, topicName, 1)
			for i, b := range tc.brokers {
				require.NoError(t, b.Broker.Close())
				tc.brokers[i] = nil
			}
			for id := 0; id < 3; id++ {
				tc.brokers[id] = tc.start(t, id, t.TempDir(), "127.0.0.1:0")
			}
			state, n := readTable(t, tc.brokers[0].Addr, topicName, lastRec)
			require.Equal(t, want, state)
			require.Equal(t, keys, n, "one record per key, read from S3")
			t.Logf("%s: %d records produced; after every disk was wiped a consumer from offset 0 reads %d from S3", durability, produced, n)

			// The log goes on past the tier's end.
			r := &kgo.Record{Topic: topicName, Key: []byte("key-000"), Value: []byte("after")}
			require.NoError(t, brokertest.Client(t, tc.brokers[0].Addr).ProduceSync(context.Background(), r).FirstErr())
			require.GreaterOrEqual(t, r.Offset, tier.End(man))
		})
	}
}

// partitionLeader returns the leader of a partition, as Metadata says.
func partitionLeader(t *testing.T, addr, topicName string, idx int32) int32 {
	t.Helper()
	for _, tp := range metadataOnConn(t, addr).Topics {
		if *tp.Topic == topicName {
			for _, p := range tp.Partitions {
				if p.Partition == idx {
					return p.Leader
				}
			}
		}
	}
	t.Fatalf("no partition %s-%d", topicName, idx)
	return -1
}

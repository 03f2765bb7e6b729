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

// gappedTable is a one-partition compacted topic on one broker, cleaned:
// keys × versions produced in batches that mix keys, so the cleaner
// leaves gaps inside batches and empty batches between them.
type gappedTable struct {
	b     *brokertest.Broker
	topic string
	want  tableState
	kept  []broker.LocalRecord // the records left, in offset order
	hwm   int64
	ts    map[int64]time.Time // produce timestamp by offset
}

func newGappedTable(t *testing.T, topicName string, keys, versions int) *gappedTable {
	b := compactCluster(t, 1)[0]
	cfg := tableConfigs("delete.retention.ms", "300")
	delete(cfg, "min.insync.replicas")
	brokertest.CreateTopic(t, b.Addr, topicName, 1, cfg)
	g := &gappedTable{b: b, topic: topicName, want: tableState{}, ts: map[int64]time.Time{}}
	cl := brokertest.Client(t, b.Addr, kgo.DefaultProduceTopic(topicName), kgo.ProducerLinger(time.Millisecond))
	base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	i := 0
	for v := 0; v < versions; v++ {
		var rs []*kgo.Record
		for k := 0; k < keys; k++ {
			if tail := v - (versions - 3); tail >= 0 && k%3 != tail {
				continue // the last versions of a key spread over three batches
			}
			key := fmt.Sprintf("key-%02d", (k*7+v)%keys) // a different key order per version
			value := fmt.Sprintf("%s=v%02d", key, v)
			rs = append(rs, &kgo.Record{Key: []byte(key), Value: []byte(value), Timestamp: base.Add(time.Duration(i) * time.Second)})
			g.want[key] = value
			i++
		}
		require.NoError(t, cl.ProduceSync(context.Background(), rs...).FirstErr())
		for _, r := range rs {
			g.ts[r.Offset] = r.Timestamp
		}
	}
	// Two keys deleted last: once their tombstones are gone too, the log
	// ends with an empty batch past the last record.
	tombs := []*kgo.Record{{Key: []byte("key-00")}, {Key: []byte("key-01")}}
	require.NoError(t, cl.ProduceSync(context.Background(), tombs...).FirstErr())
	delete(g.want, "key-00")
	delete(g.want, "key-01")
	i += len(tombs)
	waitFor(t, "the table cleaned", func() bool { return cleaned(replicaRecords(t, b, topicName, 1), g.want) })
	g.kept = replicaRecords(t, b, topicName, 1)[0]
	_, g.hwm, _, _ = broker.LocalLog(b.Broker, topicName, 0)
	require.Len(t, g.kept, keys-2)
	require.Less(t, g.kept[len(g.kept)-1].Offset+1, g.hwm, "the log ends past its last record")
	require.Equal(t, int64(i), g.hwm, "offsets keep their place: the log end does not move")
	return g
}

// firstKeptAt returns the first kept record at or after off (nil: none).
func (g *gappedTable) firstKeptAt(off int64) *broker.LocalRecord {
	for i := range g.kept {
		if g.kept[i].Offset >= off {
			return &g.kept[i]
		}
	}
	return nil
}

// TestCompactionConfigs: Kafka's names and defaults; a bad value of any of
// them is INVALID_CONFIG naming the key, on create and on alter.
func TestCompactionConfigs(t *testing.T) {
	b := brokertest.Start(t)
	adm := brokertest.Admin(t, b.Addr)
	ctx := context.Background()
	bad := []struct{ key, value, names string }{
		{"cleanup.policy", "shred", "cleanup.policy"},
		{"cleanup.policy", "compact,", "cleanup.policy"},
		{"min.cleanable.dirty.ratio", "1.5", "min.cleanable.dirty.ratio"},
		{"min.cleanable.dirty.ratio", "half", "min.cleanable.dirty.ratio"},
		{"min.compaction.lag.ms", "-1", "min.compaction.lag.ms"},
		{"max.compaction.lag.ms", "0", "max.compaction.lag.ms"},
		{"delete.retention.ms", "-5", "delete.retention.ms"},
		{"delete.retention.ms", "soon", "delete.retention.ms"},
	}
	for _, c := range bad {
		resp, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{c.key: kadm.StringPtr(c.value)}, "bad-config")
		require.ErrorIs(t, err, kerr.InvalidConfig, "%s=%s", c.key, c.value)
		require.Contains(t, resp.ErrMessage, c.names, "%s=%s", c.key, c.value)
	}
	// max below min names both.
	resp, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"min.compaction.lag.ms": kadm.StringPtr("20000"), "max.compaction.lag.ms": kadm.StringPtr("10000")}, "bad-config")
	require.ErrorIs(t, err, kerr.InvalidConfig)
	require.Contains(t, resp.ErrMessage, "max.compaction.lag.ms")
	require.Contains(t, resp.ErrMessage, "min.compaction.lag.ms")

	brokertest.CreateTopic(t, b.Addr, "table-cfg", 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")})
	rcs, err := adm.DescribeTopicConfigs(ctx, "table-cfg")
	require.NoError(t, err)
	rc, err := rcs.On("table-cfg", nil)
	require.NoError(t, err)
	got := map[string]string{}
	for _, c := range rc.Configs {
		if c.Value != nil {
			got[c.Key] = *c.Value
		}
	}
	for k, v := range map[string]string{
		"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.5", "min.compaction.lag.ms": "0",
		"max.compaction.lag.ms": "9223372036854775807", "delete.retention.ms": "86400000",
	} {
		require.Equal(t, v, got[k], k)
	}
	for _, c := range bad {
		res, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: c.key, Value: kadm.StringPtr(c.value)}}, "table-cfg")
		require.NoError(t, err)
		require.ErrorIs(t, res[0].Err, kerr.InvalidConfig, "%s=%s", c.key, c.value)
		require.Contains(t, res[0].ErrMessage, c.names)
	}
	for _, p := range []string{"compact,delete", "delete,compact", "delete"} {
		res, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "cleanup.policy", Value: kadm.StringPtr(p)}}, "table-cfg")
		require.NoError(t, err)
		require.NoError(t, res[0].Err, p)
	}
}

// TestKeylessRecordsAndPolicyChanges: a compacted topic refuses a record
// without a key (INVALID_RECORD, nothing stored); turning compaction on
// with AlterConfigs takes effect without a restart, for produce and for
// the cleaner; turning it off accepts keyless records again.
func TestKeylessRecordsAndPolicyChanges(t *testing.T) {
	b := compactCluster(t, 1)[0]
	adm := brokertest.Admin(t, b.Addr)
	ctx := context.Background()
	cfg := tableConfigs("cleanup.policy", "delete")
	delete(cfg, "min.insync.replicas")
	brokertest.CreateTopic(t, b.Addr, "policy", 1, cfg)
	cl := brokertest.Client(t, b.Addr, kgo.DefaultProduceTopic("policy"), kgo.ProducerLinger(time.Millisecond),
		kgo.RecordRetries(0), kgo.DisableIdempotentWrite())
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte("keyless, while delete")}).FirstErr())
	want := tableState{}
	for v := 0; v < 20; v++ {
		var rs []*kgo.Record
		for k := 0; k < 10; k++ {
			key, value := fmt.Sprintf("k%d", k), fmt.Sprintf("v%d", v)
			rs = append(rs, &kgo.Record{Key: []byte(key), Value: []byte(value)})
			want[key] = value
		}
		require.NoError(t, cl.ProduceSync(ctx, rs...).FirstErr())
	}
	time.Sleep(500 * time.Millisecond) // segments roll, the cleaner looks: nothing to do for delete
	require.Len(t, replicaRecords(t, b, "policy", 1)[0], 201)

	alter := func(policy string) {
		res, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "cleanup.policy", Value: kadm.StringPtr(policy)}}, "policy")
		require.NoError(t, err)
		require.NoError(t, res[0].Err)
	}
	alter("compact")
	waitFor(t, "keyless records refused", func() bool {
		err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("keyless")}).FirstErr()
		return err != nil
	})
	err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("k1"), Value: []byte("1")}, &kgo.Record{Value: []byte("keyless")}).FirstErr()
	require.ErrorIs(t, err, kerr.InvalidRecord)
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Key: []byte("k0"), Value: []byte("last")}).FirstErr())
	want["k0"] = "last"
	// The keyless record of the delete days goes too: a compacted log
	// keeps only keyed records.
	waitFor(t, "the log cleaned without a restart", func() bool { return cleaned(replicaRecords(t, b, "policy", 1), want) })

	alter("delete")
	waitFor(t, "keyless records accepted again", func() bool {
		return cl.ProduceSync(ctx, &kgo.Record{Value: []byte("keyless again")}).FirstErr() == nil
	})
}

// TestGapsThroughFetchListOffsetsDeleteRecords: Fetch at an offset the
// cleaner removed serves the next record kept; ListOffsets keeps the log
// start and end and finds by time the first kept record at or after the
// time; DeleteRecords into a gap moves the log start there, and the
// cleaner goes on.
func TestGapsThroughFetchListOffsetsDeleteRecords(t *testing.T) {
	g := newGappedTable(t, "gaps", 20, 30)
	ctx := context.Background()
	adm := brokertest.Admin(t, g.b.Addr)

	for off := int64(0); off < g.hwm; off += 7 {
		want := g.firstKeptAt(off)
		if want == nil {
			break // past the last record: nothing to read (kcat and Sarama check the end)
		}
		cl := brokertest.Client(t, g.b.Addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{g.topic: {0: kgo.NewOffset().At(off)}}),
			kgo.FetchMaxWait(50*time.Millisecond))
		fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		var first *kgo.Record
		for first == nil && fctx.Err() == nil {
			fs := cl.PollRecords(fctx, 1)
			fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch at %d: %v", off, err) })
			fs.EachRecord(func(r *kgo.Record) {
				if first == nil {
					first = r
				}
			})
		}
		cancel()
		cl.Close()
		require.NotNil(t, first, "fetch at %d", off)
		require.Equal(t, want.Offset, first.Offset, "fetch at %d", off)
		require.Equal(t, want.Value, string(first.Value), "fetch at %d", off)
	}

	starts, err := adm.ListStartOffsets(ctx, g.topic)
	require.NoError(t, err)
	s, _ := starts.Lookup(g.topic, 0)
	require.Zero(t, s.Offset)
	ends, err := adm.ListEndOffsets(ctx, g.topic)
	require.NoError(t, err)
	e, _ := ends.Lookup(g.topic, 0)
	require.Equal(t, g.hwm, e.Offset)
	for off := int64(0); off < g.hwm; off += 13 {
		ts := g.ts[off]
		want := int64(-1)
		for _, r := range g.kept {
			if !g.ts[r.Offset].Before(ts) {
				want = r.Offset
				break
			}
		}
		listed, err := adm.ListOffsetsAfterMilli(ctx, ts.UnixMilli(), g.topic)
		require.NoError(t, err)
		lo, _ := listed.Lookup(g.topic, 0)
		require.NoError(t, lo.Err)
		if want < 0 {
			require.Equal(t, g.hwm, lo.Offset, "after the last kept record: the log end")
			continue
		}
		require.Equal(t, want, lo.Offset, "the first kept record at or after the time of offset %d", off)
	}

	// DeleteRecords at an offset that holds no record any more.
	gap := int64(-1)
	for i := 1; i < len(g.kept); i++ {
		if g.kept[i].Offset > g.kept[i-1].Offset+1 {
			gap = g.kept[i-1].Offset + 1
			break
		}
	}
	require.Positive(t, gap)
	dr, err := adm.DeleteRecords(ctx, kadm.Offsets{g.topic: {0: {Topic: g.topic, Partition: 0, At: gap}}})
	require.NoError(t, err)
	d, _ := dr.Lookup(g.topic, 0)
	require.NoError(t, d.Err)
	require.Equal(t, gap, d.LowWatermark)
	starts, err = adm.ListStartOffsets(ctx, g.topic)
	require.NoError(t, err)
	s, _ = starts.Lookup(g.topic, 0)
	require.Equal(t, gap, s.Offset)
	left := replicaRecords(t, g.b, g.topic, 1)[0]
	require.Equal(t, g.firstKeptAt(gap).Offset, left[0].Offset)

	// The cleaner goes on above the new log start.
	cl := brokertest.Client(t, g.b.Addr, kgo.DefaultProduceTopic(g.topic))
	want := tableState{}
	for _, r := range left {
		want[r.Key] = r.Value
	}
	for v := 0; v < 5; v++ {
		r := &kgo.Record{Key: []byte("key-05"), Value: []byte(fmt.Sprintf("after-%d", v))}
		require.NoError(t, cl.ProduceSync(ctx, r).FirstErr())
		want["key-05"] = string(r.Value)
	}
	waitFor(t, "cleaned after DeleteRecords", func() bool { return cleaned(replicaRecords(t, g.b, g.topic, 1), want) })
}

// TestCleanerMetrics: bytes read and written, passes, the dirty ratio and
// time since the last clean per compacted replica, uncleanable
// partitions.
func TestCleanerMetrics(t *testing.T) {
	g := newGappedTable(t, "metered", 20, 30)
	m := gather(t, g.b.Gatherer())
	require.Positive(t, sum(m, "strata_cleaner_read_bytes_total", nil))
	require.Positive(t, sum(m, "strata_cleaner_written_bytes_total", nil))
	require.Less(t, sum(m, "strata_cleaner_written_bytes_total", nil), sum(m, "strata_cleaner_read_bytes_total", nil))
	require.Positive(t, sum(m, "strata_cleaner_passes_total", nil))
	require.Positive(t, sum(m, "strata_cleaner_dirty_bytes_total", nil))
	require.Positive(t, sum(m, "strata_cleaner_busy_seconds_total", nil))
	part := map[string]string{"topic": "metered", "partition": "0"}
	require.Len(t, m["strata_cleaner_dirty_ratio"], 1)
	require.Equal(t, part, m["strata_cleaner_dirty_ratio"][0].labels)
	require.Less(t, m["strata_cleaner_dirty_ratio"][0].value, 0.5, "just cleaned")
	require.Len(t, m["strata_cleaner_seconds_since_last_clean"], 1)
	require.Less(t, m["strata_cleaner_seconds_since_last_clean"][0].value, 30.0)
	require.Zero(t, sum(m, "strata_cleaner_uncleanable_partitions", nil))
}

// TestCompactDeleteAppliesBoth: cleanup.policy=compact,delete removes
// segments past retention.ms and compacts the rest.
func TestCompactDeleteAppliesBoth(t *testing.T) {
	b := compactCluster(t, 1)[0]
	cfg := tableConfigs("cleanup.policy", "compact,delete", "retention.ms", "3600000")
	delete(cfg, "min.insync.replicas")
	brokertest.CreateTopic(t, b.Addr, "both", 1, cfg)
	cl := brokertest.Client(t, b.Addr, kgo.DefaultProduceTopic("both"), kgo.ProducerLinger(time.Millisecond))
	ctx := context.Background()
	old := time.Now().Add(-2 * time.Hour)
	var rs []*kgo.Record
	for k := 0; k < 10; k++ {
		rs = append(rs, &kgo.Record{Key: []byte(fmt.Sprintf("k%d", k)), Value: []byte("old"), Timestamp: old})
	}
	require.NoError(t, cl.ProduceSync(ctx, rs...).FirstErr())
	// Their segment closes (segment.ms) and is past retention.ms at once.
	waitFor(t, "the old records expired", func() bool {
		leo, _, _, _ := broker.LocalLog(b.Broker, "both", 0)
		return leo == 10 && len(replicaRecords(t, b, "both", 1)[0]) == 0
	})
	want := tableState{}
	for v := 0; v < 5; v++ {
		rs = rs[:0]
		for k := 0; k < 5; k++ {
			key, value := fmt.Sprintf("k%d", k), fmt.Sprintf("new-%d", v)
			rs = append(rs, &kgo.Record{Key: []byte(key), Value: []byte(value)})
			want[key] = value
		}
		require.NoError(t, cl.ProduceSync(ctx, rs...).FirstErr())
	}
	// k5-k9 had only old values, which retention removed; k0-k4 keep
	// their latest.
	waitFor(t, "retention and compaction both applied", func() bool { return cleaned(replicaRecords(t, b, "both", 1), want) })
	starts, err := brokertest.Admin(t, b.Addr).ListStartOffsets(ctx, "both")
	require.NoError(t, err)
	s, _ := starts.Lookup("both", 0)
	require.GreaterOrEqual(t, s.Offset, int64(10), "the log start moved past the expired segment")
}

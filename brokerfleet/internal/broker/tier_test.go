package broker_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratamq/strata/brokerfleet/internal/broker"
	"github.com/stratamq/strata/brokerfleet/internal/brokertest"
	"github.com/stratamq/strata/brokerfleet/internal/tier"
	"github.com/stratamq/strata/pkg/metastore"
	"github.com/stratamq/strata/pkg/objstore"
	"github.com/stratamq/strata/pkg/objstore/objstoretest"
	"github.com/stratamq/strata/pkg/objstore/s3local"
	"github.com/stratamq/strata/pkg/objstore/s3store"
)

// tieredCluster is three brokers sharing a metastore and an object store,
// tiering every 100 ms.
type tieredCluster struct {
	meta    *metastore.Meta
	objects objstore.Store
	brokers []*brokertest.Broker
	tweak   func(*broker.Config) // applied to every broker's config, if set
}

func startTiered(t *testing.T, objects objstore.Store, tweak ...func(*broker.Config)) *tieredCluster {
	tc := &tieredCluster{meta: brokertest.NewMeta(t), objects: objects}
	if len(tweak) > 0 {
		tc.tweak = tweak[0]
	}
	for id := 0; id < 3; id++ {
		tc.brokers = append(tc.brokers, tc.start(t, id, t.TempDir(), "127.0.0.1:0"))
	}
	waitFor(t, "all brokers registered", func() bool { return len(metadataOnConn(t, tc.brokers[0].Addr).Brokers) == 3 })
	return tc
}

func (tc *tieredCluster) start(t *testing.T, id int, dir, listen string) *brokertest.Broker {
	cfg := brokertest.Start(t, func(c *broker.Config) {}).Cfg // defaults of a test broker
	cfg.Meta, cfg.NodeID, cfg.DataDir, cfg.Objects = tc.meta, int32(id), dir, tc.objects
	cfg.TierInterval, cfg.TierOrphanGrace = 100*time.Millisecond, time.Hour
	cfg.MaintenanceInterval, cfg.Advertise = 100*time.Millisecond, ""
	cfg.DefaultReplicationFactor = 3
	cfg.Cleaner.Backoff = 50 * time.Millisecond // compacted topics clean at once
	if tc.tweak != nil {
		tc.tweak(&cfg)
	}
	return brokertest.StartConfig(t, cfg, listen)
}

// manifestEnd sums, over partitions, the offset below which the tier holds
// everything.
func manifestEnd(t *testing.T, meta *metastore.Meta, topicName string, partitions int32) (map[int32]int64, int64) {
	t.Helper()
	ctx := context.Background()
	tp, err := meta.Topic(ctx, topicName)
	require.NoError(t, err)
	ends := map[int32]int64{}
	var sum int64
	for p := int32(0); p < partitions; p++ {
		end, _, err := tier.Recoverable(ctx, meta, tp.ID, p) // the manifest and the WAL index entries it would absorb
		require.NoError(t, err)
		ends[p] = end
		sum += ends[p]
	}
	return ends, sum
}

// TestTierSurvivesWipingEveryDisk produces with small segments, waits for
// uploads, then replaces every broker with one on an empty disk: every
// record uploaded before the wipe reads back identical from offset 0, and
// the partitions take new writes after the tier's end.
func TestTierSurvivesWipingEveryDisk(t *testing.T) {
	s3 := objstoretest.StartS3(t, "") // gofakes3 behind the real SDK
	tc := startTiered(t, s3.Store(t, s3store.Options{}))
	addr := tc.brokers[0].Addr
	brokertest.CreateTopicRF(t, addr, "tiered", 3, 3, map[string]*string{
		"segment.bytes":       kadm.StringPtr("4096"),
		"local.retention.ms":  kadm.StringPtr("0"), // uploaded segments leave the disk at once
		"min.insync.replicas": kadm.StringPtr("2"),
	})
	cl := brokertest.Client(t, addr)
	want := map[string]kgo.Record{}
	for i := 0; i < 3000; i++ {
		r := &kgo.Record{Topic: "tiered", Key: []byte(fmt.Sprint(i % 17)), Value: []byte(fmt.Sprintf("value-%05d-%s", i, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"))}
		require.NoError(t, cl.ProduceSync(context.Background(), r).FirstErr())
		want[fmt.Sprintf("%d/%d", r.Partition, r.Offset)] = *r
	}
	var ends map[int32]int64
	waitFor(t, "most of the log uploaded", func() bool {
		var sum int64
		ends, sum = manifestEnd(t, tc.meta, "tiered", 3)
		return sum >= 2400
	})

	// Local retention has moved the local log start above 0, so offset 0
	// is served from the tier even before the wipe.
	adm := brokertest.Admin(t, addr)
	starts, err := adm.ListStartOffsets(context.Background(), "tiered")
	require.NoError(t, err)
	starts.Each(func(o kadm.ListedOffset) {
		require.Zero(t, o.Offset, "partition %d: the log start includes the tier", o.Partition)
	})
	waitFor(t, "local segments deleted after upload", func() bool {
		resp, err := adm.ListOffsetsAfterMilli(context.Background(), -4, "tiered") // earliest-local (KIP-405)
		if err != nil {
			return false
		}
		moved := 0
		resp.Each(func(o kadm.ListedOffset) {
			if o.Err == nil && o.Offset > 0 {
				moved++
			}
		})
		return moved == 3
	})

	// Replace every broker with one whose disk is empty.
	for i, b := range tc.brokers {
		require.NoError(t, b.Broker.Close())
		tc.brokers[i] = nil
	}
	for id := 0; id < 3; id++ {
		tc.brokers[id] = tc.start(t, id, t.TempDir(), "127.0.0.1:0")
	}
	addr = tc.brokers[0].Addr
	got := readRange(t, addr, "tiered", ends)
	n := 0
	for p, end := range ends {
		for off := int64(0); off < end; off++ {
			k := fmt.Sprintf("%d/%d", p, off)
			w, ok := want[k]
			require.True(t, ok, "offset %s was never produced", k)
			g, ok := got[k]
			require.True(t, ok, "offset %s uploaded before the wipe is missing", k)
			require.Equal(t, string(w.Key), string(g.Key), k)
			require.Equal(t, string(w.Value), string(g.Value), k)
			n++
		}
	}
	require.GreaterOrEqual(t, n, 2400)

	// ListOffsets by time finds records that only the tier holds.
	adm = brokertest.Admin(t, addr)
	for i := 1; i < 3000; i += 97 {
		w := want[fmt.Sprintf("%d/%d", 0, 0)]
		for _, r := range want {
			if string(r.Value) == fmt.Sprintf("value-%05d-%s", i, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx") {
				w = r
			}
		}
		if w.Offset >= ends[w.Partition] {
			continue
		}
		ms := w.Timestamp.UnixMilli()
		expect := w.Offset
		for _, r := range want {
			if r.Partition == w.Partition && r.Timestamp.UnixMilli() >= ms && r.Offset < expect {
				expect = r.Offset
			}
		}
		listed, err := adm.ListOffsetsAfterMilli(context.Background(), ms, "tiered")
		require.NoError(t, err)
		lo, ok := listed.Lookup("tiered", w.Partition)
		require.True(t, ok)
		require.NoError(t, lo.Err)
		require.Equal(t, expect, lo.Offset, "first offset at or after %d in partition %d", ms, w.Partition)
	}

	// New writes go after the tier's end: no offset is assigned twice.
	cl2 := brokertest.Client(t, addr)
	for i := 0; i < 30; i++ {
		r := &kgo.Record{Topic: "tiered", Key: []byte(fmt.Sprint(i)), Value: []byte("after")}
		require.NoError(t, cl2.ProduceSync(context.Background(), r).FirstErr())
		require.GreaterOrEqual(t, r.Offset, ends[r.Partition], "partition %d reused an offset the tier holds", r.Partition)
	}
}

// readRange consumes each partition from 0 up to ends[p] (exclusive).
func readRange(t *testing.T, addr, topicName string, ends map[int32]int64) map[string]kgo.Record {
	t.Helper()
	offsets := map[int32]kgo.Offset{}
	var total int64
	for p, e := range ends {
		offsets[p] = kgo.NewOffset().At(0)
		total += e
	}
	cl := brokertest.Client(t, addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topicName: offsets}),
		kgo.FetchMaxWait(200*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := map[string]kgo.Record{}
	var n int64
	for n < total {
		fs := cl.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "read %d of %d records", n, total)
		fs.EachError(func(tp string, p int32, err error) { t.Logf("fetch %s-%d: %v", tp, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < ends[r.Partition] {
				k := fmt.Sprintf("%d/%d", r.Partition, r.Offset)
				if _, dup := out[k]; !dup {
					n++
				}
				out[k] = *r
			}
		})
	}
	return out
}

// TestTierUnderS3Faults: while S3 fails every request, produce keeps
// working and nothing un-uploaded leaves the local disk; with errors,
// 409 conflicts and 2 s latency mixed in, uploads retry and catch up; the
// log then reads back from offset 0 with no gap.
func TestTierUnderS3Faults(t *testing.T) {
	s3 := objstoretest.StartS3(t, "")
	tc := startTiered(t, s3.Store(t, s3store.Options{Retries: 2}))
	addr := tc.brokers[0].Addr
	brokertest.CreateTopicRF(t, addr, "faulty", 2, 3, map[string]*string{
		"segment.bytes":      kadm.StringPtr("4096"),
		"local.retention.ms": kadm.StringPtr("0"),
	})
	cl := brokertest.Client(t, addr)
	want := map[string]string{}
	produce := func(from, to int) {
		for i := from; i < to; i++ {
			r := &kgo.Record{Topic: "faulty", Key: []byte(fmt.Sprint(i % 7)), Value: []byte(fmt.Sprintf("faulty-%05d-%s", i, "yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy"))}
			require.NoError(t, cl.ProduceSync(context.Background(), r).FirstErr(), "produce while S3 misbehaves")
			want[fmt.Sprintf("%d/%d", r.Partition, r.Offset)] = string(r.Value)
		}
	}
	adm := brokertest.Admin(t, addr)
	localStarts := func() map[int32]int64 {
		out := map[int32]int64{}
		resp, err := adm.ListOffsetsAfterMilli(context.Background(), -4, "faulty")
		require.NoError(t, err)
		resp.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
		return out
	}

	// S3 down: produce works, nothing is uploaded, nothing local deleted.
	s3.Faults.FailFraction("", 1, s3local.Fault503)
	produce(0, 1000)
	time.Sleep(500 * time.Millisecond) // several tier rounds
	_, uploaded := manifestEnd(t, tc.meta, "faulty", 2)
	require.Zero(t, uploaded)
	for p, off := range localStarts() {
		require.Zero(t, off, "partition %d lost un-uploaded segments", p)
	}

	// Errors, conflicts and latency: uploads get through by retrying.
	s3.Faults.FailFraction("", 0.3, s3local.Fault500)
	s3.Faults.ConflictConditionalPuts(5)
	s3.Faults.Delay(2 * time.Second)
	produce(1000, 1500)
	waitFor(t, "uploads despite faults", func() bool {
		_, sum := manifestEnd(t, tc.meta, "faulty", 2)
		return sum > 0
	})
	s3.Faults.Delay(0)
	s3.Faults.FailFraction("", 0, 0)
	produce(1500, 2000)
	var ends map[int32]int64
	waitFor(t, "uploads caught up", func() bool {
		var sum int64
		ends, sum = manifestEnd(t, tc.meta, "faulty", 2)
		return sum >= 1600
	})
	waitFor(t, "uploaded segments deleted locally", func() bool {
		for _, off := range localStarts() {
			if off == 0 {
				return false
			}
		}
		return true
	})
	require.Positive(t, s3.Faults.Injected())

	// Read everything from 0: the tier, then the local log, with no gap.
	hw, err := adm.ListEndOffsets(context.Background(), "faulty")
	require.NoError(t, err)
	all := map[int32]int64{}
	hw.Each(func(o kadm.ListedOffset) { all[o.Partition] = o.Offset })
	got := readRange(t, addr, "faulty", all)
	require.Len(t, got, len(want))
	for k, v := range want {
		require.Equal(t, v, string(got[k].Value), k)
	}
	t.Logf("tier ends %v, injected %d faults, S3 requests %v", ends, s3.Faults.Injected(), s3.Faults.Counts())
}

// TestObjectDurabilitySurvivesWipingAllDisks: with strata.durability=object
// a produce is acknowledged only once its batch is in S3 and referenced by
// the manifest, so every acknowledged record survives replacing all three
// brokers' disks at once.
func TestObjectDurabilitySurvivesWipingAllDisks(t *testing.T) {
	s3 := objstoretest.StartS3(t, "")
	tc := startTiered(t, s3.Store(t, s3store.Options{}))
	addr := tc.brokers[0].Addr
	brokertest.CreateTopicRF(t, addr, "durable", 3, 3, map[string]*string{
		"strata.durability": kadm.StringPtr("object"),
		"segment.bytes":     kadm.StringPtr("65536"),
	})
	cl := brokertest.Client(t, addr, kgo.ProducerLinger(2*time.Millisecond))
	var mu sync.Mutex
	acked := map[string]string{} // partition/offset -> value
	var failed int
	var wg sync.WaitGroup
	for i := 0; i < 3000; i++ {
		wg.Add(1)
		r := &kgo.Record{Topic: "durable", Key: []byte(fmt.Sprint(i % 11)), Value: []byte(fmt.Sprintf("durable-%05d", i))}
		cl.Produce(context.Background(), r, func(r *kgo.Record, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed++
				return
			}
			acked[fmt.Sprintf("%d/%d", r.Partition, r.Offset)] = string(r.Value)
		})
		if i%300 == 299 {
			time.Sleep(20 * time.Millisecond) // spread over many flushes
		}
	}
	wg.Wait()
	require.Zero(t, failed)
	mu.Lock()
	ends := map[int32]int64{}
	for k := range acked {
		var p int32
		var off int64
		fmt.Sscanf(k, "%d/%d", &p, &off)
		ends[p] = max(ends[p], off+1)
	}
	mu.Unlock()
	_, inTier := manifestEnd(t, tc.meta, "durable", 3)
	var want int64
	for _, e := range ends {
		want += e
	}
	require.GreaterOrEqual(t, inTier, want, "everything acknowledged is in the tier at ack time")

	// Every disk at once.
	var closing sync.WaitGroup
	for _, b := range tc.brokers {
		closing.Add(1)
		go func() { defer closing.Done(); b.Broker.Close() }()
	}
	closing.Wait()
	for id := 0; id < 3; id++ {
		tc.brokers[id] = tc.start(t, id, t.TempDir(), "127.0.0.1:0")
	}
	got := readRange(t, tc.brokers[0].Addr, "durable", ends)
	for k, v := range acked {
		require.Equal(t, v, string(got[k].Value), "acknowledged record %s", k)
	}
	objs, err := s3.Store(t, s3store.Options{Prefix: "/"}).List(context.Background(), "")
	require.NoError(t, err)
	t.Logf("%d acknowledged records survived; %d objects in the bucket", len(acked), len(objs))
}

// TestObjectDurabilityFromTheWALIndexAfterAWipe: a lone broker whose
// acknowledged object-durability records are, at the moment it goes, in
// its WAL index and not yet in any manifest comes back as a new
// incarnation on an empty disk and serves every one of them.
func TestObjectDurabilityFromTheWALIndexAfterAWipe(t *testing.T) {
	s3 := objstoretest.StartS3(t, "")
	tc := &tieredCluster{meta: brokertest.NewMeta(t), objects: s3.Store(t, s3store.Options{})}
	b := tc.start(t, 0, t.TempDir(), "127.0.0.1:0")
	brokertest.CreateTopicRF(t, b.Addr, "durable", 4, 1, map[string]*string{"strata.durability": kadm.StringPtr("object")})
	cl := brokertest.Client(t, b.Addr, kgo.ProducerLinger(time.Millisecond))
	var mu sync.Mutex
	acked := map[string]string{}
	var failed []error
	var wg sync.WaitGroup
	for i := 0; i < 600; i++ {
		wg.Add(1)
		r := &kgo.Record{Topic: "durable", Key: []byte(fmt.Sprint(i % 7)), Value: []byte(fmt.Sprintf("v-%04d", i))}
		cl.Produce(context.Background(), r, func(r *kgo.Record, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed = append(failed, err)
				return
			}
			acked[fmt.Sprintf("%d/%d", r.Partition, r.Offset)] = string(r.Value)
		})
	}
	wg.Wait()
	cl.Close()
	require.Empty(t, failed)
	ends := map[int32]int64{}
	for k := range acked {
		var p int32
		var off int64
		fmt.Sscanf(k, "%d/%d", &p, &off)
		ends[p] = max(ends[p], off+1)
	}
	tp, err := tc.meta.Topic(context.Background(), "durable")
	require.NoError(t, err)
	inManifests := int64(0)
	for p := int32(0); p < 4; p++ {
		man, err := tc.meta.Manifest(context.Background(), tp.ID, p)
		require.NoError(t, err)
		inManifests += tier.End(man)
	}
	_, inTier := manifestEnd(t, tc.meta, "durable", 4)
	t.Logf("%d acknowledged, %d offsets in manifests, %d with the WAL index", len(acked), inManifests, inTier)
	require.Less(t, inManifests, int64(len(acked)), "some acknowledged records only in the WAL index")
	require.GreaterOrEqual(t, inTier, int64(len(acked)))
	m := gather(t, b.Broker.Gatherer())
	flushes := sum(m, "strata_object_flushes_total", nil)
	require.Positive(t, flushes)
	require.Equal(t, flushes, sum(m, "strata_object_flush_metastore_writes_total", nil), "one metastore write per flush")

	require.NoError(t, b.Broker.Close())
	b = tc.start(t, 0, t.TempDir(), "127.0.0.1:0") // a new incarnation, an empty disk
	got := readRange(t, b.Addr, "durable", ends)
	for k, v := range acked {
		require.Equal(t, v, string(got[k].Value), "acknowledged record %s", k)
	}
}

// Deleting a topic removes its segment objects and manifests.
func TestDeletedTopicLeavesTheTier(t *testing.T) {
	s3 := objstoretest.StartS3(t, "")
	store := s3.Store(t, s3store.Options{})
	tc := startTiered(t, store)
	addr := tc.brokers[0].Addr
	brokertest.CreateTopicRF(t, addr, "doomed", 2, 3, map[string]*string{"segment.bytes": kadm.StringPtr("2048")})
	cl := brokertest.Client(t, addr)
	for i := 0; i < 400; i++ {
		require.NoError(t, cl.ProduceSync(context.Background(), &kgo.Record{Topic: "doomed", Value: []byte(fmt.Sprintf("%0100d", i))}).FirstErr())
	}
	tp, err := tc.meta.Topic(context.Background(), "doomed")
	require.NoError(t, err)
	waitFor(t, "segments uploaded", func() bool {
		objs, err := store.List(context.Background(), tp.ID.String()+"/")
		return err == nil && len(objs) >= 4
	})
	adm := brokertest.Admin(t, addr)
	_, err = adm.DeleteTopics(context.Background(), "doomed")
	require.NoError(t, err)
	waitFor(t, "objects and manifests removed", func() bool {
		objs, err := store.List(context.Background(), tp.ID.String()+"/")
		if err != nil || len(objs) > 0 {
			return false
		}
		for p := int32(0); p < 2; p++ {
			man, err := tc.meta.Manifest(context.Background(), tp.ID, p)
			if err != nil || man.Version != 0 {
				return false
			}
		}
		return true
	})
}

// WAL objects nothing references (a dead incarnation's) are swept after
// the grace period; referenced ones stay.
func TestUnreferencedWALObjectsAreSwept(t *testing.T) {
	s3 := objstoretest.StartS3(t, "")
	store := s3.Store(t, s3store.Options{})
	tc := &tieredCluster{meta: brokertest.NewMeta(t), objects: store}
	b := tc.start(t, 0, t.TempDir(), "127.0.0.1:0")
	b.Broker.Close()
	cfg := b.Cfg
	cfg.TierOrphanGrace, cfg.Advertise = time.Second, ""
	b = brokertest.StartConfig(t, cfg, "127.0.0.1:0")
	brokertest.CreateTopicRF(t, b.Addr, "swept", 1, 1, map[string]*string{"strata.durability": kadm.StringPtr("object")})
	ctx := context.Background()
	dead := tier.WALKey(0, "dead-incarnation", 1)
	require.NoError(t, store.Put(ctx, dead, []byte("nobody references this"), objstore.PutOptions{}))
	cl := brokertest.Client(t, b.Addr)
	for i := 0; i < 20; i++ {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "swept", Value: []byte(fmt.Sprint(i))}).FirstErr())
	}
	tp, err := tc.meta.Topic(ctx, "swept")
	require.NoError(t, err)
	waitFor(t, "the dead incarnation's object swept", func() bool {
		_, err := store.Get(ctx, dead, 0, -1)
		return errors.Is(err, objstore.ErrNotFound)
	})
	_, referenced, err := tier.Recoverable(ctx, tc.meta, tp.ID, 0)
	require.NoError(t, err)
	require.NotEmpty(t, referenced)
	for obj := range referenced {
		_, err := store.Get(ctx, obj, 0, -1)
		require.NoError(t, err, "referenced WAL object %s deleted", obj)
	}
}

// DeleteRecords below the local log moves the tier's start: earliest is
// the new start, reads below it fail, and segments wholly below it leave
// the manifest and the bucket.
func TestDeleteRecordsReachesTheTier(t *testing.T) {
	s3 := objstoretest.StartS3(t, "")
	store := s3.Store(t, s3store.Options{})
	tc := startTiered(t, store)
	addr := tc.brokers[0].Addr
	brokertest.CreateTopicRF(t, addr, "purged", 1, 3, map[string]*string{
		"segment.bytes": kadm.StringPtr("2048"), "local.retention.ms": kadm.StringPtr("0"),
	})
	cl := brokertest.Client(t, addr, kgo.DefaultProduceTopic("purged"))
	ctx := context.Background()
	for i := 0; i < 500; i++ {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("%080d", i))}).FirstErr())
	}
	adm := brokertest.Admin(t, addr)
	waitFor(t, "most of the log only in S3", func() bool {
		resp, err := adm.ListOffsetsAfterMilli(ctx, -4, "purged")
		if err != nil {
			return false
		}
		o, _ := resp.Lookup("purged", 0)
		return o.Offset > 300
	})
	tp, err := tc.meta.Topic(ctx, "purged")
	require.NoError(t, err)
	before, err := tc.meta.Manifest(ctx, tp.ID, 0)
	require.NoError(t, err)

	res, err := adm.DeleteRecords(ctx, kadm.Offsets{"purged": {0: {At: 200}}})
	require.NoError(t, err)
	dr, _ := res.Lookup("purged", 0)
	require.NoError(t, dr.Err)
	require.Equal(t, int64(200), dr.LowWatermark)
	starts, err := adm.ListStartOffsets(ctx, "purged")
	require.NoError(t, err)
	s, _ := starts.Lookup("purged", 0)
	require.Equal(t, int64(200), s.Offset)

	// A consumer asking for offset 0 is out of range and resets to the new
	// start, served from S3.
	cons := brokertest.Client(t, addr, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"purged": {0: kgo.NewOffset().At(0)}}),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var first *kgo.Record
	for first == nil {
		fs := cons.PollFetches(rctx)
		require.NoError(t, rctx.Err())
		if recs := fs.Records(); len(recs) > 0 {
			first = recs[0]
		}
	}
	require.Equal(t, int64(200), first.Offset)
	require.Equal(t, fmt.Sprintf("%080d", 200), string(first.Value))

	waitFor(t, "segments below the start expired", func() bool {
		man, err := tc.meta.Manifest(ctx, tp.ID, 0)
		if err != nil || len(man.Segments) >= len(before.Segments) {
			return false
		}
		for _, seg := range man.Segments {
			if seg.NextOffset <= 200 {
				return false
			}
		}
		objs, err := store.List(ctx, tier.Prefix(tp.ID, 0))
		return err == nil && len(objs) == len(man.Segments)
	})
}

// TestStaleLeaderKeepsItsLog: a broker that still believes it leads while
// the manifest was written under a later leader epoch (its lease lapsed and
// another broker took over, uploading past this broker's log end) is
// fenced. It must not restart its log at the tier's end, as a rightful
// leader elected on a wiped disk would: the metadata update that follows
// makes it a follower, and truncation lines its log up with the leader's.
func TestStaleLeaderKeepsItsLog(t *testing.T) {
	s3 := objstoretest.StartS3(t, "")
	tc := startTiered(t, s3.Store(t, s3store.Options{}))
	addr := tc.brokers[0].Addr
	brokertest.CreateTopicRF(t, addr, "stale", 1, 1, nil)
	cl := brokertest.Client(t, addr)
	for i := 0; i < 50; i++ {
		require.NoError(t, cl.ProduceSync(context.Background(), &kgo.Record{Topic: "stale", Value: []byte("v")}).FirstErr())
	}
	leader := metadataOnConn(t, addr).Topics[0].Partitions[0].Leader
	dir := tc.brokers[leader].Cfg.DataDir
	require.NoError(t, tc.brokers[leader].Broker.Close())

	// A manifest from a later epoch that ends far above the local log.
	ctx := context.Background()
	tp, err := tc.meta.Topic(ctx, "stale")
	require.NoError(t, err)
	man, err := tc.meta.Manifest(ctx, tp.ID, 0)
	require.NoError(t, err)
	man.LeaderEpoch = 1 << 20
	man.Segments = append(man.Segments, metastore.SegmentRef{BaseOffset: 0, NextOffset: 5000, LeaderEpoch: 1 << 20, Object: "elsewhere"})
	_, err = tc.meta.PutManifest(ctx, tp.ID, 0, man)
	require.NoError(t, err)

	tc.brokers[leader] = tc.start(t, int(leader), dir, "127.0.0.1:0")
	cl2 := brokertest.Client(t, tc.brokers[leader].Addr)
	r := &kgo.Record{Topic: "stale", Value: []byte("after")}
	require.NoError(t, cl2.ProduceSync(context.Background(), r).FirstErr())
	require.Equal(t, int64(50), r.Offset, "the fenced leader restarted its log at the newer manifest's end")
}

// TestFirstWriteWaitsForTheManifest: a new leader reads its partition's
// manifest before the first write. A write that arrives first waits for
// that (the tier loop is kicked) instead of being refused with NOT_LEADER,
// which cost franz-go clients up to 5 s on every new topic (they refresh
// metadata at most every 5 s). The tier loop runs hourly here, so only
// the kick can load the manifest.
func TestFirstWriteWaitsForTheManifest(t *testing.T) {
	s3 := objstoretest.StartS3(t, "")
	cfg := brokertest.Start(t, func(c *broker.Config) {}).Cfg
	cfg.Meta, cfg.DataDir, cfg.Objects = brokertest.NewMeta(t), t.TempDir(), s3.Store(t, s3store.Options{})
	cfg.TierInterval, cfg.Advertise = time.Hour, ""
	b := brokertest.StartConfig(t, cfg, "127.0.0.1:0")
	brokertest.CreateTopicRF(t, b.Addr, "fresh", 4, 1, nil)
	for p := int32(0); p < 4; p++ {
		resp := produceOnConn(t, b.Addr, "fresh", p, batch(-1, -1, -1, 1, 10))
		require.Equal(t, int16(0), resp.ErrorCode, "partition %d: %v", p, kerr.ErrorForCode(resp.ErrorCode))
	}
}

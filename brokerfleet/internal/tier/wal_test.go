package tier

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/catalog"
	"github.com/stratamq/strata/brokerfleet/internal/partition"
	"github.com/stratamq/strata/brokerfleet/internal/topic"
	"github.com/stratamq/strata/pkg/clock"
	"github.com/stratamq/strata/pkg/metastore"
	"github.com/stratamq/strata/pkg/metastore/embedded"
	"github.com/stratamq/strata/pkg/objstore"
	"github.com/stratamq/strata/pkg/segment"
)

// walEnv is the tier Manager of one broker that leads the partitions of
// "object" durability topics, over a shared metastore and object store
// (several walEnvs are several brokers).
type walEnv struct {
	ctx     context.Context
	node    int32
	tg      *Manager
	cat     *catalog.Catalog
	meta    *metastore.Meta
	objects objstore.Store
	clock   *clock.Fake
	puts    *atomic.Int64 // metastore Puts through this broker's store
	lease   *metastore.Lease
}

// walStores are the stores the brokers of a test share; metastore puts
// are counted per broker.
type walStores struct {
	meta    metastore.Store
	objects objstore.Store
	clock   *clock.Fake
}

func newWALStores(t *testing.T) *walStores {
	s, err := embedded.Open(filepath.Join(t.TempDir(), "meta.db"), embedded.WithoutSync())
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	return &walStores{meta: s, objects: objstore.NewMemory(), clock: clock.NewFake(time.Now())}
}

func (ws *walStores) broker(t *testing.T, node int32, incarnation string, objects objstore.Store) *walEnv {
	e := &walEnv{ctx: context.Background(), node: node, clock: ws.clock, puts: &atomic.Int64{}}
	if objects == nil {
		objects = ws.objects
	}
	e.objects = objects
	e.meta = metastore.New(metastore.Instrument(ws.meta, func(op string, _ time.Duration, _ error) {
		if op == metastore.OpNamePut {
			e.puts.Add(1)
		}
	}))
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	lease, err := e.meta.BrokerLease(metastore.Broker{ID: node, Endpoint: "h:1", Incarnation: incarnation}, metastore.LeaseOptions{Duration: time.Hour, Margin: time.Second, Clock: ws.clock})
	require.NoError(t, err)
	e.lease = lease
	defaults, err := topic.NewDefaults(nil)
	require.NoError(t, err)
	e.cat, err = catalog.New(catalog.Options{Meta: e.meta, NodeID: node, Incarnation: incarnation, Lease: lease, DataDir: "/data", FS: segment.NewMemFS(),
		Defaults: defaults, Clock: ws.clock, Logger: quiet})
	require.NoError(t, err)
	t.Cleanup(func() { e.cat.Close() })
	e.cat.Register(e.ctx)
	require.True(t, e.cat.LeaseValid())
	e.tg = NewManager(ManagerOptions{Catalog: e.cat, Meta: e.meta, Objects: objects, NodeID: node, Incarnation: incarnation, Defaults: defaults,
		Interval: time.Second, OrphanGrace: time.Hour, FlushInterval: time.Minute, Clock: ws.clock, Logger: quiet})
	e.tg.ctx = e.ctx
	return e
}

// createObjectTopic stores an "object" durability topic whose partitions
// leader leads, alone in their ISR, under leader epoch 1.
func (e *walEnv) createObjectTopic(t *testing.T, name string, partitions int32, leader int32) metastore.Topic {
	var states []metastore.PartitionState
	for p := int32(0); p < partitions; p++ {
		states = append(states, metastore.PartitionState{Partition: p, Replicas: []int32{leader}, Leader: leader, LeaderEpoch: 1, ISR: []int32{leader}})
	}
	tp, err := e.meta.CreateTopic(e.ctx, metastore.Topic{Name: name, ID: metastore.NewTopicID(), Partitions: partitions, ReplicationFactor: 1,
		Configs: map[string]string{topic.Durability: topic.DurabilityObject}}, states)
	require.NoError(t, err)
	return tp
}

// lead reconciles the catalog and loads the manifests of what it leads.
func (e *walEnv) lead(t *testing.T) {
	require.NoError(t, e.cat.Reconcile(e.ctx))
	e.tg.round()
}

func (e *walEnv) part(t *testing.T, name string, idx int32) *partition.Partition {
	p, err := e.cat.Snapshot().Leader(name, idx)
	require.NoError(t, err)
	return p
}

// produce appends a batch of n records to a led partition and returns the
// offset after it.
func (e *walEnv) produce(t *testing.T, name string, idx int32, n int) int64 {
	p := e.part(t, name, idx)
	b := walBatch(n)
	h, err := segment.ParseHeader(b)
	require.NoError(t, err)
	res, err := p.Append(b, h)
	require.NoError(t, err)
	return res.LastOffset + 1
}

// walBatch returns a RecordBatch v2 of n small records, stamped now.
func walBatch(n int) []byte { return walBatchAt(n, time.Now().UnixMilli()) }

// walBatchAt returns a RecordBatch v2 of n small records stamped ts.
func walBatchAt(n int, ts int64) []byte {
	var records []byte
	for i := 0; i < n; i++ {
		r := kmsg.Record{OffsetDelta: int32(i), Value: []byte("value")}
		records = r.AppendTo(records)
	}
	rb := kmsg.RecordBatch{Magic: 2, LastOffsetDelta: int32(n - 1), FirstTimestamp: ts, MaxTimestamp: ts,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: int32(n), Records: records}
	raw := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

// gatedStore holds WAL PUTs while closed, and counts them.
type gatedStore struct {
	objstore.Store
	walPuts atomic.Int64
	mu      sync.Mutex
	gate    chan struct{} // nil: open
	entered chan struct{}
}

func (g *gatedStore) Put(ctx context.Context, key string, data []byte, o objstore.PutOptions) error {
	if strings.HasPrefix(key, walPrefix) {
		g.mu.Lock()
		gate := g.gate
		g.mu.Unlock()
		if gate != nil {
			g.entered <- struct{}{}
			<-gate
		}
		defer g.walPuts.Add(1)
	}
	return g.Store.Put(ctx, key, data, o)
}

// A flush starts at once when none is in flight, so a lone producer waits
// for one flush and never for the interval; what arrives during a flush is
// gathered into the next, which waits for the interval since the previous
// start (the PUT-rate cap under load).
func TestWALGroupCommit(t *testing.T) {
	ws := newWALStores(t)
	gs := &gatedStore{Store: ws.objects, entered: make(chan struct{})}
	e := ws.broker(t, 1, "one", gs)
	e.createObjectTopic(t, "durable", 2, 1)
	e.lead(t)
	ctx, cancel := context.WithCancel(e.ctx)
	e.tg.ctx = ctx
	e.tg.wg.Add(1)
	go e.tg.runWAL()
	t.Cleanup(func() { cancel(); e.tg.Wait() })
	p0, p1 := e.part(t, "durable", 0), e.part(t, "durable", 1)
	durable := func(p *partition.Partition, end int64) func() bool {
		return func() bool { return p.HighWatermark() >= end }
	}

	// A lone producer: each flush at once, the fake clock never moves.
	for i := 1; i <= 3; i++ {
		end := e.produce(t, "durable", 0, 1)
		e.tg.KickWAL()
		require.Eventually(t, durable(p0, end), 10*time.Second, time.Millisecond, "flush %d without waiting for the interval", i)
		require.Equal(t, int64(i), gs.walPuts.Load())
	}

	// A flush in flight; two batches arrive meanwhile.
	gs.mu.Lock()
	gs.gate = make(chan struct{})
	gate := gs.gate
	gs.mu.Unlock()
	end0 := e.produce(t, "durable", 0, 1)
	e.tg.KickWAL()
	<-gs.entered
	gs.mu.Lock()
	gs.gate = nil
	gs.mu.Unlock()
	end1 := e.produce(t, "durable", 1, 2)
	e.tg.KickWAL()
	end0b := e.produce(t, "durable", 0, 1)
	e.tg.KickWAL()
	close(gate)
	require.Eventually(t, durable(p0, end0), 10*time.Second, time.Millisecond)
	// The gathered flush waits on the clock (the ticker and its sleep).
	require.True(t, ws.clock.WaitForPending(e.ctx, 2))
	require.Equal(t, int64(4), gs.walPuts.Load())
	require.Less(t, p1.HighWatermark(), end1, "gathered, not flushed before the interval")
	ws.clock.Advance(time.Minute)
	require.Eventually(t, durable(p1, end1), 10*time.Second, time.Millisecond)
	require.Eventually(t, durable(p0, end0b), 10*time.Second, time.Millisecond)
	require.Equal(t, int64(5), gs.walPuts.Load(), "both gathered batches in one flush")
}

// moveLeader elects node as the leader of a partition under the next
// leader epoch, alone in its replica set (as after a failover).
func moveLeader(t *testing.T, meta *metastore.Meta, id metastore.TopicID, idx int32, node int32) int32 {
	states, err := meta.Partitions(context.Background(), id)
	require.NoError(t, err)
	st := states[idx]
	st.Leader, st.LeaderEpoch, st.Replicas, st.ISR = node, st.LeaderEpoch+1, []int32{node}, []int32{node}
	_, err = meta.UpdatePartition(context.Background(), st)
	require.NoError(t, err)
	return st.LeaderEpoch
}

// recoverable is where each partition's log ends as a new leader would
// find it.
func recoverable(t *testing.T, meta *metastore.Meta, id metastore.TopicID, partitions int32) []int64 {
	var out []int64
	for p := int32(0); p < partitions; p++ {
		end, _, err := Recoverable(context.Background(), meta, id, p)
		require.NoError(t, err)
		out = append(out, end)
	}
	return out
}

// A flush of many partitions writes one metastore item, the WAL index,
// and no manifest; what it acknowledged is recoverable.
func TestWALFlushIsOneMetastoreWrite(t *testing.T) {
	ws := newWALStores(t)
	e := ws.broker(t, 1, "one", nil)
	const n = 64
	tp := e.createObjectTopic(t, "durable", n, 1)
	e.lead(t)
	for round := 0; round < 3; round++ {
		want := make([]int64, n)
		for p := int32(0); p < n; p++ {
			want[p] = e.produce(t, "durable", p, 1+int(p)%3)
		}
		before := e.puts.Load()
		require.NoError(t, e.tg.flushWAL())
		require.Equal(t, int64(1), e.puts.Load()-before, "metastore writes of a flush of %d partitions", n)
		for p := int32(0); p < n; p++ {
			require.Equal(t, want[p], e.part(t, "durable", p).HighWatermark(), "partition %d acknowledged", p)
		}
		require.Equal(t, want, recoverable(t, e.meta, tp.ID, n))
	}
	man, err := e.meta.Manifest(e.ctx, tp.ID, 0)
	require.NoError(t, err)
	require.Empty(t, WALObjects(man), "the flushes wrote no manifest")
	st := e.tg.WALStats()
	require.Equal(t, WALStats{Flushes: 3, MetaWrites: 3}, WALStats{Flushes: st.Flushes, MetaWrites: st.MetaWrites})
	require.Positive(t, st.IndexBytes)
}

// After a failover the new leader, with an empty disk, finds every
// acknowledged record in the WAL index of the old one (and in a WAL share
// an earlier build referenced from the manifest), absorbs them into the
// manifest under its epoch, serves them from S3 and appends after them.
func TestWALIndexRecoveryAfterFailover(t *testing.T) {
	ws := newWALStores(t)
	a := ws.broker(t, 1, "a", nil)
	tp := a.createObjectTopic(t, "durable", 2, 1)
	// An earlier build's flush: a WAL share referenced by the manifest.
	old := WALKey(1, "earlier-build", 1)
	batch := walBatch(2)
	_, errs, err := a.tg.t.PutWAL(a.ctx, old, []WALPart{{ID: tp.ID, Partition: 0, LeaderEpoch: 1, Batches: batch, Base: 0, Next: 2, MaxTS: time.Now().UnixMilli()}})
	require.NoError(t, err)
	require.NoError(t, errs[0])
	a.lead(t)
	require.Equal(t, int64(2), a.part(t, "durable", 0).LogEndOffset(), "the log restarted at the tier's end")
	var acked []int64
	for i := 0; i < 4; i++ {
		a.produce(t, "durable", 0, 3)
		a.produce(t, "durable", 1, 1)
		require.NoError(t, a.tg.flushWAL())
	}
	for p := int32(0); p < 2; p++ {
		acked = append(acked, a.part(t, "durable", p).HighWatermark())
	}
	require.Equal(t, []int64{14, 4}, acked)
	man, err := a.meta.Manifest(a.ctx, tp.ID, 0)
	require.NoError(t, err)
	require.Equal(t, int64(2), End(man), "only the earlier build's share is in the manifest")

	// Broker 1 dies; broker 2, with an empty disk, leads both partitions.
	b := ws.broker(t, 2, "b", nil)
	for p := int32(0); p < 2; p++ {
		moveLeader(t, b.meta, tp.ID, p, 2)
	}
	b.lead(t)
	for p := int32(0); p < 2; p++ {
		part := b.part(t, "durable", p)
		require.Equal(t, acked[p], part.LogEndOffset(), "partition %d: the new leader's log starts at the tier's end", p)
		require.Equal(t, acked[p], part.HighWatermark())
		man, err := b.meta.Manifest(b.ctx, tp.ID, p)
		require.NoError(t, err)
		require.Equal(t, acked[p], End(man), "partition %d: absorbed into the manifest", p)
		require.Equal(t, int32(2), man.LeaderEpoch)
		// Every acknowledged offset reads back from S3.
		var got int64
		for off := int64(0); off < acked[p]; {
			data, err := b.tg.Read(b.ctx, tp.ID, p, off, 1<<20)
			require.NoError(t, err)
			require.NotEmpty(t, data)
			require.NoError(t, segment.Split(data, func(h segment.Header, _ []byte) error {
				off = h.LastOffset() + 1
				return nil
			}))
			got = off
		}
		require.Equal(t, acked[p], got)
	}
	// It appends after them, and its flushes continue the chain.
	want := b.produce(t, "durable", 0, 2)
	require.NoError(t, b.tg.flushWAL())
	require.Equal(t, want, b.part(t, "durable", 0).HighWatermark())
	require.Equal(t, []int64{want, acked[1]}, recoverable(t, b.meta, tp.ID, 2))
}

// A deposed leader that has not noticed (a zombie) may still flush and
// write its own WAL index, but the new leader fenced its epoch in the
// manifest when it took over: nothing the zombie flushes afterwards is
// ever absorbed, by the new leader or by any later one.
func TestWALZombieFlushIsNotCounted(t *testing.T) {
	ws := newWALStores(t)
	a := ws.broker(t, 1, "a", nil)
	tp := a.createObjectTopic(t, "durable", 1, 1)
	a.lead(t)
	a.produce(t, "durable", 0, 5)
	require.NoError(t, a.tg.flushWAL())
	acked := a.part(t, "durable", 0).HighWatermark()
	require.Equal(t, int64(5), acked)

	b := ws.broker(t, 2, "b", nil)
	moveLeader(t, b.meta, tp.ID, 0, 2)
	b.lead(t)
	require.Equal(t, acked, b.part(t, "durable", 0).LogEndOffset())

	// The zombie takes more writes and flushes them into its index.
	a.produce(t, "durable", 0, 7)
	before := a.tg.WALStats().Flushes
	require.NoError(t, a.tg.flushWAL())
	require.Equal(t, before+1, a.tg.WALStats().Flushes, "the zombie's flush was written")
	idx, err := a.meta.WALIndex(a.ctx, 1)
	require.NoError(t, err)
	require.NotEmpty(t, idx.Entries)
	require.Equal(t, []int64{acked}, recoverable(t, a.meta, tp.ID, 1), "but not counted")

	// The new leader's own writes continue from the fenced end.
	next := b.produce(t, "durable", 0, 1)
	require.NoError(t, b.tg.flushWAL())
	require.Equal(t, []int64{next}, recoverable(t, b.meta, tp.ID, 1))

	// A third leader, after the new one dies, takes the new leader's
	// share and not the zombie's (which starts at the same offset).
	c := ws.broker(t, 3, "c", nil)
	moveLeader(t, c.meta, tp.ID, 0, 3)
	c.lead(t)
	require.Equal(t, next, c.part(t, "durable", 0).LogEndOffset())
	data, err := c.tg.Read(c.ctx, tp.ID, 0, acked, 1<<20)
	require.NoError(t, err)
	h, err := segment.ParseHeader(data)
	require.NoError(t, err)
	require.Equal(t, int32(1), h.NumRecords, "the new leader's batch, not the zombie's seven records")
}

func (e *walEnv) objectExists(t *testing.T, key string) bool {
	_, err := e.objects.Get(e.ctx, key, 0, -1)
	if err == nil {
		return true
	}
	require.ErrorIs(t, err, objstore.ErrNotFound)
	return false
}

// Entries leave the WAL index once their manifest has moved past them: a
// segment upload covers a led partition's (and its WAL objects are
// deleted), a new leader's takeover supersedes a deposed one's, which
// empties its index even with nothing more to flush.
func TestWALIndexGarbageCollected(t *testing.T) {
	ws := newWALStores(t)
	a := ws.broker(t, 1, "a", nil)
	tp := a.createObjectTopic(t, "durable", 2, 1)
	a.lead(t)
	var objects []string
	for i := 0; i < 3; i++ {
		a.produce(t, "durable", 0, 2)
		a.produce(t, "durable", 1, 1)
		require.NoError(t, a.tg.flushWAL())
		objects = append(objects, WALKey(1, "a", int64(i+1)))
	}
	idx, err := a.meta.WALIndex(a.ctx, 1)
	require.NoError(t, err)
	require.Len(t, idx.Entries, 6)

	// Partition 0's segment closes and is uploaded: its entries are
	// covered; the next flush (of partition 1 alone) leaves them out.
	require.NoError(t, a.part(t, "durable", 0).Roll())
	a.tg.round()
	man, err := a.meta.Manifest(a.ctx, tp.ID, 0)
	require.NoError(t, err)
	require.Equal(t, int64(6), SegmentEnd(man), "uploaded")
	a.produce(t, "durable", 1, 1)
	require.NoError(t, a.tg.flushWAL())
	idx, err = a.meta.WALIndex(a.ctx, 1)
	require.NoError(t, err)
	require.Len(t, idx.Entries, 4, "partition 1's four shares")
	for _, e := range idx.Entries {
		require.Equal(t, int32(1), e.Partition)
	}
	for _, o := range objects {
		require.True(t, a.objectExists(t, o), "%s: partition 1 still needs it", o)
	}
	require.NoError(t, a.part(t, "durable", 1).Roll())
	a.tg.round()
	for _, o := range objects {
		require.False(t, a.objectExists(t, o), "%s: covered by segment objects, deleted", o)
	}
	require.Equal(t, []int64{6, 4}, recoverable(t, a.meta, tp.ID, 2))

	// More shares; then broker 2 takes both partitions over.
	a.produce(t, "durable", 0, 1)
	a.produce(t, "durable", 1, 1)
	require.NoError(t, a.tg.flushWAL())
	b := ws.broker(t, 2, "b", nil)
	for p := int32(0); p < 2; p++ {
		moveLeader(t, b.meta, tp.ID, p, 2)
	}
	b.lead(t)
	require.Equal(t, []int64{7, 5}, recoverable(t, b.meta, tp.ID, 2))
	// Broker 1 learns it leads nothing; its round prunes its index, and
	// its WAL loop rewrites it with nothing to flush.
	require.NoError(t, a.cat.Reconcile(a.ctx))
	ws.clock.Advance(walPruneInterval)
	a.tg.round()
	require.True(t, a.tg.walCompact.Load())
	require.NoError(t, a.tg.flushWAL())
	idx, err = a.meta.WALIndex(a.ctx, 1)
	require.NoError(t, err)
	require.Empty(t, idx.Entries, "superseded by the new leader's manifests")
	require.Equal(t, []int64{7, 5}, recoverable(t, b.meta, tp.ID, 2))
}

// The WAL index stays under its size budget however many partitions a
// broker flushes: past it, a flush first writes the manifests of the
// partitions with the most entries (absorbing them), and everything
// acknowledged stays recoverable.
func TestWALIndexStaysUnderItsBudget(t *testing.T) {
	ws := newWALStores(t)
	a := ws.broker(t, 1, "a", nil)
	const n = 40
	tp := a.createObjectTopic(t, "durable", n, 1)
	a.lead(t)
	a.tg.walBudget = 3 << 10 // about three flushes of every partition
	want := make([]int64, n)
	for i := 0; i < 12; i++ {
		for p := int32(0); p < n; p++ {
			want[p] = a.produce(t, "durable", p, 1)
		}
		require.NoError(t, a.tg.flushWAL())
		idx, err := a.meta.WALIndex(a.ctx, 1)
		require.NoError(t, err)
		require.LessOrEqual(t, len(metastore.EncodeWALIndex(idx)), a.tg.walBudget, "flush %d", i)
		require.Equal(t, want, recoverable(t, a.meta, tp.ID, n), "flush %d", i)
	}
	st := a.tg.WALStats()
	t.Logf("%d flushes of %d partitions: %d metastore writes", st.Flushes, n, st.MetaWrites)
	require.Greater(t, st.MetaWrites, st.Flushes, "absorptions were forced")
}

// A WAL index item that does not decode is a clear error: a new leader
// does not take writes (it cannot know what was acknowledged), nothing
// panics, and nothing is lost once the item is readable again.
func TestWALCorruptIndexIsAnError(t *testing.T) {
	ws := newWALStores(t)
	a := ws.broker(t, 1, "a", nil)
	tp := a.createObjectTopic(t, "durable", 1, 1)
	a.lead(t)
	a.produce(t, "durable", 0, 3)
	require.NoError(t, a.tg.flushWAL())
	good, err := ws.meta.Get(a.ctx, metastore.Key{PK: "walindex", SK: "0000000001"})
	require.NoError(t, err)
	_, err = ws.meta.Put(a.ctx, metastore.Item{Key: good.Key, Value: good.Value[:len(good.Value)-3]}, metastore.Always)
	require.NoError(t, err)
	_, _, err = Recoverable(a.ctx, a.meta, tp.ID, 0)
	require.ErrorIs(t, err, metastore.ErrCorruptWALIndex)

	b := ws.broker(t, 2, "b", nil)
	moveLeader(t, b.meta, tp.ID, 0, 2)
	b.lead(t)
	_, _, ok := b.tg.current(tierKey{tp.ID, 0}, b.part(t, "durable", 0))
	require.False(t, ok, "not writable without its manifest")

	_, err = ws.meta.Put(a.ctx, metastore.Item{Key: good.Key, Value: good.Value}, metastore.Always)
	require.NoError(t, err)
	b.tg.round()
	require.Equal(t, int64(3), b.part(t, "durable", 0).LogEndOffset())
}

func TestAbsorbChain(t *testing.T) {
	id := metastore.NewTopicID()
	e := func(epoch int32, base, next int64, obj string) metastore.WALEntry {
		return metastore.WALEntry{Topic: id, LeaderEpoch: epoch, BaseOffset: base, NextOffset: next, Object: obj}
	}
	man := func(epoch int32, end int64) metastore.Manifest {
		m := metastore.Manifest{LeaderEpoch: epoch}
		if end > 0 {
			m.Segments = []metastore.SegmentRef{{BaseOffset: 0, NextOffset: end, Object: "seg"}}
		}
		return m
	}
	objs := func(refs []metastore.SegmentRef) []string {
		var out []string
		for _, r := range refs {
			out = append(out, r.Object)
		}
		return out
	}
	for _, tc := range []struct {
		name    string
		man     metastore.Manifest
		epoch   int32
		entries []metastore.WALEntry
		want    []string
	}{
		{"empty", man(1, 0), 2, nil, nil},
		{"a chain in any order", man(1, 10), 2, []metastore.WALEntry{e(1, 15, 20, "c"), e(1, 10, 15, "b"), e(1, 5, 10, "a")}, []string{"b", "c"}},
		{"a gap stops it", man(1, 10), 2, []metastore.WALEntry{e(1, 10, 15, "b"), e(1, 16, 20, "c")}, []string{"b"}},
		{"straddling the end (a segment closed mid-share)", man(1, 12), 2, []metastore.WALEntry{e(1, 10, 15, "b")}, []string{"b"}},
		{"a deposed epoch is never taken", man(2, 10), 3, []metastore.WALEntry{e(1, 10, 15, "zombie")}, nil},
		{"the higher epoch wins at the same offset", man(2, 10), 3, []metastore.WALEntry{e(2, 10, 30, "old"), e(3, 10, 12, "new"), e(2, 12, 40, "old2")}, []string{"new"}},
		{"epochs never go back along the chain", man(1, 10), 3, []metastore.WALEntry{e(2, 10, 12, "b2"), e(1, 12, 14, "a1"), e(2, 12, 13, "b3")}, []string{"b2", "b3"}},
		{"not above the absorber's epoch", man(1, 10), 1, []metastore.WALEntry{e(2, 10, 12, "later")}, nil},
		{"the longest at the same epoch", man(1, 10), 2, []metastore.WALEntry{e(1, 10, 12, "short"), e(1, 10, 14, "long")}, []string{"long"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, objs(absorbChain(tc.man, tc.epoch, tc.entries)))
		})
	}
}

// The same node, restarted with an empty disk (kill -9, a new
// incarnation), leads again under a new epoch: it absorbs its previous
// incarnation's shares from its own index item before taking writes, and
// its first flush takes the item over without them.
func TestWALSameNodeRestartsWithAnEmptyDisk(t *testing.T) {
	ws := newWALStores(t)
	a := ws.broker(t, 1, "before", nil)
	tp := a.createObjectTopic(t, "durable", 1, 1)
	a.lead(t)
	for i := 0; i < 3; i++ {
		a.produce(t, "durable", 0, 2)
		require.NoError(t, a.tg.flushWAL())
	}
	acked := a.part(t, "durable", 0).HighWatermark()
	require.NoError(t, a.lease.Release(a.ctx)) // its registration ends; its disk is gone

	again := ws.broker(t, 1, "after", nil)
	moveLeader(t, again.meta, tp.ID, 0, 1)
	again.lead(t)
	require.Equal(t, acked, again.part(t, "durable", 0).LogEndOffset())
	next := again.produce(t, "durable", 0, 1)
	require.NoError(t, again.tg.flushWAL())
	idx, err := again.meta.WALIndex(again.ctx, 1)
	require.NoError(t, err)
	require.Equal(t, "after", idx.Owner)
	require.Len(t, idx.Entries, 1, "the earlier incarnation's shares are in the manifest now")
	require.Equal(t, []int64{next}, recoverable(t, again.meta, tp.ID, 1))
}

// With NoWALIndex (an upgrade in progress) a flush references its shares
// from the manifests, as earlier builds did, so a leader of such a build
// finds them; a leader with the index continues from them.
func TestWALFlushWithoutTheIndex(t *testing.T) {
	ws := newWALStores(t)
	a := ws.broker(t, 1, "a", nil)
	a.tg.opts.NoWALIndex = true
	const n = 4
	tp := a.createObjectTopic(t, "durable", n, 1)
	a.lead(t)
	want := make([]int64, n)
	for p := int32(0); p < n; p++ {
		want[p] = a.produce(t, "durable", p, 2)
	}
	before := a.puts.Load()
	require.NoError(t, a.tg.flushWAL())
	require.Equal(t, int64(n), a.puts.Load()-before, "one manifest write per partition")
	for p := int32(0); p < n; p++ {
		man, err := a.meta.Manifest(a.ctx, tp.ID, p)
		require.NoError(t, err)
		require.Equal(t, want[p], End(man), "partition %d: in the manifest itself", p)
	}
	idx, err := a.meta.WALIndex(a.ctx, 1)
	require.NoError(t, err)
	require.Zero(t, idx.Version, "no index written")

	b := ws.broker(t, 2, "b", nil)
	for p := int32(0); p < n; p++ {
		moveLeader(t, b.meta, tp.ID, p, 2)
	}
	b.lead(t)
	want[0] = b.produce(t, "durable", 0, 1)
	require.NoError(t, b.tg.flushWAL())
	require.Equal(t, want, recoverable(t, b.meta, tp.ID, n))
}

// Shares only the WAL index holds are not expired by the tier round (the
// local log still has them; the upload that covers them goes by
// retention): expiring them from the view would write the manifest at
// every round and keep them pending.
func TestWALPendingSharesAreNotExpired(t *testing.T) {
	ws := newWALStores(t)
	a := ws.broker(t, 1, "a", nil)
	tp := a.createObjectTopic(t, "durable", 1, 1)
	a.lead(t)
	p := a.part(t, "durable", 0)
	b := walBatchAt(3, 1) // far past retention.ms
	h, err := segment.ParseHeader(b)
	require.NoError(t, err)
	_, err = p.Append(b, h)
	require.NoError(t, err)
	require.NoError(t, a.tg.flushWAL())
	before := a.puts.Load()
	for i := 0; i < 3; i++ {
		a.tg.round()
	}
	require.Equal(t, before, a.puts.Load(), "no manifest writes")
	require.Equal(t, []int64{3}, recoverable(t, a.meta, tp.ID, 1))
}

// Whether a flush gathered something is told by appends counted while it
// wrote, not by a pending kick: the batch that kicked may already be in
// the flush (one a tick started), and pacing the next flush for it would
// make a lone producer wait the interval. One batch arriving during the
// flush is such a lone producer's too; two are load.
func TestWALGatheredCountsArrivalsNotKicks(t *testing.T) {
	ws := newWALStores(t)
	gs := &gatedStore{Store: ws.objects, entered: make(chan struct{})}
	e := ws.broker(t, 1, "one", gs)
	e.createObjectTopic(t, "durable", 1, 1)
	e.lead(t)
	e.produce(t, "durable", 0, 1)
	e.tg.KickWAL() // not taken: as if a tick's flush started first
	gathered, err := e.tg.flush()
	require.NoError(t, err)
	require.False(t, gathered, "the kicking batch was in this flush")

	gs.mu.Lock()
	gs.gate = make(chan struct{})
	gate := gs.gate
	gs.mu.Unlock()
	e.produce(t, "durable", 0, 1)
	done := make(chan bool)
	go func() {
		g, err := e.tg.flush()
		assert.NoError(t, err)
		done <- g
	}()
	<-gs.entered
	e.produce(t, "durable", 0, 1)
	e.tg.KickWAL() // arrives while the flush writes
	close(gate)
	require.False(t, <-done, "one batch during the flush: not paced")

	gs.mu.Lock()
	gs.gate = make(chan struct{})
	gate = gs.gate
	gs.mu.Unlock()
	go func() {
		g, err := e.tg.flush()
		assert.NoError(t, err)
		done <- g
	}()
	<-gs.entered
	for range 2 {
		e.produce(t, "durable", 0, 1)
		e.tg.KickWAL() // two arrive while the flush writes: load
	}
	close(gate)
	require.True(t, <-done, "two batches during the flush: the next is paced")
}

package tier

import (
	"bytes"
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

// walBatch returns a RecordBatch v2 of n small records.
func walBatch(n int) []byte {
	var records []byte
	for i := 0; i < n; i++ {
		r := kmsg.Record{OffsetDelta: int32(i), Value: []byte("value")}
		records = r.AppendTo(records)
	}
	rb := kmsg.RecordBatch{Magic: 2, LastOffsetDelta: int32(n - 1), FirstTimestamp: 1, MaxTimestamp: 1,
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

var _ = bytes.Equal

package tier

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratamq/strata/brokerfleet/internal/catalog"
	"github.com/stratamq/strata/brokerfleet/internal/topic"
	"github.com/stratamq/strata/pkg/clock"
	"github.com/stratamq/strata/pkg/metastore"
	"github.com/stratamq/strata/pkg/metastore/embedded"
	"github.com/stratamq/strata/pkg/objstore"
	"github.com/stratamq/strata/pkg/segment"
)

const sweepGrace = time.Minute

// sweepEnv is a Manager of broker 1, which leads nothing, over a counting
// object store and a counting metastore.
type sweepEnv struct {
	ctx     context.Context
	tg      *Manager
	meta    *metastore.Meta
	objects *objstore.Counting
	clock   *clock.Fake
	holds   atomic.Bool // what Sweep reports

	mu  sync.Mutex
	ops map[string]int // metastore operations
}

func newSweepEnv(t *testing.T, withSweep bool) *sweepEnv {
	e := &sweepEnv{ctx: context.Background(), objects: objstore.NewCounting(objstore.NewMemory()), clock: clock.NewFake(time.Now()), ops: map[string]int{}}
	s, err := embedded.Open(filepath.Join(t.TempDir(), "meta.db"), embedded.WithoutSync())
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	e.meta = metastore.New(metastore.Instrument(s, func(op string, _ time.Duration, _ error) {
		e.mu.Lock()
		e.ops[op]++
		e.mu.Unlock()
	}))
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	lease, err := e.meta.BrokerLease(metastore.Broker{ID: 1, Endpoint: "h:1", Incarnation: "now"}, metastore.LeaseOptions{Duration: time.Hour, Margin: time.Second, Clock: e.clock})
	require.NoError(t, err)
	defaults, err := topic.NewDefaults(nil)
	require.NoError(t, err)
	cat, err := catalog.New(catalog.Options{Meta: e.meta, NodeID: 1, Incarnation: "now", Lease: lease, DataDir: "/data", FS: segment.NewMemFS(),
		Defaults: defaults, Clock: e.clock, Logger: quiet})
	require.NoError(t, err)
	t.Cleanup(func() { cat.Close() })
	cat.Register(e.ctx)
	require.True(t, cat.LeaseValid())
	opts := ManagerOptions{Catalog: cat, Meta: e.meta, Objects: e.objects, NodeID: 1, Incarnation: "now", Defaults: defaults,
		Interval: time.Second, OrphanGrace: sweepGrace, Clock: e.clock, Logger: quiet}
	if withSweep {
		opts.Sweep = e.holds.Load
	}
	e.tg = NewManager(opts)
	e.tg.ctx = e.ctx
	return e
}

// takeOps returns the metastore operations since the last call.
func (e *sweepEnv) takeOps() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := e.ops
	e.ops = map[string]int{}
	return out
}

// createTopic stores a topic whose partitions broker 2 leads.
func (e *sweepEnv) createTopic(t *testing.T, name string, partitions int32, configs map[string]string) metastore.Topic {
	var states []metastore.PartitionState
	for p := int32(0); p < partitions; p++ {
		states = append(states, metastore.PartitionState{Partition: p, Replicas: []int32{2}, Leader: 2, LeaderEpoch: 1, ISR: []int32{2}})
	}
	tp, err := e.meta.CreateTopic(e.ctx, metastore.Topic{Name: name, ID: metastore.NewTopicID(), Partitions: partitions, ReplicationFactor: 1, Configs: configs}, states)
	require.NoError(t, err)
	return tp
}

// upload stores a one-batch segment of a partition at base, referenced by
// its manifest (as its leader would).
func (e *sweepEnv) upload(t *testing.T, id metastore.TopicID, p int32, base int64) {
	man, err := e.meta.Manifest(e.ctx, id, p)
	require.NoError(t, err)
	body := testBatch(base)
	_, err = e.tg.t.Upload(e.ctx, id, p, 1, man, segment.SegmentInfo{BaseOffset: base, NextOffset: base + 1, Size: int64(len(body)), MaxTimestamp: 1}, bytes.NewReader(body))
	require.NoError(t, err)
}

// testBatch is a RecordBatch v2 header at base (enough for the index pass).
func testBatch(base int64) []byte {
	b := make([]byte, segment.HeaderSize)
	binary.BigEndian.PutUint64(b, uint64(base))
	binary.BigEndian.PutUint32(b[8:], uint32(segment.HeaderSize-12))
	b[16] = 2 // magic
	return b
}

func (e *sweepEnv) exists(t *testing.T, key string) bool {
	objs, err := e.objects.List(e.ctx, key)
	require.NoError(t, err)
	return len(objs) == 1 && objs[0].Key == key
}

func (e *sweepEnv) keys(t *testing.T, prefix string) []string {
	objs, err := e.objects.List(e.ctx, prefix)
	require.NoError(t, err)
	var out []string
	for _, o := range objs {
		out = append(out, o.Key)
	}
	return out
}

// The broker Sweep picks removes, once older than the grace, the objects
// and manifests of a topic deleted by a broker that died before removing
// them, and the WAL objects of nodes and incarnations that no manifest
// references; a live topic's objects, referenced WAL objects and young
// objects stay, and a broker Sweep does not pick touches nothing.
func TestSweepCollectsWhatNoLeaderReaches(t *testing.T) {
	e := newSweepEnv(t, true)
	gone := e.createTopic(t, "gone", 2, nil)
	kept := e.createTopic(t, "kept", 1, nil)
	durable := e.createTopic(t, "durable", 1, map[string]string{topic.Durability: topic.DurabilityObject})
	for p := int32(0); p < 2; p++ {
		e.upload(t, gone.ID, p, 0)
		e.upload(t, gone.ID, p, 1)
	}
	e.upload(t, kept.ID, 0, 0)
	// The deleting broker died before RemoveTopic ran.
	require.NoError(t, e.meta.DeleteTopic(e.ctx, gone))
	// A dead node's WAL object, and one of this node's earlier incarnation.
	deadNode, oldLife := WALKey(7, "gone-for-good", 1), WALKey(1, "earlier", 3)
	for _, k := range []string{deadNode, oldLife} {
		require.NoError(t, e.objects.Put(e.ctx, k, []byte("nobody references this"), objstore.PutOptions{}))
	}
	// A live node's WAL object, referenced by the object-durability topic.
	live := WALKey(3, "live", 1)
	_, errs, err := e.tg.t.PutWAL(e.ctx, live, []WALPart{{ID: durable.ID, Partition: 0, LeaderEpoch: 1, Batches: testBatch(0), Base: 0, Next: 1}})
	require.NoError(t, err)
	require.NoError(t, errs[0])
	goneObjects := e.keys(t, gone.ID.String()+"/")
	require.Len(t, goneObjects, 4)

	// The sweeper, while everything is younger than the grace: the deleted
	// topic's manifests go (its id is never reused), its objects stay.
	e.holds.Store(true)
	e.tg.round()
	require.Len(t, e.keys(t, gone.ID.String()+"/"), 4, "young objects stay: an upload may be finishing")
	for p := int32(0); p < 2; p++ {
		man, err := e.meta.Manifest(e.ctx, gone.ID, p)
		require.NoError(t, err)
		require.Zero(t, man.Version, "partition %d's manifest", p)
	}
	require.True(t, e.exists(t, deadNode))

	// Another broker sweeps: nothing is looked at, however old.
	e.holds.Store(false)
	e.clock.Advance(2 * sweepGrace)
	e.objects.Reset()
	e.tg.round()
	require.Zero(t, e.objects.Counts().Requests(), "a broker Sweep does not pick lists nothing")

	// This one again, past the grace: collected.
	e.holds.Store(true)
	e.objects.Reset()
	e.takeOps()
	e.tg.round()
	counts, ops := e.objects.Counts(), e.takeOps()
	t.Logf("a sweep that collected: %+v, metastore %v", counts, ops)
	require.Empty(t, e.keys(t, gone.ID.String()+"/"), "the deleted topic's objects")
	items, err := e.meta.Store().Query(e.ctx, "manifest/"+gone.ID.String(), "")
	require.NoError(t, err)
	require.Empty(t, items, "the deleted topic's manifest items")
	require.False(t, e.exists(t, deadNode), "a dead node's unreferenced WAL object")
	require.False(t, e.exists(t, oldLife), "an earlier incarnation's unreferenced WAL object")
	require.True(t, e.exists(t, live), "a referenced WAL object stays")
	require.Len(t, e.keys(t, kept.ID.String()+"/"), 1, "a live topic's objects stay")

	// At most every OrphanGrace/2.
	e.clock.Advance(sweepGrace/2 - time.Second)
	e.objects.Reset()
	e.tg.round()
	require.Zero(t, e.objects.Counts().Lists, "swept again before OrphanGrace/2")

	// A sweep with nothing old to collect costs two listings and a topic
	// listing; with an old referenced WAL object, the WAL indexes and the
	// manifests of the
	// object-durability topics as well.
	require.True(t, e.exists(t, live))
	e.clock.Advance(time.Second)
	e.objects.Reset()
	e.takeOps()
	e.tg.round()
	counts, ops = e.objects.Counts(), e.takeOps()
	t.Logf("a sweep with nothing to collect: %+v, metastore %v", counts, ops)
	require.Equal(t, int64(2), counts.Lists, "the bucket's prefixes and wal/")
	require.Zero(t, counts.Deletes+counts.Gets+counts.Puts)
	delete(ops, metastore.OpNameGet) // this node's WAL index, when the round prunes it (every walPruneInterval)
	require.Equal(t, map[string]int{metastore.OpNameQuery: 3}, ops, "the topics, the one object-durability partition's manifest, and the WAL indexes")
}

// Without Sweep, a broker sweeps only its own WAL objects.
func TestWithoutSweepEachBrokerSweepsItsOwnWAL(t *testing.T) {
	e := newSweepEnv(t, false)
	gone := e.createTopic(t, "gone", 1, nil)
	e.upload(t, gone.ID, 0, 0)
	require.NoError(t, e.meta.DeleteTopic(e.ctx, gone))
	own, other := WALKey(1, "earlier", 1), WALKey(7, "gone-for-good", 1)
	for _, k := range []string{own, other} {
		require.NoError(t, e.objects.Put(e.ctx, k, []byte("x"), objstore.PutOptions{}))
	}
	e.clock.Advance(2 * sweepGrace)
	e.tg.round()
	require.False(t, e.exists(t, own))
	require.True(t, e.exists(t, other), "another node's objects are the sweeper's")
	require.Len(t, e.keys(t, gone.ID.String()+"/"), 1, "and so are deleted topics'")
}

// RemoveTopic deletes each partition's manifest before its objects: a
// removal that fails midway (its broker dies) leaves objects, never a
// manifest without them, and the sweep finishes it.
func TestRemoveTopicDeletesManifestsFirst(t *testing.T) {
	e := newSweepEnv(t, true)
	gone := e.createTopic(t, "gone", 2, nil)
	for p := int32(0); p < 2; p++ {
		e.upload(t, gone.ID, p, 0)
	}
	require.NoError(t, e.meta.DeleteTopic(e.ctx, gone))
	e.tg.opts.Objects = &failDeletes{Store: e.objects}
	_, err := e.tg.removeTopicObjects(e.ctx, gone)
	require.ErrorIs(t, err, errInjected)
	for p := int32(0); p < 2; p++ {
		man, err := e.meta.Manifest(e.ctx, gone.ID, p)
		require.NoError(t, err)
		if p == 0 {
			require.Zero(t, man.Version, "partition 0's manifest went first")
		} else {
			require.NotZero(t, man.Version, "the removal stopped at partition 0")
		}
	}
	require.Len(t, e.keys(t, gone.ID.String()+"/"), 2)

	e.tg.opts.Objects = e.objects
	e.holds.Store(true)
	e.clock.Advance(2 * sweepGrace)
	e.tg.round()
	require.Empty(t, e.keys(t, gone.ID.String()+"/"))
	items, err := e.meta.Store().Query(e.ctx, "manifest/"+gone.ID.String(), "")
	require.NoError(t, err)
	require.Empty(t, items)
}

var errInjected = errorString("injected failure")

type errorString string

func (e errorString) Error() string { return string(e) }

// failDeletes fails every Delete.
type failDeletes struct{ objstore.Store }

func (f *failDeletes) Delete(context.Context, string) error { return errInjected }

// The sweep keeps the WAL objects that an index entry still needs (no
// manifest has moved past it) and collects those whose entries are
// superseded.
func TestSweepKeepsWhatTheWALIndexNeeds(t *testing.T) {
	e := newSweepEnv(t, true)
	durable := e.createTopic(t, "durable", 1, map[string]string{topic.Durability: topic.DurabilityObject})
	e.upload(t, durable.ID, 0, 0) // the manifest ends at 1
	needed, covered := WALKey(3, "live", 2), WALKey(3, "live", 1)
	for _, k := range []string{needed, covered} {
		require.NoError(t, e.objects.Put(e.ctx, k, testBatch(0), objstore.PutOptions{}))
	}
	_, err := e.meta.PutWALIndex(e.ctx, metastore.WALIndex{Node: 3, Owner: "live", Entries: []metastore.WALEntry{
		{Topic: durable.ID, Partition: 0, LeaderEpoch: 1, BaseOffset: 0, NextOffset: 1, Object: covered, Len: 1},
		{Topic: durable.ID, Partition: 0, LeaderEpoch: 1, BaseOffset: 1, NextOffset: 2, Object: needed, Len: 1},
	}})
	require.NoError(t, err)
	e.holds.Store(true)
	e.clock.Advance(2 * sweepGrace)
	e.tg.round()
	require.True(t, e.exists(t, needed), "an index entry past the manifest's end needs it")
	require.False(t, e.exists(t, covered), "its entry is below the manifest's end")
}

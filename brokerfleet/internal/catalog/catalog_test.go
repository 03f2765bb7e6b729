package catalog

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratamq/strata/brokerfleet/internal/topic"
	"github.com/stratamq/strata/pkg/clock"
	"github.com/stratamq/strata/pkg/metastore"
	"github.com/stratamq/strata/pkg/metastore/embedded"
	"github.com/stratamq/strata/pkg/segment"
)

type env struct {
	t    *testing.T
	ctx  context.Context
	meta *metastore.Meta
	fs   *segment.MemFS
	cat  *Catalog
	// applied and roles record the hooks' calls.
	applied []*Snapshot
	roles   []metastore.PartitionState
	removed chan metastore.Topic
}

func newEnv(t *testing.T) *env {
	s, err := embedded.Open(filepath.Join(t.TempDir(), "meta.db"))
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	e := &env{t: t, ctx: context.Background(), meta: metastore.New(s), fs: segment.NewMemFS(), removed: make(chan metastore.Topic, 4)}
	fake := clock.NewFake(time.Unix(1_700_000_000, 0))
	lease, err := e.meta.BrokerLease(metastore.Broker{ID: 1, Endpoint: "h:1", Incarnation: "x"}, metastore.LeaseOptions{Duration: 6 * time.Second, Margin: time.Second, Clock: fake})
	require.NoError(t, err)
	defaults, err := topic.NewDefaults(nil)
	require.NoError(t, err)
	e.cat, err = New(Options{Meta: e.meta, NodeID: 1, Incarnation: "x", Lease: lease, DataDir: "/data", FS: e.fs, Defaults: defaults, Clock: fake,
		Logger:   slog.New(slog.NewTextHandler(io.Discard, nil)),
		OnApply:  func(s *Snapshot) { e.applied = append(e.applied, s) },
		OnRole:   func(st metastore.PartitionState) { e.roles = append(e.roles, st) },
		OnRemove: func(t metastore.Topic) { e.removed <- t },
	})
	require.NoError(t, err)
	t.Cleanup(func() { e.cat.Close() })
	return e
}

func (e *env) reconcile() *Snapshot {
	require.NoError(e.t, e.cat.Reconcile(e.ctx))
	return e.cat.Snapshot()
}

// Reconcile opens the logs of the partitions this broker hosts, with their
// roles, publishes a new snapshot and calls the hooks; partitions moved
// away lose their logs; a deleted topic loses its directory.
func TestReconcileFollowsTheMetastore(t *testing.T) {
	e := newEnv(t)
	tp := metastore.Topic{Name: "orders", ID: metastore.NewTopicID(), Partitions: 3, ReplicationFactor: 2}
	_, err := e.meta.CreateTopic(e.ctx, tp, []metastore.PartitionState{
		{Partition: 0, Replicas: []int32{1, 2}, Leader: 1, ISR: []int32{1, 2}},
		{Partition: 1, Replicas: []int32{2, 1}, Leader: 2, LeaderEpoch: 4, ISR: []int32{2, 1}},
		{Partition: 2, Replicas: []int32{2, 3}, Leader: 2, ISR: []int32{2, 3}},
	})
	require.NoError(t, err)
	before := e.cat.Snapshot()
	s := e.reconcile()
	require.NotSame(t, before, s)
	require.Nil(t, before.Topic("orders"), "an old snapshot never changes")
	ot := s.Topic("orders")
	require.NotNil(t, ot)
	require.Same(t, ot, s.TopicByID(tp.ID))
	require.NotNil(t, ot.Parts[0])
	require.NotNil(t, ot.Parts[1])
	require.Nil(t, ot.Parts[2], "not a replica here")
	require.True(t, ot.Parts[0].IsLeader())
	require.False(t, ot.Parts[1].IsLeader())
	require.Equal(t, int32(4), ot.Parts[1].LeaderEpoch())
	p, err := s.Leader("orders", 0)
	require.NoError(t, err)
	require.Same(t, ot.Parts[0], p)
	_, err = s.Leader("orders", 1)
	require.ErrorIs(t, err, ErrNotLeader)
	_, err = s.Leader("orders", 9)
	require.ErrorIs(t, err, ErrUnknownPartition)
	require.Len(t, s.Led(nil), 1)
	require.Len(t, s.Hosted(), 2)
	require.Len(t, e.applied, 1)
	require.Same(t, s, e.applied[0])
	require.Len(t, e.roles, 2)

	// Partition 1 moves away: its log goes, partition 0's stays the same
	// object.
	sts, err := e.meta.Partitions(e.ctx, tp.ID)
	require.NoError(t, err)
	moved := sts[1]
	moved.Replicas, moved.ISR = []int32{2, 3}, []int32{2, 3}
	_, err = e.meta.UpdatePartition(e.ctx, moved)
	require.NoError(t, err)
	s2 := e.reconcile()
	require.Same(t, ot.Parts[0], s2.Topic("orders").Parts[0])
	require.Nil(t, s2.Topic("orders").Parts[1])
	dirs, err := e.fs.ReadDir(filepath.Dir(e.cat.partitionDir(tp, 0)))
	require.NoError(t, err)
	require.Equal(t, []string{"0"}, dirs)

	// Deleted: the topic leaves the view, its logs and directory go, and
	// OnRemove hears of it.
	cur, err := e.meta.Topic(e.ctx, "orders")
	require.NoError(t, err)
	require.NoError(t, e.meta.DeleteTopic(e.ctx, cur))
	s3 := e.reconcile()
	require.Nil(t, s3.Topic("orders"))
	require.Equal(t, tp.ID, (<-e.removed).ID)
	_, err = e.fs.ReadDir(filepath.Dir(e.cat.partitionDir(tp, 0)))
	require.Error(t, err, "the topic's directory is removed")
}

// A topic whose states cannot be read keeps its last view (and logs):
// local data is never dropped because the metastore failed.
func TestReconcileKeepsWhatItCannotRead(t *testing.T) {
	e := newEnv(t)
	tp := metastore.Topic{Name: "keep", ID: metastore.NewTopicID(), Partitions: 1, ReplicationFactor: 1, Configs: map[string]string{}}
	_, err := e.meta.CreateTopic(e.ctx, tp, []metastore.PartitionState{{Partition: 0, Replicas: []int32{1}, Leader: 1, ISR: []int32{1}}})
	require.NoError(t, err)
	s := e.reconcile()
	p := s.Topic("keep").Parts[0]
	// A config the defaults reject makes the topic unreadable.
	cur, err := e.meta.Topic(e.ctx, "keep")
	require.NoError(t, err)
	cur.Configs = map[string]string{"retention.ms": "soon"}
	_, err = e.meta.UpdateTopic(e.ctx, cur, nil)
	require.NoError(t, err)
	require.Error(t, e.cat.Reconcile(e.ctx))
	s2 := e.cat.Snapshot()
	require.NotNil(t, s2.Topic("keep"))
	require.Same(t, p, s2.Topic("keep").Parts[0])
}

// The snapshot names the broker in the controller lease.
func TestSnapshotNamesTheController(t *testing.T) {
	e := newEnv(t)
	require.Equal(t, int32(-1), e.reconcile().Controller())
	l, err := e.meta.ControllerLease(3, "c", metastore.LeaseOptions{Duration: 6 * time.Second, Margin: time.Second})
	require.NoError(t, err)
	_, err = l.Tick(e.ctx)
	require.NoError(t, err)
	require.Equal(t, int32(3), e.reconcile().Controller())
}

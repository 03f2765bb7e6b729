package controller

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
)

// cluster is a metastore with broker registrations driven by hand on a
// fake clock, and a controller over it whose rounds the test runs.
type cluster struct {
	t      *testing.T
	ctx    context.Context
	clock  *clock.Fake
	meta   *metastore.Meta
	leases map[int32]*metastore.Lease
	ctrl   *Controller
	topic  metastore.Topic
}

const testLease = 6 * time.Second

func newCluster(t *testing.T, ids ...int32) *cluster {
	s, err := embedded.Open(filepath.Join(t.TempDir(), "meta.db"))
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	c := &cluster{t: t, ctx: context.Background(), clock: clock.NewFake(t0), meta: metastore.New(s), leases: map[int32]*metastore.Lease{}}
	opts := metastore.LeaseOptions{Duration: testLease, Margin: time.Second, Clock: c.clock}
	for _, id := range ids {
		l, err := c.meta.BrokerLease(metastore.Broker{ID: id, Endpoint: "h:1", Rack: string(rune('a' + id)), Incarnation: "i"}, opts)
		require.NoError(t, err)
		c.leases[id] = l
	}
	c.heartbeat(ids...)
	defaults, err := topic.NewDefaults(nil)
	require.NoError(t, err)
	c.ctrl, err = New(Options{Meta: c.meta, NodeID: ids[0], Incarnation: "ctrl", Lease: opts, Defaults: defaults,
		ReassignAfter: time.Hour, MaxReassignments: 8, Clock: c.clock, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	st, err := c.ctrl.lease.Tick(c.ctx)
	require.NoError(t, err)
	require.True(t, st.Held)
	return c
}

func (c *cluster) heartbeat(ids ...int32) {
	for _, id := range ids {
		st, err := c.leases[id].Tick(c.ctx)
		require.NoError(c.t, err)
		require.True(c.t, st.Held, "broker %d registration", id)
	}
}

// round runs one controller round as the controller, renewing its lease.
func (c *cluster) round() {
	_, err := c.ctrl.lease.Tick(c.ctx)
	require.NoError(c.t, err)
	require.NoError(c.t, c.ctrl.Round(c.ctx, true))
}

func (c *cluster) createTopic(states ...metastore.PartitionState) {
	c.topic = metastore.Topic{Name: "t", ID: metastore.NewTopicID(), Partitions: int32(len(states)), ReplicationFactor: int16(len(states[0].Replicas))}
	for i := range states {
		states[i].Partition = int32(i)
	}
	_, err := c.meta.CreateTopic(c.ctx, c.topic, states)
	require.NoError(c.t, err)
}

func (c *cluster) states() []metastore.PartitionState {
	st, err := c.meta.Partitions(c.ctx, c.topic.ID)
	require.NoError(c.t, err)
	return st
}

// A broker that stops heartbeating for a full lease on the controller's
// clock is fenced (its registration marked released, so a paused process
// must re-register under a new epoch) and loses leadership to an in-sync
// replica under a new leader epoch; a broker that keeps heartbeating is
// left alone.
func TestControllerFencesAFrozenBrokerAndElects(t *testing.T) {
	c := newCluster(t, 0, 1, 2)
	c.createTopic(
		metastore.PartitionState{Replicas: []int32{1, 2, 0}, Leader: 1, ISR: []int32{1, 2, 0}},
		metastore.PartitionState{Replicas: []int32{2, 0, 1}, Leader: 2, ISR: []int32{2, 0, 1}},
	)
	c.round()
	require.Equal(t, int32(1), c.states()[0].Leader, "nothing to do while everyone heartbeats")

	// Brokers 0 and 2 heartbeat; broker 1 froze.
	for range 4 {
		c.clock.Advance(testLease / 3)
		c.heartbeat(0, 2)
		c.round()
	}
	brokers, err := c.meta.Brokers(c.ctx)
	require.NoError(t, err)
	for _, br := range brokers {
		require.Equal(t, br.ID != 1, br.Live, "broker %d live", br.ID)
	}
	st := c.states()
	require.Equal(t, int32(2), st[0].Leader, "first live ISR member in replica order")
	require.Equal(t, int32(1), st[0].LeaderEpoch)
	require.Equal(t, []int32{2, 0}, st[0].ISR)
	require.Equal(t, int32(2), st[1].Leader, "a partition led by a live broker keeps its leader")
	require.Equal(t, []int32{2, 0, 1}, st[1].ISR, "a dead follower is the live leader's to drop, by replica lag")
	require.Equal(t, int32(0), st[1].LeaderEpoch)

	// Every shard has a live owner, none on the fenced broker.
	shards, err := c.meta.CoordinatorShards(c.ctx)
	require.NoError(t, err)
	require.Len(t, shards, metastore.GroupShards)
	for _, s := range shards {
		require.NotEqual(t, int32(1), s.Broker)
	}
}

// A broker that comes back as a new incarnation (a restart, maybe on an
// empty disk) leaves the ISRs it held, and when it led, leadership moves
// to an in-sync replica: no election may pick it until it caught up.
func TestControllerTakesARestartedBrokerOutOfTheISR(t *testing.T) {
	c := newCluster(t, 0, 1, 2)
	c.createTopic(
		metastore.PartitionState{Replicas: []int32{0, 1, 2}, Leader: 0, ISR: []int32{0, 1, 2}},
		metastore.PartitionState{Replicas: []int32{1, 0, 2}, Leader: 1, ISR: []int32{1, 0, 2}},
	)
	c.round()
	// Broker 1 restarts: its old lease is released and a new incarnation
	// registers.
	require.NoError(t, c.leases[1].Release(c.ctx))
	l, err := c.meta.BrokerLease(metastore.Broker{ID: 1, Endpoint: "h:1", Incarnation: "i2"}, metastore.LeaseOptions{Duration: testLease, Margin: time.Second, Clock: c.clock})
	require.NoError(t, err)
	c.leases[1] = l
	c.heartbeat(0, 1, 2)
	c.round()
	st := c.states()
	require.Equal(t, []int32{0, 2}, st[0].ISR, "a restarted follower leaves the ISR; the leader stays")
	require.Equal(t, int32(0), st[0].LeaderEpoch)
	require.Equal(t, int32(0), st[1].Leader, "a restarted leader is replaced")
	require.Equal(t, []int32{0, 2}, st[1].ISR)
	require.Equal(t, int32(1), st[1].LeaderEpoch)
	// Applied: the next round does not act on the restart again.
	c.round()
	require.Equal(t, st, c.states())
}

// A controller that lost its lease acts on nothing.
func TestControllerWithoutTheLeaseDoesNothing(t *testing.T) {
	c := newCluster(t, 0, 1)
	c.createTopic(metastore.PartitionState{Replicas: []int32{1, 0}, Leader: 1, ISR: []int32{1, 0}})
	c.clock.Advance(2 * testLease) // the controller's lease lapsed; broker 1 froze
	c.heartbeat(0)
	require.NoError(t, c.ctrl.Round(c.ctx, true))
	require.Equal(t, int32(1), c.states()[0].Leader)
	brokers, err := c.meta.Brokers(c.ctx)
	require.NoError(t, err)
	for _, br := range brokers {
		require.True(t, br.Live, "broker %d fenced by a controller without its lease", br.ID)
	}
}

package txn

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/stratamq/strata/pkg/clock"
	"github.com/stratamq/strata/pkg/metastore"
	"github.com/stratamq/strata/pkg/metastore/embedded"
	"github.com/stratamq/strata/pkg/segment"
)

// markers is an in-memory Markers: it records what each partition got,
// and fails writes while fail says so.
type markers struct {
	mu   sync.Mutex
	got  map[TopicPartition][]segment.Marker
	fail func(TopicPartition) error
}

func newMarkers() *markers { return &markers{got: map[TopicPartition][]segment.Marker{}} }

func (f *markers) WriteMarkers(_ context.Context, m segment.Marker, parts []TopicPartition) []error {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]error, len(parts))
	for i, tp := range parts {
		if f.fail != nil {
			if out[i] = f.fail(tp); out[i] != nil {
				continue
			}
		}
		f.got[tp] = append(f.got[tp], m)
	}
	return out
}

func (f *markers) of(tp TopicPartition) []segment.Marker {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.got[tp])
}

func (f *markers) setFail(fn func(TopicPartition) error) {
	f.mu.Lock()
	f.fail = fn
	f.mu.Unlock()
}

type env struct {
	t    *testing.T
	meta *metastore.Meta
	next int64
	mu   sync.Mutex
}

func newEnv(t *testing.T) *env {
	store, err := embedded.Open(filepath.Join(t.TempDir(), "meta.db"), embedded.WithoutSync())
	require.NoError(t, err)
	t.Cleanup(func() { store.Close() })
	return &env{t: t, meta: metastore.New(store), next: 1000}
}

func (e *env) newID(context.Context) (int64, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.next++
	return e.next, nil
}

// assign gives every shard to broker and returns the assignments.
func (e *env) assign(broker int32) map[int32]metastore.CoordinatorShard {
	ctx := context.Background()
	cur, err := e.meta.CoordinatorShards(ctx)
	require.NoError(e.t, err)
	byShard := map[int32]metastore.CoordinatorShard{}
	for _, cs := range cur {
		byShard[cs.Shard] = cs
	}
	out := map[int32]metastore.CoordinatorShard{}
	for s := int32(0); s < metastore.GroupShards; s++ {
		cs, ok := byShard[s]
		if !ok {
			cs = metastore.CoordinatorShard{Shard: s, Broker: -1}
		}
		next, err := e.meta.AssignShard(ctx, cs, broker)
		require.NoError(e.t, err)
		out[s] = next
	}
	return out
}

func (e *env) coordinator(m Markers, opts ...func(*Options)) *Coordinator {
	o := Options{Meta: e.meta, NewProducerID: e.newID, Markers: m, EndWait: time.Second, CheckInterval: 50 * time.Millisecond}
	for _, fn := range opts {
		fn(&o)
	}
	c := New(o)
	e.t.Cleanup(c.Close)
	return c
}

var (
	ctx     = context.Background()
	orders0 = TopicPartition{Topic: "orders", Partition: 0}
	orders1 = TopicPartition{Topic: "orders", Partition: 1}
)

func stored(t *testing.T, m *metastore.Meta, id string) metastore.Transaction {
	t.Helper()
	txn, ok, err := m.Transaction(ctx, id)
	require.NoError(t, err)
	require.True(t, ok)
	return txn
}

func eventually(t *testing.T, what string, fn func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !fn(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func TestInitProducerIDFencesAndRecovers(t *testing.T) {
	e := newEnv(t)
	c := e.coordinator(newMarkers())
	c.SetShards(e.assign(1))

	pid, epoch, code := c.InitProducerID(ctx, "etl", time.Minute, -1, -1)
	require.Zero(t, code)
	require.EqualValues(t, 0, epoch)
	// A second instance of the id: same producer id, next epoch.
	pid2, epoch2, code := c.InitProducerID(ctx, "etl", time.Minute, -1, -1)
	require.Zero(t, code)
	require.Equal(t, pid, pid2)
	require.EqualValues(t, 1, epoch2)

	// KIP-360: the current instance recovers with its id and epoch, and
	// its retry gets the same answer.
	_, epoch3, code := c.InitProducerID(ctx, "etl", time.Minute, pid, 1)
	require.Zero(t, code)
	require.EqualValues(t, 2, epoch3)
	_, again, code := c.InitProducerID(ctx, "etl", time.Minute, pid, 1)
	require.Zero(t, code)
	require.EqualValues(t, 2, again)
	// An older instance, or another producer id, is fenced.
	_, _, code = c.InitProducerID(ctx, "etl", time.Minute, pid, 0)
	require.Equal(t, kerr.ProducerFenced.Code, code)
	_, _, code = c.InitProducerID(ctx, "etl", time.Minute, pid+77, 0)
	require.Equal(t, kerr.ProducerFenced.Code, code)
	// Bad input.
	_, _, code = c.InitProducerID(ctx, "", time.Minute, -1, -1)
	require.Equal(t, kerr.InvalidRequest.Code, code)
	_, _, code = c.InitProducerID(ctx, "etl", 16*time.Minute, -1, -1)
	require.Equal(t, kerr.InvalidTransactionTimeout.Code, code)
	_, _, code = c.InitProducerID(ctx, "etl", 0, -1, -1)
	require.Equal(t, kerr.InvalidTransactionTimeout.Code, code)
	require.EqualValues(t, 2, stored(t, e.meta, "etl").ProducerEpoch)
}

func TestEpochExhaustedMovesToANewProducerID(t *testing.T) {
	e := newEnv(t)
	c := e.coordinator(newMarkers())
	c.SetShards(e.assign(1))
	pid, _, code := c.InitProducerID(ctx, "old", time.Minute, -1, -1)
	require.Zero(t, code)
	// Age the record: its epoch is at the limit.
	txn := stored(t, e.meta, "old")
	txn.ProducerEpoch = 32766
	_, err := e.meta.PutTransaction(ctx, txn, e.shardVersion("old"))
	require.NoError(t, err)
	c.SetShards(e.assign(1)) // re-read
	pid2, epoch, code := c.InitProducerID(ctx, "old", time.Minute, pid, 32766)
	require.Zero(t, code)
	require.NotEqual(t, pid, pid2)
	require.EqualValues(t, 0, epoch)
	// The retry of that rotation (it never got the answer) gets it again.
	pid3, epoch3, code := c.InitProducerID(ctx, "old", time.Minute, pid, 32766)
	require.Zero(t, code)
	require.Equal(t, pid2, pid3)
	require.EqualValues(t, 0, epoch3)
}

func (e *env) shardVersion(id string) int64 {
	cur, err := e.meta.CoordinatorShards(ctx)
	require.NoError(e.t, err)
	for _, cs := range cur {
		if cs.Shard == metastore.GroupShard(id) {
			return cs.Version
		}
	}
	e.t.Fatal("no shard")
	return 0
}

func TestCommitWritesMarkersThenCompletes(t *testing.T) {
	e := newEnv(t)
	mk := newMarkers()
	c := e.coordinator(mk)
	owned := e.assign(1)
	c.SetShards(owned)
	pid, epoch, _ := c.InitProducerID(ctx, "etl", time.Minute, -1, -1)

	// Not a transaction of this producer.
	require.Equal(t, kerr.InvalidProducerIDMapping.Code, c.AddPartitions(ctx, "etl", pid+1, epoch, []TopicPartition{orders0}))
	require.Equal(t, kerr.ProducerFenced.Code, c.AddPartitions(ctx, "etl", pid, epoch+1, []TopicPartition{orders0}))
	require.Equal(t, kerr.InvalidTxnState.Code, c.EndTxn(ctx, "etl", pid, epoch, true)(), "nothing to end")
	require.Equal(t, kerr.InvalidProducerIDMapping.Code, c.EndTxn(ctx, "nope", pid, epoch, true)())

	require.Zero(t, c.AddPartitions(ctx, "etl", pid, epoch, []TopicPartition{orders0, orders1}))
	require.Zero(t, c.AddOffsets(ctx, "etl", pid, epoch, "etl-group"))
	got := stored(t, e.meta, "etl")
	require.Equal(t, metastore.TxnOngoing, got.State)
	require.True(t, got.HasPartition(OffsetsTopic, metastore.GroupShard("etl-group")))
	require.Equal(t, []int16{0, 0, kerr.InvalidTxnState.Code}, c.Verify(ctx, "etl", pid, epoch, []TopicPartition{orders0, GroupPartition("etl-group"), {Topic: "orders", Partition: 2}}))
	require.Equal(t, []int16{kerr.ProducerFenced.Code}, c.Verify(ctx, "etl", pid, epoch+1, []TopicPartition{orders0}))

	require.Zero(t, c.EndTxn(ctx, "etl", pid, epoch, true)())
	shardEpoch := int32(owned[metastore.GroupShard("etl")].Epoch)
	want := []segment.Marker{{ProducerID: pid, ProducerEpoch: epoch, Commit: true, CoordinatorEpoch: shardEpoch}}
	for _, tp := range []TopicPartition{orders0, orders1, GroupPartition("etl-group")} {
		require.Equal(t, want, mk.of(tp), "%v", tp)
	}
	got = stored(t, e.meta, "etl")
	require.Equal(t, metastore.TxnCompleteCommit, got.State)
	require.Empty(t, got.Partitions)
	// A retried EndTxn of the same decision succeeds, the other fails.
	require.Zero(t, c.EndTxn(ctx, "etl", pid, epoch, true)())
	require.Equal(t, kerr.InvalidTxnState.Code, c.EndTxn(ctx, "etl", pid, epoch, false)())
	// Verification after the end: not in a transaction any more.
	require.Equal(t, []int16{kerr.InvalidTxnState.Code}, c.Verify(ctx, "etl", pid, epoch, []TopicPartition{orders0}))

	// The next transaction of the same epoch starts afresh.
	require.Zero(t, c.AddPartitions(ctx, "etl", pid, epoch, []TopicPartition{orders1}))
	got = stored(t, e.meta, "etl")
	require.Equal(t, []metastore.TxnTopic{{Topic: "orders", Partitions: []int32{1}}}, got.Partitions)
	require.Zero(t, c.EndTxn(ctx, "etl", pid, epoch, false)())
	require.Len(t, mk.of(orders1), 2)
	require.False(t, mk.of(orders1)[1].Commit)
	require.Equal(t, metastore.TxnCompleteAbort, stored(t, e.meta, "etl").State)
}

func TestNewInstanceAbortsTheOngoingTransaction(t *testing.T) {
	e := newEnv(t)
	mk := newMarkers()
	var causes []string
	var mu sync.Mutex
	c := e.coordinator(mk, func(o *Options) {
		o.Aborted = func(cause string) { mu.Lock(); causes = append(causes, cause); mu.Unlock() }
	})
	c.SetShards(e.assign(1))
	pid, epoch, _ := c.InitProducerID(ctx, "etl", time.Minute, -1, -1)
	require.Zero(t, c.AddPartitions(ctx, "etl", pid, epoch, []TopicPartition{orders0}))

	// The new instance is told to retry while the old transaction is
	// aborted under a bumped epoch.
	_, _, code := c.InitProducerID(ctx, "etl", time.Minute, -1, -1)
	require.Equal(t, kerr.ConcurrentTransactions.Code, code)
	eventually(t, "the abort completes", func() bool { return stored(t, e.meta, "etl").State == metastore.TxnCompleteAbort })
	require.Equal(t, []segment.Marker{{ProducerID: pid, ProducerEpoch: epoch + 1, CoordinatorEpoch: mk.of(orders0)[0].CoordinatorEpoch}}, mk.of(orders0))
	pid2, epoch2, code := c.InitProducerID(ctx, "etl", time.Minute, -1, -1)
	require.Zero(t, code)
	require.Equal(t, pid, pid2)
	require.Equal(t, epoch+2, epoch2)
	// The old instance is fenced everywhere.
	require.Equal(t, kerr.ProducerFenced.Code, c.AddPartitions(ctx, "etl", pid, epoch, []TopicPartition{orders0}))
	require.Equal(t, kerr.ProducerFenced.Code, c.EndTxn(ctx, "etl", pid, epoch, true)())
	mu.Lock()
	require.Equal(t, []string{"fenced"}, causes)
	mu.Unlock()
}

func TestTimedOutTransactionIsAborted(t *testing.T) {
	e := newEnv(t)
	mk := newMarkers()
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	aborted := make(chan string, 4)
	c := e.coordinator(mk, func(o *Options) {
		o.Clock = clk
		o.CheckInterval = time.Second
		o.Aborted = func(cause string) { aborted <- cause }
	})
	c.SetShards(e.assign(1))
	pid, epoch, _ := c.InitProducerID(ctx, "slow", 10*time.Second, -1, -1)
	require.Zero(t, c.AddPartitions(ctx, "slow", pid, epoch, []TopicPartition{orders0}))
	clk.Advance(5 * time.Second)
	require.Empty(t, mk.of(orders0))
	clk.Advance(6 * time.Second)
	select {
	case cause := <-aborted:
		require.Equal(t, "timeout", cause)
	case <-time.After(10 * time.Second):
		t.Fatal("the timed-out transaction was not aborted")
	}
	eventually(t, "the abort completes", func() bool { return stored(t, e.meta, "slow").State == metastore.TxnCompleteAbort })
	require.Equal(t, epoch+1, mk.of(orders0)[0].ProducerEpoch, "the abort fences the producer")
	require.False(t, mk.of(orders0)[0].Commit)
	require.Equal(t, kerr.ProducerFenced.Code, c.EndTxn(ctx, "slow", pid, epoch, true)())
}

func TestIdleTransactionalIDExpires(t *testing.T) {
	e := newEnv(t)
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	c := e.coordinator(newMarkers(), func(o *Options) {
		o.Clock, o.CheckInterval, o.IDExpiration = clk, time.Second, time.Hour
	})
	c.SetShards(e.assign(1))
	_, _, code := c.InitProducerID(ctx, "idle", time.Minute, -1, -1)
	require.Zero(t, code)
	clk.Advance(time.Hour + 2*time.Second)
	eventually(t, "the id expires", func() bool {
		_, ok, err := e.meta.Transaction(ctx, "idle")
		require.NoError(t, err)
		return !ok
	})
	_, code = c.Describe(ctx, "idle")
	require.Equal(t, kerr.TransactionalIDNotFound.Code, code)
}

func TestNewOwnerCompletesADecidedTransaction(t *testing.T) {
	e := newEnv(t)
	stuck := newMarkers()
	stuck.setFail(func(tp TopicPartition) error {
		if tp == orders1 {
			return errors.New("leader unreachable")
		}
		return nil
	})
	a := e.coordinator(stuck)
	a.SetShards(e.assign(1))
	pid, epoch, _ := a.InitProducerID(ctx, "etl", time.Minute, -1, -1)
	require.Zero(t, a.AddPartitions(ctx, "etl", pid, epoch, []TopicPartition{orders0, orders1}))
	// The decision is written; one partition's marker cannot be: the
	// client still hears success (the decision is durable).
	require.Zero(t, a.EndTxn(ctx, "etl", pid, epoch, true)())
	require.Equal(t, metastore.TxnPrepareCommit, stored(t, e.meta, "etl").State)
	require.Len(t, stuck.of(orders0), 1)
	require.Empty(t, stuck.of(orders1))
	// The producer may not start again before the markers are written.
	require.Equal(t, kerr.ConcurrentTransactions.Code, a.AddPartitions(ctx, "etl", pid, epoch, []TopicPartition{orders0}))

	// The coordinator dies; its shards move to another broker, which
	// resumes the decision at once, with its own coordinator epoch.
	a.Close()
	mk := newMarkers()
	b := e.coordinator(mk)
	owned := e.assign(2)
	b.SetShards(owned)
	eventually(t, "the new owner completes it", func() bool { return stored(t, e.meta, "etl").State == metastore.TxnCompleteCommit })
	want := segment.Marker{ProducerID: pid, ProducerEpoch: epoch, Commit: true, CoordinatorEpoch: int32(owned[metastore.GroupShard("etl")].Epoch)}
	require.Equal(t, []segment.Marker{want}, mk.of(orders1))
	require.Equal(t, []segment.Marker{want}, mk.of(orders0), "written again: a partition takes a repeat")
	require.Zero(t, b.AddPartitions(ctx, "etl", pid, epoch, []TopicPartition{orders0}))
}

func TestStaleCoordinatorCannotDecide(t *testing.T) {
	e := newEnv(t)
	a := e.coordinator(newMarkers())
	a.SetShards(e.assign(1))
	pid, epoch, _ := a.InitProducerID(ctx, "etl", time.Minute, -1, -1)
	require.Zero(t, a.AddPartitions(ctx, "etl", pid, epoch, []TopicPartition{orders0}))
	// The shard moves while a is frozen: a has not heard of it.
	b := e.coordinator(newMarkers())
	b.SetShards(e.assign(2))
	require.Equal(t, kerr.NotCoordinator.Code, a.EndTxn(ctx, "etl", pid, epoch, true)())
	require.Equal(t, metastore.TxnOngoing, stored(t, e.meta, "etl").State)
	// The new owner decides.
	require.Zero(t, b.EndTxn(ctx, "etl", pid, epoch, false)())
	require.Equal(t, metastore.TxnCompleteAbort, stored(t, e.meta, "etl").State)
	// Without the shard, a serves nothing.
	a.SetShards(nil)
	require.Equal(t, kerr.NotCoordinator.Code, a.AddPartitions(ctx, "etl", pid, epoch, []TopicPartition{orders0}))
}

func TestFencedMarkerStopsTheCompletion(t *testing.T) {
	e := newEnv(t)
	mk := newMarkers()
	mk.setFail(func(TopicPartition) error { return ErrFenced })
	c := e.coordinator(mk)
	c.SetShards(e.assign(1))
	pid, epoch, _ := c.InitProducerID(ctx, "etl", time.Minute, -1, -1)
	require.Zero(t, c.AddPartitions(ctx, "etl", pid, epoch, []TopicPartition{orders0}))
	require.Zero(t, c.EndTxn(ctx, "etl", pid, epoch, true)())
	require.Equal(t, metastore.TxnPrepareCommit, stored(t, e.meta, "etl").State, "a fenced coordinator records nothing")
}

func TestListAndDescribe(t *testing.T) {
	e := newEnv(t)
	c := e.coordinator(newMarkers())
	c.SetShards(e.assign(1))
	for _, id := range []string{"a", "b", "c"} {
		pid, epoch, code := c.InitProducerID(ctx, id, time.Minute, -1, -1)
		require.Zero(t, code)
		if id == "b" {
			require.Zero(t, c.AddPartitions(ctx, id, pid, epoch, []TopicPartition{orders0}))
		}
	}
	txns, code := c.List(ctx)
	require.Zero(t, code)
	states := map[string]string{}
	for _, t := range txns {
		states[t.ID] = t.State
	}
	require.Equal(t, map[string]string{"a": "Empty", "b": "Ongoing", "c": "Empty"}, states)
	got, code := c.Describe(ctx, "b")
	require.Zero(t, code)
	require.Equal(t, []metastore.TxnTopic{{Topic: "orders", Partitions: []int32{0}}}, got.Partitions)
	require.NotZero(t, got.StartMs)

	// A fresh coordinator owning the shards reads them all back.
	c2 := e.coordinator(newMarkers())
	c.SetShards(nil)
	c2.SetShards(e.assign(2))
	txns, code = c2.List(ctx)
	require.Zero(t, code)
	require.Len(t, txns, 3)
}

func TestUnknownIDsLeaveNothingInMemory(t *testing.T) {
	e := newEnv(t)
	c := e.coordinator(newMarkers())
	c.SetShards(e.assign(1))
	for i := range 100 {
		_, code := c.Describe(ctx, "nobody-"+strconv.Itoa(i))
		require.Equal(t, kerr.TransactionalIDNotFound.Code, code)
		require.Equal(t, kerr.InvalidProducerIDMapping.Code, c.EndTxn(ctx, "ghost-"+strconv.Itoa(i), 1, 0, true)())
	}
	c.mu.Lock()
	n := len(c.txns)
	c.mu.Unlock()
	require.Zero(t, n)
}

package metastoretest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stratamq/strata/pkg/metastore"
)

// ManualClock is a Clock moved by hand, for lease tests.
type ManualClock struct {
	mu sync.Mutex
	t  time.Time
}

// NewManualClock starts at base.
func NewManualClock(base time.Time) *ManualClock { return &ManualClock{t: base} }

// Now returns the clock's time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

const (
	leaseDur    = 6 * time.Second
	leaseMargin = time.Second
)

var leaseKey = metastore.Key{PK: "leases", SK: "test"}

func newLease(t *testing.T, s metastore.Store, holder string, clock metastore.Clock) *metastore.Lease {
	t.Helper()
	l, err := metastore.NewLease(s, leaseKey, holder, metastore.LeaseOptions{Duration: leaseDur, Margin: leaseMargin, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func tick(t *testing.T, l *metastore.Lease) metastore.LeaseState {
	t.Helper()
	st, err := l.Tick(ctx(t))
	if err != nil {
		t.Fatalf("tick: %v", err)
	}
	return st
}

func testLeaseRace(t *testing.T, s metastore.Store, _ Options) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var winners []string
	for i := 0; i < 16; i++ {
		l := newLease(t, s, fmt.Sprintf("holder-%d", i), nil)
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			st, err := l.Tick(ctx(t))
			if err != nil {
				t.Errorf("holder %d: %v", i, err)
				return
			}
			if _, valid := l.Valid(); st.Held != valid {
				t.Errorf("holder %d: Tick says held=%v, Valid says %v", i, st.Held, valid)
			}
			if st.Held {
				mu.Lock()
				winners = append(winners, fmt.Sprint(i))
				mu.Unlock()
			}
		}(i)
	}
	wg.Wait()
	if len(winners) != 1 {
		t.Fatalf("%d holders won the lease (%v), want exactly 1", len(winners), winners)
	}
}

func testLeaseRenewal(t *testing.T, s metastore.Store, _ Options) {
	ca, cb := NewManualClock(time.Unix(1000, 0)), NewManualClock(time.Unix(5000, 0))
	a, b := newLease(t, s, "a", ca), newLease(t, s, "b", cb)
	if !tick(t, a).Held {
		t.Fatal("a did not acquire a free lease")
	}
	for i := 0; i < 20; i++ {
		ca.Advance(leaseDur / 3)
		cb.Advance(leaseDur / 3)
		if !tick(t, a).Held {
			t.Fatalf("round %d: a lost a lease it kept renewing", i)
		}
		if st := tick(t, b); st.Held || st.Holder != "a" || st.Epoch != 1 {
			t.Fatalf("round %d: contender sees %+v, want holder a at epoch 1", i, st)
		}
		if epoch, ok := a.Valid(); !ok || epoch != 1 {
			t.Fatalf("round %d: a may not act (epoch %d, %v)", i, epoch, ok)
		}
	}
}

func testLeaseTakeover(t *testing.T, s metastore.Store, _ Options) {
	for i, skew := range []time.Duration{-30 * time.Second, 0, 30 * time.Second} {
		t.Run(fmt.Sprintf("skew%+v", skew), func(t *testing.T) {
			key := metastore.Key{PK: "leases", SK: fmt.Sprintf("takeover-%d", i)}
			base := time.Unix(100_000, 0)
			ca, cb := NewManualClock(base), NewManualClock(base.Add(skew))
			a, _ := metastore.NewLease(s, key, "a", metastore.LeaseOptions{Duration: leaseDur, Margin: leaseMargin, Clock: ca})
			b, _ := metastore.NewLease(s, key, "b", metastore.LeaseOptions{Duration: leaseDur, Margin: leaseMargin, Clock: cb})
			if !tick(t, a).Held {
				t.Fatal("a did not acquire")
			}
			// a stops renewing (paused or dead). b watches.
			if tick(t, b).Held {
				t.Fatal("b took a fresh lease at once")
			}
			step := 250 * time.Millisecond
			var took time.Duration
			for elapsed := time.Duration(0); elapsed <= 2*leaseDur; elapsed += step {
				ca.Advance(step)
				cb.Advance(step)
				st := tick(t, b)
				if st.Held {
					took = elapsed + step
					if _, ok := a.Valid(); ok {
						t.Fatalf("b took over at +%v while a could still act", took)
					}
					if st.Epoch != 2 {
						t.Fatalf("takeover epoch %d, want 2", st.Epoch)
					}
					break
				}
				if elapsed+step < leaseDur-leaseMargin {
					if _, ok := a.Valid(); !ok {
						t.Fatalf("a stopped acting at +%v, before its safe deadline", elapsed+step)
					}
				}
			}
			if took < leaseDur || took > leaseDur+time.Second {
				t.Fatalf("b took over after %v; want a full lease (%v) and little more", took, leaseDur)
			}
			// a comes back: its renewal is refused and it knows it lost.
			if st := tick(t, a); st.Held {
				t.Fatal("the old holder renewed after a takeover")
			}
			if _, ok := a.Valid(); ok {
				t.Fatal("the old holder may still act")
			}
		})
	}
}

// failingStore fails every call while down is set.
type failingStore struct {
	metastore.Store
	mu   sync.Mutex
	down bool
}

func (f *failingStore) fail() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return fmt.Errorf("injected: %w", metastore.ErrUnavailable)
	}
	return nil
}

func (f *failingStore) Get(c context.Context, k metastore.Key) (metastore.Item, error) {
	if err := f.fail(); err != nil {
		return metastore.Item{}, err
	}
	return f.Store.Get(c, k)
}

func (f *failingStore) Put(c context.Context, it metastore.Item, cond metastore.Cond) (metastore.Item, error) {
	if err := f.fail(); err != nil {
		return metastore.Item{}, err
	}
	return f.Store.Put(c, it, cond)
}

func testLeaseSafeDeadline(t *testing.T, s metastore.Store, _ Options) {
	fs := &failingStore{Store: s}
	clock := NewManualClock(time.Unix(7, 0))
	l, _ := metastore.NewLease(fs, leaseKey, "a", metastore.LeaseOptions{Duration: leaseDur, Margin: leaseMargin, Clock: clock})
	if !tick(t, l).Held {
		t.Fatal("did not acquire")
	}
	fs.mu.Lock()
	fs.down = true
	fs.mu.Unlock()
	for elapsed := time.Duration(0); elapsed < 2*leaseDur; elapsed += 500 * time.Millisecond {
		_, err := l.Tick(ctx(t))
		if !errors.Is(err, metastore.ErrUnavailable) {
			t.Fatalf("tick with the store down: %v", err)
		}
		_, ok := l.Valid()
		if want := elapsed < leaseDur-leaseMargin; ok != want {
			t.Fatalf("at +%v with renewals failing: may act = %v, want %v", elapsed, ok, want)
		}
		clock.Advance(500 * time.Millisecond)
	}
}

func testLeaseRelease(t *testing.T, s metastore.Store, _ Options) {
	a, b := newLease(t, s, "a", nil), newLease(t, s, "b", nil)
	if !tick(t, a).Held {
		t.Fatal("a did not acquire")
	}
	if err := a.Release(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if _, ok := a.Valid(); ok {
		t.Fatal("a may act after releasing")
	}
	st := tick(t, b)
	if !st.Held || st.Epoch != 2 {
		t.Fatalf("after release b got %+v, want held at epoch 2 at once", st)
	}
}

func testStaleEpoch(t *testing.T, s metastore.Store, _ Options) {
	m := metastore.New(s)
	c := ctx(t)
	id := metastore.TopicID{1, 2, 3}
	_, err := m.CreateTopic(c, metastore.Topic{Name: "fenced", ID: id, Partitions: 1, ReplicationFactor: 3},
		[]metastore.PartitionState{{Partition: 0, Replicas: []int32{1, 2, 3}, Leader: 1, LeaderEpoch: 1, ISR: []int32{1, 2, 3}}})
	if err != nil {
		t.Fatal(err)
	}
	read := func() metastore.PartitionState {
		ps, err := m.Partitions(c, id)
		if err != nil || len(ps) != 1 {
			t.Fatalf("partitions: %v %v", ps, err)
		}
		return ps[0]
	}
	old := read()
	// Another controller shrinks the ISR under the same leader epoch.
	shrunk := old
	shrunk.ISR = []int32{1, 2}
	if _, err := m.UpdatePartition(c, shrunk); err != nil {
		t.Fatal(err)
	}
	// A write from the stale read is refused: the state changed since.
	stale := old
	stale.ISR = []int32{1}
	_, err = m.UpdatePartition(c, stale)
	WantErr(t, err, metastore.ErrConditionFailed)
	// A new leader is elected (epoch 2).
	next := read()
	next.Leader, next.LeaderEpoch, next.ISR = 2, 2, []int32{2}
	if _, err := m.UpdatePartition(c, next); err != nil {
		t.Fatal(err)
	}
	// The old leader, even with the current version, carries epoch 1: fenced.
	stale = read()
	stale.Leader, stale.LeaderEpoch, stale.ISR = 1, 1, []int32{1}
	_, err = m.UpdatePartition(c, stale)
	WantErr(t, err, metastore.ErrFenced)
	if got := read(); got.Leader != 2 || got.LeaderEpoch != 2 {
		t.Fatalf("state after rejected writes: %+v", got)
	}
	// The manifest fences old leader epochs the same way.
	man, err := m.PutManifest(c, id, 0, metastore.Manifest{LeaderEpoch: 2, Segments: []metastore.SegmentRef{{BaseOffset: 0, NextOffset: 10}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.PutManifest(c, id, 0, metastore.Manifest{LeaderEpoch: 1, Version: man.Version})
	WantErr(t, err, metastore.ErrFenced)
}

func testOffsetGeneration(t *testing.T, s metastore.Store, _ Options) {
	m := metastore.New(s)
	c := ctx(t)
	// A group without generations takes commits as generation 0 until its
	// first generation starts.
	if err := m.CommitOffsets(c, "g", 0, []metastore.Offset{{Topic: "t", Partition: 0, Offset: 1}}); err != nil {
		t.Fatalf("commit to a group without generations: %v", err)
	}
	gen1, err := m.NewGeneration(c, "g")
	if err != nil {
		t.Fatal(err)
	}
	commit := func(gen, off int64) error {
		return m.CommitOffsets(c, "g", gen, []metastore.Offset{{Topic: "t", Partition: 0, Offset: off}, {Topic: "t", Partition: 1, Offset: off}})
	}
	WantErr(t, m.CommitOffsets(c, "g", 0, []metastore.Offset{{Topic: "t", Partition: 0, Offset: 2}}), metastore.ErrFenced)
	if err := commit(gen1, 10); err != nil {
		t.Fatal(err)
	}
	gen2, err := m.NewGeneration(c, "g")
	if err != nil || gen2 <= gen1 {
		t.Fatalf("new generation %d after %d: %v", gen2, gen1, err)
	}
	// A zombie of generation 1 commits: rejected, nothing moves.
	WantErr(t, commit(gen1, 99), metastore.ErrFenced)
	offs, err := m.Offsets(c, "g")
	if err != nil || len(offs) != 2 || offs[0].Offset != 10 || offs[1].Offset != 10 {
		t.Fatalf("offsets after a fenced commit: %+v %v", offs, err)
	}
	if err := commit(gen2, 20); err != nil {
		t.Fatal(err)
	}
	WantErr(t, commit(gen2+1, 30), metastore.ErrFenced)
	if err := m.ResetOffsets(c, "g", []metastore.Offset{{Topic: "t", Partition: 0, Offset: 5}}); err != nil {
		t.Fatal(err)
	}
	offs, _ = m.Offsets(c, "g")
	if offs[0].Offset != 5 || offs[1].Offset != 20 {
		t.Fatalf("offsets after reset: %+v", offs)
	}
	// More offsets than one transaction holds.
	many := make([]metastore.Offset, 150)
	for i := range many {
		many[i] = metastore.Offset{Topic: "many", Partition: int32(i), Offset: int64(i)}
	}
	if err := m.CommitOffsets(c, "g", gen2, many); err != nil {
		t.Fatal(err)
	}
	if offs, _ = m.Offsets(c, "g"); len(offs) != 152 {
		t.Fatalf("%d offsets stored, want 152", len(offs))
	}
}

func testGroups(t *testing.T, s metastore.Store, _ Options) {
	m := metastore.New(s)
	c := ctx(t)
	// Shards: first assignment creates, later ones are compare-and-set.
	shards, err := m.CoordinatorShards(c)
	if err != nil || len(shards) != 0 {
		t.Fatalf("fresh shards: %v %v", shards, err)
	}
	v0, _ := m.ChangeVersion(c)
	s3, err := m.AssignShard(c, metastore.CoordinatorShard{Shard: 3, Broker: -1}, 1)
	if err != nil || s3.Broker != 1 || s3.Epoch != 1 {
		t.Fatalf("assign shard 3: %+v %v", s3, err)
	}
	if v1, _ := m.ChangeVersion(c); v1 <= v0 {
		t.Fatal("assigning a shard did not notify watchers")
	}
	_, err = m.AssignShard(c, metastore.CoordinatorShard{Shard: 3, Broker: -1}, 2)
	WantErr(t, err, metastore.ErrConditionFailed)
	s3b, err := m.AssignShard(c, s3, 2)
	if err != nil || s3b.Broker != 2 || s3b.Epoch != 2 {
		t.Fatalf("move shard 3: %+v %v", s3b, err)
	}
	_, err = m.AssignShard(c, s3, 1) // stale read
	WantErr(t, err, metastore.ErrConditionFailed)
	shards, err = m.CoordinatorShards(c)
	if err != nil || len(shards) != 1 || shards[0] != s3b {
		t.Fatalf("shards: %+v %v", shards, err)
	}
	// Group index: per shard, idempotent, removed with the group.
	for _, g := range []string{"billing", "analytics", "billing"} {
		if err := m.IndexGroup(c, metastore.GroupInfo{Group: g, ProtocolType: "consumer"}); err != nil {
			t.Fatal(err)
		}
	}
	found := map[string]int32{}
	for sh := int32(0); sh < metastore.GroupShards; sh++ {
		gs, err := m.Groups(c, sh)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range gs {
			if g.ProtocolType != "consumer" {
				t.Fatalf("group info %+v", g)
			}
			found[g.Group] = sh
		}
	}
	if len(found) != 2 || found["billing"] != metastore.GroupShard("billing") || found["analytics"] != metastore.GroupShard("analytics") {
		t.Fatalf("indexed groups by shard: %v", found)
	}
	if gi, ok, err := m.GroupInfo(c, "billing"); err != nil || !ok || gi.ProtocolType != "consumer" {
		t.Fatalf("group info: %+v %v %v", gi, ok, err)
	}
	if _, ok, err := m.GroupInfo(c, "nobody"); err != nil || ok {
		t.Fatalf("group info of an unknown group: %v %v", ok, err)
	}
	gen, err := m.NewGeneration(c, "billing")
	if err != nil {
		t.Fatal(err)
	}
	offs := []metastore.Offset{{Topic: "orders", Partition: 0, Offset: 7, Metadata: "m"}, {Topic: "orders", Partition: 1, Offset: 9}}
	if err := m.CommitOffsets(c, "billing", gen, offs); err != nil {
		t.Fatal(err)
	}
	if err := m.DeleteOffset(c, "billing", "orders", 1); err != nil {
		t.Fatal(err)
	}
	if err := m.DeleteOffset(c, "billing", "orders", 5); err != nil {
		t.Fatalf("deleting an absent offset: %v", err)
	}
	got, _ := m.Offsets(c, "billing")
	if len(got) != 1 || got[0].Offset != 7 || got[0].Metadata != "m" {
		t.Fatalf("offsets after OffsetDelete: %+v", got)
	}
	if err := m.DeleteGroup(c, "billing"); err != nil {
		t.Fatal(err)
	}
	if got, _ := m.Offsets(c, "billing"); len(got) != 0 {
		t.Fatalf("offsets after DeleteGroup: %+v", got)
	}
	if _, ok, _ := m.GroupInfo(c, "billing"); ok {
		t.Fatal("deleted group still has an index entry")
	}
	gs, _ := m.Groups(c, metastore.GroupShard("billing"))
	for _, g := range gs {
		if g.Group == "billing" {
			t.Fatal("deleted group still indexed")
		}
	}
	// Generations continue across deletion: an old member stays fenced.
	gen2, err := m.NewGeneration(c, "billing")
	if err != nil || gen2 <= gen {
		t.Fatalf("generation after delete %d, before %d: %v", gen2, gen, err)
	}
	WantErr(t, m.CommitOffsets(c, "billing", gen, offs), metastore.ErrFenced)
	if shard := metastore.GroupShard("billing"); shard < 0 || shard >= metastore.GroupShards {
		t.Fatalf("shard %d out of range", shard)
	}
}

func testProducerIDs(t *testing.T, s metastore.Store, _ Options) {
	m := metastore.New(s)
	var wg sync.WaitGroup
	var mu sync.Mutex
	type block struct{ first, n int64 }
	var blocks []block
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 5; j++ {
				first, n, err := m.ProducerIDBlock(ctx(t))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				blocks = append(blocks, block{first, n})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	used := map[int64]bool{}
	for _, b := range blocks {
		if b.n <= 0 || b.first < 0 {
			t.Fatalf("block %+v", b)
		}
		for id := b.first; id < b.first+b.n; id++ {
			if used[id] {
				t.Fatalf("producer id %d handed out twice", id)
			}
			used[id] = true
		}
	}
	if len(blocks) != 80 {
		t.Fatalf("%d blocks, want 80", len(blocks))
	}
}

func testManifest(t *testing.T, s metastore.Store, _ Options) {
	m := metastore.New(s)
	c := ctx(t)
	id := metastore.TopicID{9}
	empty, err := m.Manifest(c, id, 3)
	if err != nil || empty.Version != 0 || len(empty.Segments) != 0 {
		t.Fatalf("empty manifest: %+v %v", empty, err)
	}
	man, err := m.PutManifest(c, id, 3, metastore.Manifest{LeaderEpoch: 1, Segments: []metastore.SegmentRef{{BaseOffset: 0, NextOffset: 100, Object: "a"}}})
	if err != nil {
		t.Fatal(err)
	}
	// Two writers from the same read: exactly one wins.
	var wg sync.WaitGroup
	results := make([]error, 2)
	for i := range results {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			next := man
			next.Segments = append(append([]metastore.SegmentRef(nil), man.Segments...), metastore.SegmentRef{BaseOffset: 100, NextOffset: 200, Object: fmt.Sprint("writer", i)})
			_, results[i] = m.PutManifest(c, id, 3, next)
		}(i)
	}
	wg.Wait()
	won := 0
	for _, err := range results {
		if err == nil {
			won++
		} else if !errors.Is(err, metastore.ErrConditionFailed) {
			t.Fatalf("manifest race: %v", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d manifest writers won, want 1", won)
	}
	got, _ := m.Manifest(c, id, 3)
	if len(got.Segments) != 2 {
		t.Fatalf("manifest has %d segments", len(got.Segments))
	}
	// A manifest beyond one item is refused cleanly.
	huge := got
	for i := 0; len(huge.Segments) < 8000; i++ {
		huge.Segments = append(huge.Segments, metastore.SegmentRef{BaseOffset: int64(i), Object: fmt.Sprintf("%0100d", i)})
	}
	_, err = m.PutManifest(c, id, 3, huge)
	WantErr(t, err, metastore.ErrTooLarge)
}

func testTopics(t *testing.T, s metastore.Store, _ Options) {
	m := metastore.New(s)
	c := ctx(t)
	id := metastore.TopicID{42}
	parts := []metastore.PartitionState{{Partition: 0, Leader: 0, Replicas: []int32{0}, ISR: []int32{0}}, {Partition: 1, Leader: 0, Replicas: []int32{0}, ISR: []int32{0}}}
	top, err := m.CreateTopic(c, metastore.Topic{Name: "orders", ID: id, Partitions: 2, ReplicationFactor: 1, Configs: map[string]string{"retention.ms": "1000"}}, parts)
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.CreateTopic(c, metastore.Topic{Name: "orders", ID: metastore.TopicID{43}, Partitions: 1}, nil)
	WantErr(t, err, metastore.ErrConditionFailed)
	ps, err := m.Partitions(c, id)
	if err != nil || len(ps) != 2 || ps[1].Partition != 1 || ps[1].Epoch != 1 {
		t.Fatalf("partitions: %+v %v", ps, err)
	}
	top.Configs["retention.ms"] = "2000"
	top.Partitions = 3
	top, err = m.UpdateTopic(c, top, []metastore.PartitionState{{Partition: 2, Replicas: []int32{0}, ISR: []int32{0}}})
	if err != nil {
		t.Fatal(err)
	}
	stale := top
	stale.Version--
	_, err = m.UpdateTopic(c, stale, nil)
	WantErr(t, err, metastore.ErrConditionFailed)
	list, err := m.Topics(c)
	if err != nil || len(list) != 1 || list[0].Configs["retention.ms"] != "2000" || list[0].Partitions != 3 {
		t.Fatalf("topics: %+v %v", list, err)
	}
	if ps, _ := m.Partitions(c, id); len(ps) != 3 {
		t.Fatalf("%d partitions after growing to 3", len(ps))
	}
	if err := m.DeleteTopic(c, top); err != nil {
		t.Fatal(err)
	}
	_, err = m.Topic(c, "orders")
	WantErr(t, err, metastore.ErrNotFound)
	if ps, _ := m.Partitions(c, id); len(ps) != 0 {
		t.Fatalf("%d partition states left after delete", len(ps))
	}
}

func testBrokers(t *testing.T, s metastore.Store, _ Options) {
	m := metastore.New(s)
	c := ctx(t)
	opts := metastore.LeaseOptions{Duration: leaseDur, Margin: leaseMargin}
	b1, err := m.BrokerLease(metastore.Broker{ID: 1, Endpoint: "127.0.0.1:9092", Rack: "az1", Incarnation: "first"}, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !tick(t, b1).Held {
		t.Fatal("broker 1 did not register")
	}
	tick(t, b1)
	brokers, err := m.Brokers(c)
	if err != nil || len(brokers) != 1 {
		t.Fatalf("brokers: %+v %v", brokers, err)
	}
	if b := brokers[0]; b.ID != 1 || b.Endpoint != "127.0.0.1:9092" || b.Rack != "az1" || !b.Live || b.Epoch != 1 || b.Version != 2 {
		t.Fatalf("broker record %+v", b)
	}
	// A restart is a new incarnation: it waits for the old lease or a
	// clean hand-over, then registers under a new epoch.
	again, _ := m.BrokerLease(metastore.Broker{ID: 1, Endpoint: "127.0.0.1:9092", Incarnation: "second"}, opts)
	if tick(t, again).Held {
		t.Fatal("a new incarnation took a live registration at once")
	}
	if err := b1.Release(c); err != nil {
		t.Fatal(err)
	}
	if st := tick(t, again); !st.Held || st.Epoch != 2 {
		t.Fatalf("after a clean shutdown the new incarnation got %+v", st)
	}
	brokers, _ = m.Brokers(c)
	if brokers[0].Incarnation != "second" || brokers[0].Epoch != 2 {
		t.Fatalf("broker record after restart %+v", brokers[0])
	}
}

func testChanges(t *testing.T, s metastore.Store, _ Options) {
	m := metastore.New(s)
	c := ctx(t)
	v0, err := m.ChangeVersion(c)
	if err != nil {
		t.Fatal(err)
	}
	seen := make(chan int64, 16)
	wctx, cancel := context.WithCancel(c)
	defer cancel()
	go m.WatchChanges(wctx, 10*time.Millisecond, func(v int64) error { seen <- v; return nil }, nil)
	if got := <-seen; got != v0 {
		t.Fatalf("first notification %d, want the current version %d", got, v0)
	}
	top, err := m.CreateTopic(c, metastore.Topic{Name: "watched", ID: metastore.TopicID{7}, Partitions: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case v := <-seen:
		if v <= v0 {
			t.Fatalf("change version went from %d to %d", v0, v)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no notification within 5s of a topic change")
	}
	before, _ := m.ChangeVersion(c)
	top.Configs = map[string]string{"a": "b"}
	if _, err := m.UpdateTopic(c, top, []metastore.PartitionState{{Partition: 0, Leader: 1, ISR: []int32{1, 2}}}); err != nil {
		t.Fatal(err)
	}
	after, _ := m.ChangeVersion(c)
	if after <= before {
		t.Fatal("a config change did not move the change version")
	}
	// An ISR change (leadership changes are the same write) moves it too.
	ps, err := m.Partitions(c, top.ID)
	if err != nil || len(ps) != 1 {
		t.Fatalf("partitions: %+v %v", ps, err)
	}
	ps[0].ISR = []int32{1}
	if _, err := m.UpdatePartition(c, ps[0]); err != nil {
		t.Fatal(err)
	}
	if again, _ := m.ChangeVersion(c); again <= after {
		t.Fatal("an ISR change did not move the change version")
	}
}

func testSchemas(t *testing.T, s metastore.Store, _ Options) {
	m := metastore.New(s)
	c := ctx(t)
	const avro = `{"type":"record","name":"Order","fields":[{"name":"id","type":"string"}]}`
	// Concurrent registrations of one schema share one id.
	ids := make([]int64, 8)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			id, err := m.SchemaID(c, "AVRO", avro)
			if err != nil {
				t.Error(err)
			}
			ids[i] = id
		}(i)
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] || id <= 0 {
			t.Fatalf("one schema got ids %v", ids)
		}
	}
	other, err := m.SchemaID(c, "JSON", avro)
	if err != nil || other == ids[0] {
		t.Fatalf("a different type got id %d (%v), the same as %d", other, err, ids[0])
	}
	sch, err := m.SchemaByID(c, ids[0])
	if err != nil || sch.Text != avro || sch.Type != "AVRO" || sch.ID != ids[0] {
		t.Fatalf("schema by id: %+v %v", sch, err)
	}
	_, err = m.SchemaByID(c, 999999)
	WantErr(t, err, metastore.ErrNotFound)

	// Subject versions: appended under compare-and-set on the latest.
	v1, err := m.AddSubjectVersion(c, "orders-value", 0, ids[0])
	if err != nil || v1 != 1 {
		t.Fatalf("first version %d: %v", v1, err)
	}
	_, err = m.AddSubjectVersion(c, "orders-value", 0, other)
	WantErr(t, err, metastore.ErrConditionFailed)
	v2, err := m.AddSubjectVersion(c, "orders-value", v1, other)
	if err != nil || v2 != 2 {
		t.Fatalf("second version %d: %v", v2, err)
	}
	if err := m.MarkVersionDeleted(c, "orders-value", 1); err != nil {
		t.Fatal(err)
	}
	vs, err := m.SubjectVersions(c, "orders-value")
	if err != nil || len(vs) != 2 || !vs[0].Deleted || vs[1].Deleted || vs[1].ID != other || vs[1].Version != 2 {
		t.Fatalf("versions: %+v %v", vs, err)
	}

	// Compatibility levels, global and per subject.
	if _, ok, err := m.Compatibility(c, ""); ok || err != nil {
		t.Fatalf("a global level before any was set (%v)", err)
	}
	if err := m.SetCompatibility(c, "", "BACKWARD"); err != nil {
		t.Fatal(err)
	}
	if err := m.SetCompatibility(c, "orders-value", "FULL_TRANSITIVE"); err != nil {
		t.Fatal(err)
	}
	if lvl, ok, _ := m.Compatibility(c, ""); !ok || lvl != "BACKWARD" {
		t.Fatalf("global level %q", lvl)
	}
	if lvl, ok, _ := m.Compatibility(c, "orders-value"); !ok || lvl != "FULL_TRANSITIVE" {
		t.Fatalf("subject level %q", lvl)
	}
	if err := m.SetCompatibility(c, "orders-value", ""); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := m.Compatibility(c, "orders-value"); ok {
		t.Fatal("a removed subject level is still set")
	}

	// Modes, global and per subject, like levels.
	if _, ok, err := m.SchemaMode(c, ""); ok || err != nil {
		t.Fatalf("a global mode before any was set (%v)", err)
	}
	if err := m.SetSchemaMode(c, "orders-value", "READONLY"); err != nil {
		t.Fatal(err)
	}
	if mode, ok, _ := m.SchemaMode(c, "orders-value"); !ok || mode != "READONLY" {
		t.Fatalf("subject mode %q", mode)
	}
	if _, ok, _ := m.SchemaMode(c, ""); ok {
		t.Fatal("a subject mode set the global one")
	}
	if err := m.SetSchemaMode(c, "orders-value", ""); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := m.SchemaMode(c, "orders-value"); ok {
		t.Fatal("a removed subject mode is still set")
	}
	testSchemaIndexes(t, m, ids[0], other)
}

// testSchemaIndexes covers lookups without allocation, references, the
// subject and use indexes, permanent deletion and imported ids; it runs
// after testSchemas registered "orders-value" versions 1 (deleted, id a)
// and 2 (id b).
func testSchemaIndexes(t *testing.T, m *metastore.Meta, a, b int64) {
	c := ctx(t)
	const base = `{"type":"record","name":"Base","fields":[]}`
	if _, err := m.LookupSchemaID(c, "AVRO", base); !errors.Is(err, metastore.ErrNotFound) {
		t.Fatalf("lookup of an unknown schema: %v", err)
	}
	if id, err := m.LookupSchemaID(c, "JSON", `{"type":"record","name":"Order","fields":[{"name":"id","type":"string"}]}`); err != nil || id != b {
		t.Fatalf("lookup of a known schema: %d %v, want %d", id, err, b)
	}
	baseID := Must[int64](t)(m.SchemaID(c, "AVRO", base))
	Must[int64](t)(m.AddSubjectVersion(c, "base", 0, baseID))

	// References are part of a schema's identity, and indexed.
	ref := metastore.SchemaRef{Name: "Base", Subject: "base", Version: 1}
	const user = `{"type":"record","name":"User","fields":[{"name":"b","type":"Base"}]}`
	withRef := Must[int64](t)(m.SchemaID(c, "AVRO", user, ref))
	if again := Must[int64](t)(m.SchemaID(c, "AVRO", user, ref)); again != withRef {
		t.Fatalf("same schema and references: ids %d and %d", withRef, again)
	}
	other := ref
	other.Name = "other.Base"
	if id := Must[int64](t)(m.SchemaID(c, "AVRO", user, other)); id == withRef {
		t.Fatal("other references got the same id")
	}
	if id := Must[int64](t)(m.SchemaID(c, "AVRO", user)); id == withRef {
		t.Fatal("no references got the same id")
	}
	if sch := Must[metastore.Schema](t)(m.SchemaByID(c, withRef)); len(sch.References) != 1 || sch.References[0] != ref {
		t.Fatalf("references read back as %+v", sch.References)
	}
	by := Must[[]int64](t)(m.ReferencedBy(c, "base", 1))
	if len(by) != 2 || by[0] != withRef {
		t.Fatalf("referenced by %v, want %d and the other-references id", by, withRef)
	}
	if by := Must[[]int64](t)(m.ReferencedBy(c, "base", 2)); len(by) != 0 {
		t.Fatalf("an unreferenced version is referenced by %v", by)
	}

	// Indexes: subjects and the versions that use an id.
	Must[int64](t)(m.AddSubjectVersion(c, "users", 0, withRef))
	Must[int64](t)(m.AddSubjectVersion(c, "users-copy", 0, withRef))
	if subs := Must[[]string](t)(m.Subjects(c)); fmt.Sprint(subs) != "[base orders-value users users-copy]" {
		t.Fatalf("subjects %v", subs)
	}
	uses := Must[[]metastore.SubjectVersion](t)(m.SchemaUses(c, withRef))
	if len(uses) != 2 || uses[0].Subject != "users" || uses[1].Subject != "users-copy" || uses[0].Version != 1 {
		t.Fatalf("uses of %d: %+v", withRef, uses)
	}
	uses = Must[[]metastore.SubjectVersion](t)(m.SchemaUses(c, a))
	if len(uses) != 1 || uses[0].Subject != "orders-value" || !uses[0].Deleted {
		t.Fatalf("uses of %d: %+v", a, uses)
	}

	// Permanent deletion needs a soft delete first; the schema stays.
	WantErr(t, m.DeleteSubjectVersion(c, "orders-value", 2), metastore.ErrConditionFailed)
	WantErr(t, m.DeleteSubjectVersion(c, "orders-value", 9), metastore.ErrNotFound)
	if err := m.DeleteSubjectVersion(c, "orders-value", 1); err != nil {
		t.Fatal(err)
	}
	if vs := Must[[]metastore.SubjectVersion](t)(m.SubjectVersions(c, "orders-value")); len(vs) != 1 || vs[0].Version != 2 {
		t.Fatalf("versions after a permanent delete: %+v", vs)
	}
	if uses := Must[[]metastore.SubjectVersion](t)(m.SchemaUses(c, a)); len(uses) != 0 {
		t.Fatalf("a permanently deleted version is still a use: %+v", uses)
	}
	Must[metastore.Schema](t)(m.SchemaByID(c, a))

	// Imported ids: idempotent, conflicts refused, the counter moves past.
	if err := m.ImportSchema(c, 500, "JSON", `{"type":"string"}`); err != nil {
		t.Fatal(err)
	}
	if err := m.ImportSchema(c, 500, "JSON", `{"type":"string"}`); err != nil {
		t.Fatalf("importing the same schema again: %v", err)
	}
	WantErr(t, m.ImportSchema(c, 500, "JSON", `{"type":"number"}`), metastore.ErrConditionFailed)
	if id := Must[int64](t)(m.LookupSchemaID(c, "JSON", `{"type":"string"}`)); id != 500 {
		t.Fatalf("imported schema looked up as %d", id)
	}
	if id := Must[int64](t)(m.SchemaID(c, "JSON", `{"type":"boolean"}`)); id <= 500 {
		t.Fatalf("an id allocated after an import of 500: %d", id)
	}
}

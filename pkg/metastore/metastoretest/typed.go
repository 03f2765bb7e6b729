package metastoretest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stratamq/strata/pkg/metastore"
)

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

func testGroupRecord(t *testing.T, s metastore.Store, _ Options) {
	m := metastore.New(s)
	c := ctx(t)
	// A group never stored reads as version 0, classic, generation 0.
	r, err := m.LoadGroup(c, "g")
	if err != nil || r.Version != 0 || r.Type != "" || r.Classic == nil || r.Classic.Generation != 0 {
		t.Fatalf("absent group: %+v %v", r, err)
	}
	// A record from before the value existed: generation = version.
	gen, err := m.NewGeneration(c, "old")
	if err != nil {
		t.Fatal(err)
	}
	r, err = m.LoadGroup(c, "old")
	if err != nil || r.Version != gen || r.Classic == nil || r.Classic.Generation != int32(gen) {
		t.Fatalf("old group: %+v %v", r, err)
	}
	// Stores are conditioned on the version.
	rec := metastore.GroupRecord{Type: metastore.GroupTypeConsumer, Consumer: &metastore.ConsumerGroup{Epoch: 3, AssignmentEpoch: 3,
		Members: []metastore.ConsumerMember{{ID: "m1", Epoch: 3, Topics: []string{"t"},
			Assigned: []metastore.TopicPartitions{{Topic: metastore.TopicID{9}, Partitions: []int32{0, 1}, Epochs: []int32{2, 3}}}}}}}
	v1, err := m.StoreGroup(c, "g", rec)
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.StoreGroup(c, "g", rec) // version 0 again: another writer's
	WantErr(t, err, metastore.ErrFenced)
	rec.Version = v1
	rec.Consumer.Epoch = 4
	v2, err := m.StoreGroup(c, "g", rec)
	if err != nil || v2 <= v1 {
		t.Fatalf("store at version %d: %d %v", v1, v2, err)
	}
	rec.Version = v1
	_, err = m.StoreGroup(c, "g", rec)
	WantErr(t, err, metastore.ErrFenced)
	got, err := m.LoadGroup(c, "g")
	if err != nil || got.Version != v2 || got.Type != metastore.GroupTypeConsumer || got.Consumer.Epoch != 4 ||
		len(got.Consumer.Members) != 1 || got.Consumer.Members[0].Assigned[0].Topic != (metastore.TopicID{9}) ||
		got.Consumer.Members[0].Assigned[0].Epochs[1] != 3 {
		t.Fatalf("loaded %+v %v", got, err)
	}
	// Commits are fenced by the record's version.
	WantErr(t, m.CommitOffsets(c, "g", v1, []metastore.Offset{{Topic: "t", Offset: 1}}), metastore.ErrFenced)
	if err := m.CommitOffsets(c, "g", v2, []metastore.Offset{{Topic: "t", Offset: 1}}); err != nil {
		t.Fatal(err)
	}
	// Deleting the group keeps the record (it fences).
	if err := m.DeleteGroup(c, "g"); err != nil {
		t.Fatal(err)
	}
	if got, err := m.LoadGroup(c, "g"); err != nil || got.Version != v2 {
		t.Fatalf("after delete: %+v %v", got, err)
	}
}

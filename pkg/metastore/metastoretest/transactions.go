package metastoretest

import (
	"slices"
	"testing"

	"github.com/stratamq/strata/pkg/metastore"
)

// testTransactions checks the transaction coordinator's records: writes
// conditioned on the record's version and on the shard's assignment, so a
// coordinator that lost its shard, or read a stale record, writes nothing.
func testTransactions(t *testing.T, s metastore.Store, _ Options) {
	m := metastore.New(s)
	c := ctx(t)
	id := "payments-etl"
	shard := metastore.GroupShard(id)
	sh, err := m.AssignShard(c, metastore.CoordinatorShard{Shard: shard, Broker: -1}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, err := m.Transaction(c, id); ok || err != nil {
		t.Fatalf("fresh id: %v %v", ok, err)
	}
	txn := metastore.Transaction{ID: id, ProducerID: 7, ProducerEpoch: 0, LastProducerID: -1, LastProducerEpoch: -1,
		State: metastore.TxnEmpty, TimeoutMs: 60000, UpdateMs: 1}
	created, err := m.PutTransaction(c, txn, sh.Version)
	if err != nil || created.Version != 1 {
		t.Fatalf("create: %+v %v", created, err)
	}
	// Another coordinator that read nothing (or the old version) loses.
	_, err = m.PutTransaction(c, txn, sh.Version)
	WantErr(t, err, metastore.ErrFenced)

	next := created
	next.State = metastore.TxnOngoing
	next.AddPartition("orders", 3)
	next.AddPartition("orders", 1)
	next.AddPartition("audit", 0)
	if next.AddPartition("orders", 3) {
		t.Fatal("a partition added twice is new")
	}
	stored, err := m.PutTransaction(c, next, sh.Version)
	if err != nil || stored.Version != 2 {
		t.Fatalf("update: %+v %v", stored, err)
	}
	got, ok, err := m.Transaction(c, id)
	if err != nil || !ok || got.Version != 2 || got.State != metastore.TxnOngoing ||
		!slices.EqualFunc(got.Partitions, []metastore.TxnTopic{{Topic: "audit", Partitions: []int32{0}}, {Topic: "orders", Partitions: []int32{1, 3}}},
			func(a, b metastore.TxnTopic) bool {
				return a.Topic == b.Topic && slices.Equal(a.Partitions, b.Partitions)
			}) {
		t.Fatalf("read back: %+v %v %v", got, ok, err)
	}
	if !got.HasPartition("orders", 1) || got.HasPartition("orders", 2) {
		t.Fatal("HasPartition")
	}
	// A stale version loses.
	_, err = m.PutTransaction(c, created, sh.Version)
	WantErr(t, err, metastore.ErrFenced)

	// The shard moves: the old owner can decide nothing any more.
	moved, err := m.AssignShard(c, sh, 2)
	if err != nil {
		t.Fatal(err)
	}
	decide := got
	decide.State = metastore.TxnPrepareCommit
	_, err = m.PutTransaction(c, decide, sh.Version)
	WantErr(t, err, metastore.ErrFenced)
	err = m.DeleteTransaction(c, got, sh.Version)
	WantErr(t, err, metastore.ErrFenced)
	if _, err = m.PutTransaction(c, decide, moved.Version); err != nil {
		t.Fatal(err)
	}
	all, err := m.Transactions(c, shard)
	if err != nil || len(all) != 1 || all[0].State != metastore.TxnPrepareCommit || all[0].Version != 3 {
		t.Fatalf("shard's transactions: %+v %v", all, err)
	}
	if err := m.DeleteTransaction(c, all[0], moved.Version); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := m.Transaction(c, id); ok {
		t.Fatal("deleted transaction still there")
	}
}

// testPendingOffsets checks transactional offsets: stored under the
// group's generation, found through the producer's index, committed or
// dropped once.
func testPendingOffsets(t *testing.T, s metastore.Store, _ Options) {
	m := metastore.New(s)
	c := ctx(t)
	gen, err := m.NewGeneration(c, "etl")
	if err != nil {
		t.Fatal(err)
	}
	offs := []metastore.PendingOffset{{ProducerEpoch: 2, Topic: "in", Partition: 0, Offset: 10}, {ProducerEpoch: 2, Topic: "in", Partition: 1, Offset: 20, Metadata: "m"}}
	WantErr(t, m.PutPendingOffsets(c, "etl", gen+1, 5, offs), metastore.ErrFenced)
	if err := m.PutPendingOffsets(c, "etl", gen, 5, offs); err != nil {
		t.Fatal(err)
	}
	if err := m.PutPendingOffsets(c, "etl", gen, 6, offs[:1]); err != nil {
		t.Fatal(err)
	}
	groups, err := m.PendingGroups(c, metastore.GroupShard("etl"), 5)
	if err != nil || !slices.Equal(groups, []string{"etl"}) {
		t.Fatalf("pending groups: %v %v", groups, err)
	}
	pending, err := m.PendingOffsets(c, "etl")
	if err != nil || len(pending) != 3 {
		t.Fatalf("pending: %+v %v", pending, err)
	}
	if committed, _ := m.Offsets(c, "etl"); len(committed) != 0 {
		t.Fatalf("pending offsets read as committed: %+v", committed)
	}
	var of5, of6 []metastore.PendingOffset
	for _, p := range pending {
		if p.ProducerID == 5 {
			of5 = append(of5, p)
		} else {
			of6 = append(of6, p)
		}
	}
	if err := m.CompletePendingOffsets(c, "etl", 5, true, gen, of5); err != nil {
		t.Fatal(err)
	}
	// Applied once: a second completion from the same read loses.
	WantErr(t, m.CompletePendingOffsets(c, "etl", 5, true, gen, of5), metastore.ErrFenced)
	committed, err := m.Offsets(c, "etl")
	if err != nil || len(committed) != 2 || committed[0].Offset != 10 || committed[1].Offset != 20 || committed[1].Metadata != "m" {
		t.Fatalf("committed: %+v %v", committed, err)
	}
	if err := m.CompletePendingOffsets(c, "etl", 6, false, gen, of6); err != nil {
		t.Fatal(err)
	}
	if pending, _ := m.PendingOffsets(c, "etl"); len(pending) != 0 {
		t.Fatalf("pending after completion: %+v", pending)
	}
	if groups, _ := m.PendingGroups(c, metastore.GroupShard("etl"), 5); len(groups) != 0 {
		t.Fatalf("index after completion: %v", groups)
	}
	if committed, _ := m.Offsets(c, "etl"); committed[0].Offset != 10 {
		t.Fatalf("an abort moved a committed offset: %+v", committed)
	}
}

package metastoretest

// The records offset retention and topic re-creation rely on: offsets carry
// the topic id and commit time they were committed with, index entries the
// times the coordinator counts retention from, and records stored before
// those fields existed still load.

import (
	"fmt"
	"testing"

	"github.com/stratamq/strata/pkg/metastore"
)

// Record layouts as stored before the retention fields existed. They pin
// the stored layout: a change that cannot read them breaks stored data.
var (
	legacyOffsetKey   = metastore.Key{PK: "group/old", SK: "offset/t/000003"}
	legacyOffset      = `{"topic":"t","partition":3,"offset":42,"leaderEpoch":5,"metadata":"m","generation":0}`
	legacyGroupKey    = metastore.Key{PK: fmt.Sprintf("groups/%06d", metastore.GroupShard("old")), SK: "old"}
	legacyGroupRecord = `{"group":"old","protocolType":"consumer"}`
)

func testOffsetRecords(t *testing.T, s metastore.Store, _ Options) {
	m := metastore.New(s)
	c := ctx(t)
	id := metastore.NewTopicID()
	in := metastore.Offset{Topic: "t", Partition: 0, Offset: 7, LeaderEpoch: 2, Metadata: "m", TopicID: id, CommittedAt: 1_700_000_000_123}
	if err := m.CommitOffsets(c, "g", 0, []metastore.Offset{in}); err != nil {
		t.Fatal(err)
	}
	got := Must[[]metastore.Offset](t)(m.Offsets(c, "g"))
	if len(got) != 1 || got[0].TopicID != id || got[0].CommittedAt != in.CommittedAt || got[0].Offset != 7 || got[0].Version == 0 {
		t.Fatalf("offsets %+v, want %+v with a version", got, in)
	}

	// A record without the new fields loads with them zero.
	Must[metastore.Item](t)(s.Put(c, metastore.Item{Key: legacyOffsetKey, Value: []byte(legacyOffset)}, metastore.IfAbsent()))
	old := Must[[]metastore.Offset](t)(m.Offsets(c, "old"))
	if len(old) != 1 || old[0].Offset != 42 || old[0].LeaderEpoch != 5 || old[0].Metadata != "m" ||
		old[0].TopicID != (metastore.TopicID{}) || old[0].CommittedAt != 0 {
		t.Fatalf("legacy offset read as %+v", old)
	}
	// Stamping fills it in, unless it changed since it was read.
	stale := old[0]
	stamped := old[0]
	stamped.CommittedAt = 1_700_000_000_000
	if err := m.StampOffsets(c, "old", []metastore.Offset{stamped}); err != nil {
		t.Fatal(err)
	}
	if o := Must[[]metastore.Offset](t)(m.Offsets(c, "old")); o[0].CommittedAt != stamped.CommittedAt || o[0].Offset != 42 {
		t.Fatalf("stamped offset %+v", o[0])
	}
	stale.CommittedAt = 1
	if err := m.StampOffsets(c, "old", []metastore.Offset{stale}); err != nil {
		t.Fatalf("stamping a record changed since: %v", err)
	}
	if o := Must[[]metastore.Offset](t)(m.Offsets(c, "old")); o[0].CommittedAt != stamped.CommittedAt {
		t.Fatalf("a stale stamp overwrote the record: %+v", o[0])
	}
}

func testGroupInfo(t *testing.T, s metastore.Store, _ Options) {
	m := metastore.New(s)
	c := ctx(t)
	Must[metastore.Item](t)(s.Put(c, metastore.Item{Key: legacyGroupKey, Value: []byte(legacyGroupRecord)}, metastore.IfAbsent()))
	gi, ok, err := m.GroupInfo(c, "old")
	if err != nil || !ok || gi != (metastore.GroupInfo{Group: "old", ProtocolType: "consumer"}) {
		t.Fatalf("legacy index entry read as %+v %v %v", gi, ok, err)
	}
	want := metastore.GroupInfo{Group: "old", ProtocolType: "consumer", EmptySince: 1_700_000_000_000, OldestCommit: 1_600_000_000_000}
	if err := m.PutGroupInfo(c, want); err != nil {
		t.Fatal(err)
	}
	if gi, _, _ := m.GroupInfo(c, "old"); gi != want {
		t.Fatalf("index entry %+v, want %+v", gi, want)
	}
	listed := Must[[]metastore.GroupInfo](t)(m.Groups(c, metastore.GroupShard("old")))
	if len(listed) != 1 || listed[0] != want {
		t.Fatalf("shard index %+v, want %+v", listed, want)
	}
	// IndexGroup still leaves an existing entry alone; PutGroupInfo of a
	// new group indexes it.
	if err := m.IndexGroup(c, metastore.GroupInfo{Group: "old"}); err != nil {
		t.Fatal(err)
	}
	if gi, _, _ := m.GroupInfo(c, "old"); gi != want {
		t.Fatalf("IndexGroup changed an entry: %+v", gi)
	}
	if err := m.PutGroupInfo(c, metastore.GroupInfo{Group: "new", OldestCommit: 5}); err != nil {
		t.Fatal(err)
	}
	if gi, ok, _ := m.GroupInfo(c, "new"); !ok || gi.OldestCommit != 5 {
		t.Fatalf("new index entry %+v %v", gi, ok)
	}
}

func testOffsetExpiry(t *testing.T, s metastore.Store, _ Options) {
	m := metastore.New(s)
	c := ctx(t)
	gen := Must[int64](t)(m.NewGeneration(c, "g"))
	if err := m.PutGroupInfo(c, metastore.GroupInfo{Group: "g", ProtocolType: "consumer"}); err != nil {
		t.Fatal(err)
	}
	var offs []metastore.Offset
	for p := range int32(120) { // more than one transaction holds
		offs = append(offs, metastore.Offset{Topic: "t", Partition: p, Offset: int64(p)})
	}
	if err := m.CommitOffsets(c, "g", gen, offs); err != nil {
		t.Fatal(err)
	}
	// A coordinator of an older generation expires nothing.
	gen2 := Must[int64](t)(m.NewGeneration(c, "g"))
	_, err := m.ExpireOffsets(c, "g", gen, offs[:1], false)
	WantErr(t, err, metastore.ErrFenced)
	if left := Must[[]metastore.Offset](t)(m.Offsets(c, "g")); len(left) != 120 {
		t.Fatalf("%d offsets left after a fenced expiry, want 120", len(left))
	}
	dropped, err := m.ExpireOffsets(c, "g", gen2, offs[:110], false)
	if err != nil || dropped {
		t.Fatalf("expire: dropped %v, %v", dropped, err)
	}
	left := Must[[]metastore.Offset](t)(m.Offsets(c, "g"))
	if len(left) != 10 || left[0].Partition != 110 {
		t.Fatalf("offsets left: %+v", left)
	}
	// Dropping the group while an offset it was not told of remains keeps
	// the group.
	dropped, err = m.ExpireOffsets(c, "g", gen2, left[:9], true)
	if err != nil || dropped {
		t.Fatalf("expire with an offset left: dropped %v, %v", dropped, err)
	}
	if _, ok, _ := m.GroupInfo(c, "g"); !ok {
		t.Fatal("group dropped with an offset left")
	}
	_, err = m.ExpireOffsets(c, "g", gen, left[9:], true)
	WantErr(t, err, metastore.ErrFenced)
	dropped, err = m.ExpireOffsets(c, "g", gen2, left[9:], true)
	if err != nil || !dropped {
		t.Fatalf("expire the last offset: dropped %v, %v", dropped, err)
	}
	if _, ok, _ := m.GroupInfo(c, "g"); ok {
		t.Fatal("group still indexed after its last offset expired")
	}
	if left := Must[[]metastore.Offset](t)(m.Offsets(c, "g")); len(left) != 0 {
		t.Fatalf("offsets left: %+v", left)
	}
	// The generation stays: an old member remains fenced.
	if g := Must[int64](t)(m.Generation(c, "g")); g != gen2 {
		t.Fatalf("generation %d after the group expired, want %d", g, gen2)
	}
	// A group that never had a generation (simple commits) expires under
	// generation 0.
	if err := m.CommitOffsets(c, "simple", 0, offs[:1]); err != nil {
		t.Fatal(err)
	}
	if err := m.PutGroupInfo(c, metastore.GroupInfo{Group: "simple"}); err != nil {
		t.Fatal(err)
	}
	if dropped, err := m.ExpireOffsets(c, "simple", 0, offs[:1], true); err != nil || !dropped {
		t.Fatalf("expire a simple group: dropped %v, %v", dropped, err)
	}
}

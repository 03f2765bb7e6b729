// Package metastoretest is the conformance suite every metastore.Store
// implementation runs: the primitive's semantics, then the lease, fencing,
// offset-commit, producer-id and manifest rules built on it. It imports
// testing and is used only from tests.
package metastoretest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stratamq/strata/pkg/metastore"
)

// Options describe what an implementation cannot do, so the cases that
// need it are skipped by name with the reason.
type Options struct {
	// NoTransactions, if set, is why Transact is unsupported (dynalite).
	NoTransactions string
	// NoExpiry, if set, is why items with Expires cannot be tested.
	NoExpiry string
}

// NewStore returns a fresh, empty store for one test; the suite closes it.
type NewStore func(t *testing.T) metastore.Store

// Run runs every case against stores made by newStore.
func Run(t *testing.T, newStore NewStore, opts Options) {
	cases := []struct {
		name string
		fn   func(t *testing.T, s metastore.Store, opts Options)
	}{
		{"GetAbsent", testGetAbsent},
		{"PutConditions", testPutConditions},
		{"DeleteConditions", testDeleteConditions},
		{"QueryPrefixOrder", testQuery},
		{"Expiry", testExpiry},
		{"ItemSizeLimit", testItemSize},
		{"RacingCreateHasOneWinner", testRacingCreate},
		{"AddIsAtomic", testAdd},
		{"TransactAllOrNothing", testTransact},
		{"LeaseRace16", testLeaseRace},
		{"LeaseRenewalKeepsIt", testLeaseRenewal},
		{"LeaseTakeoverAfterFullLease", testLeaseTakeover},
		{"LeaseHolderStopsAtSafeDeadline", testLeaseSafeDeadline},
		{"LeaseReleaseHandsOver", testLeaseRelease},
		{"StaleEpochWriteRejected", testStaleEpoch},
		{"OffsetCommitFencedByGeneration", testOffsetGeneration},
		{"GroupIndexAndCoordinatorShards", testGroups},
		{"OffsetRecordsCarryTopicIDAndTime", testOffsetRecords},
		{"GroupInfoRetentionTimes", testGroupInfo},
		{"OffsetExpiryFencedByGeneration", testOffsetExpiry},
		{"ProducerIDBlocksNeverOverlap", testProducerIDs},
		{"ManifestCompareAndSet", testManifest},
		{"ManifestPaging", testManifestPaging},
		{"ManifestSingleItemCompatibility", testManifestSingleItem},
		{"ManifestFencedAcrossPages", testManifestFencedAcrossPages},
		{"ManifestStrayPages", testManifestStrayPages},
		{"TopicsAndPartitions", testTopics},
		{"BrokerRegistration", testBrokers},
		{"ChangeNotification", testChanges},
		{"SchemaRegistryRecords", testSchemas},
		{"TransactionsFencedByShardAndVersion", testTransactions},
		{"PendingTransactionalOffsets", testPendingOffsets},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newStore(t)
			t.Cleanup(func() { s.Close() })
			c.fn(t, s, opts)
		})
	}
}

// Ctx returns a context that ends with the test (or after 30 s).
func Ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func ctx(t *testing.T) context.Context { return Ctx(t) }

// Must returns a function that fails the test on a non-nil error and
// otherwise returns the value: Must[metastore.Item](t)(s.Get(c, k)).
func Must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return v
	}
}

// WantErr fails the test unless errors.Is(err, target).
func WantErr(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("got error %v, want %v", err, target)
	}
}

var k1 = metastore.Key{PK: "test", SK: "k1"}

func testGetAbsent(t *testing.T, s metastore.Store, _ Options) {
	_, err := s.Get(ctx(t), k1)
	WantErr(t, err, metastore.ErrNotFound)
}

func testPutConditions(t *testing.T, s metastore.Store, _ Options) {
	c := ctx(t)
	it := Must[metastore.Item](t)(s.Put(c, metastore.Item{Key: k1, Value: []byte("a")}, metastore.IfAbsent()))
	if it.Version != 1 {
		t.Fatalf("first version %d, want 1", it.Version)
	}
	_, err := s.Put(c, metastore.Item{Key: k1, Value: []byte("b")}, metastore.IfAbsent())
	WantErr(t, err, metastore.ErrConditionFailed)
	it = Must[metastore.Item](t)(s.Put(c, metastore.Item{Key: k1, Value: []byte("b")}, metastore.IfVersion(1)))
	if it.Version != 2 {
		t.Fatalf("second version %d, want 2", it.Version)
	}
	_, err = s.Put(c, metastore.Item{Key: k1, Value: []byte("c")}, metastore.IfVersion(1))
	WantErr(t, err, metastore.ErrConditionFailed)
	got := Must[metastore.Item](t)(s.Get(c, k1))
	if got.Version != 2 || string(got.Value) != "b" {
		t.Fatalf("got version %d value %q, want 2 \"b\"", got.Version, got.Value)
	}
	it = Must[metastore.Item](t)(s.Put(c, metastore.Item{Key: k1, Value: []byte("d")}, metastore.Always))
	if it.Version != 3 {
		t.Fatalf("unconditional put: version %d, want 3", it.Version)
	}
	_, err = s.Put(c, metastore.Item{Key: metastore.Key{PK: "test", SK: "absent"}, Value: []byte("x")}, metastore.IfExists())
	WantErr(t, err, metastore.ErrConditionFailed)
	_, err = s.Put(c, metastore.Item{Key: metastore.Key{PK: "test", SK: "absent"}, Value: []byte("x")}, metastore.IfVersion(0))
	WantErr(t, err, metastore.ErrConditionFailed)
	Must[metastore.Item](t)(s.Put(c, metastore.Item{Key: k1, Value: nil}, metastore.IfExists()))
	if got := Must[metastore.Item](t)(s.Get(c, k1)); len(got.Value) != 0 {
		t.Fatalf("empty value read back as %q", got.Value)
	}
}

func testDeleteConditions(t *testing.T, s metastore.Store, _ Options) {
	c := ctx(t)
	Must[metastore.Item](t)(s.Put(c, metastore.Item{Key: k1, Value: []byte("a")}, metastore.IfAbsent()))
	WantErr(t, s.Delete(c, k1, metastore.IfVersion(7)), metastore.ErrConditionFailed)
	if err := s.Delete(c, k1, metastore.IfVersion(1)); err != nil {
		t.Fatal(err)
	}
	_, err := s.Get(c, k1)
	WantErr(t, err, metastore.ErrNotFound)
	if err := s.Delete(c, k1, metastore.Always); err != nil {
		t.Fatalf("deleting an absent item unconditionally: %v", err)
	}
	WantErr(t, s.Delete(c, k1, metastore.IfExists()), metastore.ErrConditionFailed)
}

func testQuery(t *testing.T, s metastore.Store, _ Options) {
	c := ctx(t)
	for _, sk := range []string{"b/2", "a/1", "b/1", "b/10", "c"} {
		Must[metastore.Item](t)(s.Put(c, metastore.Item{Key: metastore.Key{PK: "q", SK: sk}, Value: []byte(sk)}, metastore.Always))
	}
	Must[metastore.Item](t)(s.Put(c, metastore.Item{Key: metastore.Key{PK: "q2", SK: "b/3"}, Value: []byte("x")}, metastore.Always))
	items := Must[[]metastore.Item](t)(s.Query(c, "q", "b/"))
	var got []string
	for _, it := range items {
		got = append(got, it.SK)
		if string(it.Value) != it.SK || it.PK != "q" || it.Version != 1 {
			t.Fatalf("query returned %+v", it)
		}
	}
	if fmt.Sprint(got) != "[b/1 b/10 b/2]" {
		t.Fatalf("query order %v, want [b/1 b/10 b/2]", got)
	}
	if all := Must[[]metastore.Item](t)(s.Query(c, "q", "")); len(all) != 5 {
		t.Fatalf("query all: %d items, want 5", len(all))
	}
	if none := Must[[]metastore.Item](t)(s.Query(c, "nothing-here", "")); len(none) != 0 {
		t.Fatalf("query of an empty partition key: %d items", len(none))
	}
	// More than one DynamoDB page (1 MB): 40 items of 30 KB.
	big := bytes.Repeat([]byte("x"), 30<<10)
	for i := 0; i < 40; i++ {
		Must[metastore.Item](t)(s.Put(c, metastore.Item{Key: metastore.Key{PK: "big", SK: fmt.Sprintf("%03d", i)}, Value: big}, metastore.Always))
	}
	if n := len(Must[[]metastore.Item](t)(s.Query(c, "big", ""))); n != 40 {
		t.Fatalf("paged query: %d items, want 40", n)
	}
}

func testExpiry(t *testing.T, s metastore.Store, opts Options) {
	if opts.NoExpiry != "" {
		t.Skip(opts.NoExpiry)
	}
	c := ctx(t)
	past := time.Now().Add(-time.Hour).Unix()
	Must[metastore.Item](t)(s.Put(c, metastore.Item{Key: k1, Value: []byte("old"), Expires: past}, metastore.Always))
	_, err := s.Get(c, k1)
	WantErr(t, err, metastore.ErrNotFound)
	if items := Must[[]metastore.Item](t)(s.Query(c, k1.PK, "")); len(items) != 0 {
		t.Fatalf("expired item listed: %+v", items)
	}
	it := Must[metastore.Item](t)(s.Put(c, metastore.Item{Key: k1, Value: []byte("new"), Expires: time.Now().Add(time.Hour).Unix()}, metastore.IfAbsent()))
	if got := Must[metastore.Item](t)(s.Get(c, k1)); string(got.Value) != "new" || got.Version != it.Version {
		t.Fatalf("got %+v", got)
	}
}

func testItemSize(t *testing.T, s metastore.Store, _ Options) {
	c := ctx(t)
	Must[metastore.Item](t)(s.Put(c, metastore.Item{Key: k1, Value: bytes.Repeat([]byte{7}, metastore.MaxItemBytes)}, metastore.Always))
	got := Must[metastore.Item](t)(s.Get(c, k1))
	if len(got.Value) != metastore.MaxItemBytes {
		t.Fatalf("read back %d bytes", len(got.Value))
	}
	_, err := s.Put(c, metastore.Item{Key: k1, Value: make([]byte, metastore.MaxItemBytes+1)}, metastore.Always)
	WantErr(t, err, metastore.ErrTooLarge)
	_, err = s.Put(c, metastore.Item{Key: k1, Value: make([]byte, 400<<10)}, metastore.Always)
	WantErr(t, err, metastore.ErrTooLarge)
	if got := Must[metastore.Item](t)(s.Get(c, k1)); got.Version != 1 {
		t.Fatalf("a rejected write changed the item (version %d)", got.Version)
	}
}

func testRacingCreate(t *testing.T, s metastore.Store, _ Options) {
	c := ctx(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	wins, fails := 0, 0
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, err := s.Put(c, metastore.Item{Key: k1, Value: []byte{byte(i)}}, metastore.IfAbsent())
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case errors.Is(err, metastore.ErrConditionFailed):
				fails++
			default:
				t.Errorf("racing create: %v", err)
			}
		}(i)
	}
	wg.Wait()
	if wins != 1 || fails != 15 {
		t.Fatalf("%d winners and %d losers, want 1 and 15", wins, fails)
	}
}

func testAdd(t *testing.T, s metastore.Store, _ Options) {
	c := ctx(t)
	key := metastore.Key{PK: "counters", SK: "c"}
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[int64]bool{}
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 20; j++ {
				n, err := s.Add(c, key, 3)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				if seen[n] {
					t.Errorf("Add returned %d twice", n)
				}
				seen[n] = true
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if n := Must[int64](t)(s.Add(c, key, 0)); n != 16*20*3 {
		t.Fatalf("counter %d, want %d", n, 16*20*3)
	}
}

func testTransact(t *testing.T, s metastore.Store, opts Options) {
	if opts.NoTransactions != "" {
		t.Skip(opts.NoTransactions)
	}
	c := ctx(t)
	a, b, chk := metastore.Key{PK: "tx", SK: "a"}, metastore.Key{PK: "tx", SK: "b"}, metastore.Key{PK: "tx", SK: "check"}
	Must[metastore.Item](t)(s.Put(c, metastore.Item{Key: chk, Value: []byte("g")}, metastore.Always))
	Must[metastore.Item](t)(s.Put(c, metastore.Item{Key: b, Value: []byte("old")}, metastore.Always))
	// The check fails: nothing is written.
	err := s.Transact(c, []metastore.Op{
		{Kind: metastore.OpCheck, Item: metastore.Item{Key: chk}, Cond: metastore.IfVersion(2)},
		{Kind: metastore.OpPut, Item: metastore.Item{Key: a, Value: []byte("new")}, Cond: metastore.Always},
		{Kind: metastore.OpDelete, Item: metastore.Item{Key: b}, Cond: metastore.Always},
	})
	WantErr(t, err, metastore.ErrConditionFailed)
	_, err = s.Get(c, a)
	WantErr(t, err, metastore.ErrNotFound)
	Must[metastore.Item](t)(s.Get(c, b))
	// The check holds: everything happens.
	if err := s.Transact(c, []metastore.Op{
		{Kind: metastore.OpCheck, Item: metastore.Item{Key: chk}, Cond: metastore.IfVersion(1)},
		{Kind: metastore.OpPut, Item: metastore.Item{Key: a, Value: []byte("new")}, Cond: metastore.IfAbsent()},
		{Kind: metastore.OpDelete, Item: metastore.Item{Key: b}, Cond: metastore.IfVersion(1)},
	}); err != nil {
		t.Fatal(err)
	}
	if got := Must[metastore.Item](t)(s.Get(c, a)); string(got.Value) != "new" || got.Version != 1 {
		t.Fatalf("got %+v", got)
	}
	_, err = s.Get(c, b)
	WantErr(t, err, metastore.ErrNotFound)
	if got := Must[metastore.Item](t)(s.Get(c, chk)); got.Version != 1 {
		t.Fatalf("a check changed the version to %d", got.Version)
	}
}

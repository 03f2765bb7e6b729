package metastoretest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stratamq/strata/pkg/metastore"
)

// The manifest cases: compare-and-set, paging, the single-item manifests
// of earlier versions, fencing across pages, and pages left by failures.

func refAt(i int) metastore.SegmentRef {
	return metastore.SegmentRef{BaseOffset: int64(i) * 10, NextOffset: int64(i+1) * 10, LeaderEpoch: 1, Size: 4096, MaxTimestamp: 1_700_000_000_000 + int64(i),
		Object: fmt.Sprintf("0123456789abcdef0123456789abcdef/3/%020d-1.log", i*10), IndexPos: 4000}
}

func refs(from, to int) []metastore.SegmentRef {
	out := make([]metastore.SegmentRef, 0, to-from)
	for i := from; i < to; i++ {
		out = append(out, refAt(i))
	}
	return out
}

// manifestItems returns the stored items of partition 3's manifest, the
// head first.
func manifestItems(t *testing.T, s metastore.Store, id metastore.TopicID) []metastore.Item {
	t.Helper()
	items, err := s.Query(ctx(t), "manifest/"+id.String(), "000003")
	if err != nil {
		t.Fatal(err)
	}
	return items
}

// headPages returns the page count the stored head names (0 for a head in
// the single-item shape).
func headPages(t *testing.T, head metastore.Item) int {
	t.Helper()
	var h struct {
		Segments json.RawMessage `json:"segments"`
	}
	if err := json.Unmarshal(head.Value, &h); err != nil {
		t.Fatal(err)
	}
	if len(h.Segments) == 0 || h.Segments[0] != '{' {
		return 0
	}
	var ps struct {
		Pages []json.RawMessage `json:"pages"`
	}
	if err := json.Unmarshal(h.Segments, &ps); err != nil {
		t.Fatal(err)
	}
	return len(ps.Pages)
}

// wantNoStrayPages fails unless the partition's items are its head and the
// pages it names.
func wantNoStrayPages(t *testing.T, s metastore.Store, id metastore.TopicID) {
	t.Helper()
	items := manifestItems(t, s, id)
	if len(items) == 0 {
		t.Fatal("no manifest head")
	}
	if n := headPages(t, items[0]); len(items) != 1+n {
		t.Fatalf("%d manifest items for a head naming %d pages", len(items), n)
	}
}

func wantManifest(t *testing.T, m *metastore.Meta, id metastore.TopicID, want metastore.Manifest) {
	t.Helper()
	got, err := m.Manifest(ctx(t), id, 3)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("read manifest (version %d, %d segments) differs from the one written (version %d, %d segments)", got.Version, len(got.Segments), want.Version, len(want.Segments))
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
	// A manifest far beyond one item (1.2 MB) is paged.
	huge := got
	for i := 0; len(huge.Segments) < 8000; i++ {
		huge.Segments = append(huge.Segments, metastore.SegmentRef{BaseOffset: int64(i), Object: fmt.Sprintf("%0100d", i)})
	}
	huge, err = m.PutManifest(c, id, 3, huge)
	if err != nil {
		t.Fatalf("8,000 segments: %v", err)
	}
	wantManifest(t, m, id, huge)
	wantNoStrayPages(t, s, id)
	// A reference too large for any item is refused cleanly, and nothing
	// it wrote stays.
	tooBig := huge
	tooBig.Segments = append(append([]metastore.SegmentRef(nil), huge.Segments...), metastore.SegmentRef{Object: strings.Repeat("x", metastore.MaxItemBytes)})
	for i := 0; i < 100; i++ {
		tooBig.Segments = append(tooBig.Segments, refAt(i)) // past the tail: sealed with it
	}
	_, err = m.PutManifest(c, id, 3, tooBig)
	WantErr(t, err, metastore.ErrTooLarge)
	wantManifest(t, m, id, huge)
	wantNoStrayPages(t, s, id)
}

// countOps wraps s, counting operations by name.
func countOps(s metastore.Store) (metastore.Store, func() map[string]int64) {
	var mu sync.Mutex
	counts := map[string]int64{}
	wrapped := metastore.Instrument(s, func(op string, _ time.Duration, _ error) {
		mu.Lock()
		counts[op]++
		mu.Unlock()
	})
	return wrapped, func() map[string]int64 {
		mu.Lock()
		defer mu.Unlock()
		out := counts
		counts = map[string]int64{}
		return out
	}
}

// Appends write the head alone until the tail is sealed into a page (one
// page write, the head, and the delete of the page it replaces); expiry
// drops whole pages; reads are one query; a manifest returned by a write
// equals the one read back.
func testManifestPaging(t *testing.T, raw metastore.Store, _ Options) {
	s, take := countOps(raw)
	m := metastore.New(s)
	c := ctx(t)
	id := metastore.TopicID{10}
	// 2,900 references in one write (sealed into pages), then appends one
	// by one, past two seals.
	const n = 3000
	man, err := m.PutManifest(c, id, 3, metastore.Manifest{LeaderEpoch: 1, Segments: refs(0, n-100)})
	if err != nil {
		t.Fatal(err)
	}
	take()
	var ops int64
	for i := n - 100; i < n; i++ {
		next := man
		next.Segments = append(append([]metastore.SegmentRef(nil), man.Segments...), refAt(i))
		if man, err = m.PutManifest(c, id, 3, next); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		counts := take()
		if counts[metastore.OpNameQuery] != 0 || counts[metastore.OpNameGet] > 1 { // a get settles a lost answer
			t.Fatalf("append %d read the manifest: %v", i, counts)
		}
		if w := counts[metastore.OpNamePut] + counts[metastore.OpNameDelete]; w > 3 {
			t.Fatalf("append %d: %v", i, counts)
		}
		ops += counts[metastore.OpNamePut] + counts[metastore.OpNameDelete]
		if size := len(manifestItems(t, raw, id)[0].Value); size > 64<<10 {
			t.Fatalf("append %d: the head grew to %d bytes", i, size)
		}
	}
	if per := float64(ops) / 100; per > 1.1 {
		t.Fatalf("%.2f operations per append", per)
	}
	items := manifestItems(t, raw, id)
	if len(items) < 3 {
		t.Fatalf("%d items for %d segments: not paged", len(items), n)
	}
	wantNoStrayPages(t, raw, id)
	take()
	wantManifest(t, m, id, man)
	if counts := take(); counts[metastore.OpNameQuery] != 1 || len(counts) != 1 {
		t.Fatalf("a read cost %v", counts)
	}

	// Expiry drops from the front: the head is written alone, and the
	// pages wholly expired are deleted.
	pagesBefore := len(items) - 1
	next := man
	next.Segments = man.Segments[2*n/3:]
	if man, err = m.PutManifest(c, id, 3, next); err != nil {
		t.Fatal(err)
	}
	counts := take()
	if counts[metastore.OpNamePut] != 1 || counts[metastore.OpNameDelete] == 0 {
		t.Fatalf("expiry of two thirds: %v", counts)
	}
	wantManifest(t, m, id, man)
	if got := len(manifestItems(t, raw, id)) - 1; got >= pagesBefore {
		t.Fatalf("%d pages after expiring two thirds of %d pages", got, pagesBefore)
	}
	wantNoStrayPages(t, raw, id)

	// Two writers sealing from the same read: one wins, the loser's page
	// is gone.
	var wg sync.WaitGroup
	var won atomic.Int32
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			next := man
			next.Segments = append(append([]metastore.SegmentRef(nil), man.Segments...), refs(2*n+w*100, 2*n+w*100+70)...)
			if _, err := m.PutManifest(c, id, 3, next); err == nil {
				won.Add(1)
			} else if !errors.Is(err, metastore.ErrConditionFailed) {
				t.Errorf("writer %d: %v", w, err)
			}
		}(w)
	}
	wg.Wait()
	if won.Load() != 1 {
		t.Fatalf("%d writers won", won.Load())
	}
	wantNoStrayPages(t, raw, id)

	// Everything expires: the head alone is left.
	cur, err := m.Manifest(c, id, 3)
	if err != nil {
		t.Fatal(err)
	}
	cur.Segments = nil
	if cur, err = m.PutManifest(c, id, 3, cur); err != nil {
		t.Fatal(err)
	}
	if items := manifestItems(t, raw, id); len(items) != 1 {
		t.Fatalf("%d items after everything expired", len(items))
	}
	wantManifest(t, m, id, cur)
}

// A single-item manifest written by an earlier version reads and grows;
// once paged, its head no longer decodes as a single-item manifest, so an
// earlier version refuses it instead of writing back part of it.
func testManifestSingleItem(t *testing.T, s metastore.Store, _ Options) {
	m := metastore.New(s)
	c := ctx(t)
	id := metastore.TopicID{11}
	type single struct {
		LeaderEpoch int32                  `json:"leaderEpoch"`
		StartOffset int64                  `json:"start,omitempty"`
		Segments    []metastore.SegmentRef `json:"segments"`
	}
	old := single{LeaderEpoch: 4, StartOffset: 15, Segments: refs(0, 1500)}
	value, err := json.Marshal(old)
	if err != nil {
		t.Fatal(err)
	}
	key := metastore.Key{PK: "manifest/" + id.String(), SK: "000003"}
	written := Must[metastore.Item](t)(s.Put(c, metastore.Item{Key: key, Value: value}, metastore.Always))
	man, err := m.Manifest(c, id, 3)
	if err != nil {
		t.Fatal(err)
	}
	if man.LeaderEpoch != 4 || man.StartOffset != 15 || man.Version != written.Version || !reflect.DeepEqual(man.Segments, old.Segments) {
		t.Fatalf("single-item manifest read as epoch %d start %d version %d with %d segments", man.LeaderEpoch, man.StartOffset, man.Version, len(man.Segments))
	}
	next := man
	next.LeaderEpoch = 5
	next.Segments = append(append([]metastore.SegmentRef(nil), man.Segments...), refAt(1500))
	if man, err = m.PutManifest(c, id, 3, next); err != nil {
		t.Fatal(err)
	}
	wantManifest(t, m, id, man)
	wantNoStrayPages(t, s, id)
	head := Must[metastore.Item](t)(s.Get(c, key))
	if err := json.Unmarshal(head.Value, &single{}); err == nil {
		t.Fatal("a paged head decodes as a single-item manifest")
	}
	// A small manifest keeps the single-item shape.
	small := metastore.TopicID{12}
	sm, err := m.PutManifest(c, small, 3, metastore.Manifest{LeaderEpoch: 1, StartOffset: 7, Segments: refs(0, 10)})
	if err != nil {
		t.Fatal(err)
	}
	var got single
	if err := json.Unmarshal(Must[metastore.Item](t)(s.Get(c, metastore.Key{PK: "manifest/" + small.String(), SK: "000003"})).Value, &got); err != nil {
		t.Fatal(err)
	}
	if got.LeaderEpoch != 1 || got.StartOffset != 7 || !reflect.DeepEqual(got.Segments, sm.Segments) {
		t.Fatalf("small manifest stored as %+v", got)
	}
}

// A deposed leader's writes change nothing, however many pages they add.
func testManifestFencedAcrossPages(t *testing.T, s metastore.Store, _ Options) {
	m := metastore.New(s)
	c := ctx(t)
	id := metastore.TopicID{13}
	zombie, err := m.PutManifest(c, id, 3, metastore.Manifest{LeaderEpoch: 1, Segments: refs(0, 500)})
	if err != nil {
		t.Fatal(err)
	}
	leader, err := m.Manifest(c, id, 3)
	if err != nil {
		t.Fatal(err)
	}
	leader.LeaderEpoch = 2
	leader.Segments = append(append([]metastore.SegmentRef(nil), leader.Segments...), refAt(500))
	if leader, err = m.PutManifest(c, id, 3, leader); err != nil {
		t.Fatal(err)
	}
	// The zombie appends enough to seal pages, from its stale version.
	next := zombie
	next.Segments = append(append([]metastore.SegmentRef(nil), zombie.Segments...), refs(1000, 1300)...)
	_, err = m.PutManifest(c, id, 3, next)
	WantErr(t, err, metastore.ErrFenced)
	// And from the current version, with its old epoch.
	next = leader
	next.LeaderEpoch = 1
	next.Segments = append(append([]metastore.SegmentRef(nil), leader.Segments...), refs(1000, 1300)...)
	_, err = m.PutManifest(c, id, 3, next)
	WantErr(t, err, metastore.ErrFenced)
	wantManifest(t, m, id, leader)
	wantNoStrayPages(t, s, id)
}

// failHead fails the next write of partition 3's manifest head with
// ErrUnavailable, without writing it (a timeout whose write never landed).
type failHead struct {
	metastore.Store
	armed atomic.Bool
}

func (f *failHead) Put(ctx context.Context, it metastore.Item, c metastore.Cond) (metastore.Item, error) {
	if strings.HasPrefix(it.PK, "manifest/") && it.SK == "000003" && f.armed.CompareAndSwap(true, false) {
		return metastore.Item{}, fmt.Errorf("put %s: timed out: %w", it.Key, metastore.ErrUnavailable)
	}
	return f.Store.Put(ctx, it, c)
}

// Pages written by a change whose head write never landed are left while
// that write might still land, and deleted by the first write after it no
// longer can; the manifest never shows them. Deleting the manifest removes
// every item.
func testManifestStrayPages(t *testing.T, raw metastore.Store, _ Options) {
	s := &failHead{Store: raw}
	m := metastore.New(s)
	c := ctx(t)
	id := metastore.TopicID{14}
	man, err := m.PutManifest(c, id, 3, metastore.Manifest{LeaderEpoch: 1, Segments: refs(0, 300)})
	if err != nil {
		t.Fatal(err)
	}
	s.armed.Store(true)
	lost := man
	lost.Segments = append(append([]metastore.SegmentRef(nil), man.Segments...), refs(300, 400)...)
	_, err = m.PutManifest(c, id, 3, lost)
	WantErr(t, err, metastore.ErrUnavailable)
	stray := len(manifestItems(t, raw, id)) - 1 - headPages(t, manifestItems(t, raw, id)[0])
	if stray == 0 {
		t.Fatal("the failed write left no pages: this case tests nothing")
	}
	wantManifest(t, m, id, man)
	// The writer re-reads and retries; the stray pages are then garbage.
	cur, err := m.Manifest(c, id, 3)
	if err != nil {
		t.Fatal(err)
	}
	lost.Version, lost.LeaderEpoch = cur.Version, cur.LeaderEpoch
	if _, err := m.PutManifest(c, id, 3, lost); err != nil {
		t.Fatal(err)
	}
	// A new leader reads (finding them) and writes (deleting them).
	cur, err = m.Manifest(c, id, 3)
	if err != nil {
		t.Fatal(err)
	}
	cur.LeaderEpoch = 2
	if cur, err = m.PutManifest(c, id, 3, cur); err != nil {
		t.Fatal(err)
	}
	wantManifest(t, m, id, cur)
	wantNoStrayPages(t, raw, id)

	// Deleting removes head and pages; DeleteManifests every partition's.
	if err := m.DeleteManifest(c, id, 3); err != nil {
		t.Fatal(err)
	}
	if items := manifestItems(t, raw, id); len(items) != 0 {
		t.Fatalf("%d items after DeleteManifest", len(items))
	}
	for p := int32(0); p < 3; p++ {
		if _, err := m.PutManifest(c, id, p, metastore.Manifest{LeaderEpoch: 1, Segments: refs(0, 100)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.DeleteManifests(c, id); err != nil {
		t.Fatal(err)
	}
	if items, err := raw.Query(c, "manifest/"+id.String(), ""); err != nil || len(items) != 0 {
		t.Fatalf("%d items after DeleteManifests (%v)", len(items), err)
	}
}

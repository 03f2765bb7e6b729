package metastore_test

import (
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stratamq/strata/pkg/metastore"
	"github.com/stratamq/strata/pkg/metastore/embedded"
	"github.com/stratamq/strata/pkg/metastore/metastoretest"
)

// The instrumented store is a Store like any other: it passes the
// conformance suite over the embedded store.
func TestInstrumentedConformance(t *testing.T) {
	metastoretest.Run(t, func(t *testing.T) metastore.Store {
		s, err := embedded.Open(filepath.Join(t.TempDir(), "meta.db"))
		if err != nil {
			t.Fatal(err)
		}
		return metastore.Instrument(s, func(string, time.Duration, error) {})
	}, metastoretest.Options{})
}

func TestInstrumentedReportsEveryOperation(t *testing.T) {
	s, err := embedded.Open(filepath.Join(t.TempDir(), "meta.db"))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	got := map[string]int{}
	var notFound int
	is := metastore.Instrument(s, func(op string, took time.Duration, err error) {
		mu.Lock()
		defer mu.Unlock()
		got[op]++
		if errors.Is(err, metastore.ErrNotFound) {
			notFound++
		}
		if took < 0 {
			t.Errorf("%s took %v", op, took)
		}
	})
	defer is.Close()
	ctx := t.Context()
	k := metastore.Key{PK: "p", SK: "s"}
	if _, err := is.Get(ctx, k); !errors.Is(err, metastore.ErrNotFound) {
		t.Fatalf("get absent: %v", err)
	}
	if _, err := is.Put(ctx, metastore.Item{Key: k, Value: []byte("v")}, metastore.IfAbsent()); err != nil {
		t.Fatal(err)
	}
	if _, err := is.Query(ctx, "p", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := is.Add(ctx, metastore.Key{PK: "c", SK: "n"}, 1); err != nil {
		t.Fatal(err)
	}
	if err := is.Transact(ctx, []metastore.Op{{Kind: metastore.OpCheck, Item: metastore.Item{Key: k}, Cond: metastore.IfExists()}}); err != nil {
		t.Fatal(err)
	}
	if err := is.Delete(ctx, k, metastore.Always); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{
		metastore.OpNameGet: 1, metastore.OpNamePut: 1, metastore.OpNameQuery: 1,
		metastore.OpNameAdd: 1, metastore.OpNameTransact: 1, metastore.OpNameDelete: 1,
	}
	for op, n := range want {
		if got[op] != n {
			t.Errorf("%s reported %d times, want %d (all: %v)", op, got[op], n, got)
		}
	}
	if notFound != 1 {
		t.Errorf("not-found errors reported: %d, want 1", notFound)
	}
}

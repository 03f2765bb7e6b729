package embedded_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stratamq/strata/pkg/latency"
	"github.com/stratamq/strata/pkg/metastore"
	"github.com/stratamq/strata/pkg/metastore/embedded"
	"github.com/stratamq/strata/pkg/metastore/metastoretest"
)

func TestConformance(t *testing.T) {
	metastoretest.Run(t, func(t *testing.T) metastore.Store {
		s, err := embedded.Open(filepath.Join(t.TempDir(), "meta.db"))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}, metastoretest.Options{})
}

func TestSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "meta.db")
	s, err := embedded.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	k := metastore.Key{PK: "p", SK: "s"}
	if _, err := s.Put(ctx, metastore.Item{Key: k, Value: []byte("v")}, metastore.IfAbsent()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Add(ctx, metastore.Key{PK: "c", SK: "n"}, 5); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = embedded.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	it, err := s.Get(ctx, k)
	if err != nil || string(it.Value) != "v" || it.Version != 1 {
		t.Fatalf("after reopen: %+v, %v", it, err)
	}
	if n, _ := s.Add(ctx, metastore.Key{PK: "c", SK: "n"}, 1); n != 6 {
		t.Fatalf("counter after reopen: %d, want 6", n)
	}
}

// The latency wrapper dev and the bench put in front of the embedded
// store keeps every guarantee of the store behind it (with a small model,
// so the run stays short).
func TestConformanceBehindLatency(t *testing.T) {
	metastoretest.Run(t, func(t *testing.T) metastore.Store {
		s, err := embedded.Open(filepath.Join(t.TempDir(), "meta.db"), embedded.WithoutSync())
		if err != nil {
			t.Fatal(err)
		}
		return metastore.NewDelayed(s, latency.NewInjector(latency.Model{P50: 50 * time.Microsecond, P99: 200 * time.Microsecond}))
	}, metastoretest.Options{})
}

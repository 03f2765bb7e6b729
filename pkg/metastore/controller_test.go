package metastore_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stratamq/strata/pkg/clock"
	"github.com/stratamq/strata/pkg/metastore"
	"github.com/stratamq/strata/pkg/metastore/embedded"
)

// The controller lease names its holder until another broker takes over;
// a released lease names nobody.
func TestControllerNamesTheLeaseHolder(t *testing.T) {
	s, err := embedded.Open(filepath.Join(t.TempDir(), "meta.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m := metastore.New(s)
	ctx := context.Background()
	if _, ok, err := m.Controller(ctx); err != nil || ok {
		t.Fatalf("controller before any lease: ok=%v err=%v", ok, err)
	}
	fake := clock.NewFake(time.Unix(0, 0))
	opts := metastore.LeaseOptions{Duration: 6 * time.Second, Margin: time.Second, Clock: fake}
	first, err := m.ControllerLease(7, "a", opts)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := first.Tick(ctx); err != nil || !st.Held {
		t.Fatalf("first tick: %+v %v", st, err)
	}
	if id, ok, err := m.Controller(ctx); err != nil || !ok || id != 7 {
		t.Fatalf("controller = %d %v %v, want 7", id, ok, err)
	}
	// Broker 3 takes over once the record stood still for a full lease.
	second, err := m.ControllerLease(3, "b", opts)
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := second.Tick(ctx); st.Held {
		t.Fatal("took a lease that is held")
	}
	fake.Advance(7 * time.Second)
	if st, err := second.Tick(ctx); err != nil || !st.Held {
		t.Fatalf("takeover: %+v %v", st, err)
	}
	if id, ok, _ := m.Controller(ctx); !ok || id != 3 {
		t.Fatalf("controller after takeover = %d %v, want 3", id, ok)
	}
	if err := second.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if id, ok, _ := m.Controller(ctx); ok {
		t.Fatalf("controller after release = %d, want none", id)
	}
}

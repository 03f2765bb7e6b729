package metastore_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stratamq/strata/pkg/metastore"
	"github.com/stratamq/strata/pkg/metastore/embedded"
)

// A sync request only ever moves forward and moves the change counter;
// acknowledgements are kept per broker.
func TestSyncRequestsAndAcks(t *testing.T) {
	s, err := embedded.Open(filepath.Join(t.TempDir(), "meta.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m := metastore.New(s)
	ctx := context.Background()
	if v, err := m.SyncRequest(ctx); err != nil || v != 0 {
		t.Fatalf("no request yet: %d %v", v, err)
	}
	before, _ := m.ChangeVersion(ctx)
	if err := m.RequestSync(ctx, 7); err != nil {
		t.Fatal(err)
	}
	if after, _ := m.ChangeVersion(ctx); after <= before {
		t.Fatalf("change counter %d -> %d: watchers would not read the request", before, after)
	}
	if err := m.RequestSync(ctx, 5); err != nil {
		t.Fatal(err)
	}
	if v, _ := m.SyncRequest(ctx); v != 7 {
		t.Fatalf("request %d, want 7: an older one must not replace a newer one", v)
	}
	if err := m.AckSync(ctx, 1, 7); err != nil {
		t.Fatal(err)
	}
	if err := m.AckSync(ctx, 12, 9); err != nil {
		t.Fatal(err)
	}
	acks, err := m.SyncAcks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(acks) != 2 || acks[1] != 7 || acks[12] != 9 {
		t.Fatalf("acks %v", acks)
	}
}

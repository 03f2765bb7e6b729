package metastore_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/stratamq/strata/pkg/metastore"
	"github.com/stratamq/strata/pkg/metastore/embedded"
)

// A change the callback fails to apply is handed to it again at the next
// poll, not dropped until the next change.
func TestWatchChangesRetriesAFailedApply(t *testing.T) {
	s, err := embedded.Open(filepath.Join(t.TempDir(), "meta.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	m := metastore.New(s)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.NotifyChange(ctx); err != nil {
		t.Fatal(err)
	}
	calls := make(chan int64, 16)
	failures := 2
	var reported []error
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.WatchChanges(wctx, 5*time.Millisecond, func(v int64) error {
			calls <- v
			if failures > 0 {
				failures--
				return errors.New("not applied")
			}
			return nil
		}, func(err error) { reported = append(reported, err) })
	}()
	var seen []int64
	for len(seen) < 3 {
		select {
		case v := <-calls:
			seen = append(seen, v)
		case <-ctx.Done():
			t.Fatalf("calls %v: the failed version was not handed over again", seen)
		}
	}
	// No change meanwhile: it settles after the third (successful) call.
	select {
	case v := <-calls:
		t.Fatalf("a fourth call (%d) after the change was applied", v)
	case <-time.After(50 * time.Millisecond):
	}
	stop()
	<-done
	if seen[0] != seen[1] || seen[1] != seen[2] {
		t.Fatalf("versions %v, want the same one three times", seen)
	}
	if len(reported) != 2 {
		t.Fatalf("%d errors reported, want 2", len(reported))
	}
}

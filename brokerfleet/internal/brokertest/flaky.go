package brokertest

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/stratamq/strata/pkg/metastore"
)

// FlakyStore wraps a metastore.Store and fails every call while Down is
// set, as an unreachable DynamoDB would after the SDK's retries.
type FlakyStore struct {
	metastore.Store
	Down  atomic.Bool
	Calls atomic.Int64
}

func (f *FlakyStore) check() error {
	f.Calls.Add(1)
	if f.Down.Load() {
		return fmt.Errorf("injected outage: %w", metastore.ErrUnavailable)
	}
	return nil
}

// Get implements metastore.Store.
func (f *FlakyStore) Get(ctx context.Context, k metastore.Key) (metastore.Item, error) {
	if err := f.check(); err != nil {
		return metastore.Item{}, err
	}
	return f.Store.Get(ctx, k)
}

// Query implements metastore.Store.
func (f *FlakyStore) Query(ctx context.Context, pk, prefix string) ([]metastore.Item, error) {
	if err := f.check(); err != nil {
		return nil, err
	}
	return f.Store.Query(ctx, pk, prefix)
}

// Put implements metastore.Store.
func (f *FlakyStore) Put(ctx context.Context, it metastore.Item, c metastore.Cond) (metastore.Item, error) {
	if err := f.check(); err != nil {
		return metastore.Item{}, err
	}
	return f.Store.Put(ctx, it, c)
}

// Delete implements metastore.Store.
func (f *FlakyStore) Delete(ctx context.Context, k metastore.Key, c metastore.Cond) error {
	if err := f.check(); err != nil {
		return err
	}
	return f.Store.Delete(ctx, k, c)
}

// Add implements metastore.Store.
func (f *FlakyStore) Add(ctx context.Context, k metastore.Key, d int64) (int64, error) {
	if err := f.check(); err != nil {
		return 0, err
	}
	return f.Store.Add(ctx, k, d)
}

// Transact implements metastore.Store.
func (f *FlakyStore) Transact(ctx context.Context, ops []metastore.Op) error {
	if err := f.check(); err != nil {
		return err
	}
	return f.Store.Transact(ctx, ops)
}

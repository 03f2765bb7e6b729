package metastore

import (
	"context"

	"github.com/stratamq/strata/pkg/latency"
)

// Delayed wraps a Store and makes every request wait a time drawn from a
// latency model first (the embedded store behaving like DynamoDB, for dev
// and the bench). A nil or zero-model injector adds nothing.
type Delayed struct {
	next Store
	in   *latency.Injector
}

var _ Store = (*Delayed)(nil)

// NewDelayed returns next behind in's waits.
func NewDelayed(next Store, in *latency.Injector) *Delayed { return &Delayed{next: next, in: in} }

// Get implements Store.
func (d *Delayed) Get(ctx context.Context, k Key) (Item, error) {
	if err := d.in.Wait(ctx); err != nil {
		return Item{}, err
	}
	return d.next.Get(ctx, k)
}

// Query implements Store.
func (d *Delayed) Query(ctx context.Context, pk, prefix string) ([]Item, error) {
	if err := d.in.Wait(ctx); err != nil {
		return nil, err
	}
	return d.next.Query(ctx, pk, prefix)
}

// Put implements Store.
func (d *Delayed) Put(ctx context.Context, it Item, c Cond) (Item, error) {
	if err := d.in.Wait(ctx); err != nil {
		return Item{}, err
	}
	return d.next.Put(ctx, it, c)
}

// Delete implements Store.
func (d *Delayed) Delete(ctx context.Context, k Key, c Cond) error {
	if err := d.in.Wait(ctx); err != nil {
		return err
	}
	return d.next.Delete(ctx, k, c)
}

// Add implements Store.
func (d *Delayed) Add(ctx context.Context, k Key, delta int64) (int64, error) {
	if err := d.in.Wait(ctx); err != nil {
		return 0, err
	}
	return d.next.Add(ctx, k, delta)
}

// Transact implements Store.
func (d *Delayed) Transact(ctx context.Context, ops []Op) error {
	if err := d.in.Wait(ctx); err != nil {
		return err
	}
	return d.next.Transact(ctx, ops)
}

// Close implements Store.
func (d *Delayed) Close() error { return d.next.Close() }

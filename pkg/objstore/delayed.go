package objstore

import (
	"context"
	"io"

	"github.com/stratamq/strata/pkg/latency"
)

// Delayed wraps a Store and makes every request wait a time drawn from a
// latency model first (a stand-in behaving like S3 Standard or Express
// One Zone, for dev and the bench). A nil or zero-model injector adds
// nothing.
type Delayed struct {
	next Store
	in   *latency.Injector
}

var (
	_ Store        = (*Delayed)(nil)
	_ PrefixLister = (*Delayed)(nil)
)

// NewDelayed returns next behind in's waits.
func NewDelayed(next Store, in *latency.Injector) *Delayed { return &Delayed{next: next, in: in} }

// Put implements Store.
func (d *Delayed) Put(ctx context.Context, key string, body []byte, opts PutOptions) error {
	if err := d.in.Wait(ctx); err != nil {
		return err
	}
	return d.next.Put(ctx, key, body, opts)
}

// PutReader implements Store.
func (d *Delayed) PutReader(ctx context.Context, key string, r io.ReadSeeker, size int64, opts PutOptions) error {
	if err := d.in.Wait(ctx); err != nil {
		return err
	}
	return d.next.PutReader(ctx, key, r, size, opts)
}

// Get implements Store.
func (d *Delayed) Get(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	if err := d.in.Wait(ctx); err != nil {
		return nil, err
	}
	return d.next.Get(ctx, key, offset, length)
}

// List implements Store.
func (d *Delayed) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	if err := d.in.Wait(ctx); err != nil {
		return nil, err
	}
	return d.next.List(ctx, prefix)
}

// ListPrefixes implements PrefixLister.
func (d *Delayed) ListPrefixes(ctx context.Context, prefix string) ([]string, error) {
	if err := d.in.Wait(ctx); err != nil {
		return nil, err
	}
	return ListPrefixes(ctx, d.next, prefix)
}

// Delete implements Store.
func (d *Delayed) Delete(ctx context.Context, key string) error {
	if err := d.in.Wait(ctx); err != nil {
		return err
	}
	return d.next.Delete(ctx, key)
}

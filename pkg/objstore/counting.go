package objstore

import (
	"context"
	"io"
	"sync/atomic"
)

// Counting wraps a Store and counts its calls and bytes, for cost figures
// (S3 bills per request and per byte transferred). Every call counts,
// failed ones included, since S3 bills those too; bytes count only for
// calls that succeed. One List call may cost several LIST requests on S3
// (one per 1,000 keys): Listed counts the objects returned so that pages
// can be estimated. It is safe for concurrent use.
type Counting struct {
	next Store

	puts, gets, lists, deletes atomic.Int64
	putBytes, getBytes, listed atomic.Int64
}

var (
	_ Store        = (*Counting)(nil)
	_ PrefixLister = (*Counting)(nil)
)

// NewCounting returns next behind a Counting with zero counts.
func NewCounting(next Store) *Counting { return &Counting{next: next} }

// Counts is a snapshot of a Counting's counters.
type Counts struct {
	Puts, Gets, Lists, Deletes int64
	// PutBytes and GetBytes are the body bytes of successful Puts and Gets.
	PutBytes, GetBytes int64
	// Listed is the number of objects successful Lists returned.
	Listed int64
}

// Requests returns the calls of every kind.
func (c Counts) Requests() int64 { return c.Puts + c.Gets + c.Lists + c.Deletes }

// Counts returns the current counts.
func (c *Counting) Counts() Counts {
	return Counts{
		Puts: c.puts.Load(), Gets: c.gets.Load(), Lists: c.lists.Load(), Deletes: c.deletes.Load(),
		PutBytes: c.putBytes.Load(), GetBytes: c.getBytes.Load(), Listed: c.listed.Load(),
	}
}

// Reset zeroes the counts.
func (c *Counting) Reset() {
	for _, v := range []*atomic.Int64{&c.puts, &c.gets, &c.lists, &c.deletes, &c.putBytes, &c.getBytes, &c.listed} {
		v.Store(0)
	}
}

// Put implements Store.
func (c *Counting) Put(ctx context.Context, key string, body []byte, opts PutOptions) error {
	c.puts.Add(1)
	err := c.next.Put(ctx, key, body, opts)
	if err == nil {
		c.putBytes.Add(int64(len(body)))
	}
	return err
}

// PutReader implements Store.
func (c *Counting) PutReader(ctx context.Context, key string, r io.ReadSeeker, size int64, opts PutOptions) error {
	c.puts.Add(1)
	err := c.next.PutReader(ctx, key, r, size, opts)
	if err == nil {
		c.putBytes.Add(size)
	}
	return err
}

// Get implements Store.
func (c *Counting) Get(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	c.gets.Add(1)
	b, err := c.next.Get(ctx, key, offset, length)
	if err == nil {
		c.getBytes.Add(int64(len(b)))
	}
	return b, err
}

// List implements Store.
func (c *Counting) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	c.lists.Add(1)
	objs, err := c.next.List(ctx, prefix)
	if err == nil {
		c.listed.Add(int64(len(objs)))
	}
	return objs, err
}

// ListPrefixes implements PrefixLister (as a List call, Listed counting
// the prefixes returned); it lists through the wrapped store's
// ListPrefixes when it has one.
func (c *Counting) ListPrefixes(ctx context.Context, prefix string) ([]string, error) {
	c.lists.Add(1)
	out, err := ListPrefixes(ctx, c.next, prefix)
	if err == nil {
		c.listed.Add(int64(len(out)))
	}
	return out, err
}

// Delete implements Store.
func (c *Counting) Delete(ctx context.Context, key string) error {
	c.deletes.Add(1)
	return c.next.Delete(ctx, key)
}

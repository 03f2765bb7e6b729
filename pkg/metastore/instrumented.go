package metastore

import (
	"context"
	"time"
)

// Operation names passed to an Observer, one per Store method.
const (
	OpNameGet      = "get"
	OpNameQuery    = "query"
	OpNamePut      = "put"
	OpNameDelete   = "delete"
	OpNameAdd      = "add"
	OpNameTransact = "transact"
)

// Observer is told about every operation an instrumented Store performs:
// its name (OpNameGet, …), how long it took and the error it returned
// (nil on success). It is called on the caller's goroutine after the
// operation returns, so it must be cheap and safe for concurrent use.
type Observer func(op string, took time.Duration, err error)

// Instrument returns s with every operation reported to observe, for
// request counts and latency (DynamoDB bills per request). It changes no
// behaviour: results and errors pass through unchanged. Close is not
// reported.
func Instrument(s Store, observe Observer) Store {
	return &instrumented{next: s, observe: observe}
}

type instrumented struct {
	next    Store
	observe Observer
}

var _ Store = (*instrumented)(nil)

func (s *instrumented) Get(ctx context.Context, k Key) (Item, error) {
	start := time.Now()
	it, err := s.next.Get(ctx, k)
	s.observe(OpNameGet, time.Since(start), err)
	return it, err
}

func (s *instrumented) Query(ctx context.Context, pk, prefix string) ([]Item, error) {
	start := time.Now()
	its, err := s.next.Query(ctx, pk, prefix)
	s.observe(OpNameQuery, time.Since(start), err)
	return its, err
}

func (s *instrumented) Put(ctx context.Context, it Item, c Cond) (Item, error) {
	start := time.Now()
	out, err := s.next.Put(ctx, it, c)
	s.observe(OpNamePut, time.Since(start), err)
	return out, err
}

func (s *instrumented) Delete(ctx context.Context, k Key, c Cond) error {
	start := time.Now()
	err := s.next.Delete(ctx, k, c)
	s.observe(OpNameDelete, time.Since(start), err)
	return err
}

func (s *instrumented) Add(ctx context.Context, k Key, delta int64) (int64, error) {
	start := time.Now()
	n, err := s.next.Add(ctx, k, delta)
	s.observe(OpNameAdd, time.Since(start), err)
	return n, err
}

func (s *instrumented) Transact(ctx context.Context, ops []Op) error {
	start := time.Now()
	err := s.next.Transact(ctx, ops)
	s.observe(OpNameTransact, time.Since(start), err)
	return err
}

func (s *instrumented) Close() error { return s.next.Close() }

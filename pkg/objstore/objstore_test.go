package objstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stratamq/strata/pkg/objstore"
	"github.com/stratamq/strata/pkg/objstore/objstoretest"
)

func TestConformanceMemory(t *testing.T) {
	objstoretest.Run(t, func(*testing.T) objstore.Store { return objstore.NewMemory() })
}

func TestConformanceCounting(t *testing.T) {
	objstoretest.Run(t, func(*testing.T) objstore.Store { return objstore.NewCounting(objstore.NewMemory()) })
}

// listOnly hides a store's optional interfaces: ListPrefixes falls back to
// List.
type listOnly struct{ objstore.Store }

func TestConformanceWithoutPrefixLister(t *testing.T) {
	objstoretest.Run(t, func(*testing.T) objstore.Store { return listOnly{objstore.NewMemory()} })
}

func TestCounting(t *testing.T) {
	c, ctx := objstore.NewCounting(objstore.NewMemory()), objstoretest.Ctx(t)
	objstoretest.Put(t, c, "a/1", make([]byte, 100))
	objstoretest.Put(t, c, "a/2", make([]byte, 50))
	objstoretest.WantErr(t, c.Put(ctx, "a/1", []byte("x"), objstore.PutOptions{IfAbsent: true}), objstore.ErrExists)
	objstoretest.Get(t, c, "a/1", 10, 20)
	objstoretest.Get(t, c, "a/2", 0, -1)
	_, err := c.Get(ctx, "missing", 0, -1)
	objstoretest.WantErr(t, err, objstore.ErrNotFound)
	objstoretest.List(t, c, "a/")
	objstoretest.List(t, c, "b/")
	if err := c.Delete(ctx, "a/1"); err != nil {
		t.Fatal(err)
	}
	want := objstore.Counts{Puts: 3, Gets: 3, Lists: 2, Deletes: 1, PutBytes: 150, GetBytes: 70, Listed: 2}
	if got := c.Counts(); got != want {
		t.Fatalf("counts %+v, want %+v", got, want)
	}
	if got := c.Counts().Requests(); got != 9 {
		t.Fatalf("requests %d, want 9", got)
	}
	c.Reset()
	if got := c.Counts(); got != (objstore.Counts{}) {
		t.Fatalf("after reset: %+v", got)
	}
}

// landedThenLost is a Store whose next IfAbsent Put lands and then reports
// ErrExists, as a retried S3 create whose first answer was lost does.
type landedThenLost struct {
	objstore.Store
	armed bool
}

func (s *landedThenLost) Put(ctx context.Context, key string, body []byte, opts objstore.PutOptions) error {
	if s.armed && opts.IfAbsent {
		s.armed = false
		if err := s.Store.Put(ctx, key, body, opts); err != nil {
			return err
		}
		return s.Store.Put(ctx, key, body, opts) // the retry
	}
	return s.Store.Put(ctx, key, body, opts)
}

func TestPutIfAbsentIdempotentAfterLostAnswer(t *testing.T) {
	s, ctx := &landedThenLost{Store: objstore.NewMemory(), armed: true}, objstoretest.Ctx(t)
	objstoretest.WantErr(t, s.Put(ctx, "k", []byte("v"), objstore.PutOptions{IfAbsent: true}), objstore.ErrExists)
	s.armed = true
	if err := objstore.PutIfAbsentIdempotent(ctx, s, "k2", []byte("v")); err != nil {
		t.Fatalf("own landed create: %v", err)
	}
	objstoretest.WantBody(t, s, "k2", []byte("v"))
	s.armed = true
	err := objstore.PutIfAbsentIdempotent(ctx, s, "k2", []byte("w"))
	objstoretest.WantErr(t, err, objstore.ErrExists)
}

func TestPutIfAbsentIdempotentPassesOtherErrors(t *testing.T) {
	s := objstore.NewMemory()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := objstore.PutIfAbsentIdempotent(ctx, s, "k", []byte("v")); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
}

func TestCheckKey(t *testing.T) {
	for _, k := range []string{"a", "a/b=c-d", "日本", strings.Repeat("k", objstore.MaxKeyBytes)} {
		if err := objstore.CheckKey(k); err != nil {
			t.Errorf("%q: %v", k, err)
		}
	}
	for _, k := range []string{"", "a\x00", "a\x7f", "\xff", strings.Repeat("k", objstore.MaxKeyBytes+1)} {
		if err := objstore.CheckKey(k); err == nil {
			t.Errorf("%q accepted", k)
		}
	}
}

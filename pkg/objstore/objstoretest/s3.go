package objstoretest

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stratamq/strata/pkg/objstore/s3local"
	"github.com/stratamq/strata/pkg/objstore/s3store"
)

// Bucket is the bucket StartS3 creates.
const Bucket = "strata-test"

// S3 is an S3 stand-in serving one test: an s3local server with Faults in
// front and Bucket created.
type S3 struct {
	// Faults sits in front of the server; its counts include every
	// attempt of every client.
	Faults *s3local.Faults
	// Path is the bbolt file, "" for memory.
	Path string

	srv      *s3local.Server
	prefixes atomic.Int64
}

// StartS3 starts s3local in memory (path "") or on the bbolt file at path,
// with Faults in front and Bucket created, and closes it when the test
// ends.
func StartS3(t testing.TB, path string) *S3 {
	t.Helper()
	s := &S3{Faults: &s3local.Faults{}, Path: path}
	s.start(t, "127.0.0.1:0")
	t.Cleanup(func() {
		if err := s.srv.Close(); err != nil {
			t.Errorf("close s3local: %v", err)
		}
	})
	return s
}

func (s *S3) start(t testing.TB, addr string) {
	t.Helper()
	srv, err := s3local.Start(s.Path, s3local.WithAddr(addr), s3local.WithWrap(s.Faults.Wrap), s3local.WithBuckets(Bucket))
	if err != nil {
		t.Fatalf("start s3local: %v", err)
	}
	s.srv = srv
}

// URL returns the server's endpoint.
func (s *S3) URL() string { return s.srv.URL() }

// Restart closes the server and starts it again on the same file and
// address, so stores opened before keep working. A memory server comes
// back empty (with Bucket).
func (s *S3) Restart(t testing.TB) {
	t.Helper()
	addr := strings.TrimPrefix(s.srv.URL(), "http://")
	if err := s.srv.Close(); err != nil {
		t.Fatalf("close s3local: %v", err)
	}
	s.start(t, addr)
}

// Store opens an s3store.Store on Bucket with opts (Endpoint and Bucket
// are filled in). An empty opts.Prefix gets a fresh one, so stores of one
// server do not see each other's objects; "/" means the bucket's root.
func (s *S3) Store(t testing.TB, opts s3store.Options) *s3store.Store {
	t.Helper()
	opts.Endpoint, opts.Bucket = s.URL(), Bucket
	if opts.Prefix == "" {
		opts.Prefix = fmt.Sprintf("store-%d", s.prefixes.Add(1))
	}
	st, err := s3store.Open(context.Background(), opts)
	if err != nil {
		t.Fatalf("open s3 store: %v", err)
	}
	return st
}

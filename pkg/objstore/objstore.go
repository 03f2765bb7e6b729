// Package objstore is Strata's object-store layer: the bucket that holds
// tiered segments and their indexes (DESIGN.md §2 "Tier").
//
// Everything goes through one small interface, Store: whole-object Put
// (optionally a conditional create, S3's If-None-Match: *), ranged Get,
// prefix List and Delete. Implementations only translate it: Memory (tests
// and benchmarks), s3store (Amazon S3 and S3-compatible services through
// aws-sdk-go-v2) and, for `brokerfleet dev`, s3store over s3local (gofakes3
// on 127.0.0.1). All of them pass the conformance suite in objstoretest.
//
// # Conditional creates and retries
//
// A segment is uploaded once, with PutOptions{IfAbsent: true}, so that a
// deposed leader can never overwrite what the current one wrote. The S3
// client retries a lost answer (5xx, dropped connection, timeout), and a
// retry of a create whose first attempt did land answers 412 Precondition
// Failed: Put returns ErrExists for the caller's own object. So ErrExists
// on a key only the caller writes means "maybe mine": compare contents
// before treating it as a conflict. PutIfAbsentIdempotent does exactly
// that. Likewise ErrUnavailable from an IfAbsent Put means the object may
// or may not exist; calling PutIfAbsentIdempotent again settles it.
//
// Keys are relative to the store's prefix, '/'-separated, non-empty UTF-8
// of at most MaxKeyBytes bytes (see CheckKey).
package objstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"
	"unicode/utf8"
)

var (
	// ErrNotFound is returned when an object does not exist.
	ErrNotFound = errors.New("objstore: not found")
	// ErrExists is returned by a Put with IfAbsent when the key already
	// exists, possibly because an earlier attempt of the same call landed
	// (see the package documentation and PutIfAbsentIdempotent).
	ErrExists = errors.New("objstore: already exists")
	// ErrUnavailable is returned when the store could not be reached or kept
	// failing (5xx, throttling, timeouts) after bounded retries. It is
	// retriable: a write may or may not have happened.
	ErrUnavailable = errors.New("objstore: unavailable")
)

// MaxKeyBytes bounds a key (S3 allows 1024 bytes of UTF-8 for the whole
// key, the store's prefix included).
const MaxKeyBytes = 1024

// Store is a flat namespace of immutable-by-convention objects. Every
// method is safe for concurrent use.
type Store interface {
	// Put creates or replaces key. With IfAbsent it fails with ErrExists if
	// the key exists (S3 If-None-Match: *), atomically under concurrency.
	Put(ctx context.Context, key string, body []byte, opts PutOptions) error
	// PutReader is Put with the body streamed from r, size bytes from its
	// current position, so a large object is never held in memory. r must
	// be seekable: a retried request rewinds and resends it.
	PutReader(ctx context.Context, key string, r io.ReadSeeker, size int64, opts PutOptions) error
	// Get returns length bytes from offset (length < 0: to the end).
	// ErrNotFound if missing; a range past the end returns what exists
	// (possibly empty), never an error for offset >= size.
	Get(ctx context.Context, key string, offset, length int64) ([]byte, error)
	// List returns every object under prefix, sorted by key, following
	// pagination. Result keys are whole keys, as given to Put (they start
	// with prefix). An empty prefix lists everything.
	List(ctx context.Context, prefix string) ([]ObjectInfo, error)
	// Delete removes key; deleting a missing key is not an error.
	Delete(ctx context.Context, key string) error
}

// PutOptions modify a Put.
type PutOptions struct {
	// IfAbsent makes the Put a create: it fails with ErrExists when the key
	// exists.
	IfAbsent bool
}

// ObjectInfo describes one listed object.
type ObjectInfo struct {
	Key          string
	Size         int64
	LastModified time.Time
}

// CheckKey returns an error unless key is a usable object key: non-empty,
// valid UTF-8, at most MaxKeyBytes bytes, and free of control characters
// (which S3 accepts but XML listings cannot carry safely). Implementations
// call it before any request, so behaviour does not depend on the backend.
func CheckKey(key string) error {
	switch {
	case key == "":
		return errors.New("objstore: empty key")
	case len(key) > MaxKeyBytes:
		return fmt.Errorf("objstore: key of %d bytes exceeds %d", len(key), MaxKeyBytes)
	case !utf8.ValidString(key):
		return fmt.Errorf("objstore: key %q is not valid UTF-8", key)
	}
	for _, r := range key {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("objstore: key %q holds a control character", key)
		}
	}
	return nil
}

// CheckRange returns an error for a negative offset.
func CheckRange(offset int64) error {
	if offset < 0 {
		return fmt.Errorf("objstore: negative offset %d", offset)
	}
	return nil
}

// PutIfAbsentIdempotent creates key with body unless it exists. When it
// exists (ErrExists) it reads the object back and returns nil if it holds
// exactly body: a retried create whose first attempt landed, or an earlier
// call of the caller's own, is success. Otherwise it returns an error
// wrapping ErrExists. Use it for keys that only one writer creates with
// deterministic contents (segment uploads), and call it again after
// ErrUnavailable.
func PutIfAbsentIdempotent(ctx context.Context, s Store, key string, body []byte) error {
	err := s.Put(ctx, key, body, PutOptions{IfAbsent: true})
	if !errors.Is(err, ErrExists) {
		return err
	}
	got, gerr := s.Get(ctx, key, 0, -1)
	switch {
	case errors.Is(gerr, ErrNotFound):
		// Deleted since: whatever was there was not provably ours.
		return fmt.Errorf("put %s if absent: existed, then vanished: %w", key, ErrExists)
	case gerr != nil:
		return fmt.Errorf("put %s if absent: read back existing object: %w", key, gerr)
	case !bytes.Equal(got, body):
		return fmt.Errorf("put %s if absent: holds other contents (%d bytes, want %d): %w", key, len(got), len(body), ErrExists)
	}
	return nil
}

// PutReaderIfAbsentIdempotent is PutIfAbsentIdempotent for a streamed body:
// on ErrExists it compares the stored object with r chunk by chunk.
func PutReaderIfAbsentIdempotent(ctx context.Context, s Store, key string, r io.ReadSeeker, size int64) error {
	start, err := r.Seek(0, io.SeekCurrent)
	if err != nil {
		return fmt.Errorf("put %s if absent: %w", key, err)
	}
	err = s.PutReader(ctx, key, r, size, PutOptions{IfAbsent: true})
	if !errors.Is(err, ErrExists) {
		return err
	}
	const chunk = 8 << 20
	want := make([]byte, chunk)
	for off := int64(0); off <= size; off += chunk {
		n := min(chunk, size-off)
		got, gerr := s.Get(ctx, key, off, n+1) // one more byte: a longer object differs
		switch {
		case errors.Is(gerr, ErrNotFound):
			return fmt.Errorf("put %s if absent: existed, then vanished: %w", key, ErrExists)
		case gerr != nil:
			return fmt.Errorf("put %s if absent: read back existing object: %w", key, gerr)
		}
		if _, err := r.Seek(start+off, io.SeekStart); err != nil {
			return fmt.Errorf("put %s if absent: %w", key, err)
		}
		if _, err := io.ReadFull(r, want[:n]); err != nil {
			return fmt.Errorf("put %s if absent: %w", key, err)
		}
		if int64(len(got)) != n || !bytes.Equal(got, want[:n]) {
			return fmt.Errorf("put %s if absent: holds other contents at byte %d: %w", key, off, ErrExists)
		}
		if n < chunk {
			break
		}
	}
	return nil
}

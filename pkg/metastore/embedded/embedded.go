// Package embedded is a metastore.Store in one local bbolt file, for
// `brokerfleet dev` and single-process tests. Conditions are evaluated with
// metastore.Cond.Holds inside one bbolt write transaction, so it has exactly
// the reference semantics; it survives restarts of the process.
package embedded

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/stratamq/strata/pkg/metastore"
)

var (
	itemsBucket    = []byte("items")
	countersBucket = []byte("counters")
)

// Store is the bbolt-backed metastore.Store.
type Store struct {
	db  *bolt.DB
	now func() time.Time
}

var _ metastore.Store = (*Store)(nil)

// Option configures Open.
type Option func(*Store)

// WithClock sets the wall clock used for item expiry (default time.Now).
func WithClock(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// WithoutSync skips the fsync of every commit (bbolt's NoSync), for tests
// and benchmarks whose file is thrown away: a crash of the machine may
// lose or corrupt recent writes.
func WithoutSync() Option { return func(s *Store) { s.db.NoSync = true } }

// Open opens or creates the store file at path. Only one process may have
// it open; a second Open waits up to a second and then fails.
func Open(path string, opts ...Option) (*Store, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return nil, fmt.Errorf("open embedded metastore %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{itemsBucket, countersBucket} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open embedded metastore %s: %w", path, err)
	}
	s := &Store{db: db, now: time.Now}
	for _, o := range opts {
		o(s)
	}
	return s, nil
}

func dbKey(k metastore.Key) []byte {
	b := make([]byte, 0, len(k.PK)+1+len(k.SK))
	b = append(b, k.PK...)
	b = append(b, 0)
	return append(b, k.SK...)
}

// encoded item: version (8) | expires (8) | value
func encode(it metastore.Item) []byte {
	b := make([]byte, 16, 16+len(it.Value))
	binary.BigEndian.PutUint64(b, uint64(it.Version))
	binary.BigEndian.PutUint64(b[8:], uint64(it.Expires))
	return append(b, it.Value...)
}

func decode(k metastore.Key, b []byte) (metastore.Item, error) {
	if len(b) < 16 {
		return metastore.Item{}, fmt.Errorf("embedded metastore: item %s: %d-byte record is corrupt", k, len(b))
	}
	return metastore.Item{
		Key:     k,
		Version: int64(binary.BigEndian.Uint64(b)),
		Expires: int64(binary.BigEndian.Uint64(b[8:])),
		Value:   append([]byte(nil), b[16:]...),
	}, nil
}

func (s *Store) live(it metastore.Item) bool {
	return it.Expires == 0 || it.Expires >= s.now().Unix()
}

// current returns the live item at k, or nil.
func (s *Store) current(b *bolt.Bucket, k metastore.Key) (*metastore.Item, error) {
	raw := b.Get(dbKey(k))
	if raw == nil {
		return nil, nil
	}
	it, err := decode(k, raw)
	if err != nil {
		return nil, err
	}
	if !s.live(it) {
		return nil, nil
	}
	return &it, nil
}

// Get implements metastore.Store.
func (s *Store) Get(ctx context.Context, k metastore.Key) (metastore.Item, error) {
	if err := metastore.CheckKey(k); err != nil {
		return metastore.Item{}, err
	}
	var out *metastore.Item
	err := s.db.View(func(tx *bolt.Tx) error {
		var err error
		out, err = s.current(tx.Bucket(itemsBucket), k)
		return err
	})
	if err != nil {
		return metastore.Item{}, err
	}
	if out == nil {
		return metastore.Item{}, fmt.Errorf("get %s: %w", k, metastore.ErrNotFound)
	}
	return *out, nil
}

// Query implements metastore.Store.
func (s *Store) Query(ctx context.Context, pk, prefix string) ([]metastore.Item, error) {
	var out []metastore.Item
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(itemsBucket).Cursor()
		start := dbKey(metastore.Key{PK: pk, SK: prefix})
		for k, v := c.Seek(start); k != nil && bytes.HasPrefix(k, start); k, v = c.Next() {
			key := metastore.Key{PK: pk, SK: string(k[len(pk)+1:])}
			it, err := decode(key, v)
			if err != nil {
				return err
			}
			if s.live(it) {
				out = append(out, it)
			}
		}
		return nil
	})
	return out, err
}

// Put implements metastore.Store.
func (s *Store) Put(ctx context.Context, it metastore.Item, c metastore.Cond) (metastore.Item, error) {
	if err := metastore.CheckItem(it); err != nil {
		return metastore.Item{}, err
	}
	var stored metastore.Item
	err := s.db.Update(func(tx *bolt.Tx) error {
		var err error
		stored, err = s.put(tx.Bucket(itemsBucket), it, c)
		return err
	})
	return stored, err
}

func (s *Store) put(b *bolt.Bucket, it metastore.Item, c metastore.Cond) (metastore.Item, error) {
	cur, err := s.current(b, it.Key)
	if err != nil {
		return metastore.Item{}, err
	}
	if !c.Holds(cur) {
		return metastore.Item{}, fmt.Errorf("put %s %s: %w", it.Key, c, metastore.ErrConditionFailed)
	}
	// The version keeps counting across expiry (an expired item is still
	// stored), as DynamoDB's does; after a Delete it starts again at 1.
	var prev int64
	if raw := b.Get(dbKey(it.Key)); raw != nil {
		prev = int64(binary.BigEndian.Uint64(raw))
	}
	stored := metastore.Item{Key: it.Key, Version: prev + 1, Value: append([]byte(nil), it.Value...), Expires: it.Expires}
	return stored, b.Put(dbKey(it.Key), encode(stored))
}

func (s *Store) del(b *bolt.Bucket, k metastore.Key, c metastore.Cond) error {
	cur, err := s.current(b, k)
	if err != nil {
		return err
	}
	if !c.Holds(cur) {
		return fmt.Errorf("delete %s %s: %w", k, c, metastore.ErrConditionFailed)
	}
	return b.Delete(dbKey(k))
}

// Delete implements metastore.Store.
func (s *Store) Delete(ctx context.Context, k metastore.Key, c metastore.Cond) error {
	if err := metastore.CheckKey(k); err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error { return s.del(tx.Bucket(itemsBucket), k, c) })
}

// Add implements metastore.Store.
func (s *Store) Add(ctx context.Context, k metastore.Key, delta int64) (int64, error) {
	if err := metastore.CheckKey(k); err != nil {
		return 0, err
	}
	var n int64
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(countersBucket)
		if raw := b.Get(dbKey(k)); len(raw) == 8 {
			n = int64(binary.BigEndian.Uint64(raw))
		}
		n += delta
		return b.Put(dbKey(k), binary.BigEndian.AppendUint64(nil, uint64(n)))
	})
	return n, err
}

// Transact implements metastore.Store.
func (s *Store) Transact(ctx context.Context, ops []metastore.Op) error {
	if err := metastore.CheckOps(ops); err != nil {
		return err
	}
	return s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(itemsBucket)
		// Check every condition first: bbolt rolls back on error anyway,
		// but checking before writing keeps conditions independent of the
		// order of ops.
		for _, op := range ops {
			cur, err := s.current(b, op.Item.Key)
			if err != nil {
				return err
			}
			if !op.Cond.Holds(cur) {
				return fmt.Errorf("transact: %s %s: %w", op.Item.Key, op.Cond, metastore.ErrConditionFailed)
			}
		}
		for _, op := range ops {
			var err error
			switch op.Kind {
			case metastore.OpPut:
				_, err = s.put(b, op.Item, metastore.Always)
			case metastore.OpDelete:
				err = s.del(b, op.Item.Key, metastore.Always)
			case metastore.OpCheck:
			default:
				err = fmt.Errorf("transact: unknown op kind %d", op.Kind)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
}

// Close implements metastore.Store.
func (s *Store) Close() error { return s.db.Close() }

package metastore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

var (
	// ErrNotFound is returned when an item does not exist (or has expired).
	ErrNotFound = errors.New("metastore: not found")
	// ErrConditionFailed is returned when a conditional write's condition
	// does not hold: the item exists when it must not, is absent when it
	// must exist, or carries another version.
	ErrConditionFailed = errors.New("metastore: condition failed")
	// ErrTooLarge is returned when an item would exceed MaxItemBytes.
	ErrTooLarge = errors.New("metastore: item too large")
	// ErrUnavailable is returned when the store could not be reached or kept
	// failing (throttling, 5xx, timeouts) after bounded retries. It is
	// retriable: the write may or may not have happened.
	ErrUnavailable = errors.New("metastore: unavailable")
	// ErrUnsupported is returned when a store cannot perform an operation
	// (dynalite has no transactions).
	ErrUnsupported = errors.New("metastore: unsupported")
)

// MaxItemBytes bounds an item's value so that, with its keys and
// attributes, it stays under DynamoDB's 400 KB item limit. Every
// implementation enforces it, so behaviour does not depend on the backend.
const MaxItemBytes = 390 << 10

// MaxKeyBytes bounds each key part (DynamoDB allows 2048 for a partition
// key and 1024 for a sort key).
const MaxKeyBytes = 1024

// MaxTransactItems is the most operations one Transact may carry
// (DynamoDB's TransactWriteItems limit).
const MaxTransactItems = 100

// MaxTransactBytes bounds the values of one Transact, leaving room for keys
// and attributes under DynamoDB's 4 MB request limit.
const MaxTransactBytes = 4<<20 - 256<<10

// Key addresses an item: PK groups items that are queried together, SK
// orders them within the group.
type Key struct {
	PK, SK string
}

func (k Key) String() string { return k.PK + "/" + k.SK }

// Item is a stored value with its version. Version is 0 for an item never
// written; every write stores the previous version plus one. Versions start
// again at 1 after a Delete (and after DynamoDB's TTL process removes an
// expired item), so records whose versions fence writers (leases, partition
// state, generations) are never deleted and never carry Expires. Expires, when
// non-zero, is a Unix time in seconds after which the item reads as absent.
type Item struct {
	Key
	Version int64
	Value   []byte
	Expires int64
}

// Cond is a write condition.
type Cond struct {
	kind    condKind
	version int64
}

type condKind uint8

const (
	condNone condKind = iota
	condAbsent
	condVersion
	condExists
)

// Always is no condition.
var Always = Cond{}

// IfAbsent holds when the item does not exist (or has expired).
func IfAbsent() Cond { return Cond{kind: condAbsent} }

// IfVersion holds when the item exists with exactly version v.
func IfVersion(v int64) Cond { return Cond{kind: condVersion, version: v} }

// IfExists holds when the item exists, whatever its version.
func IfExists() Cond { return Cond{kind: condExists} }

// Holds reports whether c holds for the stored item cur (nil when absent).
// Implementations without native conditions (embedded) use it; it is the
// reference semantics the conformance suite checks everyone against.
func (c Cond) Holds(cur *Item) bool {
	switch c.kind {
	case condAbsent:
		return cur == nil
	case condVersion:
		return cur != nil && cur.Version == c.version
	case condExists:
		return cur != nil
	}
	return true
}

// Kind and Version describe c for implementations that translate it.
func (c Cond) Kind() (absent, version, exists bool, v int64) {
	return c.kind == condAbsent, c.kind == condVersion, c.kind == condExists, c.version
}

func (c Cond) String() string {
	switch c.kind {
	case condAbsent:
		return "if absent"
	case condVersion:
		return fmt.Sprintf("if version %d", c.version)
	case condExists:
		return "if exists"
	}
	return "always"
}

// OpKind is the kind of one transactional operation.
type OpKind uint8

// Operations of a transaction.
const (
	OpPut    OpKind = iota + 1 // write Item under Cond
	OpDelete                   // delete Item.Key under Cond
	OpCheck                    // only check Cond on Item.Key
)

// Op is one operation of a transaction.
type Op struct {
	Kind OpKind
	Item Item // for OpPut the value and expiry to write; for the others only the key
	Cond Cond
}

// Store is the conditional-write primitive. Reads are strongly consistent.
// All methods are safe for concurrent use.
type Store interface {
	// Get returns the item at k, or ErrNotFound.
	Get(ctx context.Context, k Key) (Item, error)
	// Query returns the live items whose partition key is pk and whose sort
	// key starts with prefix, in sort-key order.
	Query(ctx context.Context, pk, prefix string) ([]Item, error)
	// Put writes it.Value and it.Expires under c and returns the stored
	// item with its new version (it.Version is ignored; use IfVersion).
	Put(ctx context.Context, it Item, c Cond) (Item, error)
	// Delete removes k under c. Deleting an absent item with Always is not
	// an error.
	Delete(ctx context.Context, k Key, c Cond) error
	// Add atomically adds delta to the counter at k (created at 0) and
	// returns the new value. Counters live apart from versioned items.
	Add(ctx context.Context, k Key, delta int64) (int64, error)
	// Transact applies ops atomically: all conditions hold and every write
	// happens, or nothing does and the error wraps ErrConditionFailed.
	// At most MaxTransactItems ops, each on a distinct key.
	Transact(ctx context.Context, ops []Op) error
	// Close releases the store's resources.
	Close() error
}

// CheckItem validates keys and size, as every implementation must before
// writing.
func CheckItem(it Item) error {
	if err := CheckKey(it.Key); err != nil {
		return err
	}
	if len(it.Value) > MaxItemBytes {
		return fmt.Errorf("put %s: %d-byte value exceeds %d: %w", it.Key, len(it.Value), MaxItemBytes, ErrTooLarge)
	}
	return nil
}

// CheckKey validates a key.
func CheckKey(k Key) error {
	if k.PK == "" || k.SK == "" {
		return fmt.Errorf("key %q: partition and sort key must be non-empty", k)
	}
	if len(k.PK) > MaxKeyBytes || len(k.SK) > MaxKeyBytes {
		return fmt.Errorf("key of %d+%d bytes: a key part exceeds %d bytes: %w", len(k.PK), len(k.SK), MaxKeyBytes, ErrTooLarge)
	}
	if strings.IndexByte(k.PK, 0) >= 0 {
		return fmt.Errorf("key %q: the partition key contains a NUL byte", k)
	}
	if !utf8.ValidString(k.PK) || !utf8.ValidString(k.SK) {
		return fmt.Errorf("key %q: keys must be valid UTF-8", k)
	}
	return nil
}

// CheckOps validates a transaction's shape.
func CheckOps(ops []Op) error {
	if len(ops) == 0 || len(ops) > MaxTransactItems {
		return fmt.Errorf("transact: %d ops; want 1 to %d", len(ops), MaxTransactItems)
	}
	seen := make(map[Key]bool, len(ops))
	total := 0
	for _, op := range ops {
		total += len(op.Item.Value)
		if total > MaxTransactBytes {
			return fmt.Errorf("transact: values exceed %d bytes: %w", MaxTransactBytes, ErrTooLarge)
		}
		if seen[op.Item.Key] {
			return fmt.Errorf("transact: key %s appears twice", op.Item.Key)
		}
		seen[op.Item.Key] = true
		if op.Kind == OpPut {
			if err := CheckItem(op.Item); err != nil {
				return err
			}
		} else if err := CheckKey(op.Item.Key); err != nil {
			return err
		}
	}
	return nil
}

package schemaregistry

import (
	"sync"
	"time"
)

// boundedCache maps immutable values by id (schemas, parsed schemas). When
// full it forgets everything: simple, and a registry's working set is small.
type boundedCache[V any] struct {
	mu  sync.Mutex
	max int
	m   map[int64]V
}

func newBoundedCache[V any](max int) *boundedCache[V] {
	return &boundedCache[V]{max: max, m: make(map[int64]V)}
}

func (c *boundedCache[V]) get(id int64) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[id]
	return v, ok
}

func (c *boundedCache[V]) put(id int64, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= c.max {
		clear(c.m)
	}
	c.m[id] = v
}

// subjectIDs caches, per subject, the ids of its live versions, for
// SubjectHasID. A found id is trusted for ttl; a missing id always makes
// the caller re-read the subject, so a schema just registered through
// another broker is seen at once (a producer registers, then sends).
type subjectIDs struct {
	mu      sync.Mutex
	ttl     time.Duration
	now     func() time.Time
	entries map[string]idsEntry
}

type idsEntry struct {
	ids  map[int64]bool
	read time.Time
}

func newSubjectIDs(ttl time.Duration) *subjectIDs {
	return &subjectIDs{ttl: ttl, now: time.Now, entries: make(map[string]idsEntry)}
}

// lookup reports whether the cache answers for (subject, id): known is
// false when the caller must read the subject and store the result.
func (c *subjectIDs) lookup(subject string, id int64) (has, known bool) {
	if c.ttl <= 0 {
		return false, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[subject]
	if !ok {
		return false, false
	}
	age := c.now().Sub(e.read)
	if age >= c.ttl {
		return false, false
	}
	if e.ids[id] {
		return true, true
	}
	return false, false
}

func (c *subjectIDs) store(subject string, ids map[int64]bool) {
	if c.ttl <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= maxCachedSubjects {
		clear(c.entries)
	}
	c.entries[subject] = idsEntry{ids: ids, read: c.now()}
}

// forget drops a subject this registry changed.
func (c *subjectIDs) forget(subject string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, subject)
}

const (
	maxCachedSubjects = 4096
	maxCachedSchemas  = 1024
)

package topic

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"sync"

	"github.com/stratamq/strata/pkg/segment"
)

// Errors returned by the Catalog.
var (
	// ErrExists is returned when creating a topic whose name (or a name that
	// differs only in '.' versus '_') is taken.
	ErrExists = errors.New("topic already exists")
	// ErrNotFound is returned when a topic does not exist.
	ErrNotFound = errors.New("topic not found")
)

// ID is a topic's UUID, new for every incarnation of a name.
type ID [16]byte

// NewID returns a random version-4 UUID.
func NewID() ID {
	var id ID
	_, _ = rand.Read(id[:])
	id[6] = id[6]&0x0f | 0x40
	id[8] = id[8]&0x3f | 0x80
	return id
}

func (id ID) String() string { return hex.EncodeToString(id[:]) }

// Topic is the durable description of a topic.
type Topic struct {
	Name              string            `json:"name"`
	ID                ID                `json:"id"`
	Partitions        int32             `json:"partitions"`
	ReplicationFactor int16             `json:"replicationFactor"`
	Configs           map[string]string `json:"configs,omitempty"`
}

func (t Topic) clone() Topic {
	c := t
	c.Configs = make(map[string]string, len(t.Configs))
	for k, v := range t.Configs {
		c.Configs[k] = v
	}
	return c
}

// Catalog is the durable set of topics, kept as one JSON file written
// atomically (temporary file, fsync, rename) on every change. The metastore
// issue replaces it with records in the control-plane store.
type Catalog struct {
	fs   segment.FS
	dir  string
	mu   sync.RWMutex
	byNm map[string]Topic
}

const catalogFile = "topics.json"

// OpenCatalog loads the catalog in dir, creating an empty one if absent.
func OpenCatalog(fs segment.FS, dir string) (*Catalog, error) {
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("open catalog: %w", err)
	}
	c := &Catalog{fs: fs, dir: dir, byNm: map[string]Topic{}}
	f, err := fs.OpenFile(path.Join(dir, catalogFile), os.O_RDONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open catalog: %w", err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, fmt.Errorf("open catalog: %w", err)
	}
	buf := make([]byte, size)
	if _, err := f.ReadAt(buf, 0); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read catalog: %w", err)
	}
	var list []Topic
	if err := json.Unmarshal(buf, &list); err != nil {
		return nil, fmt.Errorf("decode catalog %s: %w", path.Join(dir, catalogFile), err)
	}
	for _, t := range list {
		c.byNm[t.Name] = t
	}
	return c, nil
}

// List returns every topic sorted by name.
func (c *Catalog) List() []Topic {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]Topic, 0, len(c.byNm))
	for _, t := range c.byNm {
		out = append(out, t.clone())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Get returns the topic called name.
func (c *Catalog) Get(name string) (Topic, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	t, ok := c.byNm[name]
	if !ok {
		return Topic{}, false
	}
	return t.clone(), true
}

// Create adds t. It fails with ErrExists when the name, or one that differs
// only in '.' versus '_', is taken.
func (c *Catalog) Create(t Topic) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byNm[t.Name]; ok {
		return fmt.Errorf("create topic %q: %w", t.Name, ErrExists)
	}
	key := collisionKey(t.Name)
	for name := range c.byNm {
		if collisionKey(name) == key {
			return fmt.Errorf("create topic %q: collides with %q: %w", t.Name, name, ErrExists)
		}
	}
	c.byNm[t.Name] = t.clone()
	if err := c.saveLocked(); err != nil {
		delete(c.byNm, t.Name)
		return err
	}
	return nil
}

// Update applies fn to the stored topic called name and saves the result.
func (c *Catalog) Update(name string, fn func(*Topic) error) (Topic, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old, ok := c.byNm[name]
	if !ok {
		return Topic{}, fmt.Errorf("update topic %q: %w", name, ErrNotFound)
	}
	t := old.clone()
	if err := fn(&t); err != nil {
		return Topic{}, err
	}
	if t.Name != name || t.ID != old.ID {
		return Topic{}, fmt.Errorf("update topic %q: name and id cannot change", name)
	}
	c.byNm[name] = t
	if err := c.saveLocked(); err != nil {
		c.byNm[name] = old
		return Topic{}, err
	}
	return t.clone(), nil
}

// Delete removes the topic called name and returns what it was.
func (c *Catalog) Delete(name string) (Topic, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.byNm[name]
	if !ok {
		return Topic{}, fmt.Errorf("delete topic %q: %w", name, ErrNotFound)
	}
	delete(c.byNm, name)
	if err := c.saveLocked(); err != nil {
		c.byNm[name] = t
		return Topic{}, err
	}
	return t, nil
}

func (c *Catalog) saveLocked() error {
	list := make([]Topic, 0, len(c.byNm))
	for _, t := range c.byNm {
		list = append(list, t)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	data, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return fmt.Errorf("encode catalog: %w", err)
	}
	return WriteFileAtomic(c.fs, path.Join(c.dir, catalogFile), data)
}

// WriteFileAtomic replaces name with data so that a crash leaves either the
// old or the new content: it writes a temporary file, fsyncs it and renames
// it over name.
func WriteFileAtomic(fs segment.FS, name string, data []byte) error {
	tmp := name + ".tmp"
	f, err := fs.OpenFile(tmp, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", name, err)
	}
	if err := fs.Rename(tmp, name); err != nil {
		return fmt.Errorf("rename %s: %w", name, err)
	}
	return nil
}

// MarshalText encodes the ID as 32 hex digits.
func (id ID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText decodes 32 hex digits.
func (id *ID) UnmarshalText(b []byte) error {
	if hex.DecodedLen(len(b)) != len(id) {
		return fmt.Errorf("topic id %q: want 32 hex digits", b)
	}
	_, err := hex.Decode(id[:], b)
	return err
}

package objstore

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
)

// Memory is a Store in memory, safe for concurrent use. Bodies are copied
// in and out, so callers may reuse their buffers.
type Memory struct {
	mu      sync.RWMutex
	objects map[string]memObject
}

type memObject struct {
	body     []byte
	modified time.Time
}

var (
	_ Store        = (*Memory)(nil)
	_ PrefixLister = (*Memory)(nil)
)

// NewMemory returns an empty Memory.
func NewMemory() *Memory { return &Memory{objects: map[string]memObject{}} }

// Put implements Store.
func (m *Memory) Put(ctx context.Context, key string, body []byte, opts PutOptions) error {
	if err := check(ctx, key); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	obj := memObject{body: slices.Clone(body), modified: time.Now()}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.objects[key]; ok && opts.IfAbsent {
		return fmt.Errorf("put %s: %w", key, ErrExists)
	}
	m.objects[key] = obj
	return nil
}

// PutReader implements Store.
func (m *Memory) PutReader(ctx context.Context, key string, r io.ReadSeeker, size int64, opts PutOptions) error {
	if size < 0 {
		return fmt.Errorf("put %s: negative size %d", key, size)
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(r, body); err != nil {
		return fmt.Errorf("put %s: read body: %w", key, err)
	}
	return m.Put(ctx, key, body, opts)
}

// Get implements Store.
func (m *Memory) Get(ctx context.Context, key string, offset, length int64) ([]byte, error) {
	if err := check(ctx, key); err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	if err := CheckRange(offset); err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	m.mu.RLock()
	obj, ok := m.objects[key]
	m.mu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("get %s: %w", key, ErrNotFound)
	}
	size := int64(len(obj.body))
	start := min(offset, size)
	end := size
	if length >= 0 && length < end-start {
		end = start + length
	}
	return slices.Clone(obj.body[start:end:end]), nil
}

// List implements Store.
func (m *Memory) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list %s: %w", prefix, err)
	}
	m.mu.RLock()
	out := []ObjectInfo{}
	for k, obj := range m.objects {
		if strings.HasPrefix(k, prefix) {
			out = append(out, ObjectInfo{Key: k, Size: int64(len(obj.body)), LastModified: obj.modified})
		}
	}
	m.mu.RUnlock()
	slices.SortFunc(out, func(a, b ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// ListPrefixes implements PrefixLister.
func (m *Memory) ListPrefixes(ctx context.Context, prefix string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list prefixes of %s: %w", prefix, err)
	}
	m.mu.RLock()
	var keys []string
	for k := range m.objects {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	m.mu.RUnlock()
	return CommonPrefixes(keys, prefix), nil
}

// Delete implements Store.
func (m *Memory) Delete(ctx context.Context, key string) error {
	if err := check(ctx, key); err != nil {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	m.mu.Lock()
	delete(m.objects, key)
	m.mu.Unlock()
	return nil
}

func check(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return CheckKey(key)
}

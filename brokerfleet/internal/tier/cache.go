package tier

import "sync"

type chunkCache struct {
	mu    sync.Mutex
	limit int64
	size  int64
	tick  int64
	items map[string]*cacheItem
}

type cacheItem struct {
	data []byte
	used int64
}

func newChunkCache(limit int64) *chunkCache {
	return &chunkCache{limit: limit, items: map[string]*cacheItem{}}
}

func (c *chunkCache) get(key string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	it, ok := c.items[key]
	if !ok {
		return nil, false
	}
	c.tick++
	it.used = c.tick
	return it.data, true
}

func (c *chunkCache) put(key string, data []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if int64(len(data)) > c.limit {
		return
	}
	if old, ok := c.items[key]; ok {
		c.size -= int64(len(old.data))
	}
	c.tick++
	c.items[key] = &cacheItem{data: data, used: c.tick}
	c.size += int64(len(data))
	for c.size > c.limit {
		var oldest string
		var at int64 = -1
		for k, it := range c.items {
			if at < 0 || it.used < at {
				oldest, at = k, it.used
			}
		}
		c.size -= int64(len(c.items[oldest].data))
		delete(c.items, oldest)
	}
}

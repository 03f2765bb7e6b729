package broker

import (
	"context"
	"fmt"
	"sync"

	"github.com/stratamq/strata/pkg/metastore"
)

// pidAllocator hands out producer ids from blocks reserved in the
// metastore's atomic counter, so ids never repeat across brokers or
// restarts; a crash wastes at most the rest of a block.
type pidAllocator struct {
	meta *metastore.Meta
	mu   sync.Mutex
	next int64
	end  int64 // exclusive end of the reserved block
}

func (a *pidAllocator) allocate(ctx context.Context) (int64, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.next == a.end {
		first, n, err := a.meta.ProducerIDBlock(ctx)
		if err != nil {
			return 0, fmt.Errorf("reserve producer ids: %w", err)
		}
		a.next, a.end = first, first+n
	}
	id := a.next
	a.next++
	return id, nil
}

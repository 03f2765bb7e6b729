package metastore

import (
	"context"
	"fmt"
)

// ProducerIDBlock reserves a block of producer ids [first, first+n) that no
// other caller, on any broker, ever gets: one atomic add on a counter.
func (m *Meta) ProducerIDBlock(ctx context.Context) (first, n int64, err error) {
	end, err := m.s.Add(ctx, Key{PK: pkCounters, SK: skPIDs}, pidBlock)
	if err != nil {
		return 0, 0, fmt.Errorf("metastore: reserve producer ids: %w", err)
	}
	return end - pidBlock, pidBlock, nil
}

package tier

import (
	"context"
	"fmt"
	"strings"

	"github.com/stratamq/strata/pkg/metastore"
)

// Collect deletes the partition's objects (segments and their
// aborted-transaction objects) that the manifest does not reference and
// that are older than the orphan grace period: uploads of deposed
// leaders, and uploads whose manifest write failed.
func (t *Tier) Collect(ctx context.Context, id metastore.TopicID, partition int32, man metastore.Manifest) (int, error) {
	objs, err := t.opts.Store.List(ctx, Prefix(id, partition))
	if err != nil {
		return 0, fmt.Errorf("tier: list %x/%d: %w", id, partition, err)
	}
	ref := map[string]bool{}
	for _, s := range man.Segments {
		ref[s.Object] = true
		if s.Aborted != "" {
			ref[s.Aborted] = true
		}
	}
	cutoff := t.opts.Now().Add(-t.opts.OrphanGrace)
	n := 0
	for _, o := range objs {
		ours := strings.HasSuffix(o.Key, ".log") || strings.HasSuffix(o.Key, ".aborted")
		if ref[o.Key] || !ours || o.LastModified.After(cutoff) {
			continue
		}
		if err := t.opts.Store.Delete(ctx, o.Key); err != nil {
			return n, fmt.Errorf("tier: collect %s: %w", o.Key, err)
		}
		t.opts.Logger.Info("collected unreferenced segment object", "object", o.Key)
		n++
	}
	return n, nil
}

// chunkCache is a byte-bounded LRU of object chunks (the read-ahead cache:

package tier_test

import (
	"bytes"
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratamq/strata/brokerfleet/internal/tier"
	"github.com/stratamq/strata/pkg/metastore"
	"github.com/stratamq/strata/pkg/metastore/embedded"
	"github.com/stratamq/strata/pkg/objstore"
	"github.com/stratamq/strata/pkg/segment"
)

// opCounter counts metastore operations by name.
type opCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *opCounter) observe(op string, _ time.Duration, _ error) {
	c.mu.Lock()
	c.n[op]++
	c.mu.Unlock()
}

// take returns the counts since the last call.
func (c *opCounter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.n
	c.n = map[string]int{}
	return out
}

// TestTenThousandSegments grows one partition's tier to 10,000 segments
// (a manifest about four times what one metastore item holds), uploads at
// that size, reads across it and expires half: an upload costs about one
// metastore write and no read, the manifest read back equals the one the
// writes returned, and expiry writes the head once and deletes the pages
// it empties. The first 9,800 segments are stored by the upload code and
// recorded 100 to a manifest write, since 10,000 single uploads copy the
// growing list 10,000 times (slow under the race detector, not in use).
func TestTenThousandSegments(t *testing.T) {
	ctx := context.Background()
	raw, err := embedded.Open(filepath.Join(t.TempDir(), "meta.db"), embedded.WithoutSync())
	require.NoError(t, err)
	t.Cleanup(func() { raw.Close() })
	ops := &opCounter{n: map[string]int{}}
	store := objstore.NewMemory()
	e := &env{store: store, meta: metastore.New(metastore.Instrument(raw, ops.observe)), id: metastore.NewTopicID(), now: time.Now()}
	e.t = tier.New(tier.Options{Store: store, Meta: e.meta, Now: func() time.Time { return e.now }})

	const n, uploads, perSeg = 10_000, 200, 2 // segments, of which uploaded one by one, offsets per segment
	day := e.now.Add(-24 * time.Hour).UnixMilli()
	bodies := map[int64][]byte{} // a sample, by base offset
	seg := func(s int64) ([]byte, segment.SegmentInfo) {
		body, info := mkSegment(s*perSeg, 1, perSeg, 8, day+s) // segment s's records are s ms younger
		if s%97 == 0 || s == n-1 {
			bodies[s*perSeg] = body
		}
		return body, info
	}
	man := metastore.Manifest{LeaderEpoch: 1}
	for s := int64(0); s < n-uploads; {
		next := man
		next.Segments = append([]metastore.SegmentRef(nil), man.Segments...)
		for end := s + 100; s < end; s++ {
			body, info := seg(s)
			ref, err := tier.StoreSegment(e.t, ctx, tier.Key(e.id, 0, info.BaseOffset, 1), e.id, 0, 1, info, bytes.NewReader(body))
			require.NoError(t, err)
			next.Segments = append(next.Segments, ref)
		}
		man, err = e.meta.PutManifest(ctx, e.id, 0, next)
		require.NoError(t, err, "segments to %d", s)
	}
	ops.take()
	start := time.Now()
	for s := int64(n - uploads); s < n; s++ {
		body, info := seg(s)
		man, err = e.t.Upload(ctx, e.id, 0, 1, man, info, bytes.NewReader(body))
		require.NoError(t, err, "segment %d", s)
	}
	took := time.Since(start)
	counts := ops.take()
	writes := counts[metastore.OpNamePut] + counts[metastore.OpNameDelete]
	t.Logf("%d uploads at %d segments in %v: %v (%.3f metastore operations per upload)", uploads, n, took.Round(time.Millisecond), counts, float64(writes)/uploads)
	require.Zero(t, counts[metastore.OpNameGet]+counts[metastore.OpNameQuery], "uploads do not read the manifest back")
	require.LessOrEqual(t, float64(writes)/uploads, 1.05)
	require.Len(t, man.Segments, n)
	require.Equal(t, int64(n*perSeg), tier.End(man))

	items, err := raw.Query(ctx, "manifest/"+e.id.String(), "")
	require.NoError(t, err)
	var total int
	for _, it := range items {
		require.LessOrEqual(t, len(it.Value), metastore.MaxItemBytes)
		total += len(it.Value)
	}
	t.Logf("manifest: %d items, %d bytes, the head %d (one item holds %d)", len(items), total, len(items[0].Value), metastore.MaxItemBytes)
	require.Greater(t, total, 3*metastore.MaxItemBytes, "the manifest outgrew one item by far")

	ops.take()
	stored, err := e.meta.Manifest(ctx, e.id, 0)
	require.NoError(t, err)
	require.Equal(t, man, stored)
	require.Equal(t, map[string]int{metastore.OpNameQuery: 1}, ops.take(), "a read is one query")

	// Reads anywhere in the 10,000 come from the cached manifest.
	for base, body := range bodies {
		got, err := e.t.Read(ctx, man, base+1, 1<<20)
		require.NoError(t, err, "offset %d", base+1)
		require.Equal(t, body, got, "offset %d", base+1)
	}
	batch, ok, err := e.t.FindTimestamp(ctx, man, day+7777, n*perSeg)
	require.NoError(t, err)
	require.True(t, ok)
	h, err := segment.ParseHeader(batch)
	require.NoError(t, err)
	require.Equal(t, int64(7777*perSeg), h.BaseOffset)
	require.Empty(t, ops.take(), "reads never touch the metastore")

	// Expire the older half by time.
	retention := time.Duration(e.now.UnixMilli()-(day+n/2)) * time.Millisecond
	man, err = e.t.Expire(ctx, e.id, 0, 1, man, retention, -1)
	require.NoError(t, err)
	counts = ops.take()
	t.Logf("expiring %d segments: %v", n/2, counts)
	require.Equal(t, 1, counts[metastore.OpNamePut], "expiry writes the head alone")
	require.Positive(t, counts[metastore.OpNameDelete], "and deletes the pages it empties")
	require.Zero(t, counts[metastore.OpNameGet]+counts[metastore.OpNameQuery])
	require.Equal(t, int64(n/2*perSeg), tier.Start(man))
	_, err = e.t.Read(ctx, man, n/2*perSeg-1, 1<<20)
	require.ErrorIs(t, err, segment.ErrOffsetOutOfRange)
	got, err := e.t.Read(ctx, man, (n-1)*perSeg, 1<<20)
	require.NoError(t, err)
	require.Equal(t, bodies[(n-1)*perSeg], got)
	objs, err := store.List(ctx, tier.Prefix(e.id, 0))
	require.NoError(t, err)
	require.Len(t, objs, n/2, "the expired segments' objects are deleted")
	stored, err = e.meta.Manifest(ctx, e.id, 0)
	require.NoError(t, err)
	require.Equal(t, man, stored)
	after, err := raw.Query(ctx, "manifest/"+e.id.String(), "")
	require.NoError(t, err)
	require.Less(t, len(after), len(items), "whole pages went")

	// Uploads go on after expiry.
	body, info := mkSegment(n*perSeg, 1, perSeg, 8, e.now.UnixMilli())
	man, err = e.t.Upload(ctx, e.id, 0, 1, man, info, bytes.NewReader(body))
	require.NoError(t, err)
	require.Equal(t, int64((n+1)*perSeg), tier.End(man))
}

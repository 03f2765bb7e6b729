package tier_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratamq/strata/brokerfleet/internal/tier"
	"github.com/stratamq/strata/pkg/metastore"
	"github.com/stratamq/strata/pkg/objstore"
	"github.com/stratamq/strata/pkg/segment"
)

// cleanedCopy keeps every other batch of segments [from, to) of all,
// and the last one (a cleaned segment ends where its range does).
func cleanedCopy(t *testing.T, all []byte, from, to int64) ([]byte, segment.SegmentInfo) {
	var out []byte
	i := 0
	info := segment.SegmentInfo{BaseOffset: from, NextOffset: to, MaxTimestamp: -1}
	require.NoError(t, segment.Split(all, func(h segment.Header, raw []byte) error {
		if h.BaseOffset < from || h.LastOffset() >= to {
			return nil
		}
		if i%2 == 0 || h.LastOffset() == to-1 {
			out = append(out, raw...)
			info.MaxTimestamp = max(info.MaxTimestamp, h.MaxTimestamp)
		}
		i++
		return nil
	}))
	info.Size = int64(len(out))
	return out, info
}

// TestReplaceWithCleanedSegments: a cleaned copy of two uploaded
// segments replaces both references in one manifest write, in their
// place; reads of its range, gaps included, come from it; the replaced
// objects stay until the orphan grace passed.
func TestReplaceWithCleanedSegments(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMemory()
	e := newEnv(t, store, tier.Options{IndexInterval: 300, OrphanGrace: time.Minute})
	var man metastore.Manifest
	var all []byte
	for s := 0; s < 4; s++ {
		body, info := mkSegment(int64(s*60), 20, 3, 40, 1000+int64(s))
		all = append(all, body...)
		var err error
		key := tier.CompactedKey(e.id, 0, info.BaseOffset, 1, 0)
		man, err = e.t.UploadAs(ctx, key, e.id, 0, 1, man, info, bytes.NewReader(body), nil)
		require.NoError(t, err)
	}
	old := man.Segments
	require.Zero(t, tier.CleanedOf(man))

	body, info := cleanedCopy(t, all, 60, 180)
	key := tier.CompactedKey(e.id, 0, 60, 2, 180)
	man, err := e.t.Replace(ctx, key, e.id, 0, 2, man, info, bytes.NewReader(body), []tier.AbortedTxn{{ProducerID: 7, FirstOffset: 70, LastOffset: 80}})
	require.NoError(t, err)
	require.Len(t, man.Segments, 3)
	require.Equal(t, []string{old[0].Object, key, old[3].Object},
		[]string{man.Segments[0].Object, man.Segments[1].Object, man.Segments[2].Object}, "in offset order")
	require.EqualValues(t, 180, tier.CleanedOf(man))
	require.EqualValues(t, 2, man.LeaderEpoch)
	// The aborted transactions of the range go along, for read_committed
	// consumers of the tier.
	require.Equal(t, tier.AbortedKey(key), man.Segments[1].Aborted)
	ab, err := store.Get(ctx, tier.AbortedKey(key), 0, 24)
	require.NoError(t, err)
	require.Len(t, ab, 24)
	stored, err := e.meta.Manifest(ctx, e.id, 0)
	require.NoError(t, err)
	require.Equal(t, man.Segments, stored.Segments)

	kept := map[int64][]byte{}
	require.NoError(t, segment.Split(body, func(h segment.Header, raw []byte) error {
		kept[h.BaseOffset] = raw
		return nil
	}))
	for off := int64(60); off < 180; off++ {
		got, err := e.t.Read(ctx, man, off, 1)
		require.NoError(t, err, "offset %d", off)
		h, err := segment.ParseHeader(got)
		require.NoError(t, err)
		require.GreaterOrEqual(t, h.LastOffset(), off, "offset %d", off)
		require.Equal(t, kept[h.BaseOffset], got, "offset %d: the cleaned copy, the next batch kept in a gap", off)
		if h.BaseOffset > off {
			require.Nil(t, kept[off-off%3], "offset %d is in a gap", off)
		}
	}

	// A reader holding the old manifest finishes; the objects go after
	// the grace.
	_, err = e.t.Read(ctx, metastore.Manifest{Segments: old}, 61, 1)
	require.NoError(t, err)
	n, err := e.t.Collect(ctx, e.id, 0, man)
	require.NoError(t, err)
	require.Zero(t, n)
	e.now = e.now.Add(2 * time.Minute)
	n, err = e.t.Collect(ctx, e.id, 0, man)
	require.NoError(t, err)
	require.Equal(t, 2, n)

	// A deposed leader replaces nothing.
	_, err = e.t.Replace(ctx, tier.CompactedKey(e.id, 0, 0, 1, 200), e.id, 0, 1, man, info, bytes.NewReader(body), nil)
	require.ErrorIs(t, err, tier.ErrFenced)
}

// TestReplaceRefusesAStraddle: a reference starting inside the range and
// ending past it (a new leader's first upload overlapping the old
// leader's last) would still serve part of the range, so the replacement
// is refused; one that covers it too is made.
func TestReplaceRefusesAStraddle(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, objstore.NewMemory(), tier.Options{})
	var all []byte
	a, ainfo := mkSegment(0, 10, 10, 20, 1) // [0, 100)
	all = append(all, a...)
	man, err := e.t.UploadAs(ctx, tier.CompactedKey(e.id, 0, 0, 1, 0), e.id, 0, 1, metastore.Manifest{}, ainfo, bytes.NewReader(a), nil)
	require.NoError(t, err)
	b, binfo := mkSegment(100, 10, 10, 20, 2) // [100, 200)
	all = append(all, b...)
	var overlap []byte // [90, 200): the new leader's segment
	require.NoError(t, segment.Split(all, func(h segment.Header, raw []byte) error {
		if h.BaseOffset >= 90 {
			overlap = append(overlap, raw...)
		}
		return nil
	}))
	oinfo := segment.SegmentInfo{BaseOffset: 90, NextOffset: binfo.NextOffset, Size: int64(len(overlap)), MaxTimestamp: 2}
	man, err = e.t.UploadAs(ctx, tier.CompactedKey(e.id, 0, 90, 2, 0), e.id, 0, 2, man, oinfo, bytes.NewReader(overlap), nil)
	require.NoError(t, err)

	body, info := cleanedCopy(t, all, 0, 150)
	_, err = e.t.Replace(ctx, tier.CompactedKey(e.id, 0, 0, 2, 150), e.id, 0, 2, man, info, bytes.NewReader(body), nil)
	require.Error(t, err, "[90, 200) would keep serving [90, 150)")
	stored, err := e.meta.Manifest(ctx, e.id, 0)
	require.NoError(t, err)
	require.Equal(t, man.Segments, stored.Segments, "nothing written")

	body, info = cleanedCopy(t, all, 0, 200)
	man, err = e.t.Replace(ctx, tier.CompactedKey(e.id, 0, 0, 2, 200), e.id, 0, 2, man, info, bytes.NewReader(body), nil)
	require.NoError(t, err)
	require.Len(t, man.Segments, 1)
	require.EqualValues(t, 200, tier.CleanedOf(man))
}

package tier_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/tier"
	"github.com/stratamq/strata/pkg/metastore"
	"github.com/stratamq/strata/pkg/metastore/embedded"
	"github.com/stratamq/strata/pkg/objstore"
	"github.com/stratamq/strata/pkg/segment"
)

// mkBatch returns a RecordBatch v2 at base with n records of size bytes.
func mkBatch(base int64, n, size int, ts int64) []byte {
	var records []byte
	for i := 0; i < n; i++ {
		v := bytes.Repeat([]byte{byte('a' + (base+int64(i))%26)}, size)
		r := kmsg.Record{OffsetDelta: int32(i), Value: v}
		records = r.AppendTo(records)
	}
	rb := kmsg.RecordBatch{
		FirstOffset: base, Magic: 2, LastOffsetDelta: int32(n - 1), FirstTimestamp: ts, MaxTimestamp: ts,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: int32(n), Records: records,
	}
	raw := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

// mkSegment returns count batches from base and the segment's description.
func mkSegment(base int64, count, perBatch, size int, ts int64) ([]byte, segment.SegmentInfo) {
	var out []byte
	off := base
	for i := 0; i < count; i++ {
		out = append(out, mkBatch(off, perBatch, size, ts)...)
		off += int64(perBatch)
	}
	return out, segment.SegmentInfo{BaseOffset: base, NextOffset: off, Size: int64(len(out)), MaxTimestamp: ts}
}

type env struct {
	t     *tier.Tier
	store objstore.Store
	meta  *metastore.Meta
	id    metastore.TopicID
	now   time.Time
}

func newEnv(t *testing.T, store objstore.Store, opts tier.Options) *env {
	s, err := embedded.Open(filepath.Join(t.TempDir(), "meta.db"))
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	e := &env{store: store, meta: metastore.New(s), id: metastore.NewTopicID(), now: time.Now()}
	opts.Store, opts.Meta = store, e.meta
	if opts.Now == nil {
		opts.Now = func() time.Time { return e.now }
	}
	e.t = tier.New(opts)
	return e
}

// Reads at every offset return whole batches starting with the one that
// holds the offset, across index entries and chunk boundaries.
func TestUploadAndReadEveryOffset(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, objstore.NewMemory(), tier.Options{IndexInterval: 700, ChunkSize: 1000, CacheBytes: 5000})
	var man metastore.Manifest
	var all []byte
	var infos []segment.SegmentInfo
	for s := 0; s < 3; s++ {
		body, info := mkSegment(int64(s*60), 20, 3, 37+s*20, 1000+int64(s))
		all = append(all, body...)
		infos = append(infos, info)
		var err error
		man, err = e.t.Upload(ctx, e.id, 0, 1, man, info, bytes.NewReader(body))
		require.NoError(t, err)
	}
	require.Equal(t, int64(0), tier.Start(man))
	require.Equal(t, int64(180), tier.End(man))
	stored, err := e.meta.Manifest(ctx, e.id, 0)
	require.NoError(t, err)
	require.Equal(t, man, stored)
	require.Equal(t, tier.Key(e.id, 0, 60, 1), man.Segments[1].Object)

	batches := map[int64][]byte{} // by base offset
	require.NoError(t, segment.Split(all, func(h segment.Header, raw []byte) error {
		batches[h.BaseOffset] = raw
		return nil
	}))
	for off := int64(0); off < 180; off++ {
		got, err := e.t.Read(ctx, man, off, 1)
		require.NoError(t, err, "offset %d", off)
		base := off - off%3
		require.Equal(t, batches[base], got, "offset %d: one whole batch", off)
		// A larger budget returns following batches of the same segment.
		got, err = e.t.Read(ctx, man, off, 3*len(batches[base]))
		require.NoError(t, err)
		seg := infos[off/60]
		want := []byte{}
		for b := base; b < seg.NextOffset && len(want)+len(batches[b]) <= 3*len(batches[base]); b += 3 {
			want = append(want, batches[b]...)
		}
		require.Equal(t, want, got, "offset %d with a budget", off)
	}
	_, err = e.t.Read(ctx, man, 180, 100)
	require.ErrorIs(t, err, segment.ErrOffsetOutOfRange)
}

// A zombie leader (an older epoch) uploads: its object is never referenced
// by the manifest and is collected once older than the grace period.
func TestZombieUploadIsNeverReferencedAndCollected(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMemory()
	e := newEnv(t, store, tier.Options{OrphanGrace: time.Minute})
	body, info := mkSegment(0, 10, 2, 50, 1)
	man, err := e.t.Upload(ctx, e.id, 3, 5, metastore.Manifest{}, info, bytes.NewReader(body))
	require.NoError(t, err)

	// The old leader (epoch 4) still has its view from before epoch 5.
	body2, info2 := mkSegment(20, 10, 2, 50, 2)
	stale := metastore.Manifest{}
	_, err = e.t.Upload(ctx, e.id, 3, 4, stale, info2, bytes.NewReader(body2))
	require.ErrorIs(t, err, tier.ErrFenced)
	// Even with a manifest read before the new leader wrote: the stored
	// epoch decides.
	_, err = e.t.Upload(ctx, e.id, 3, 4, metastore.Manifest{LeaderEpoch: 4}, info2, bytes.NewReader(body2))
	require.ErrorIs(t, err, tier.ErrFenced)
	stored, err := e.meta.Manifest(ctx, e.id, 3)
	require.NoError(t, err)
	require.Equal(t, man.Segments, stored.Segments, "the zombie's segment is not referenced")

	// The zombie's object exists until the grace period passes.
	objs, err := store.List(ctx, tier.Prefix(e.id, 3))
	require.NoError(t, err)
	require.Len(t, objs, 2)
	n, err := e.t.Collect(ctx, e.id, 3, stored)
	require.NoError(t, err)
	require.Zero(t, n, "within the grace period (an upload may be in flight)")
	e.now = e.now.Add(2 * time.Minute)
	n, err = e.t.Collect(ctx, e.id, 3, stored)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	objs, err = store.List(ctx, tier.Prefix(e.id, 3))
	require.NoError(t, err)
	require.Len(t, objs, 1)
	require.Equal(t, stored.Segments[0].Object, objs[0].Key)
	got, err := e.t.Read(ctx, stored, 0, 1<<20)
	require.NoError(t, err)
	require.Equal(t, body, got)
}

// Retention drops whole segments from the manifest first, then deletes
// their objects.
func TestExpireByTimeAndSize(t *testing.T) {
	ctx := context.Background()
	store := objstore.NewMemory()
	e := newEnv(t, store, tier.Options{})
	var man metastore.Manifest
	for s := 0; s < 5; s++ {
		body, info := mkSegment(int64(s*10), 5, 2, 100, e.now.Add(time.Duration(s-5)*time.Hour).UnixMilli())
		var err error
		man, err = e.t.Upload(ctx, e.id, 0, 1, man, info, bytes.NewReader(body))
		require.NoError(t, err)
	}
	// Segments 0 and 1 are older than 3.5 hours.
	man, err := e.t.Expire(ctx, e.id, 0, 1, man, 210*time.Minute, -1)
	require.NoError(t, err)
	require.Equal(t, int64(20), tier.Start(man))
	_, err = e.t.Read(ctx, man, 5, 100)
	require.ErrorIs(t, err, segment.ErrOffsetOutOfRange)
	objs, _ := store.List(ctx, tier.Prefix(e.id, 0))
	require.Len(t, objs, 3)
	// By size: keep at most two segments' worth.
	man, err = e.t.Expire(ctx, e.id, 0, 1, man, -1, 2*man.Segments[0].Size)
	require.NoError(t, err)
	require.Equal(t, int64(30), tier.Start(man))
	require.Len(t, man.Segments, 2)
	objs, _ = store.List(ctx, tier.Prefix(e.id, 0))
	require.Len(t, objs, 2)
	for i, o := range objs {
		require.Equal(t, man.Segments[i].Object, o.Key)
	}
	stored, _ := e.meta.Manifest(ctx, e.id, 0)
	require.Equal(t, man.Segments, stored.Segments)
}

// Re-uploading the same segment (a retry after an unknown outcome) is
// idempotent; the read-ahead cache stays within its bound.
func TestUploadRetryAndCacheBound(t *testing.T) {
	ctx := context.Background()
	counting := objstore.NewCounting(objstore.NewMemory())
	e := newEnv(t, counting, tier.Options{ChunkSize: 512, CacheBytes: 2048, IndexInterval: 512})
	body, info := mkSegment(0, 40, 1, 100, 1)
	man, err := e.t.Upload(ctx, e.id, 0, 1, metastore.Manifest{}, info, bytes.NewReader(body))
	require.NoError(t, err)
	_, err = e.t.Upload(ctx, e.id, 0, 1, metastore.Manifest{}, info, bytes.NewReader(body)) // stale view, same object
	require.NoError(t, err, "the manifest already covers it")
	stored, _ := e.meta.Manifest(ctx, e.id, 0)
	require.Len(t, stored.Segments, 1)
	for off := int64(0); off < 40; off++ {
		_, err := e.t.Read(ctx, man, off, 1)
		require.NoError(t, err)
	}
	gets := counting.Counts().Gets
	// A sequential scan costs about one GET per chunk plus the index.
	require.LessOrEqual(t, gets, int64(len(body)/512+3), "read-ahead cache: %d GETs for %d bytes", gets, len(body))
	for off := int64(0); off < 40; off++ {
		_, err := e.t.Read(ctx, man, off, 1)
		require.NoError(t, err)
	}
	require.Greater(t, counting.Counts().Gets, gets, "a 2 KiB cache cannot hold the whole %d-byte segment", len(body))

}

// One WAL object carries several partitions' batches; each manifest
// references its share, reads find it, and a later segment upload
// replaces the WAL entries it covers.
func TestWALSharesAndSegmentReplacement(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, objstore.NewMemory(), tier.Options{ChunkSize: 300})
	a, ainfo := mkSegment(0, 4, 2, 40, 10)
	b, binfo := mkSegment(0, 3, 1, 90, 11)
	other := metastore.NewTopicID()
	key := tier.WALKey(1, "inc", 1)
	mans, errs, err := e.t.PutWAL(ctx, key, []tier.WALPart{
		{ID: e.id, Partition: 0, LeaderEpoch: 2, Batches: a, Base: 0, Next: ainfo.NextOffset, MaxTS: 10},
		{ID: other, Partition: 5, LeaderEpoch: 7, Batches: b, Base: 0, Next: binfo.NextOffset, MaxTS: 11},
	})
	require.NoError(t, err)
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	require.True(t, tier.IsWAL(mans[0].Segments[0]))
	require.Equal(t, int64(len(a)), mans[1].Segments[0].Pos)
	got, err := e.t.Read(ctx, mans[0], 0, 1<<20)
	require.NoError(t, err)
	require.Equal(t, a, got)
	got, err = e.t.Read(ctx, mans[1], 1, 1<<20)
	require.NoError(t, err)
	want := b[len(mkBatch(0, 1, 90, 11)):] // from the batch holding offset 1
	require.Equal(t, want, got)
	require.Equal(t, ainfo.NextOffset, tier.End(mans[0]))
	require.Zero(t, tier.SegmentEnd(mans[0]), "no segment object yet")

	// A second flush continues where the first ended; a stale leader is fenced.
	a2, a2info := mkSegment(ainfo.NextOffset, 2, 2, 40, 12)
	mans2, errs, err := e.t.PutWAL(ctx, tier.WALKey(1, "inc", 2), []tier.WALPart{
		{ID: e.id, Partition: 0, LeaderEpoch: 2, Man: mans[0], Batches: a2, Base: ainfo.NextOffset, Next: a2info.NextOffset, MaxTS: 12},
	})
	require.NoError(t, err)
	require.NoError(t, errs[0])
	_, errs, err = e.t.PutWAL(ctx, tier.WALKey(9, "zombie", 1), []tier.WALPart{
		{ID: e.id, Partition: 0, LeaderEpoch: 1, Man: mans[0], Batches: a2, Base: ainfo.NextOffset, Next: a2info.NextOffset},
	})
	require.NoError(t, err)
	require.ErrorIs(t, errs[0], tier.ErrFenced)

	// The segment [0, end) replaces both WAL entries.
	seg := append(append([]byte(nil), a...), a2...)
	info := segment.SegmentInfo{BaseOffset: 0, NextOffset: a2info.NextOffset, Size: int64(len(seg)), MaxTimestamp: 12}
	man, err := e.t.Upload(ctx, e.id, 0, 2, mans2[0], info, bytes.NewReader(seg))
	require.NoError(t, err)
	require.Len(t, man.Segments, 1)
	require.False(t, tier.IsWAL(man.Segments[0]))
	require.Empty(t, tier.WALObjects(man))
	got, err = e.t.Read(ctx, man, 0, 1<<20)
	require.NoError(t, err)
	require.Equal(t, seg, got)
}

// Search by time: the index's timestamps skip to the right region, so a
// lookup costs a few ranged GETs, not a scan of the segment.
func TestFindTimestampUsesTheTimeIndex(t *testing.T) {
	ctx := context.Background()
	counting := objstore.NewCounting(objstore.NewMemory())
	e := newEnv(t, counting, tier.Options{IndexInterval: 300, ChunkSize: 256, CacheBytes: 1024})
	var body []byte
	for i := int64(0); i < 200; i++ {
		body = append(body, mkBatch(i, 1, 20, 1000+i*10)...)
	}
	info := segment.SegmentInfo{BaseOffset: 0, NextOffset: 200, Size: int64(len(body)), MaxTimestamp: 1000 + 199*10}
	man, err := e.t.Upload(ctx, e.id, 0, 1, metastore.Manifest{}, info, bytes.NewReader(body))
	require.NoError(t, err)
	for _, ts := range []int64{0, 1000, 1005, 1500, 1990, 2001} {
		counting.Reset()
		batch, ok, err := e.t.FindTimestamp(ctx, man, ts, 200)
		require.NoError(t, err)
		want := (ts - 1000 + 9) / 10 // first batch with timestamp >= ts
		if want < 0 {
			want = 0
		}
		if want >= 200 {
			require.False(t, ok, "ts %d", ts)
			continue
		}
		require.True(t, ok, "ts %d", ts)
		h, err := segment.ParseHeader(batch)
		require.NoError(t, err)
		require.Equal(t, want, h.BaseOffset, "ts %d", ts)
		require.LessOrEqual(t, counting.Counts().Gets, int64(4), "ts %d: %d GETs", ts, counting.Counts().Gets)
	}
	// Below until only: the answer past it is the local log's business.
	_, ok, err := e.t.FindTimestamp(ctx, man, 1500, 40)
	require.NoError(t, err)
	require.False(t, ok)
}

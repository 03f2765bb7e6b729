// Package tier moves closed partition segments to an object store (S3) and
// reads them back.
//
// A segment object holds the segment's record batches verbatim followed by
// a sparse offset and time index (24-byte entries: batch base offset, byte
// position, and the largest timestamp of the batches before it), so a read
// of any offset, or a search by time, is one small ranged GET of the index
// (cached) and ranged GETs of the batches. Objects are named
// <topic-id>/<partition>/<base-offset>-<leader-epoch>.log, created with
// If-None-Match, and become part of the log only when the partition's
// manifest in the metastore references them; the manifest write is
// conditioned on the uploader's leader epoch, so a deposed leader's upload
// is never referenced. Objects no manifest references are collected after
// a grace period.
package tier

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stratamq/strata/pkg/metastore"
	"github.com/stratamq/strata/pkg/objstore"
	"github.com/stratamq/strata/pkg/segment"
)

// Options configures a Tier.
type Options struct {
	Store objstore.Store
	Meta  *metastore.Meta
	// IndexInterval is the batch bytes between offset index entries.
	IndexInterval int
	// ChunkSize is the unit of ranged reads and of the read-ahead cache.
	ChunkSize int
	// CacheBytes bounds the read-ahead cache.
	CacheBytes int64
	// OrphanGrace is how old an unreferenced object must be before it is
	// collected (an upload in flight has its object before its manifest
	// entry).
	OrphanGrace time.Duration
	Logger      *slog.Logger
	Now         func() time.Time
}

// Defaults.
const (
	DefaultIndexInterval = 64 << 10
	DefaultChunkSize     = 4 << 20
	DefaultCacheBytes    = 256 << 20
	DefaultOrphanGrace   = 10 * time.Minute
	indexEntry           = 24
)

// ErrFenced is returned when a newer leader epoch owns the manifest.
var ErrFenced = metastore.ErrFenced

// Tier uploads, reads, expires and collects tiered segments.
type Tier struct {
	opts  Options
	cache *chunkCache

	mu      sync.Mutex
	indexes map[string][]indexEntryT // object -> decoded offset index
}

type indexEntryT struct{ offset, pos, maxTsBefore int64 }

// New returns a Tier over opts.Store.
func New(opts Options) *Tier {
	if opts.IndexInterval <= 0 {
		opts.IndexInterval = DefaultIndexInterval
	}
	if opts.ChunkSize <= 0 {
		opts.ChunkSize = DefaultChunkSize
	}
	if opts.CacheBytes <= 0 {
		opts.CacheBytes = DefaultCacheBytes
	}
	if opts.OrphanGrace <= 0 {
		opts.OrphanGrace = DefaultOrphanGrace
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Tier{opts: opts, cache: newChunkCache(opts.CacheBytes), indexes: map[string][]indexEntryT{}}
}

// Prefix is where a partition's objects live.
func Prefix(id metastore.TopicID, partition int32) string {
	return id.String() + "/" + strconv.Itoa(int(partition)) + "/"
}

// Key names a segment object.
func Key(id metastore.TopicID, partition int32, base int64, epoch int32) string {
	return fmt.Sprintf("%s%020d-%d.log", Prefix(id, partition), base, epoch)
}

// walPrefix starts the keys of objects shared by the partitions of one
// broker's flush ("object" durability).
const walPrefix = "wal/"

// IsWAL reports whether a manifest entry points into a shared WAL object
// rather than a segment object.
func IsWAL(s metastore.SegmentRef) bool { return strings.HasPrefix(s.Object, walPrefix) }

// WALKey names a shared object written by a broker incarnation.
func WALKey(node int32, incarnation string, seq int64) string {
	return fmt.Sprintf("%s%d/%s/%020d.wal", walPrefix, node, incarnation, seq)
}

// SegmentEnd returns the offset after the last segment object (WAL
// entries not counted): where segment uploads resume.
func SegmentEnd(man metastore.Manifest) int64 {
	var end int64
	for _, s := range man.Segments {
		if !IsWAL(s) {
			end = max(end, s.NextOffset)
		}
	}
	return end
}

// WALObjects returns the shared objects a manifest references.
func WALObjects(man metastore.Manifest) map[string]bool {
	out := map[string]bool{}
	for _, s := range man.Segments {
		if IsWAL(s) {
			out[s.Object] = true
		}
	}
	return out
}

// End returns the offset after the manifest's last segment (0 if empty).
func End(man metastore.Manifest) int64 {
	var end int64
	for _, s := range man.Segments {
		end = max(end, s.NextOffset)
	}
	return end
}

// Start returns the manifest's first readable offset (its first segment's,
// or the start DeleteRecords set), or -1 if it holds nothing readable.
func Start(man metastore.Manifest) int64 {
	if len(man.Segments) == 0 {
		return -1
	}
	start := man.Segments[0].BaseOffset
	for _, s := range man.Segments {
		start = min(start, s.BaseOffset)
	}
	start = max(start, man.StartOffset)
	if start >= End(man) {
		return -1
	}
	return start
}

// Upload stores one closed segment (its batches, info.Size bytes read from
// src, never held in memory whole) and adds it to the manifest under
// leaderEpoch. man is the manifest as the caller last saw it; the new one
// is returned. A manifest written under a newer epoch fails with ErrFenced
// and leaves the object for collection.
func (t *Tier) Upload(ctx context.Context, id metastore.TopicID, partition, leaderEpoch int32, man metastore.Manifest, info segment.SegmentInfo, src io.ReaderAt) (metastore.Manifest, error) {
	if man.LeaderEpoch > leaderEpoch {
		return man, fmt.Errorf("tier: upload %x/%d@%d: manifest has epoch %d: %w", id, partition, info.BaseOffset, man.LeaderEpoch, ErrFenced)
	}
	index, err := t.buildIndex(io.NewSectionReader(src, 0, info.Size))
	if err != nil {
		return man, fmt.Errorf("tier: upload %x/%d@%d: %w", id, partition, info.BaseOffset, err)
	}
	indexPos := info.Size
	body := &twoPart{a: io.NewSectionReader(src, 0, info.Size), b: bytes.NewReader(index), size: info.Size + int64(len(index))}
	key := Key(id, partition, info.BaseOffset, leaderEpoch)
	if err := objstore.PutReaderIfAbsentIdempotent(ctx, t.opts.Store, key, body, body.size); err != nil {
		return man, fmt.Errorf("tier: upload %s: %w", key, err)
	}
	ref := metastore.SegmentRef{
		BaseOffset: info.BaseOffset, NextOffset: info.NextOffset, LeaderEpoch: leaderEpoch,
		Size: body.size, MaxTimestamp: info.MaxTimestamp, Object: key, IndexPos: indexPos,
	}
	for attempt := 0; ; attempt++ {
		next := man
		next.LeaderEpoch = leaderEpoch
		next.Segments = withSegment(man.Segments, ref)
		stored, err := t.opts.Meta.PutManifest(ctx, id, partition, next)
		if err == nil {
			return stored, nil
		}
		if !errors.Is(err, metastore.ErrConditionFailed) || attempt >= 2 {
			return man, fmt.Errorf("tier: record %s in the manifest: %w", key, err)
		}
		// Someone else wrote the manifest: re-read and decide again.
		if man, err = t.opts.Meta.Manifest(ctx, id, partition); err != nil {
			return man, err
		}
		if man.LeaderEpoch > leaderEpoch {
			return man, fmt.Errorf("tier: upload %s: manifest has epoch %d: %w", key, man.LeaderEpoch, ErrFenced)
		}
		if SegmentEnd(man) >= ref.NextOffset {
			return man, nil // already covered
		}
	}
}

// withSegment adds a segment object's entry and drops the WAL entries it
// covers: the shared objects stop being needed for those offsets.
func withSegment(segs []metastore.SegmentRef, ref metastore.SegmentRef) []metastore.SegmentRef {
	out := make([]metastore.SegmentRef, 0, len(segs)+1)
	for _, s := range segs {
		if IsWAL(s) && s.BaseOffset >= ref.BaseOffset && s.NextOffset <= ref.NextOffset {
			continue
		}
		out = append(out, s)
	}
	return append(out, ref)
}

// WALPart is one partition's share of a WAL object.
type WALPart struct {
	ID          metastore.TopicID
	Partition   int32
	LeaderEpoch int32
	Man         metastore.Manifest // as the writer last saw it
	Batches     []byte             // whole batches [Base, Next)
	Base, Next  int64
	MaxTS       int64
}

// PutWAL stores the batches of several partitions in one object, then
// references each part from its partition's manifest (the writes run in
// parallel). It returns each part's new manifest, or its error (ErrFenced
// when a newer leader epoch owns the manifest); err is set when the object
// itself could not be stored.
func (t *Tier) PutWAL(ctx context.Context, key string, parts []WALPart) (mans []metastore.Manifest, errs []error, err error) {
	var body []byte
	refs := make([]metastore.SegmentRef, len(parts))
	for i, p := range parts {
		refs[i] = metastore.SegmentRef{BaseOffset: p.Base, NextOffset: p.Next, LeaderEpoch: p.LeaderEpoch,
			MaxTimestamp: p.MaxTS, Object: key, Pos: int64(len(body))}
		body = append(body, p.Batches...)
		refs[i].IndexPos, refs[i].Size = int64(len(body)), int64(len(body))
	}
	if err := objstore.PutIfAbsentIdempotent(ctx, t.opts.Store, key, body); err != nil {
		return nil, nil, fmt.Errorf("tier: put %s: %w", key, err)
	}
	mans, errs = make([]metastore.Manifest, len(parts)), make([]error, len(parts))
	var wg sync.WaitGroup
	for i := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mans[i], errs[i] = t.appendRef(ctx, parts[i], refs[i])
		}()
	}
	wg.Wait()
	return mans, errs, nil
}

func (t *Tier) appendRef(ctx context.Context, p WALPart, ref metastore.SegmentRef) (metastore.Manifest, error) {
	man := p.Man
	for attempt := 0; ; attempt++ {
		if man.LeaderEpoch > p.LeaderEpoch {
			return man, fmt.Errorf("tier: %s for %x/%d: manifest has epoch %d: %w", ref.Object, p.ID, p.Partition, man.LeaderEpoch, ErrFenced)
		}
		if End(man) != ref.BaseOffset {
			return man, fmt.Errorf("tier: %s for %x/%d: manifest ends at %d, not %d", ref.Object, p.ID, p.Partition, End(man), ref.BaseOffset)
		}
		next := man
		next.LeaderEpoch = p.LeaderEpoch
		next.Segments = append(append([]metastore.SegmentRef(nil), man.Segments...), ref)
		stored, err := t.opts.Meta.PutManifest(ctx, p.ID, p.Partition, next)
		if err == nil {
			return stored, nil
		}
		if !errors.Is(err, metastore.ErrConditionFailed) || attempt >= 2 {
			return man, fmt.Errorf("tier: reference %s for %x/%d: %w", ref.Object, p.ID, p.Partition, err)
		}
		if man, err = t.opts.Meta.Manifest(ctx, p.ID, p.Partition); err != nil {
			return man, err
		}
	}
}

// buildIndex reads the batch headers of a segment (one sequential pass)
// and returns its sparse offset index: an entry for the first batch and
// then every IndexInterval bytes.
func (t *Tier) buildIndex(r io.Reader) ([]byte, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	var index []byte
	hdr := make([]byte, segment.HeaderSize)
	pos, last := int64(0), -int64(t.opts.IndexInterval)
	maxTs := int64(-1 << 63)
	for {
		if _, err := io.ReadFull(br, hdr); err != nil {
			if errors.Is(err, io.EOF) {
				return index, nil
			}
			return nil, fmt.Errorf("batch header at %d: %w", pos, err)
		}
		h, err := segment.ParseHeader(hdr)
		if err != nil {
			return nil, fmt.Errorf("batch at %d: %w", pos, err)
		}
		if pos-last >= int64(t.opts.IndexInterval) {
			index = binary.BigEndian.AppendUint64(index, uint64(h.BaseOffset))
			index = binary.BigEndian.AppendUint64(index, uint64(pos))
			index = binary.BigEndian.AppendUint64(index, uint64(maxTs))
			last = pos
		}
		maxTs = max(maxTs, h.MaxTimestamp)
		size := int64(h.Size())
		if _, err := br.Discard(int(size) - len(hdr)); err != nil {
			return nil, fmt.Errorf("batch at %d: %w", pos, err)
		}
		pos += size
	}
}

// twoPart is a ReadSeeker over a followed by b.
type twoPart struct {
	a    *io.SectionReader
	b    *bytes.Reader
	size int64
	pos  int64
}

func (p *twoPart) Read(buf []byte) (int, error) {
	if p.pos >= p.size {
		return 0, io.EOF
	}
	var n int
	var err error
	if asz := p.a.Size(); p.pos < asz {
		n, err = p.a.ReadAt(buf[:min(int64(len(buf)), asz-p.pos)], p.pos)
		if errors.Is(err, io.EOF) && n > 0 {
			err = nil
		}
	} else {
		n, err = p.b.ReadAt(buf, p.pos-asz)
		if errors.Is(err, io.EOF) && n > 0 {
			err = nil
		}
	}
	p.pos += int64(n)
	return n, err
}

func (p *twoPart) Seek(off int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		off += p.pos
	case io.SeekEnd:
		off += p.size
	default:
		return 0, fmt.Errorf("tier: seek whence %d", whence)
	}
	if off < 0 {
		return 0, fmt.Errorf("tier: seek to %d", off)
	}
	p.pos = off
	return off, nil
}

// find returns the manifest segment holding offset.
func find(man metastore.Manifest, offset int64) (metastore.SegmentRef, bool) {
	var best metastore.SegmentRef
	found := false
	for _, s := range man.Segments {
		if s.BaseOffset <= offset && offset < s.NextOffset && (!found || s.BaseOffset > best.BaseOffset) {
			best, found = s, true
		}
	}
	return best, found
}

// Read returns whole batches from the tier, starting with the batch that
// holds offset, up to maxBytes (the first batch whole even if larger) and
// not past the segment's end; segment.ErrOffsetOutOfRange if the manifest
// does not cover offset.
func (t *Tier) Read(ctx context.Context, man metastore.Manifest, offset int64, maxBytes int) ([]byte, error) {
	ref, ok := find(man, offset)
	if !ok || offset < man.StartOffset {
		return nil, fmt.Errorf("tier: offset %d not in the manifest: %w", offset, segment.ErrOffsetOutOfRange)
	}
	idx, err := t.index(ctx, ref)
	if err != nil {
		return nil, err
	}
	// The last index entry at or below offset.
	i := sort.Search(len(idx), func(i int) bool { return idx[i].offset > offset }) - 1
	pos := ref.Pos
	if i >= 0 {
		pos = max(pos, idx[i].pos)
	}
	var out []byte
	for pos < ref.IndexPos {
		hdr, err := t.readAt(ctx, ref, pos, segment.HeaderSize)
		if err != nil {
			return nil, err
		}
		h, err := segment.ParseHeader(hdr)
		if err != nil {
			return nil, fmt.Errorf("tier: %s at %d: %w", ref.Object, pos, err)
		}
		size := int64(h.Length) + 12
		if h.LastOffset() < offset {
			pos += size
			continue
		}
		if len(out) > 0 && len(out)+int(size) > maxBytes {
			break
		}
		b, err := t.readAt(ctx, ref, pos, size)
		if err != nil {
			return nil, err
		}
		out = append(out, b...)
		pos += size
		if len(out) >= maxBytes {
			break
		}
	}
	return out, nil
}

// FindTimestamp returns the first batch in the tier below until whose
// maximum timestamp is at least ts (ListOffsets by time): segments whose
// maximum timestamp is older are skipped without reading them; ok is false
// when no batch below until qualifies.
func (t *Tier) FindTimestamp(ctx context.Context, man metastore.Manifest, ts, until int64) ([]byte, bool, error) {
	refs := append([]metastore.SegmentRef(nil), man.Segments...)
	sort.Slice(refs, func(i, j int) bool { return refs[i].BaseOffset < refs[j].BaseOffset })
	cursor := Start(man)
	for _, ref := range refs {
		if ref.NextOffset <= cursor {
			continue
		}
		if ref.MaxTimestamp < ts {
			cursor = ref.NextOffset
			continue
		}
		cursor = max(cursor, ref.BaseOffset)
		// The time index: batches before the last entry whose predecessors
		// are all older than ts cannot hold the answer.
		idx, err := t.index(ctx, ref)
		if err != nil {
			return nil, false, err
		}
		for _, e := range idx {
			if e.maxTsBefore >= ts {
				break
			}
			cursor = max(cursor, e.offset)
		}
		for cursor < ref.NextOffset && cursor < until {
			batch, err := t.Read(ctx, man, cursor, 1)
			if err != nil {
				return nil, false, err
			}
			h, err := segment.ParseHeader(batch)
			if err != nil {
				return nil, false, err
			}
			if h.MaxTimestamp >= ts {
				return batch, true, nil
			}
			cursor = h.LastOffset() + 1
		}
		if cursor >= until {
			break
		}
	}
	return nil, false, nil
}

// readAt reads n bytes at pos of a segment object through the chunk cache.
func (t *Tier) readAt(ctx context.Context, ref metastore.SegmentRef, pos, n int64) ([]byte, error) {
	if pos+n > ref.IndexPos {
		return nil, fmt.Errorf("tier: %s: read [%d, %d) past the batches (%d): %w", ref.Object, pos, pos+n, ref.IndexPos, segment.ErrCorrupt)
	}
	out := make([]byte, 0, n)
	cs := int64(t.opts.ChunkSize)
	for p := pos; p < pos+n; {
		ci := p / cs
		chunk, err := t.chunk(ctx, ref, ci)
		if err != nil {
			return nil, err
		}
		from := p - ci*cs
		to := min(int64(len(chunk)), pos+n-ci*cs)
		if from >= to {
			return nil, fmt.Errorf("tier: %s: short chunk %d: %w", ref.Object, ci, segment.ErrCorrupt)
		}
		out = append(out, chunk[from:to]...)
		p = ci*cs + to
	}
	return out, nil
}

func (t *Tier) chunk(ctx context.Context, ref metastore.SegmentRef, ci int64) ([]byte, error) {
	cs := int64(t.opts.ChunkSize)
	start := ci * cs
	length := min(cs, ref.IndexPos-start)
	// Entries of one shared WAL object end at different places, so the
	// length is part of the key.
	key := ref.Object + "#" + strconv.FormatInt(ci, 10) + "#" + strconv.FormatInt(length, 10)
	if b, ok := t.cache.get(key); ok {
		return b, nil
	}
	b, err := t.opts.Store.Get(ctx, ref.Object, start, length)
	if err != nil {
		return nil, fmt.Errorf("tier: read %s: %w", ref.Object, err)
	}
	t.cache.put(key, b)
	return b, nil
}

// index returns a segment object's decoded offset index.
func (t *Tier) index(ctx context.Context, ref metastore.SegmentRef) ([]indexEntryT, error) {
	if ref.Size <= ref.IndexPos {
		return nil, nil // a WAL entry: no index, the range is small
	}
	t.mu.Lock()
	idx, ok := t.indexes[ref.Object]
	t.mu.Unlock()
	if ok {
		return idx, nil
	}
	b, err := t.opts.Store.Get(ctx, ref.Object, ref.IndexPos, ref.Size-ref.IndexPos)
	if err != nil {
		return nil, fmt.Errorf("tier: read index of %s: %w", ref.Object, err)
	}
	if len(b)%indexEntry != 0 {
		return nil, fmt.Errorf("tier: index of %s is %d bytes: %w", ref.Object, len(b), segment.ErrCorrupt)
	}
	idx = make([]indexEntryT, len(b)/indexEntry)
	for i := range idx {
		idx[i] = indexEntryT{
			offset:      int64(binary.BigEndian.Uint64(b[i*indexEntry:])),
			pos:         int64(binary.BigEndian.Uint64(b[i*indexEntry+8:])),
			maxTsBefore: int64(binary.BigEndian.Uint64(b[i*indexEntry+16:])),
		}
	}
	t.mu.Lock()
	if len(t.indexes) > 4096 {
		clear(t.indexes) // a crude bound; indexes are small and cheap to reload
	}
	t.indexes[ref.Object] = idx
	t.mu.Unlock()
	return idx, nil
}

// Expire drops from the manifest the segments past retention (by time:
// newest record older than retention; by size: the oldest while the rest
// still hold retentionBytes), then deletes their objects. It returns the
// new manifest.
func (t *Tier) Expire(ctx context.Context, id metastore.TopicID, partition, leaderEpoch int32, man metastore.Manifest, retention time.Duration, retentionBytes int64) (metastore.Manifest, error) {
	segs := append([]metastore.SegmentRef(nil), man.Segments...)
	sort.Slice(segs, func(i, j int) bool { return segs[i].BaseOffset < segs[j].BaseOffset })
	n := 0
	for n < len(segs) && segs[n].NextOffset <= man.StartOffset {
		n++ // below the start DeleteRecords set
	}
	if retention >= 0 {
		cutoff := t.opts.Now().Add(-retention).UnixMilli()
		for n < len(segs) && segs[n].MaxTimestamp < cutoff {
			n++
		}
	}
	if retentionBytes >= 0 {
		var left int64
		for _, s := range segs[n:] {
			left += s.Size
		}
		for n < len(segs) && left-segs[n].Size >= retentionBytes {
			left -= segs[n].Size
			n++
		}
	}
	if n == 0 {
		return man, nil
	}
	next := man
	next.LeaderEpoch = max(man.LeaderEpoch, leaderEpoch)
	next.Segments = segs[n:]
	stored, err := t.opts.Meta.PutManifest(ctx, id, partition, next)
	if err != nil {
		return man, fmt.Errorf("tier: expire %x/%d: %w", id, partition, err)
	}
	for _, s := range segs[:n] {
		if IsWAL(s) {
			continue // shared: deleted when no manifest needs it (the writer's job)
		}
		if err := t.opts.Store.Delete(ctx, s.Object); err != nil {
			t.opts.Logger.Warn("delete expired segment object", "object", s.Object, "err", err)
		}
	}
	return stored, nil
}

// DeleteRecords raises the manifest's start offset to offset (Kafka's
// DeleteRecords over the tier): reads below it fail at once, and the
// segments wholly below it go with the next Expire.
func (t *Tier) DeleteRecords(ctx context.Context, id metastore.TopicID, partition, leaderEpoch int32, man metastore.Manifest, offset int64) (metastore.Manifest, error) {
	for attempt := 0; ; attempt++ {
		if man.StartOffset >= offset {
			return man, nil
		}
		if man.LeaderEpoch > leaderEpoch {
			return man, fmt.Errorf("tier: delete records of %x/%d: manifest has epoch %d: %w", id, partition, man.LeaderEpoch, ErrFenced)
		}
		next := man
		next.LeaderEpoch, next.StartOffset = leaderEpoch, offset
		stored, err := t.opts.Meta.PutManifest(ctx, id, partition, next)
		if err == nil {
			return stored, nil
		}
		if !errors.Is(err, metastore.ErrConditionFailed) || attempt >= 2 {
			return man, fmt.Errorf("tier: delete records of %x/%d: %w", id, partition, err)
		}
		if man, err = t.opts.Meta.Manifest(ctx, id, partition); err != nil {
			return man, err
		}
	}
}

// Collect deletes the partition's objects that the manifest does not
// reference and that are older than the orphan grace period: uploads of
// deposed leaders, and uploads whose manifest write failed.
func (t *Tier) Collect(ctx context.Context, id metastore.TopicID, partition int32, man metastore.Manifest) (int, error) {
	objs, err := t.opts.Store.List(ctx, Prefix(id, partition))
	if err != nil {
		return 0, fmt.Errorf("tier: list %x/%d: %w", id, partition, err)
	}
	ref := map[string]bool{}
	for _, s := range man.Segments {
		ref[s.Object] = true
	}
	cutoff := t.opts.Now().Add(-t.opts.OrphanGrace)
	n := 0
	for _, o := range objs {
		if ref[o.Key] || !strings.HasSuffix(o.Key, ".log") || o.LastModified.After(cutoff) {
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
// a consumer reading sequentially finds the rest of a chunk here).
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

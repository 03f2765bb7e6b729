package tier

import (
	"context"
	"encoding/binary"
	"fmt"
	"sort"
	"strconv"

	"github.com/stratamq/strata/pkg/metastore"
	"github.com/stratamq/strata/pkg/segment"
)

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

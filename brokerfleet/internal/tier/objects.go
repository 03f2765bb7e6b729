package tier

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/stratamq/strata/pkg/metastore"
	"github.com/stratamq/strata/pkg/objstore"
	"github.com/stratamq/strata/pkg/segment"
)

// Upload stores one closed segment (its batches, info.Size bytes read from
// src, never held in memory whole) and adds it to the manifest under
// leaderEpoch. man is the manifest as the caller last saw it; the new one
// is returned. A manifest written under a newer epoch fails with ErrFenced
// and leaves the object for collection.
func (t *Tier) Upload(ctx context.Context, id metastore.TopicID, partition, leaderEpoch int32, man metastore.Manifest, info segment.SegmentInfo, src io.ReaderAt) (metastore.Manifest, error) {
	return t.UploadAs(ctx, Key(id, partition, info.BaseOffset, leaderEpoch), id, partition, leaderEpoch, man, info, src, nil)
}

// UploadAs is Upload to the object key given (CompactedKey for the
// segments of a compacted topic), with the aborted transactions that
// overlap the segment: their entries go to an object of their own,
// created before the segment's (and named by its key), so read_committed
// consumers of the tier drop the aborted records.
func (t *Tier) UploadAs(ctx context.Context, key string, id metastore.TopicID, partition, leaderEpoch int32, man metastore.Manifest, info segment.SegmentInfo, src io.ReaderAt, aborted []AbortedTxn) (metastore.Manifest, error) {
	if man.LeaderEpoch > leaderEpoch {
		return man, fmt.Errorf("tier: upload %s/%d@%d: manifest has epoch %d: %w", id, partition, info.BaseOffset, man.LeaderEpoch, ErrFenced)
	}
	var abortedKey string
	if len(aborted) > 0 {
		abortedKey = AbortedKey(key)
		if err := objstore.PutIfAbsentIdempotent(ctx, t.opts.Store, abortedKey, encodeAborted(aborted)); err != nil {
			return man, fmt.Errorf("tier: upload %s: %w", abortedKey, err)
		}
	}
	ref, err := t.storeSegment(ctx, key, id, partition, leaderEpoch, info, src)
	if err != nil {
		return man, err
	}
	ref.Aborted = abortedKey
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

// storeSegment creates a segment's object (its batches, then its offset
// index) and returns the manifest entry that would reference it.
func (t *Tier) storeSegment(ctx context.Context, key string, id metastore.TopicID, partition, leaderEpoch int32, info segment.SegmentInfo, src io.ReaderAt) (metastore.SegmentRef, error) {
	index, err := t.buildIndex(io.NewSectionReader(src, 0, info.Size), info.Size)
	if err != nil {
		return metastore.SegmentRef{}, fmt.Errorf("tier: upload %s/%d@%d: %w", id, partition, info.BaseOffset, err)
	}
	body := &twoPart{a: io.NewSectionReader(src, 0, info.Size), b: bytes.NewReader(index), size: info.Size + int64(len(index))}
	if err := objstore.PutReaderIfAbsentIdempotent(ctx, t.opts.Store, key, body, body.size); err != nil {
		return metastore.SegmentRef{}, fmt.Errorf("tier: upload %s: %w", key, err)
	}
	return metastore.SegmentRef{
		BaseOffset: info.BaseOffset, NextOffset: info.NextOffset, LeaderEpoch: leaderEpoch,
		Size: body.size, MaxTimestamp: info.MaxTimestamp, Object: key, IndexPos: info.Size,
	}, nil
}

// withSegment adds a segment object's entry and drops the WAL entries it
// covers: the shared objects stop being needed for those offsets.
func withSegment(segs []metastore.SegmentRef, ref metastore.SegmentRef) []metastore.SegmentRef {
	covered := func(s metastore.SegmentRef) bool {
		return s.BaseOffset >= ref.BaseOffset && s.NextOffset <= ref.NextOffset && IsWAL(s) // offsets first: cheap
	}
	if !slices.ContainsFunc(segs, covered) {
		return append(segs[:len(segs):len(segs)], ref) // one copy
	}
	out := make([]metastore.SegmentRef, 0, len(segs)+1)
	for _, s := range segs {
		if !covered(s) {
			out = append(out, s)
		}
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
func (t *Tier) buildIndex(r io.Reader, size int64) ([]byte, error) {
	br := bufio.NewReaderSize(r, int(min(1<<20, size))) // at least bufio's minimum
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

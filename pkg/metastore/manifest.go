package metastore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
)

// SegmentRef is an uploaded segment as the manifest records it.
type SegmentRef struct {
	BaseOffset   int64  `json:"base"`
	NextOffset   int64  `json:"next"`
	LeaderEpoch  int32  `json:"epoch"`
	Size         int64  `json:"size"`
	MaxTimestamp int64  `json:"maxTs"`
	Object       string `json:"object"`
	IndexPos     int64  `json:"ix,omitempty"`  // where the object's offset index starts (after the batches)
	Pos          int64  `json:"pos,omitempty"` // where the batches start (non-zero in objects shared by partitions)
	// Aborted names the object holding the aborted transactions that
	// overlap the segment (24-byte entries: producer id, first offset,
	// abort marker offset), uploaded before the segment is referenced;
	// empty when there are none. Brokers that do not know it ignore it.
	Aborted string `json:"aborted,omitempty"`
}

// Manifest is the list of a partition's segments in S3. A segment object is
// authoritative only once the manifest references it.
//
// It is stored as a head item and page items (see manifestpages.go): the
// head, at the key single-item manifests always had, holds the leader
// epoch, the start offset, the list of pages and the newest references
// (the tail); a page holds up to 256 KiB of references in order and is
// never changed once written. So a manifest has no size limit to speak of
// (about ten million references), and a change writes the head and at most
// the pages it adds.
type Manifest struct {
	LeaderEpoch int32 // epoch of the last writer
	StartOffset int64 // the log start set by DeleteRecords: nothing below it is readable
	Segments    []SegmentRef
	Version     int64 // the head item's version

	// layout is how the manifest at Version is stored, from the read or
	// write that returned it; PutManifest plans the next write from it
	// without reading the pages again. Copies of the value share it.
	layout *manifestLayout
}

func manifestKey(id TopicID, p int32) Key {
	return Key{PK: pkManifest + id.String(), SK: partKey(p)}
}

func manifestPageKey(id TopicID, p int32, page string) Key {
	return Key{PK: pkManifest + id.String(), SK: partKey(p) + "/" + page}
}

// manifestReadAttempts bounds the re-reads of a manifest whose head names
// a page that a concurrent writer replaced between the reads.
const manifestReadAttempts = 5

// Manifest returns a partition's manifest (empty, Version 0, if none): one
// Query for the head and its pages (one request per MB). Manifests written
// as one item, before pages existed, read the same.
func (m *Meta) Manifest(ctx context.Context, id TopicID, p int32) (Manifest, error) {
	for attempt := 1; ; attempt++ {
		items, err := m.s.Query(ctx, pkManifest+id.String(), partKey(p))
		if err != nil {
			return Manifest{}, fmt.Errorf("metastore: manifest of %s/%d: %w", id, p, err)
		}
		man, err := decodeManifest(partKey(p), items)
		if errors.Is(err, errPageMissing) && attempt < manifestReadAttempts {
			continue // rewritten meanwhile: the head read now names other pages
		}
		if err != nil {
			return Manifest{}, fmt.Errorf("metastore: manifest of %s/%d: %w", id, p, err)
		}
		return man, nil
	}
}

// PutManifest writes man if the stored manifest is still at man.Version
// (compare-and-set) and was not written under a newer leader epoch than
// man.LeaderEpoch (a deposed leader is fenced with ErrFenced).
//
// The head is the one point of conditioning: pages the change adds are
// written first under keys no head references, then the head is written
// under its version, then the pages it no longer references are deleted.
// A writer that loses the race, or is deposed, changes nothing a reader
// can see (its pages are deleted, or collected later). A manifest read or
// returned by PutManifest carries its layout, so an append costs one write
// of the head, and every 64th about three operations; a Manifest built by
// the caller costs a read first.
func (m *Meta) PutManifest(ctx context.Context, id TopicID, p int32, man Manifest) (Manifest, error) {
	lay := man.layout
	if lay == nil || lay.version != man.Version {
		cur, err := m.Manifest(ctx, id, p)
		if err != nil {
			return Manifest{}, err
		}
		if cur.LeaderEpoch > man.LeaderEpoch {
			return Manifest{}, fmt.Errorf("metastore: manifest of %s/%d: leader epoch %d < stored %d: %w", id, p, man.LeaderEpoch, cur.LeaderEpoch, ErrFenced)
		}
		if cur.Version != man.Version {
			return Manifest{}, fmt.Errorf("metastore: manifest of %s/%d: version %d, stored %d: %w", id, p, man.Version, cur.Version, ErrConditionFailed)
		}
		lay = cur.layout
	} else if lay.epoch > man.LeaderEpoch {
		return Manifest{}, fmt.Errorf("metastore: manifest of %s/%d: leader epoch %d < stored %d: %w", id, p, man.LeaderEpoch, lay.epoch, ErrFenced)
	}
	if lay == nil {
		lay = &manifestLayout{}
	}
	plan := planManifest(lay, man.Segments, man.Version+1)
	var written []Key
	for _, pg := range plan.fresh {
		k := manifestPageKey(id, p, pg.page.id)
		if _, err := m.putSettled(ctx, Item{Key: k, Value: pg.value}, IfAbsent(), 0); err != nil {
			m.deleteKeys(ctx, written)
			return Manifest{}, fmt.Errorf("metastore: manifest of %s/%d: write page %s: %w", id, p, pg.page.id, err)
		}
		written = append(written, k)
	}
	c := IfVersion(man.Version)
	if man.Version == 0 {
		c = IfAbsent()
	}
	head := encodeManifestHead(man.LeaderEpoch, man.StartOffset, plan)
	it, err := m.putSettled(ctx, Item{Key: manifestKey(id, p), Value: head}, c, man.Version+1)
	if err != nil {
		if errors.Is(err, ErrConditionFailed) || errors.Is(err, ErrTooLarge) {
			m.deleteKeys(ctx, written) // the head does not name them: nobody can
		} // else the outcome is unknown: the pages may be referenced now
		if errors.Is(err, ErrConditionFailed) {
			if epoch, ok := m.manifestEpoch(ctx, id, p); ok && epoch > man.LeaderEpoch {
				return Manifest{}, fmt.Errorf("metastore: manifest of %s/%d: leader epoch %d < stored %d: %w", id, p, man.LeaderEpoch, epoch, ErrFenced)
			}
		}
		return Manifest{}, fmt.Errorf("metastore: manifest of %s/%d: %w", id, p, err)
	}
	var unused []Key
	for _, page := range append(plan.dropped, lay.orphans...) {
		unused = append(unused, manifestPageKey(id, p, page))
	}
	m.deleteKeys(ctx, unused)
	man.Version = it.Version
	man.layout = &manifestLayout{version: it.Version, epoch: man.LeaderEpoch, pages: plan.pages, skip: plan.skip, tail: plan.tail}
	return man, nil
}

// putSettled is Put for an item whose value only this write produces (a
// fresh page, or a head naming fresh pages or carrying a new tail): when
// the outcome is unknown (ErrUnavailable: an attempt's answer was lost and
// a retry found the condition false, as after its own write), it reads the
// item back and reports success if the write is there, at version
// (0: any).
func (m *Meta) putSettled(ctx context.Context, it Item, c Cond, version int64) (Item, error) {
	stored, err := m.s.Put(ctx, it, c)
	if !errors.Is(err, ErrUnavailable) {
		return stored, err
	}
	got, gerr := m.s.Get(ctx, it.Key)
	if gerr == nil && bytes.Equal(got.Value, it.Value) && (version == 0 || got.Version == version) {
		return got, nil
	}
	return stored, err
}

// manifestEpoch reads the leader epoch of a partition's manifest head (to
// tell a fenced writer from one that lost a race).
func (m *Meta) manifestEpoch(ctx context.Context, id TopicID, p int32) (int32, bool) {
	it, err := m.s.Get(ctx, manifestKey(id, p))
	if err != nil {
		return 0, false
	}
	epoch, err := decodeManifestEpoch(it)
	return epoch, err == nil
}

// deleteKeys deletes items no reader needs (pages no head references).
// Failures are left for later: a page whose write can no longer land is
// deleted by the next writer that reads the manifest, and the topic's
// deletion removes every page.
func (m *Meta) deleteKeys(ctx context.Context, keys []Key) {
	for _, k := range keys {
		_ = m.s.Delete(ctx, k, Always)
	}
}

// DeleteManifest removes a partition's manifest, its pages first and its
// head last (its topic was deleted and its objects are being removed; the
// topic id is never reused).
func (m *Meta) DeleteManifest(ctx context.Context, id TopicID, p int32) error {
	items, err := m.s.Query(ctx, pkManifest+id.String(), partKey(p))
	if err != nil {
		return fmt.Errorf("metastore: delete manifest of %s/%d: %w", id, p, err)
	}
	head := partKey(p)
	var keys []Key
	found := false
	for _, it := range items {
		switch {
		case it.SK == head:
			found = true
		case strings.HasPrefix(it.SK, head+"/"):
			keys = append(keys, it.Key)
		}
	}
	if found {
		keys = append(keys, manifestKey(id, p))
	}
	return m.deleteAll(ctx, keys, fmt.Sprintf("delete manifest of %s/%d", id, p))
}

// DeleteManifests removes every manifest item left under a deleted topic's
// id, whatever its partition (pages first, heads last). It reads them all
// in one Query, so call it once the per-partition deletes have run.
func (m *Meta) DeleteManifests(ctx context.Context, id TopicID) error {
	items, err := m.s.Query(ctx, pkManifest+id.String(), "")
	if err != nil {
		return fmt.Errorf("metastore: delete manifests of %s: %w", id, err)
	}
	var pages, heads []Key
	for _, it := range items {
		if strings.Contains(it.SK, "/") {
			pages = append(pages, it.Key)
		} else {
			heads = append(heads, it.Key)
		}
	}
	return m.deleteAll(ctx, append(pages, heads...), fmt.Sprintf("delete manifests of %s", id))
}

func (m *Meta) deleteAll(ctx context.Context, keys []Key, what string) error {
	for _, k := range keys {
		if err := m.s.Delete(ctx, k, Always); err != nil && !errors.Is(err, ErrNotFound) {
			return fmt.Errorf("metastore: %s: %s: %w", what, k, err)
		}
	}
	return nil
}

package metastore

import (
	"context"
	"errors"
	"fmt"
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
}

// Manifest is the list of a partition's segments in S3. A segment object is
// authoritative only once the manifest references it.
type Manifest struct {
	LeaderEpoch int32        `json:"leaderEpoch"`     // epoch of the last writer
	StartOffset int64        `json:"start,omitempty"` // the log start set by DeleteRecords: nothing below it is readable
	Segments    []SegmentRef `json:"segments"`
	Version     int64        `json:"-"`
}

func manifestKey(id TopicID, p int32) Key {
	return Key{PK: pkManifest + id.String(), SK: partKey(p)}
}

// Manifest returns a partition's manifest (empty, Version 0, if none).
func (m *Meta) Manifest(ctx context.Context, id TopicID, p int32) (Manifest, error) {
	it, err := m.s.Get(ctx, manifestKey(id, p))
	if errors.Is(err, ErrNotFound) {
		return Manifest{}, nil
	}
	if err != nil {
		return Manifest{}, fmt.Errorf("metastore: manifest of %x/%d: %w", id, p, err)
	}
	var man Manifest
	if err := decodeJSON(it, &man); err != nil {
		return Manifest{}, err
	}
	man.Version = it.Version
	return man, nil
}

// PutManifest writes man if the stored manifest is still at man.Version
// (compare-and-set) and was not written under a newer leader epoch than
// man.LeaderEpoch (a deposed leader is fenced with ErrFenced). A manifest
// too large for one item fails with ErrTooLarge.
func (m *Meta) PutManifest(ctx context.Context, id TopicID, p int32, man Manifest) (Manifest, error) {
	cur, err := m.Manifest(ctx, id, p)
	if err != nil {
		return Manifest{}, err
	}
	if cur.LeaderEpoch > man.LeaderEpoch {
		return Manifest{}, fmt.Errorf("metastore: manifest of %x/%d: leader epoch %d < stored %d: %w", id, p, man.LeaderEpoch, cur.LeaderEpoch, ErrFenced)
	}
	c := IfVersion(man.Version)
	if man.Version == 0 {
		c = IfAbsent()
	}
	it, err := m.s.Put(ctx, Item{Key: manifestKey(id, p), Value: encodeJSON(man)}, c)
	if err != nil {
		return Manifest{}, fmt.Errorf("metastore: manifest of %x/%d: %w", id, p, err)
	}
	man.Version = it.Version
	return man, nil
}

// DeleteManifest removes a partition's manifest (its topic was deleted and
// its objects are being removed; the topic id is never reused).
func (m *Meta) DeleteManifest(ctx context.Context, id TopicID, p int32) error {
	if err := m.s.Delete(ctx, manifestKey(id, p), Always); err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("metastore: delete manifest of %x/%d: %w", id, p, err)
	}
	return nil
}

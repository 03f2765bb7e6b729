package metastore

import (
	"context"
	"errors"
	"fmt"
)

// Offset is a committed offset.
type Offset struct {
	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	Offset      int64  `json:"offset"`
	LeaderEpoch int32  `json:"leaderEpoch"`
	Metadata    string `json:"metadata,omitempty"`
	Generation  int64  `json:"generation"`
	// TopicID is the topic the offset was committed against, so the
	// offsets of a deleted topic can be told from those of a topic created
	// again under its name. Zero when unknown: records stored before ids
	// were kept, or a committer that did not know the id.
	TopicID TopicID `json:"topicId,omitzero"`
	// CommittedAt is when the offset was committed, in Unix milliseconds
	// of the committing coordinator's clock (retention counts from it).
	// Zero in records stored before it was kept.
	CommittedAt int64 `json:"committedAt,omitempty"`
	// Version is the record's version as Offsets read it, for StampOffsets;
	// 0 for an offset not read from the store.
	Version int64 `json:"-"`
}

func genKey(group string) Key { return Key{PK: pkGroupPfx + group, SK: skGen} }

func offsetKey(group, topic string, p int32) Key {
	return Key{PK: pkGroupPfx + group, SK: skOffPfx + topic + "/" + partKey(p)}
}

// NewGeneration starts the next generation of a group and returns it. The
// generation is the version of the group's generation record, so it only
// grows, and a commit can be conditioned on it without reading values.
func (m *Meta) NewGeneration(ctx context.Context, group string) (int64, error) {
	it, err := m.s.Put(ctx, Item{Key: genKey(group)}, Always)
	if err != nil {
		return 0, fmt.Errorf("metastore: new generation of %q: %w", group, err)
	}
	return it.Version, nil
}

// Generation returns the group's current generation (0 if none yet).
func (m *Meta) Generation(ctx context.Context, group string) (int64, error) {
	it, err := m.s.Get(ctx, genKey(group))
	if errors.Is(err, ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("metastore: generation of %q: %w", group, err)
	}
	return it.Version, nil
}

// CommitOffsets stores offsets for a member of generation gen (0: a group
// that never had one, whose offsets only simple consumers commit). It fails
// with ErrFenced unless gen is the group's current generation: a zombie
// member of an older generation cannot move a committed offset. The check
// and the writes are one transaction (up to MaxTransactItems-1 offsets per
// call); on a store without transactions (dynalite) the check is a read
// before the writes, which narrows but does not close the race.
func (m *Meta) CommitOffsets(ctx context.Context, group string, gen int64, offsets []Offset) error {
	for start := 0; start < len(offsets); start += MaxTransactItems - 1 {
		chunk := offsets[start:min(len(offsets), start+MaxTransactItems-1)]
		ops := make([]Op, 0, len(chunk)+1)
		ops = append(ops, Op{Kind: OpCheck, Item: Item{Key: genKey(group)}, Cond: genCond(gen)})
		for _, o := range chunk {
			o.Generation = gen
			ops = append(ops, Op{Kind: OpPut, Item: Item{Key: offsetKey(group, o.Topic, o.Partition), Value: encodeJSON(o)}, Cond: Always})
		}
		err := m.s.Transact(ctx, ops)
		if errors.Is(err, ErrUnsupported) {
			err = m.commitWithoutTransactions(ctx, group, gen, ops[1:])
		}
		if errors.Is(err, ErrConditionFailed) {
			return fmt.Errorf("metastore: commit offsets of %q: generation %d is not current: %w", group, gen, ErrFenced)
		}
		if err != nil {
			return fmt.Errorf("metastore: commit offsets of %q: %w", group, err)
		}
	}
	return nil
}

// genCond is the condition that gen is the group's current generation (0:
// the group never had one).
func genCond(gen int64) Cond {
	if gen == 0 {
		return IfAbsent()
	}
	return IfVersion(gen)
}

// commitWithoutTransactions applies ops (puts and deletes, unconditional)
// after checking the generation with a read.
func (m *Meta) commitWithoutTransactions(ctx context.Context, group string, gen int64, ops []Op) error {
	cur, err := m.Generation(ctx, group)
	if err != nil {
		return err
	}
	if cur != gen {
		return ErrConditionFailed
	}
	for _, op := range ops {
		var err error
		if op.Kind == OpDelete {
			err = m.s.Delete(ctx, op.Item.Key, Always)
		} else {
			_, err = m.s.Put(ctx, op.Item, Always)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// ResetOffsets stores offsets without a generation check: the explicit
// admin reset, for a group with no active members.
func (m *Meta) ResetOffsets(ctx context.Context, group string, offsets []Offset) error {
	for _, o := range offsets {
		o.Generation = -1
		if _, err := m.s.Put(ctx, Item{Key: offsetKey(group, o.Topic, o.Partition), Value: encodeJSON(o)}, Always); err != nil {
			return fmt.Errorf("metastore: reset offsets of %q: %w", group, err)
		}
	}
	return nil
}

// Offsets returns every committed offset of a group.
func (m *Meta) Offsets(ctx context.Context, group string) ([]Offset, error) {
	items, err := m.s.Query(ctx, pkGroupPfx+group, skOffPfx)
	if err != nil {
		return nil, fmt.Errorf("metastore: offsets of %q: %w", group, err)
	}
	out := make([]Offset, 0, len(items))
	for _, it := range items {
		var o Offset
		if err := decodeJSON(it, &o); err != nil {
			return nil, err
		}
		o.Version = it.Version
		out = append(out, o)
	}
	return out, nil
}

// StampOffsets rewrites offsets read by Offsets with fields filled in that
// their records lacked (CommittedAt of a record stored before it was
// kept). Each write is conditioned on the record's version as read
// (o.Version): an offset committed since is newer than the stamp and is
// left alone.
func (m *Meta) StampOffsets(ctx context.Context, group string, offsets []Offset) error {
	for _, o := range offsets {
		_, err := m.s.Put(ctx, Item{Key: offsetKey(group, o.Topic, o.Partition), Value: encodeJSON(o)}, IfVersion(o.Version))
		if err != nil && !errors.Is(err, ErrConditionFailed) {
			return fmt.Errorf("metastore: stamp offsets of %q: %w", group, err)
		}
	}
	return nil
}

// ExpireOffsets deletes committed offsets whose retention ran out and, with
// dropGroup, then removes the group's index entry if no offset of it is
// left (it reports whether it did). Like CommitOffsets it holds only while
// gen is the group's current generation, and fails with ErrFenced
// otherwise: a coordinator that lost the group to a newer generation
// cannot expire what the new one keeps. Each transaction checks the
// generation; on a store without transactions the check is a read first.
// The generation record stays, as in DeleteGroup.
func (m *Meta) ExpireOffsets(ctx context.Context, group string, gen int64, offsets []Offset, dropGroup bool) (bool, error) {
	fail := func(err error) (bool, error) {
		if errors.Is(err, ErrConditionFailed) {
			return false, fmt.Errorf("metastore: expire offsets of %q: generation %d is not current: %w", group, gen, ErrFenced)
		}
		return false, fmt.Errorf("metastore: expire offsets of %q: %w", group, err)
	}
	apply := func(keys []Key) error {
		ops := make([]Op, 0, len(keys)+1)
		ops = append(ops, Op{Kind: OpCheck, Item: Item{Key: genKey(group)}, Cond: genCond(gen)})
		for _, k := range keys {
			ops = append(ops, Op{Kind: OpDelete, Item: Item{Key: k}, Cond: Always})
		}
		err := m.s.Transact(ctx, ops)
		if errors.Is(err, ErrUnsupported) {
			err = m.commitWithoutTransactions(ctx, group, gen, ops[1:])
		}
		return err
	}
	for start := 0; start < len(offsets); start += MaxTransactItems - 1 {
		chunk := offsets[start:min(len(offsets), start+MaxTransactItems-1)]
		keys := make([]Key, 0, len(chunk))
		for _, o := range chunk {
			keys = append(keys, offsetKey(group, o.Topic, o.Partition))
		}
		if err := apply(keys); err != nil {
			return fail(err)
		}
	}
	if !dropGroup {
		return false, nil
	}
	// Offsets committed meanwhile (through another coordinator, in the
	// same generation) keep the group.
	left, err := m.s.Query(ctx, pkGroupPfx+group, skOffPfx)
	if err != nil {
		return fail(err)
	}
	if len(left) > 0 {
		return false, nil
	}
	if err := apply([]Key{groupIndexKey(group)}); err != nil {
		return fail(err)
	}
	return true, nil
}

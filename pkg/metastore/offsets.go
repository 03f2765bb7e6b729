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
		check := IfVersion(gen)
		if gen == 0 {
			check = IfAbsent() // a group that never had a generation
		}
		ops = append(ops, Op{Kind: OpCheck, Item: Item{Key: genKey(group)}, Cond: check})
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

func (m *Meta) commitWithoutTransactions(ctx context.Context, group string, gen int64, puts []Op) error {
	cur, err := m.Generation(ctx, group)
	if err != nil {
		return err
	}
	if cur != gen {
		return ErrConditionFailed
	}
	for _, op := range puts {
		if _, err := m.s.Put(ctx, op.Item, Always); err != nil {
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
		out = append(out, o)
	}
	return out, nil
}

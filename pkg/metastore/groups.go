package metastore

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
)

// GroupShards is the number of group coordinator shards. A group's shard
// is hash(group) mod GroupShards, so the count is part of the stored
// layout: changing it moves groups between index records.
const GroupShards = 16

// GroupShard returns the coordinator shard of a group (or transactional
// id): FNV-1a of the name, mod GroupShards.
func GroupShard(group string) int32 {
	h := fnv.New32a()
	h.Write([]byte(group))
	return int32(h.Sum32() % GroupShards)
}

// CoordinatorShard says which broker coordinates the groups of a shard.
// The assignment is valid only while that broker holds its registration
// lease; the controller moves the shards of a dead broker, incrementing
// Epoch, so a coordinator that lost and regained a shard knows to forget
// what it held in memory.
type CoordinatorShard struct {
	Shard   int32 `json:"shard"`
	Broker  int32 `json:"broker"` // -1: unassigned
	Epoch   int64 `json:"epoch"`
	Version int64 `json:"-"` // 0 until first stored
}

func shardKey(shard int32) Key { return Key{PK: pkCoord, SK: partKey(shard)} }

// CoordinatorShards returns the stored shard assignments, by shard. Shards
// never assigned are absent.
func (m *Meta) CoordinatorShards(ctx context.Context) ([]CoordinatorShard, error) {
	items, err := m.s.Query(ctx, pkCoord, "")
	if err != nil {
		return nil, fmt.Errorf("metastore: coordinator shards: %w", err)
	}
	out := make([]CoordinatorShard, 0, len(items))
	for _, it := range items {
		var cs CoordinatorShard
		if err := decodeJSON(it, &cs); err != nil {
			return nil, err
		}
		cs.Version = it.Version
		out = append(out, cs)
	}
	return out, nil
}

// AssignShard moves a shard to broker, with the next epoch. It is a
// compare-and-set on cur (Version 0: the shard was never assigned) and
// fails with ErrConditionFailed if the assignment changed since it was
// read. Watchers are notified.
func (m *Meta) AssignShard(ctx context.Context, cur CoordinatorShard, broker int32) (CoordinatorShard, error) {
	next := CoordinatorShard{Shard: cur.Shard, Broker: broker, Epoch: cur.Epoch + 1}
	cond := IfVersion(cur.Version)
	if cur.Version == 0 {
		cond = IfAbsent()
	}
	it, err := m.s.Put(ctx, Item{Key: shardKey(cur.Shard), Value: encodeJSON(next)}, cond)
	if err != nil {
		return CoordinatorShard{}, fmt.Errorf("metastore: assign shard %d to broker %d: %w", cur.Shard, broker, err)
	}
	next.Version = it.Version
	return next, m.bump(ctx)
}

// GroupInfo is a group's entry in its shard's index. Besides naming the
// group it carries what the group coordinator needs to expire offsets
// without reading every group's offsets (offsets.retention.minutes), and
// to keep counting after the shard moves. Times are Unix milliseconds of
// the writing coordinator's clock; zero means not recorded (entries
// stored before the field existed, or no such time).
type GroupInfo struct {
	Group        string `json:"group"`
	ProtocolType string `json:"protocolType,omitempty"`
	// Type is the group's type: "" (classic) or GroupTypeConsumer.
	Type string `json:"type,omitempty"`
	// EmptySince is when a group with a protocol type last became empty;
	// zero while it has members (its coordinator clears it when a
	// generation forms).
	EmptySince int64 `json:"emptySince,omitempty"`
	// OldestCommit is at or before the commit time of every committed
	// offset of the group: a lower bound, kept by the coordinator.
	OldestCommit int64 `json:"oldestCommit,omitempty"`
}

func groupIndexKey(group string) Key {
	return Key{PK: pkGroupIdx + partKey(GroupShard(group)), SK: group}
}

// IndexGroup records that a group exists (has a generation or committed
// offsets), so ListGroups finds it after its coordinator moved. Indexing
// an indexed group changes nothing.
func (m *Meta) IndexGroup(ctx context.Context, g GroupInfo) error {
	_, err := m.s.Put(ctx, Item{Key: groupIndexKey(g.Group), Value: encodeJSON(g)}, IfAbsent())
	if err != nil && !errors.Is(err, ErrConditionFailed) {
		return fmt.Errorf("metastore: index group %q: %w", g.Group, err)
	}
	return nil
}

// PutGroupInfo stores a group's index entry, indexing the group if it was
// not: the coordinator of the group's shard keeps it up to date.
func (m *Meta) PutGroupInfo(ctx context.Context, g GroupInfo) error {
	if _, err := m.s.Put(ctx, Item{Key: groupIndexKey(g.Group), Value: encodeJSON(g)}, Always); err != nil {
		return fmt.Errorf("metastore: index group %q: %w", g.Group, err)
	}
	return nil
}

// GroupInfo returns a group's index entry, and false if it is not indexed
// (never used, or deleted).
func (m *Meta) GroupInfo(ctx context.Context, group string) (GroupInfo, bool, error) {
	it, err := m.s.Get(ctx, groupIndexKey(group))
	if errors.Is(err, ErrNotFound) {
		return GroupInfo{}, false, nil
	}
	if err != nil {
		return GroupInfo{}, false, fmt.Errorf("metastore: group %q: %w", group, err)
	}
	var g GroupInfo
	return g, true, decodeJSON(it, &g)
}

// Groups lists the indexed groups of a shard, by name.
func (m *Meta) Groups(ctx context.Context, shard int32) ([]GroupInfo, error) {
	items, err := m.s.Query(ctx, pkGroupIdx+partKey(shard), "")
	if err != nil {
		return nil, fmt.Errorf("metastore: groups of shard %d: %w", shard, err)
	}
	out := make([]GroupInfo, 0, len(items))
	for _, it := range items {
		var g GroupInfo
		if err := decodeJSON(it, &g); err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, nil
}

// DeleteGroup removes a group's committed offsets and its index entry. The
// generation record stays: a group created again under the same name
// continues its generations, so a zombie member of the old group can never
// match the new one's.
func (m *Meta) DeleteGroup(ctx context.Context, group string) error {
	offs, err := m.Offsets(ctx, group)
	if err != nil {
		return err
	}
	for _, o := range offs {
		if err := m.s.Delete(ctx, offsetKey(group, o.Topic, o.Partition), Always); err != nil && !errors.Is(err, ErrNotFound) {
			return fmt.Errorf("metastore: delete group %q: %w", group, err)
		}
	}
	if err := m.s.Delete(ctx, groupIndexKey(group), Always); err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("metastore: delete group %q: %w", group, err)
	}
	return nil
}

// DeleteOffset removes one committed offset of a group (OffsetDelete).
func (m *Meta) DeleteOffset(ctx context.Context, group, topic string, partition int32) error {
	err := m.s.Delete(ctx, offsetKey(group, topic, partition), Always)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("metastore: delete offset of %q %s/%d: %w", group, topic, partition, err)
	}
	return nil
}

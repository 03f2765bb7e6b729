package metastore

// Share groups (KIP-932): the state of one share partition (a group's
// view of one topic partition: its start offset and the records in
// flight past it) and the per-group dynamic configs that IncrementalAlterConfigs
// sets on GROUP resources.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

const (
	pkSharePfx  = "share/"      // + group; sk "<topic id>/<zero-padded partition>": share partition state
	pkGroupCfgs = "groupconfig" // sk group: the group's dynamic configs
)

// Share record states as stored. Acquired records are stored as
// available: a lock does not survive its leader.
const (
	ShareAvailable    int8 = 0
	ShareAcknowledged int8 = 2
	ShareArchived     int8 = 4
)

// ShareRun is a run of consecutive in-flight offsets with one state and
// delivery count.
type ShareRun struct {
	First int64 `json:"f"`
	Last  int64 `json:"l"`
	State int8  `json:"s"`
	Count int16 `json:"c"`
}

// ShareState is a share partition's persisted state. Offsets below
// StartOffset are done (acknowledged or archived); offsets from
// EndOffset on were never delivered; Runs cover what lies between and
// differs from "available, never delivered".
type ShareState struct {
	// Version is the item's version (0: never stored), the fence of
	// every write: the partition's leader conditions its writes on the
	// version it read or wrote last.
	Version int64 `json:"-"`
	// LeaderEpoch is the partition leader epoch of the last writer. A
	// new leader writes the state back under its epoch before it serves
	// the partition, so an older leader's writes fail their condition.
	LeaderEpoch int32 `json:"epoch"`
	StartOffset int64 `json:"start"`
	EndOffset   int64 `json:"end"`
	// Initialized is false for a state that was deleted
	// (DeleteShareGroupOffsets): the next leader starts it afresh from
	// the group's share.auto.offset.reset.
	Initialized bool       `json:"init"`
	Runs        []ShareRun `json:"runs,omitempty"`
}

// ShareKey names a share partition.
type ShareKey struct {
	Group     string
	Topic     TopicID
	Partition int32
}

func (k ShareKey) key() Key {
	return Key{PK: pkSharePfx + k.Group, SK: k.Topic.String() + "/" + partKey(k.Partition)}
}

// ShareState returns a share partition's state (Version 0 when absent).
func (m *Meta) ShareState(ctx context.Context, k ShareKey) (ShareState, error) {
	it, err := m.s.Get(ctx, k.key())
	if errors.Is(err, ErrNotFound) {
		return ShareState{}, nil
	}
	if err != nil {
		return ShareState{}, fmt.Errorf("metastore: share state %s: %w", k.key(), err)
	}
	var st ShareState
	if err := decodeJSON(it, &st); err != nil {
		return ShareState{}, err
	}
	st.Version = it.Version
	return st, nil
}

// StoreShareState writes a share partition's state if its version is
// still st.Version (0: absent) and returns the new version; ErrFenced
// when someone else wrote it since.
func (m *Meta) StoreShareState(ctx context.Context, k ShareKey, st ShareState) (int64, error) {
	cond := IfVersion(st.Version)
	if st.Version == 0 {
		cond = IfAbsent()
	}
	it, err := m.s.Put(ctx, Item{Key: k.key(), Value: encodeJSON(st)}, cond)
	if errors.Is(err, ErrConditionFailed) {
		return 0, fmt.Errorf("metastore: store share state %s: version %d is not current: %w", k.key(), st.Version, ErrFenced)
	}
	if err != nil {
		return 0, fmt.Errorf("metastore: store share state %s: %w", k.key(), err)
	}
	return it.Version, nil
}

// ShareStates returns every share partition state of a group.
func (m *Meta) ShareStates(ctx context.Context, group string) (map[ShareKey]ShareState, error) {
	items, err := m.s.Query(ctx, pkSharePfx+group, "")
	if err != nil {
		return nil, fmt.Errorf("metastore: share states of %q: %w", group, err)
	}
	out := make(map[ShareKey]ShareState, len(items))
	for _, it := range items {
		tid, p, ok := strings.Cut(it.SK, "/")
		if !ok {
			continue
		}
		var id TopicID
		if err := id.UnmarshalText([]byte(tid)); err != nil {
			continue
		}
		n, err := strconv.ParseInt(p, 10, 32)
		if err != nil {
			continue
		}
		var st ShareState
		if err := decodeJSON(it, &st); err != nil {
			return nil, err
		}
		st.Version = it.Version
		out[ShareKey{Group: group, Topic: id, Partition: int32(n)}] = st
	}
	return out, nil
}

// GroupConfigs returns a group's dynamic configs (nil when none are set).
func (m *Meta) GroupConfigs(ctx context.Context, group string) (map[string]string, error) {
	it, err := m.s.Get(ctx, Key{PK: pkGroupCfgs, SK: group})
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("metastore: configs of group %q: %w", group, err)
	}
	var cfg map[string]string
	if err := decodeJSON(it, &cfg); err != nil {
		return nil, err
	}
	return cfg, nil
}

// AlterGroupConfigs applies fn to a group's configs in a conditional
// read-modify-write (retried when another writer won) and stores the
// result; an empty result deletes the item.
func (m *Meta) AlterGroupConfigs(ctx context.Context, group string, fn func(map[string]string) error) error {
	k := Key{PK: pkGroupCfgs, SK: group}
	for range 10 {
		cur := map[string]string{}
		cond := IfAbsent()
		it, err := m.s.Get(ctx, k)
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return fmt.Errorf("metastore: configs of group %q: %w", group, err)
		default:
			if err := decodeJSON(it, &cur); err != nil {
				return err
			}
			cond = IfVersion(it.Version)
		}
		if err := fn(cur); err != nil {
			return err
		}
		if len(cur) == 0 {
			if cond == IfAbsent() {
				return nil
			}
			err = m.s.Delete(ctx, k, cond)
		} else {
			_, err = m.s.Put(ctx, Item{Key: k, Value: encodeJSON(cur)}, cond)
		}
		if errors.Is(err, ErrConditionFailed) {
			continue
		}
		if err != nil {
			return fmt.Errorf("metastore: store configs of group %q: %w", group, err)
		}
		return nil
	}
	return fmt.Errorf("metastore: configs of group %q: too many concurrent writers: %w", group, ErrConditionFailed)
}

// ResetShareStates marks the share partition states of group that keep
// selects as deleted (DeleteShareGroupOffsets, DeleteGroups): each is
// rewritten uninitialized under its version, so a leader that holds it
// fails its next write and reads it again. It returns the keys reset.
func (m *Meta) ResetShareStates(ctx context.Context, group string, keep func(ShareKey) bool) ([]ShareKey, error) {
	sts, err := m.ShareStates(ctx, group)
	if err != nil {
		return nil, err
	}
	var out []ShareKey
	for k, st := range sts {
		if keep != nil && !keep(k) {
			continue
		}
		for range 10 {
			if !st.Initialized {
				break
			}
			_, err = m.StoreShareState(ctx, k, ShareState{Version: st.Version, LeaderEpoch: st.LeaderEpoch})
			if !errors.Is(err, ErrFenced) {
				break
			}
			if st, err = m.ShareState(ctx, k); err != nil {
				break
			}
		}
		if err != nil {
			return out, err
		}
		out = append(out, k)
	}
	return out, nil
}

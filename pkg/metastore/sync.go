package metastore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Read-your-writes for metadata. A broker that made a metadata change
// clients expect every broker to show at once (a topic created, configs
// altered, ACLs created) asks for a sync at the change version it wrote;
// every broker that applies a change reads the request and, once it has
// applied that version, acknowledges it; the asking broker answers its
// client when every live broker did. In steady state nothing is read or
// written: the request is read only when the change counter moved, and
// acknowledged only when asked.

const (
	pkSync      = "sync"
	skSyncReq   = "request"
	syncAckPfx  = "ack/"
	syncAckBase = 10
)

type syncRecord struct {
	Version int64 `json:"version"`
}

// RequestSync asks every broker to acknowledge once it has applied change
// version v, and moves the change counter so that every watcher reads the
// request. A newer request replaces an older one; an older one is
// ignored.
func (m *Meta) RequestSync(ctx context.Context, v int64) error {
	k := Key{PK: pkSync, SK: skSyncReq}
	for range 5 {
		cur, err := m.s.Get(ctx, k)
		c := IfAbsent()
		if err == nil {
			var rec syncRecord
			if json.Unmarshal(cur.Value, &rec) == nil && rec.Version >= v {
				return m.bump(ctx)
			}
			c = IfVersion(cur.Version)
		} else if !errors.Is(err, ErrNotFound) {
			return fmt.Errorf("metastore: sync request: %w", err)
		}
		if _, err := m.s.Put(ctx, Item{Key: k, Value: encodeJSON(syncRecord{Version: v})}, c); err == nil {
			return m.bump(ctx)
		} else if !errors.Is(err, ErrConditionFailed) {
			return fmt.Errorf("metastore: sync request: %w", err)
		}
	}
	return fmt.Errorf("metastore: sync request: %w", ErrConditionFailed)
}

// SyncRequest returns the change version brokers are asked to acknowledge
// (0: none).
func (m *Meta) SyncRequest(ctx context.Context) (int64, error) {
	it, err := m.s.Get(ctx, Key{PK: pkSync, SK: skSyncReq})
	if errors.Is(err, ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("metastore: sync request: %w", err)
	}
	var rec syncRecord
	if err := decodeJSON(it, &rec); err != nil {
		return 0, err
	}
	return rec.Version, nil
}

// AckSync records that broker id has applied change version v.
func (m *Meta) AckSync(ctx context.Context, id int32, v int64) error {
	k := Key{PK: pkSync, SK: syncAckPfx + strconv.FormatInt(int64(id), syncAckBase)}
	if _, err := m.s.Put(ctx, Item{Key: k, Value: encodeJSON(syncRecord{Version: v})}, Always); err != nil {
		return fmt.Errorf("metastore: sync ack of broker %d: %w", id, err)
	}
	return nil
}

// SyncAcks returns, per broker, the change version it last acknowledged.
func (m *Meta) SyncAcks(ctx context.Context) (map[int32]int64, error) {
	items, err := m.s.Query(ctx, pkSync, syncAckPfx)
	if err != nil {
		return nil, fmt.Errorf("metastore: sync acks: %w", err)
	}
	out := make(map[int32]int64, len(items))
	for _, it := range items {
		id, err := strconv.ParseInt(it.SK[len(syncAckPfx):], syncAckBase, 32)
		if err != nil {
			return nil, fmt.Errorf("metastore: sync ack key %s: %w", it.Key, err)
		}
		var rec syncRecord
		if err := decodeJSON(it, &rec); err != nil {
			return nil, err
		}
		out[int32(id)] = rec.Version
	}
	return out, nil
}

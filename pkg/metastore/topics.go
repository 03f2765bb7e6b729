package metastore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"

	"golang.org/x/sync/errgroup"
)

// TopicID is a topic's UUID.
type TopicID [16]byte

// Topic is a topic record.
type Topic struct {
	Name              string            `json:"name"`
	ID                TopicID           `json:"id"`
	Partitions        int32             `json:"partitions"`
	ReplicationFactor int16             `json:"replicationFactor"`
	Configs           map[string]string `json:"configs,omitempty"`
	Version           int64             `json:"-"` // record version, for updates
}

// PartitionState is the control-plane state of one partition. Epoch is the
// record's version: every change is a compare-and-set on it, so two
// controllers cannot both apply a change made from the same read.
type PartitionState struct {
	Topic       TopicID `json:"-"`
	Partition   int32   `json:"-"`
	Replicas    []int32 `json:"replicas"`
	Leader      int32   `json:"leader"`
	LeaderEpoch int32   `json:"leaderEpoch"`
	ISR         []int32 `json:"isr"`
	// During a reassignment (KIP-455) Replicas is the target followed by
	// the original replicas that are not in it; AddingReplicas are the
	// target's newcomers, RemovingReplicas the originals leaving. Both are
	// empty otherwise.
	AddingReplicas   []int32 `json:"adding,omitempty"`
	RemovingReplicas []int32 `json:"removing,omitempty"`
	Epoch            int64   `json:"-"`
}

// Reassigning reports whether a reassignment of the partition is in
// progress.
func (p PartitionState) Reassigning() bool {
	return len(p.AddingReplicas) > 0 || len(p.RemovingReplicas) > 0
}

func topicKey(name string) Key { return Key{PK: pkTopics, SK: name} }

func partitionKey(id TopicID, p int32) Key {
	return Key{PK: pkPartPfx + id.String(), SK: partKey(p)}
}

// CreateTopic stores a new topic and its initial partition states. It
// fails with ErrConditionFailed if the name is taken.
func (m *Meta) CreateTopic(ctx context.Context, t Topic, parts []PartitionState) (Topic, error) {
	it, err := m.s.Put(ctx, Item{Key: topicKey(t.Name), Value: encodeJSON(t)}, IfAbsent())
	if err != nil {
		return Topic{}, fmt.Errorf("metastore: create topic %q: %w", t.Name, err)
	}
	t.Version = it.Version
	err = eachPartition(ctx, len(parts), func(ctx context.Context, i int) error {
		p := parts[i]
		if _, err := m.s.Put(ctx, Item{Key: partitionKey(t.ID, p.Partition), Value: encodeJSON(p)}, IfAbsent()); err != nil {
			return fmt.Errorf("metastore: create topic %q partition %d: %w", t.Name, p.Partition, err)
		}
		return nil
	})
	if err != nil {
		return Topic{}, err
	}
	return t, m.bump(ctx)
}

// Topic returns the topic called name, or ErrNotFound.
func (m *Meta) Topic(ctx context.Context, name string) (Topic, error) {
	it, err := m.s.Get(ctx, topicKey(name))
	if err != nil {
		return Topic{}, fmt.Errorf("metastore: topic %q: %w", name, err)
	}
	var t Topic
	if err := decodeJSON(it, &t); err != nil {
		return Topic{}, err
	}
	t.Version = it.Version
	return t, nil
}

// Topics lists every topic, sorted by name.
func (m *Meta) Topics(ctx context.Context) ([]Topic, error) {
	items, err := m.s.Query(ctx, pkTopics, "")
	if err != nil {
		return nil, fmt.Errorf("metastore: list topics: %w", err)
	}
	out := make([]Topic, 0, len(items))
	for _, it := range items {
		var t Topic
		if err := decodeJSON(it, &t); err != nil {
			return nil, err
		}
		t.Version = it.Version
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// UpdateTopic writes t (configs, partition count) if the record is still at
// t.Version and still the same topic id; new partitions get their states.
func (m *Meta) UpdateTopic(ctx context.Context, t Topic, newParts []PartitionState) (Topic, error) {
	cur, err := m.Topic(ctx, t.Name)
	if err != nil {
		return Topic{}, err
	}
	if cur.ID != t.ID {
		return Topic{}, fmt.Errorf("metastore: update topic %q: it was deleted and re-created: %w", t.Name, ErrConditionFailed)
	}
	err = eachPartition(ctx, len(newParts), func(ctx context.Context, i int) error {
		p := newParts[i]
		if _, err := m.s.Put(ctx, Item{Key: partitionKey(t.ID, p.Partition), Value: encodeJSON(p)}, IfAbsent()); err != nil && !errors.Is(err, ErrConditionFailed) {
			return fmt.Errorf("metastore: update topic %q partition %d: %w", t.Name, p.Partition, err)
		}
		return nil
	})
	if err != nil {
		return Topic{}, err
	}
	it, err := m.s.Put(ctx, Item{Key: topicKey(t.Name), Value: encodeJSON(t)}, IfVersion(t.Version))
	if err != nil {
		return Topic{}, fmt.Errorf("metastore: update topic %q: %w", t.Name, err)
	}
	t.Version = it.Version
	return t, m.bump(ctx)
}

// DeleteTopic removes the topic record (if still at t.Version) and then its
// partition states; a topic id is never reused, so deleting them is safe.
func (m *Meta) DeleteTopic(ctx context.Context, t Topic) error {
	if err := m.s.Delete(ctx, topicKey(t.Name), IfVersion(t.Version)); err != nil {
		return fmt.Errorf("metastore: delete topic %q: %w", t.Name, err)
	}
	err := eachPartition(ctx, int(t.Partitions), func(ctx context.Context, i int) error {
		if err := m.s.Delete(ctx, partitionKey(t.ID, int32(i)), Always); err != nil {
			return fmt.Errorf("metastore: delete topic %q partition %d: %w", t.Name, i, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return m.bump(ctx)
}

// Partitions returns the partition states of a topic, by partition.
func (m *Meta) Partitions(ctx context.Context, id TopicID) ([]PartitionState, error) {
	items, err := m.s.Query(ctx, partitionKey(id, 0).PK, "")
	if err != nil {
		return nil, fmt.Errorf("metastore: partitions of %x: %w", id, err)
	}
	out := make([]PartitionState, 0, len(items))
	for _, it := range items {
		var p PartitionState
		if err := decodeJSON(it, &p); err != nil {
			return nil, err
		}
		n, err := parsePartKey(it.SK)
		if err != nil {
			return nil, fmt.Errorf("metastore: partition key %s: %w", it.Key, err)
		}
		p.Topic, p.Partition, p.Epoch = id, n, it.Version
		out = append(out, p)
	}
	return out, nil
}

// UpdatePartition writes p if the stored state is still at p.Epoch and its
// leader epoch is not newer than p's; it returns p with its new epoch. A
// stale writer gets an error wrapping ErrConditionFailed (changed since
// read) or ErrFenced (a newer leader epoch is stored).
func (m *Meta) UpdatePartition(ctx context.Context, p PartitionState) (PartitionState, error) {
	key := partitionKey(p.Topic, p.Partition)
	cur, err := m.s.Get(ctx, key)
	if err != nil {
		return PartitionState{}, fmt.Errorf("metastore: update partition %s: %w", key, err)
	}
	var stored PartitionState
	if err := decodeJSON(cur, &stored); err != nil {
		return PartitionState{}, err
	}
	if stored.LeaderEpoch > p.LeaderEpoch {
		return PartitionState{}, fmt.Errorf("metastore: update partition %s: leader epoch %d < stored %d: %w", key, p.LeaderEpoch, stored.LeaderEpoch, ErrFenced)
	}
	it, err := m.s.Put(ctx, Item{Key: key, Value: encodeJSON(p)}, IfVersion(p.Epoch))
	if err != nil {
		return PartitionState{}, fmt.Errorf("metastore: update partition %s: %w", key, err)
	}
	p.Epoch = it.Version
	return p, m.bump(ctx)
}

// NewTopicID returns a random version-4 UUID.
func NewTopicID() TopicID {
	var id TopicID
	_, _ = rand.Read(id[:])
	id[6] = id[6]&0x0f | 0x40
	id[8] = id[8]&0x3f | 0x80
	return id
}

func (id TopicID) String() string { return hex.EncodeToString(id[:]) }

// MarshalText encodes the id as 32 hex digits.
func (id TopicID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText decodes 32 hex digits.
func (id *TopicID) UnmarshalText(b []byte) error {
	if hex.DecodedLen(len(b)) != len(id) {
		return fmt.Errorf("topic id %q: want 32 hex digits", b)
	}
	_, err := hex.Decode(id[:], b)
	return err
}

// partitionWriters bounds the concurrent item writes of one topic change:
// a topic of thousands of partitions is one round trip per partition, and
// DynamoDB's latency, not its capacity, would otherwise bound how fast it
// is created (1,000 partitions at 5 ms each is 5 s one at a time).
const partitionWriters = 16

// eachPartition runs f(0..n-1) with at most partitionWriters at once and
// returns the first error; after one, no further calls start.
func eachPartition(ctx context.Context, n int, f func(context.Context, int) error) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(partitionWriters)
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		g.Go(func() error { return f(ctx, i) })
	}
	return g.Wait()
}

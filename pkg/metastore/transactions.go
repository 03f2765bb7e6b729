package metastore

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// Transaction coordinator state: one record per transactional id, in the
// index of its coordinator shard (the shards groups use, by the same hash),
// so a coordinator that gains a shard reads every transaction it now owns
// in one query. Every write is conditioned on the record's version and on
// the shard's assignment record being at the version the writer owns it
// under, in one transaction: a coordinator that lost its shard (or froze
// past its lease and was replaced) can never write a decision, and two
// coordinators can never both move a transaction on from the same state.
// Because the shard check fences stale writers, the record of an expired
// transactional id may be deleted.

// Transaction states, named as Kafka's DescribeTransactions and
// ListTransactions report them.
const (
	TxnEmpty          = "Empty"
	TxnOngoing        = "Ongoing"
	TxnPrepareCommit  = "PrepareCommit"
	TxnPrepareAbort   = "PrepareAbort"
	TxnCompleteCommit = "CompleteCommit"
	TxnCompleteAbort  = "CompleteAbort"
)

// TxnTopic is a topic's partitions in a transaction.
type TxnTopic struct {
	Topic      string  `json:"topic"`
	Partitions []int32 `json:"partitions"`
}

// Transaction is a transactional id's state at its coordinator.
type Transaction struct {
	ID                string `json:"id"`
	ProducerID        int64  `json:"producerId"`
	ProducerEpoch     int16  `json:"producerEpoch"`
	LastProducerID    int64  `json:"lastProducerId"`
	LastProducerEpoch int16  `json:"lastProducerEpoch"`
	State             string `json:"state"`
	TimeoutMs         int32  `json:"timeoutMs"`
	// Partitions are the partitions the transaction wrote to or will (and,
	// under the topic "__consumer_offsets", the group coordinator shards
	// whose groups it commits offsets to), sorted.
	Partitions []TxnTopic `json:"partitions,omitempty"`
	// StartMs is when the transaction began (its first partition or
	// group was added), UpdateMs when the record last changed; Unix
	// milliseconds of the coordinator's clock.
	StartMs  int64 `json:"startMs,omitempty"`
	UpdateMs int64 `json:"updateMs"`
	// Cause says who decided an abort: "client" (EndTxn), "timeout",
	// "fenced" (a new producer instance), "admin".
	Cause string `json:"cause,omitempty"`
	// Version is the record's version as read; 0 for one not stored yet.
	Version int64 `json:"-"`
}

// HasPartition reports whether the transaction holds topic/partition.
func (t *Transaction) HasPartition(topic string, p int32) bool {
	for _, tt := range t.Partitions {
		if tt.Topic == topic {
			return slices.Contains(tt.Partitions, p)
		}
	}
	return false
}

// AddPartition adds topic/partition to the transaction, keeping the order,
// and reports whether it was new.
func (t *Transaction) AddPartition(topic string, p int32) bool {
	i, found := slices.BinarySearchFunc(t.Partitions, topic, func(tt TxnTopic, name string) int {
		switch {
		case tt.Topic < name:
			return -1
		case tt.Topic > name:
			return 1
		}
		return 0
	})
	if !found {
		t.Partitions = slices.Insert(t.Partitions, i, TxnTopic{Topic: topic})
	}
	ps := t.Partitions[i].Partitions
	j, found := slices.BinarySearch(ps, p)
	if found {
		return false
	}
	t.Partitions[i].Partitions = slices.Insert(ps, j, p)
	return true
}

func txnKey(id string) Key { return Key{PK: pkTxnPfx + partKey(GroupShard(id)), SK: id} }

// Transactions returns the transactions of a coordinator shard, by id.
func (m *Meta) Transactions(ctx context.Context, shard int32) ([]Transaction, error) {
	items, err := m.s.Query(ctx, pkTxnPfx+partKey(shard), "")
	if err != nil {
		return nil, fmt.Errorf("metastore: transactions of shard %d: %w", shard, err)
	}
	out := make([]Transaction, 0, len(items))
	for _, it := range items {
		var t Transaction
		if err := decodeJSON(it, &t); err != nil {
			return nil, err
		}
		t.Version = it.Version
		out = append(out, t)
	}
	return out, nil
}

// Transaction returns one transactional id's state, and false if it has
// none.
func (m *Meta) Transaction(ctx context.Context, id string) (Transaction, bool, error) {
	it, err := m.s.Get(ctx, txnKey(id))
	if errors.Is(err, ErrNotFound) {
		return Transaction{}, false, nil
	}
	if err != nil {
		return Transaction{}, false, fmt.Errorf("metastore: transaction %q: %w", id, err)
	}
	var t Transaction
	if err := decodeJSON(it, &t); err != nil {
		return Transaction{}, false, err
	}
	t.Version = it.Version
	return t, true, nil
}

// PutTransaction stores t if its record is still at t.Version (0: absent)
// and its shard's assignment record at shardVersion, and returns it with
// its new version. Either condition failing is ErrFenced: another
// coordinator moved the transaction on, or owns the shard now.
func (m *Meta) PutTransaction(ctx context.Context, t Transaction, shardVersion int64) (Transaction, error) {
	cond := IfVersion(t.Version)
	if t.Version == 0 {
		cond = IfAbsent()
	}
	it := Item{Key: txnKey(t.ID), Value: encodeJSON(t)}
	if err := m.fencedByShard(ctx, GroupShard(t.ID), shardVersion, Op{Kind: OpPut, Item: it, Cond: cond}); err != nil {
		return t, fmt.Errorf("metastore: put transaction %q: %w", t.ID, err)
	}
	t.Version++ // every write adds one; a create stores 1
	return t, nil
}

// DeleteTransaction removes an expired transactional id's record under the
// same conditions as PutTransaction.
func (m *Meta) DeleteTransaction(ctx context.Context, t Transaction, shardVersion int64) error {
	op := Op{Kind: OpDelete, Item: Item{Key: txnKey(t.ID)}, Cond: IfVersion(t.Version)}
	if err := m.fencedByShard(ctx, GroupShard(t.ID), shardVersion, op); err != nil {
		return fmt.Errorf("metastore: delete transaction %q: %w", t.ID, err)
	}
	return nil
}

// fencedByShard applies op if shard's assignment record is at version
// shardVersion, in one transaction (on a store without transactions, a
// read of the shard first, which narrows but does not close the race; op's
// own condition still holds). A failed condition is ErrFenced.
func (m *Meta) fencedByShard(ctx context.Context, shard int32, shardVersion int64, op Op) error {
	err := m.s.Transact(ctx, []Op{{Kind: OpCheck, Item: Item{Key: shardKey(shard)}, Cond: IfVersion(shardVersion)}, op})
	if errors.Is(err, ErrUnsupported) {
		var cur Item
		if cur, err = m.s.Get(ctx, shardKey(shard)); err == nil && cur.Version != shardVersion {
			err = ErrConditionFailed
		} else if err == nil && op.Kind == OpPut {
			_, err = m.s.Put(ctx, op.Item, op.Cond)
		} else if err == nil {
			err = m.s.Delete(ctx, op.Item.Key, op.Cond)
		}
	}
	if errors.Is(err, ErrConditionFailed) || errors.Is(err, ErrNotFound) {
		return fmt.Errorf("%w: %w", ErrFenced, err)
	}
	return err
}

// PendingOffset is an offset a transaction committed (TxnOffsetCommit)
// that becomes the group's committed offset when the transaction commits,
// and is dropped when it aborts.
type PendingOffset struct {
	ProducerID    int64   `json:"producerId"`
	ProducerEpoch int16   `json:"producerEpoch"`
	Topic         string  `json:"topic"`
	Partition     int32   `json:"partition"`
	Offset        int64   `json:"offset"`
	LeaderEpoch   int32   `json:"leaderEpoch"`
	Metadata      string  `json:"metadata,omitempty"`
	TopicID       TopicID `json:"topicId,omitzero"`
	CommittedAt   int64   `json:"committedAt,omitempty"`
	// Version is the record's version as read (PendingOffsets).
	Version int64 `json:"-"`
}

func pendingKey(group string, pid int64, topic string, p int32) Key {
	return Key{PK: pkGroupPfx + group, SK: fmt.Sprintf("%s%020d/%s/%s", skPendingPfx, pid, topic, partKey(p))}
}

func pendingIndexKey(group string, pid int64) Key {
	return Key{PK: pkPendingIdx + partKey(GroupShard(group)), SK: fmt.Sprintf("%020d/%s", pid, group)}
}

// PutPendingOffsets stores producer pid's transactional offsets for group
// while gen is the group's current generation (ErrFenced otherwise, as
// CommitOffsets), and indexes the group under the producer in its shard,
// so the transaction's marker finds it.
func (m *Meta) PutPendingOffsets(ctx context.Context, group string, gen, pid int64, offsets []PendingOffset) error {
	for start := 0; start < len(offsets); start += MaxTransactItems - 2 {
		chunk := offsets[start:min(len(offsets), start+MaxTransactItems-2)]
		ops := []Op{
			{Kind: OpCheck, Item: Item{Key: genKey(group)}, Cond: genCond(gen)},
			{Kind: OpPut, Item: Item{Key: pendingIndexKey(group, pid), Value: []byte(group)}, Cond: Always},
		}
		for _, o := range chunk {
			o.ProducerID = pid
			ops = append(ops, Op{Kind: OpPut, Item: Item{Key: pendingKey(group, pid, o.Topic, o.Partition), Value: encodeJSON(o)}, Cond: Always})
		}
		err := m.s.Transact(ctx, ops)
		if errors.Is(err, ErrUnsupported) {
			err = m.commitWithoutTransactions(ctx, group, gen, ops[1:])
		}
		if errors.Is(err, ErrConditionFailed) {
			return fmt.Errorf("metastore: transactional offsets of %q: generation %d is not current: %w", group, gen, ErrFenced)
		}
		if err != nil {
			return fmt.Errorf("metastore: transactional offsets of %q: %w", group, err)
		}
	}
	return nil
}

// PendingOffsets returns every pending transactional offset of a group.
func (m *Meta) PendingOffsets(ctx context.Context, group string) ([]PendingOffset, error) {
	items, err := m.s.Query(ctx, pkGroupPfx+group, skPendingPfx)
	if err != nil {
		return nil, fmt.Errorf("metastore: pending offsets of %q: %w", group, err)
	}
	out := make([]PendingOffset, 0, len(items))
	for _, it := range items {
		var o PendingOffset
		if err := decodeJSON(it, &o); err != nil {
			return nil, err
		}
		o.Version = it.Version
		out = append(out, o)
	}
	return out, nil
}

// PendingGroups returns the groups of a shard holding pending offsets of
// producer pid.
func (m *Meta) PendingGroups(ctx context.Context, shard int32, pid int64) ([]string, error) {
	items, err := m.s.Query(ctx, pkPendingIdx+partKey(shard), fmt.Sprintf("%020d/", pid))
	if err != nil {
		return nil, fmt.Errorf("metastore: groups with pending offsets of producer %d: %w", pid, err)
	}
	out := make([]string, 0, len(items))
	for _, it := range items {
		out = append(out, string(it.Value))
	}
	return out, nil
}

// CompletePendingOffsets ends a producer's pending offsets of a group (as
// read by PendingOffsets): on commit each becomes the committed offset
// (stamped with generation gen), on abort it is dropped; then the group
// leaves the producer's index. Each pending record is removed only at the
// version read, in the same transaction as its commit, so a transaction's
// offsets are applied once even if two coordinators race.
func (m *Meta) CompletePendingOffsets(ctx context.Context, group string, pid int64, commit bool, gen int64, pending []PendingOffset) error {
	per := 1
	if commit {
		per = 2
	}
	for start := 0; start < len(pending); start += MaxTransactItems / per {
		chunk := pending[start:min(len(pending), start+MaxTransactItems/per)]
		var ops []Op
		for _, o := range chunk {
			ops = append(ops, Op{Kind: OpDelete, Item: Item{Key: pendingKey(group, o.ProducerID, o.Topic, o.Partition)}, Cond: IfVersion(o.Version)})
			if commit {
				off := Offset{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset, LeaderEpoch: o.LeaderEpoch,
					Metadata: o.Metadata, Generation: gen, TopicID: o.TopicID, CommittedAt: o.CommittedAt}
				ops = append(ops, Op{Kind: OpPut, Item: Item{Key: offsetKey(group, o.Topic, o.Partition), Value: encodeJSON(off)}, Cond: Always})
			}
		}
		err := m.s.Transact(ctx, ops)
		if errors.Is(err, ErrUnsupported) {
			// Offsets first: a crash between leaves the pending record,
			// applied again (to the same value) by the retry.
			err = nil
			for _, op := range ops {
				if op.Kind == OpPut {
					if _, err = m.s.Put(ctx, op.Item, op.Cond); err != nil {
						break
					}
				}
			}
			for _, op := range ops {
				if err == nil && op.Kind == OpDelete {
					err = m.s.Delete(ctx, op.Item.Key, op.Cond)
				}
			}
		}
		if errors.Is(err, ErrConditionFailed) {
			return fmt.Errorf("metastore: complete pending offsets of %q: %w", group, ErrFenced)
		}
		if err != nil {
			return fmt.Errorf("metastore: complete pending offsets of %q: %w", group, err)
		}
	}
	if err := m.s.Delete(ctx, pendingIndexKey(group, pid), Always); err != nil && !errors.Is(err, ErrNotFound) {
		return fmt.Errorf("metastore: complete pending offsets of %q: %w", group, err)
	}
	return nil
}

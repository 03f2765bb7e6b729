package metastore

import (
	"context"
	"errors"
	"fmt"
)

// GroupRecord is the part of a group's coordinator state that survives a
// coordinator move: a classic group's generation, protocol, leader and
// members with their assignments; a consumer group's (KIP-848) epochs,
// members, subscriptions, target and current assignments. What is not
// here (session deadlines, parked requests) a new coordinator restarts.
//
// It is stored as the value of the group's generation record, whose
// version fences every write for the group: each store is conditioned on
// the version the writer read or wrote last, and offset commits and
// expiry check it (CommitOffsets, ExpireOffsets take it as their
// generation). So a coordinator that lost the group can change nothing
// once the new one wrote, and the record, like the generation record it
// is, is never deleted. A record stored before the value existed (an
// empty value) reads as a classic group whose generation is the version.
type GroupRecord struct {
	// Version is the record's version (0: never stored), the fence of
	// the group's writes.
	Version int64 `json:"-"`
	// Type is "" for a classic group (or none), "consumer" for a group
	// of the consumer protocol.
	Type     string         `json:"type,omitempty"`
	Classic  *ClassicGroup  `json:"classic,omitempty"`
	Consumer *ConsumerGroup `json:"consumer,omitempty"`
	Share    *ShareGroup    `json:"share,omitempty"`
}

// GroupTypeShare is GroupRecord.Type of a share group (KIP-932).
const GroupTypeShare = "share"

// ShareGroup is a share group's membership (KIP-932): its epoch and each
// member's subscription and assignment. The records' state lives with
// the partition leaders (ShareState).
type ShareGroup struct {
	Epoch   int32         `json:"epoch"`
	Members []ShareMember `json:"members,omitempty"`
}

// ShareMember is a member of a share group.
type ShareMember struct {
	ID         string            `json:"id"`
	RackID     string            `json:"rack,omitempty"`
	ClientID   string            `json:"client,omitempty"`
	ClientHost string            `json:"host,omitempty"`
	Topics     []string          `json:"topics,omitempty"`
	Epoch      int32             `json:"epoch"`
	Assigned   []TopicPartitions `json:"assigned,omitempty"`
}

// GroupTypeConsumer is GroupRecord.Type of a consumer-protocol group.
const GroupTypeConsumer = "consumer"

// ClassicGroup is a classic group's state as of its last change of
// generation or assignment.
type ClassicGroup struct {
	// Generation only grows, also across deletions of the group.
	Generation   int32  `json:"gen"`
	ProtocolType string `json:"ptype,omitempty"`
	Protocol     string `json:"proto,omitempty"`
	Leader       string `json:"leader,omitempty"`
	// Stable says the leader's assignment was handed out: members with
	// their assignments. Otherwise the generation was formed and its
	// assignment never stored, so its members must rejoin.
	Stable  bool            `json:"stable,omitempty"`
	Members []ClassicMember `json:"members,omitempty"`
}

// ClassicMember is a member of the classic protocol, in a classic group
// or (migrating) inside a consumer group.
type ClassicMember struct {
	ID           string            `json:"id"`
	InstanceID   string            `json:"instance,omitempty"`
	ClientID     string            `json:"client,omitempty"`
	ClientHost   string            `json:"host,omitempty"`
	ProtocolType string            `json:"ptype,omitempty"`
	SessionMs    int32             `json:"session"`
	RebalanceMs  int32             `json:"rebalance"`
	Protocols    []ClassicProtocol `json:"protocols,omitempty"`
	Assignment   []byte            `json:"assignment,omitempty"`
}

// ClassicProtocol is one protocol a classic member supports.
type ClassicProtocol struct {
	Name     string `json:"name"`
	Metadata []byte `json:"metadata,omitempty"`
}

// ConsumerGroup is a consumer-protocol group (KIP-848).
type ConsumerGroup struct {
	Epoch           int32 `json:"epoch"`
	AssignmentEpoch int32 `json:"assignmentEpoch"`
	// MetadataHash hashes the subscribed topics (names, ids, partition
	// counts) as of the last target: when it changes, so does the epoch.
	MetadataHash uint64 `json:"hash,omitempty"`
	// Assignor is the assignor of the last target.
	Assignor string           `json:"assignor,omitempty"`
	Members  []ConsumerMember `json:"members,omitempty"`
}

// ConsumerMember is a member of a consumer group.
type ConsumerMember struct {
	ID                 string   `json:"id"`
	InstanceID         string   `json:"instance,omitempty"`
	RackID             string   `json:"rack,omitempty"`
	ClientID           string   `json:"client,omitempty"`
	ClientHost         string   `json:"host,omitempty"`
	RebalanceTimeoutMs int32    `json:"rebalance"`
	ServerAssignor     string   `json:"assignor,omitempty"`
	Topics             []string `json:"topics,omitempty"`
	Regex              string   `json:"regex,omitempty"`
	Epoch              int32    `json:"epoch"`
	PreviousEpoch      int32    `json:"prev"`
	// State is the reconciliation state: 0 stable, 1 unrevoked
	// partitions, 2 unreleased partitions.
	State    int8              `json:"state,omitempty"`
	Assigned []TopicPartitions `json:"assigned,omitempty"`
	Pending  []TopicPartitions `json:"pending,omitempty"`
	Target   []TopicPartitions `json:"target,omitempty"`
	// Classic is set for a member that uses the classic protocol
	// (JoinGroup, SyncGroup) inside the consumer group.
	Classic *ClassicMember `json:"classic,omitempty"`
}

// TopicPartitions is a set of partitions of one topic.
type TopicPartitions struct {
	Topic      TopicID `json:"t"`
	Partitions []int32 `json:"p"`
	// Epochs, if set, is the assignment epoch of each partition, in the
	// order of Partitions (KIP-1251: commits at an older member epoch are
	// accepted for partitions held since then).
	Epochs []int32 `json:"e,omitempty"`
}

// LoadGroup returns a group's record (Version 0 if it was never stored).
// A record of no type always has Classic set.
func (m *Meta) LoadGroup(ctx context.Context, group string) (GroupRecord, error) {
	it, err := m.s.Get(ctx, genKey(group))
	if errors.Is(err, ErrNotFound) {
		return GroupRecord{Classic: &ClassicGroup{}}, nil
	}
	if err != nil {
		return GroupRecord{}, fmt.Errorf("metastore: group %q: %w", group, err)
	}
	var r GroupRecord
	if len(it.Value) > 0 {
		if err := decodeJSON(it, &r); err != nil {
			return GroupRecord{}, err
		}
	}
	r.Version = it.Version
	if r.Classic == nil && r.Type == "" {
		r.Classic = &ClassicGroup{Generation: int32(it.Version)}
	}
	return r, nil
}

// StoreGroup writes a group's record if its version is still r.Version
// (0: never stored) and returns the new version. It fails with ErrFenced
// when another writer stored it since (the caller lost the group), and
// with ErrTooLarge when the record exceeds MaxItemBytes.
func (m *Meta) StoreGroup(ctx context.Context, group string, r GroupRecord) (int64, error) {
	cond := IfVersion(r.Version)
	if r.Version == 0 {
		cond = IfAbsent()
	}
	it, err := m.s.Put(ctx, Item{Key: genKey(group), Value: encodeJSON(r)}, cond)
	if errors.Is(err, ErrConditionFailed) {
		return 0, fmt.Errorf("metastore: store group %q: version %d is not current: %w", group, r.Version, ErrFenced)
	}
	if err != nil {
		return 0, fmt.Errorf("metastore: store group %q: %w", group, err)
	}
	return it.Version, nil
}

// GroupRecordBytes is the stored size of r, to check it against
// MaxItemBytes before a change makes it too large.
func GroupRecordBytes(r GroupRecord) int { return len(encodeJSON(r)) }

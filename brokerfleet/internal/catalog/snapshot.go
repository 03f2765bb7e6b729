package catalog

import (
	"errors"
	"slices"
	"strings"

	"github.com/stratamq/strata/brokerfleet/internal/partition"
	"github.com/stratamq/strata/brokerfleet/internal/topic"
	"github.com/stratamq/strata/pkg/metastore"
)

// Errors of partition lookups.
var (
	// ErrUnknownPartition is returned for a topic or partition this broker
	// does not know.
	ErrUnknownPartition = errors.New("catalog: unknown topic or partition")
	// ErrNotLeader is returned for a partition this broker does not lead.
	ErrNotLeader = errors.New("catalog: not the leader")
)

// Topic is one topic as the broker last read it. It is immutable once
// published; a change publishes a new Topic.
type Topic struct {
	Meta   metastore.Topic
	Config topic.Config
	// States holds one partition state per partition, by index (a state
	// missing in the metastore reads as leaderless).
	States []metastore.PartitionState
	// Parts holds the local logs, by index; nil where no replica is here.
	Parts []*partition.Partition
}

// Partition returns the state and local log of partition idx (p is nil
// when this broker has no replica), or false if there is no such
// partition.
func (t *Topic) Partition(idx int32) (metastore.PartitionState, *partition.Partition, bool) {
	if idx < 0 || int(idx) >= len(t.States) {
		return metastore.PartitionState{}, nil, false
	}
	return t.States[idx], t.Parts[idx], true
}

// Snapshot is the broker's whole view of the cluster at one reconcile.
// Everything reachable from it is immutable except the partition logs,
// which have their own locks.
type Snapshot struct {
	self    int32
	topics  map[string]*Topic
	byID    map[metastore.TopicID]*Topic
	peers   map[int32]metastore.Broker
	shards  map[int32]metastore.CoordinatorShard
	ctrl    int32
	version int64
}

func emptySnapshot(self int32) *Snapshot {
	return &Snapshot{self: self, topics: map[string]*Topic{}, byID: map[metastore.TopicID]*Topic{},
		peers: map[int32]metastore.Broker{}, shards: map[int32]metastore.CoordinatorShard{}, ctrl: -1}
}

// Self returns this broker's id.
func (s *Snapshot) Self() int32 { return s.self }

// Version returns the metastore change counter this snapshot was read at
// (or after).
func (s *Snapshot) Version() int64 { return s.version }

// Topic returns the topic called name, or nil.
func (s *Snapshot) Topic(name string) *Topic { return s.topics[name] }

// TopicByID returns the topic with id, or nil.
func (s *Snapshot) TopicByID(id metastore.TopicID) *Topic { return s.byID[id] }

// Topics returns every topic, sorted by name.
func (s *Snapshot) Topics() []*Topic {
	out := make([]*Topic, 0, len(s.topics))
	for _, t := range s.topics {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b *Topic) int { return strings.Compare(a.Meta.Name, b.Meta.Name) })
	return out
}

// NumTopics returns how many topics there are.
func (s *Snapshot) NumTopics() int { return len(s.topics) }

// Leader returns the local log of a partition this broker leads, or
// ErrUnknownPartition, or ErrNotLeader.
func (s *Snapshot) Leader(name string, idx int32) (*partition.Partition, error) {
	t := s.topics[name]
	if t == nil {
		return nil, ErrUnknownPartition
	}
	st, p, ok := t.Partition(idx)
	switch {
	case !ok:
		return nil, ErrUnknownPartition
	case st.Leader != s.self || p == nil:
		return nil, ErrNotLeader
	}
	return p, nil
}

// Led is a partition this broker leads, with the state that made it the
// leader.
type Led struct {
	Topic *Topic
	State metastore.PartitionState
	Part  *partition.Partition
}

// Led returns the partitions this broker leads (of the topics keep
// accepts; nil keeps all).
func (s *Snapshot) Led(keep func(*Topic) bool) []Led {
	var out []Led
	for _, t := range s.topics {
		if keep != nil && !keep(t) {
			continue
		}
		for i, st := range t.States {
			if st.Leader == s.self && t.Parts[i] != nil {
				out = append(out, Led{Topic: t, State: st, Part: t.Parts[i]})
			}
		}
	}
	return out
}

// Hosted returns every local partition log.
func (s *Snapshot) Hosted() []*partition.Partition {
	var out []*partition.Partition
	for _, t := range s.topics {
		for _, p := range t.Parts {
			if p != nil {
				out = append(out, p)
			}
		}
	}
	return out
}

// Peers returns the live registrations (this broker's included once its
// own is visible), by id. The map must not be modified.
func (s *Snapshot) Peers() map[int32]metastore.Broker { return s.peers }

// Live reports whether broker id is registered and live.
func (s *Snapshot) Live(id int32) bool {
	_, ok := s.peers[id]
	return ok
}

// Shards returns the coordinator shard assignments, by shard. The map must
// not be modified.
func (s *Snapshot) Shards() map[int32]metastore.CoordinatorShard { return s.shards }

// Controller returns the broker named in the controller lease, or -1.
func (s *Snapshot) Controller() int32 { return s.ctrl }

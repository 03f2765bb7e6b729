package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/stratamq/strata/brokerfleet/internal/catalog"
	"github.com/stratamq/strata/brokerfleet/internal/security"
	"github.com/stratamq/strata/pkg/metastore"
)

// Group coordination: every group belongs to one of metastore.GroupShards
// shards, and the controller assigns each shard to a live broker. A broker
// coordinates a shard's groups while the shard record names it and its
// registration lease is valid, so a frozen coordinator stops at its safe
// deadline, before the controller (a full lease later) moves its shards.

// coordinatorFor returns the broker coordinating key's shard, or the error
// to answer FindCoordinator with.
func (b *Broker) coordinatorFor(s *catalog.Snapshot, key string) (node int32, host string, port int32, code int16) {
	sh, assigned := s.Shards()[metastore.GroupShard(key)]
	if !assigned || sh.Broker < 0 {
		return -1, "", -1, kerr.CoordinatorNotAvailable.Code
	}
	if sh.Broker == b.cfg.NodeID {
		if !b.cat.LeaseValid() {
			return -1, "", -1, kerr.CoordinatorNotAvailable.Code
		}
		h, p := b.Addr()
		return b.cfg.NodeID, h, p, 0
	}
	peer, live := s.Peers()[sh.Broker]
	if !live {
		return -1, "", -1, kerr.CoordinatorNotAvailable.Code
	}
	h, p, err := security.SplitHostPort(peer.Endpoint)
	if err != nil {
		return -1, "", -1, kerr.CoordinatorNotAvailable.Code
	}
	return sh.Broker, h, p, 0
}

// CoordinatorShardsAssigned reports whether, as this broker last read the
// metastore, every coordinator shard is assigned to a live broker (a fresh
// cluster has none for its controller's first round).
func (b *Broker) CoordinatorShardsAssigned() bool {
	s := b.cat.Snapshot()
	if len(s.Shards()) < metastore.GroupShards {
		return false
	}
	for _, sh := range s.Shards() {
		if !s.Live(sh.Broker) && sh.Broker != b.cfg.NodeID {
			return false
		}
	}
	return true
}

// CoordinatorShardsSettled reports whether every shard has a live owner
// and each of the n brokers holds its share (at least GroupShards/n), as
// after the controller balanced them: a fresh cluster whose brokers start
// together moves shards once while they register.
func (b *Broker) CoordinatorShardsSettled(n int) bool {
	if !b.CoordinatorShardsAssigned() || n < 1 {
		return false
	}
	load := map[int32]int{}
	for _, sh := range b.cat.Snapshot().Shards() {
		load[sh.Broker]++
	}
	if len(load) < min(n, metastore.GroupShards) {
		return false
	}
	for _, c := range load {
		if c < metastore.GroupShards/n {
			return false
		}
	}
	return true
}

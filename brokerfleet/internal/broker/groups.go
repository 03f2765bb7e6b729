package broker

import (
	"context"
	"errors"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/stratamq/strata/brokerfleet/internal/security"
	"github.com/stratamq/strata/pkg/metastore"
)

// Group coordination: every group belongs to one of metastore.GroupShards
// shards, and the controller assigns each shard to a live broker. A broker
// coordinates a shard's groups while the shard record names it and its
// registration lease is valid, so a frozen coordinator stops at its safe
// deadline, before the controller (a full lease later) moves its shards.

// partitionExists reports whether a topic partition exists (for commits).
func (b *Broker) partitionExists(name string, p int32) bool {
	ts := b.lookup(name)
	return ts != nil && p >= 0 && int(p) < len(ts.states)
}

// applyShards records the shard assignments read from the metastore and
// hands this broker's to its coordinator.
func (b *Broker) applyShards(shards []metastore.CoordinatorShard) {
	all := make(map[int32]metastore.CoordinatorShard, len(shards))
	owned := map[int32]int64{}
	for _, s := range shards {
		all[s.Shard] = s
		if s.Broker == b.cfg.NodeID {
			owned[s.Shard] = s.Epoch
		}
	}
	b.mu.Lock()
	b.shards = all
	b.mu.Unlock()
	b.coord.SetShards(owned)
}

// coordinatorFor returns the broker coordinating key's shard, or the error
// to answer FindCoordinator with.
func (b *Broker) coordinatorFor(key string) (node int32, host string, port int32, code int16) {
	shard := metastore.GroupShard(key)
	b.mu.RLock()
	s, assigned := b.shards[shard]
	peer, live := b.peers[s.Broker]
	b.mu.RUnlock()
	if !assigned || s.Broker < 0 {
		return -1, "", -1, kerr.CoordinatorNotAvailable.Code
	}
	if s.Broker == b.cfg.NodeID {
		if !b.leaseValid() {
			return -1, "", -1, kerr.CoordinatorNotAvailable.Code
		}
		h, p := b.Addr()
		return b.cfg.NodeID, h, p, 0
	}
	if !live {
		return -1, "", -1, kerr.CoordinatorNotAvailable.Code
	}
	h, p, err := security.SplitHostPort(peer.Endpoint)
	if err != nil {
		return -1, "", -1, kerr.CoordinatorNotAvailable.Code
	}
	return s.Broker, h, p, 0
}

// assignShards gives every shard without a live coordinator to the live
// broker with the fewest, then evens out the counts (a shard that moves
// costs its groups one rebalance, so this runs only when the live brokers
// change). It reports whether anything changed.
func (c *controller) assignShards(ctx context.Context, live map[int32]bool) (bool, error) {
	b := c.b
	if len(live) == 0 {
		return false, nil
	}
	stored, err := b.meta.CoordinatorShards(ctx)
	if err != nil {
		return false, err
	}
	cur := make(map[int32]metastore.CoordinatorShard, metastore.GroupShards)
	for s := int32(0); s < metastore.GroupShards; s++ {
		cur[s] = metastore.CoordinatorShard{Shard: s, Broker: -1}
	}
	for _, s := range stored {
		cur[s.Shard] = s
	}
	ids := make([]int32, 0, len(live))
	for id := range live {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	load := map[int32][]int32{}
	var orphans []int32
	for s := int32(0); s < metastore.GroupShards; s++ {
		if br := cur[s].Broker; br >= 0 && live[br] {
			load[br] = append(load[br], s)
		} else {
			orphans = append(orphans, s)
		}
	}
	least := func() int32 {
		best := ids[0]
		for _, id := range ids[1:] {
			if len(load[id]) < len(load[best]) {
				best = id
			}
		}
		return best
	}
	most := func() int32 {
		best := ids[0]
		for _, id := range ids[1:] {
			if len(load[id]) > len(load[best]) {
				best = id
			}
		}
		return best
	}
	changed := false
	move := func(shard, to int32) error {
		if _, ok := c.lease.Valid(); !ok {
			return errLostControl
		}
		next, err := b.meta.AssignShard(ctx, cur[shard], to)
		if err != nil {
			return err
		}
		cur[shard] = next
		load[to] = append(load[to], shard)
		changed = true
		b.log.Info("group coordinator shard assigned", "shard", shard, "broker", to, "epoch", next.Epoch)
		return nil
	}
	for _, s := range orphans {
		if err := move(s, least()); err != nil {
			return changed, err
		}
	}
	for {
		hi, lo := most(), least()
		if len(load[hi])-len(load[lo]) <= 1 {
			return changed, nil
		}
		s := load[hi][len(load[hi])-1]
		load[hi] = load[hi][:len(load[hi])-1]
		if err := move(s, lo); err != nil {
			return changed, err
		}
	}
}

var errLostControl = errors.New("controller lease lost mid-round")

// handOverShards moves this broker's coordinator shards to the other live
// brokers before it stops, so groups move at once instead of a lease later.
func (b *Broker) handOverShards(ctx context.Context, live map[int32]bool) {
	b.mu.RLock()
	var mine []metastore.CoordinatorShard
	for _, s := range b.shards {
		if s.Broker == b.cfg.NodeID {
			mine = append(mine, s)
		}
	}
	load := map[int32]int{}
	for id, ok := range live {
		if ok {
			load[id] = 0
		}
	}
	for _, s := range b.shards {
		if _, ok := load[s.Broker]; ok {
			load[s.Broker]++
		}
	}
	b.mu.RUnlock()
	if len(load) == 0 {
		return
	}
	for _, s := range mine {
		to := int32(-1)
		for id, n := range load {
			if to < 0 || n < load[to] || (n == load[to] && id < to) {
				to = id
			}
		}
		if _, err := b.meta.AssignShard(ctx, s, to); err != nil {
			b.log.Warn("hand over coordinator shard", "shard", s.Shard, "err", err)
			continue
		}
		load[to]++
	}
}

// CoordinatorShardsAssigned reports whether, as this broker last read the
// metastore, every coordinator shard is assigned to a live broker (a fresh
// cluster has none for its controller's first round).
func (b *Broker) CoordinatorShardsAssigned() bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if len(b.shards) < metastore.GroupShards {
		return false
	}
	for _, s := range b.shards {
		if _, live := b.peers[s.Broker]; !live && s.Broker != b.cfg.NodeID {
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
	b.mu.RLock()
	defer b.mu.RUnlock()
	load := map[int32]int{}
	for _, s := range b.shards {
		load[s.Broker]++
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

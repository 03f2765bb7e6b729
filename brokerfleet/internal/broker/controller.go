package broker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/stratamq/strata/pkg/metastore"
)

// The controller is whichever broker holds the controller lease. It
// watches the broker registrations and, for a broker that stopped
// heartbeating for a full lease (on the controller's own clock) or came
// back as a new incarnation, fences it and moves leadership of its
// partitions to an in-sync replica. Everything it changes is a
// compare-and-set on the partition state, so two controllers (an old one
// past its deadline and a new one) cannot both apply a change from the
// same read.
type controller struct {
	b     *Broker
	lease *metastore.Lease
	// Per broker: the registration version last seen and when it was
	// first seen (local monotonic time), and the incarnation.
	seen map[int32]observed
	// The brokers judged live (and restarted) in the last round that
	// scanned partitions; partitions are only scanned again when this
	// changes, so an idle cluster costs no per-topic reads.
	lastLive, lastRestarted map[int32]bool
	// deadSince is when each not-live broker was first judged so;
	// reassigned marks those whose replicas were moved to live brokers.
	deadSince  map[int32]time.Time
	reassigned map[int32]bool
	// restarted marks brokers seen with a new incarnation, until a
	// partition scan has taken them out of the ISRs they held.
	restarted map[int32]bool
	// lastBalance is when leadership was last checked against the
	// preferred replicas, lastPlacement when replica placement was.
	lastBalance, lastPlacement time.Time
	// placementSettled: the last placement pass found nothing to move, at
	// change counter placementVersion with placementLive live.
	placementSettled bool
	placementVersion int64
	placementLive    map[int32]bool
}

type observed struct {
	version     int64
	at          time.Time
	incarnation string
}

func (b *Broker) runController() {
	defer b.wg.Done()
	lease, err := metastore.NewLease(b.meta.Store(), metastore.Key{PK: "leases", SK: "controller"},
		fmt.Sprintf("%d/%s", b.cfg.NodeID, b.cfg.Incarnation), b.cfg.Lease)
	if err != nil {
		b.log.Error("controller lease", "err", err)
		return
	}
	c := &controller{b: b, lease: lease, seen: map[int32]observed{}, deadSince: map[int32]time.Time{}, reassigned: map[int32]bool{}, restarted: map[int32]bool{}, lastBalance: time.Now(), lastPlacement: time.Now()}
	// The lease is renewed every third of a lease (one write); the
	// registrations are read twice as often, which is what bounds how
	// soon after a broker's last heartbeat it can be declared dead.
	interval := b.cfg.Lease.Duration / 6
	// The first round runs at once, so a fresh cluster has a controller
	// (and coordinator shards for consumer groups) without waiting.
	t := time.NewTimer(0)
	defer t.Stop()
	wasController, held := false, false
	for round := 0; ; round++ {
		select {
		case <-b.ctx.Done():
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_ = lease.Release(ctx)
			cancel()
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(b.ctx, 2*interval)
		if round%2 == 0 {
			st, err := lease.Tick(ctx)
			held = err == nil && st.Held
		} else {
			held = lease.StillValid()
		}
		if held && !wasController {
			epoch, _ := lease.Valid()
			b.log.Info("became controller", "epoch", epoch)
			c.lastLive, c.lastRestarted = nil, nil
		}
		// Every broker watches the registrations, so a new controller
		// already knows how long each has been frozen and need not watch
		// for a full lease first.
		if err := c.duties(ctx, held); err != nil && b.ctx.Err() == nil {
			b.log.Warn("controller", "err", err)
		}
		wasController = held
		b.metrics.setController(held)
		cancel()
		t.Reset(interval)
	}
}

// duties runs one round: judge liveness and, as controller, fence the
// dead and elect leaders.
func (c *controller) duties(ctx context.Context, isController bool) error {
	b := c.b
	brokers, err := b.meta.Brokers(ctx)
	if err != nil {
		return err
	}
	live := map[int32]bool{}
	now := time.Now()
	for _, br := range brokers {
		prev, known := c.seen[br.ID]
		if known && prev.incarnation != "" && prev.incarnation != br.Incarnation {
			c.restarted[br.ID] = true
		}
		if !known || prev.version != br.Version {
			c.seen[br.ID] = observed{version: br.Version, at: now, incarnation: br.Incarnation}
			prev = c.seen[br.ID]
		}
		if !br.Live {
			continue
		}
		if now.Sub(prev.at) < b.cfg.Lease.Duration {
			live[br.ID] = true
			continue
		}
		if !isController {
			continue
		}
		// Frozen for a full lease: it has stopped acting. Fence it, so a
		// paused process that wakes up must re-register (new epoch) and
		// re-read its partitions before it may lead again.
		if err := b.meta.FenceBroker(ctx, br.ID, br.Version); err != nil && !errors.Is(err, metastore.ErrConditionFailed) {
			return err
		}
		b.log.Warn("broker declared dead", "broker", br.ID, "incarnation", br.Incarnation)
	}
	// A restart counts until a scan has applied it everywhere.
	restarted := maps.Clone(c.restarted)
	racks := map[int32]string{}
	for _, br := range brokers {
		racks[br.ID] = br.Rack
		if live[br.ID] {
			delete(c.deadSince, br.ID)
			delete(c.reassigned, br.ID)
		} else if _, ok := c.deadSince[br.ID]; !ok {
			c.deadSince[br.ID] = now
		}
	}
	due := map[int32]bool{} // dead long enough for their replicas to move
	for id, since := range c.deadSince {
		if now.Sub(since) >= b.cfg.ReassignAfter && !c.reassigned[id] {
			due[id] = true
		}
	}
	if !isController || !c.lease.StillValid() {
		clear(c.restarted) // only the controller acts on restarts
		return nil
	}
	if iv := b.cfg.LeaderRebalanceInterval; iv > 0 && now.Sub(c.lastBalance) >= iv {
		c.lastBalance = now
		if err := c.balanceLeaders(ctx, live, restarted); err != nil {
			b.log.Warn("balance leaders", "err", err)
		}
	}
	if iv := b.cfg.ReplicaBalanceInterval; iv > 0 && now.Sub(c.lastPlacement) >= iv && c.lastLive != nil {
		c.lastPlacement = now
		if err := c.balanceReplicas(ctx, live, restarted); err != nil {
			b.log.Warn("balance replicas", "err", err)
		}
	}
	if len(due) == 0 && c.lastLive != nil && maps.Equal(live, c.lastLive) && maps.Equal(restarted, c.lastRestarted) {
		return nil // nothing changed since the last scan
	}
	topics, err := b.meta.Topics(ctx)
	if err != nil {
		return err
	}
	changed, retry := false, false
	for _, t := range topics {
		states, err := b.meta.Partitions(ctx, t.ID)
		if err != nil {
			return err
		}
		cfg, err := b.defaults.Resolve(t.Configs)
		if err != nil {
			continue
		}
		for _, st := range states {
			next, ok := st.Elect(live, restarted, cfg.UncleanElection)
			if moved, ok2 := c.reassign(next, live, racks); ok2 {
				next, ok = moved, true
			}
			if !ok {
				continue
			}
			if _, ok := c.lease.Valid(); !ok {
				return nil // lost the lease mid-round: act no further
			}
			if _, err := b.meta.UpdatePartition(ctx, next); err != nil {
				if errors.Is(err, metastore.ErrConditionFailed) || errors.Is(err, metastore.ErrFenced) {
					retry = true // changed meanwhile: scan again next round
					continue
				}
				return err
			}
			changed = true
			b.log.Info("leader elected", "topic", t.Name, "partition", st.Partition,
				"leader", next.Leader, "leaderEpoch", next.LeaderEpoch, "isr", next.ISR)
		}
	}
	moved, err := c.assignShards(ctx, live)
	switch {
	case errors.Is(err, errLostControl):
		return nil
	case errors.Is(err, metastore.ErrConditionFailed):
		retry = true // a shard changed meanwhile: look again next round
	case err != nil:
		return err
	}
	changed = changed || moved
	if !retry {
		c.lastLive, c.lastRestarted = live, restarted
		for id := range restarted {
			delete(c.restarted, id)
		}
		for id := range due {
			c.reassigned[id] = true
		}
	}
	if changed {
		return b.reconcile(ctx)
	}
	return nil
}

// reassign replaces the replicas of brokers dead for longer than
// ReassignAfter with live brokers that have none, preferring racks the
// partition does not use yet. The newcomer starts empty, catches up from
// the leader and joins the ISR like any follower.
func (c *controller) reassign(st metastore.PartitionState, live map[int32]bool, racks map[int32]string) (metastore.PartitionState, bool) {
	if st.Reassigning() {
		// A reassignment in progress is for its requester to finish or
		// cancel (a dead newcomer never joins the ISR, so it never ends).
		return st, false
	}
	now := time.Now()
	next := st
	changed := false
	for _, r := range st.Replicas {
		since, dead := c.deadSince[r]
		if !dead || now.Sub(since) < c.b.cfg.ReassignAfter || r == next.Leader {
			continue
		}
		used := map[string]bool{}
		for _, o := range next.Replicas {
			if o != r {
				used[racks[o]] = true
			}
		}
		best := int32(-1)
		for id := range live {
			if slices.Contains(next.Replicas, id) {
				continue
			}
			if best < 0 || (!used[racks[id]] && used[racks[best]]) || (used[racks[id]] == used[racks[best]] && id < best) {
				best = id
			}
		}
		if best < 0 {
			continue // no spare broker: the partition runs with fewer replicas
		}
		next = next.ReplaceReplica(r, best)
		changed = true
		c.b.log.Info("replica reassigned", "partition", st.Partition, "from", r, "to", best)
	}
	return next, changed
}

// balanceLeaderThreshold is the share of a broker's preferred partitions it
// may fail to lead before leadership moves back (Kafka's
// leader.imbalance.per.broker.percentage, 10).
const balanceLeaderThreshold = 0.10

// balanceLeaders moves leadership back to preferred replicas (the first of
// each replica list) for every broker that leads less than 90% of the
// partitions it is preferred for, where it is live, not restarted and in
// sync: after failovers and restarts leadership piles up on the brokers
// that stayed.
func (c *controller) balanceLeaders(ctx context.Context, live, restarted map[int32]bool) error {
	b := c.b
	topics, err := b.meta.Topics(ctx)
	if err != nil {
		return err
	}
	draining, err := b.draining(ctx)
	if err != nil {
		return err
	}
	type move struct {
		st   metastore.PartitionState
		name string
	}
	preferred := map[int32]int{}
	var candidates []move
	for _, t := range topics {
		states, err := b.meta.Partitions(ctx, t.ID)
		if err != nil {
			return err
		}
		for _, st := range states {
			if len(st.Replicas) == 0 {
				continue
			}
			pref := st.Replicas[0]
			preferred[pref]++
			if st.Leader != pref && live[pref] && !restarted[pref] && !draining[pref] && slices.Contains(st.ISR, pref) {
				candidates = append(candidates, move{st, t.Name})
			}
		}
	}
	notLeading := map[int32]int{}
	for _, m := range candidates {
		notLeading[m.st.Replicas[0]]++
	}
	moved := false
	for _, m := range candidates {
		pref := m.st.Replicas[0]
		if float64(notLeading[pref]) <= balanceLeaderThreshold*float64(preferred[pref]) {
			continue
		}
		if _, ok := c.lease.Valid(); !ok {
			return nil
		}
		next := m.st.MoveLeader(pref)
		if _, err := b.meta.UpdatePartition(ctx, next); err != nil {
			if errors.Is(err, metastore.ErrConditionFailed) || errors.Is(err, metastore.ErrFenced) {
				continue // changed meanwhile: the next check decides again
			}
			return err
		}
		moved = true
		b.log.Info("leadership back to the preferred replica", "topic", m.name, "partition", m.st.Partition, "leader", pref, "leaderEpoch", next.LeaderEpoch)
	}
	if moved {
		return b.reconcile(ctx)
	}
	return nil
}

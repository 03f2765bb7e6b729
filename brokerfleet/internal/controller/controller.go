package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"time"

	"github.com/stratamq/strata/brokerfleet/internal/topic"
	"github.com/stratamq/strata/pkg/clock"
	"github.com/stratamq/strata/pkg/metastore"
)

// Options configures a Controller.
type Options struct {
	// Meta is where the controller reads and writes. Required.
	Meta *metastore.Meta
	// NodeID and Incarnation name this broker in the controller lease.
	NodeID      int32
	Incarnation string
	// Lease is the controller lease's timing; its Duration is also how long
	// a broker's registration may stand still before it counts as frozen.
	Lease metastore.LeaseOptions
	// Defaults resolves topic configs (unclean.leader.election.enable).
	Defaults topic.Defaults
	// ReassignAfter is how long a broker must be dead before its replicas
	// move to other live brokers.
	ReassignAfter time.Duration
	// LeaderRebalanceInterval is how often leadership moves back to
	// preferred replicas (PlanLeaderBalance); 0 turns it off.
	LeaderRebalanceInterval time.Duration
	// ReplicaBalanceInterval is how often replica placement is checked
	// (PlanPlacement); 0 turns it off.
	ReplicaBalanceInterval time.Duration
	// MaxReassignments bounds the reassignments in progress at once that
	// the controller starts.
	MaxReassignments int
	// Changed runs after a round that changed partition states or shards,
	// so the broker re-reads its view at once.
	Changed func(ctx context.Context) error
	// Role runs after every round with whether this broker held the
	// controller lease.
	Role func(isController bool)
	// Clock drives the rounds and liveness; nil means the real clock.
	Clock clock.Clock
	// Logger receives operational logs; nil means slog.Default().
	Logger *slog.Logger
}

// Controller runs the controller duties on one broker: every broker runs
// one, and the one holding the controller lease acts.
type Controller struct {
	opts  Options
	meta  *metastore.Meta
	log   *slog.Logger
	clock clock.Clock
	lease *metastore.Lease
	live  *Liveness

	// The brokers judged live (and restarted) in the last round that
	// scanned partitions; partitions are only scanned again when this
	// changes, so an idle cluster costs no per-topic reads.
	lastLive, lastRestarted map[int32]bool
	// reassigned marks dead brokers whose replicas were moved.
	reassigned map[int32]bool
	// lastBalance is when leadership was last checked against the
	// preferred replicas, lastPlacement when replica placement was.
	lastBalance, lastPlacement time.Time
	// placementSettled: the last placement pass found nothing to move, at
	// change counter placementVersion with placementLive live.
	placementSettled bool
	placementVersion int64
	placementLive    map[int32]bool
}

// New returns a controller; Run runs it.
func New(opts Options) (*Controller, error) {
	if opts.Meta == nil {
		return nil, errors.New("controller: Meta is required")
	}
	opts.Clock = clock.Or(opts.Clock)
	if opts.Lease.Clock == nil {
		opts.Lease.Clock = opts.Clock
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MaxReassignments < 1 {
		opts.MaxReassignments = 1
	}
	lease, err := opts.Meta.ControllerLease(opts.NodeID, opts.Incarnation, opts.Lease)
	if err != nil {
		return nil, fmt.Errorf("controller lease: %w", err)
	}
	now := opts.Clock.Now()
	return &Controller{
		opts: opts, meta: opts.Meta, log: opts.Logger, clock: opts.Clock, lease: lease,
		live: NewLiveness(opts.Lease.Duration), reassigned: map[int32]bool{},
		lastBalance: now, lastPlacement: now,
	}, nil
}

// Run runs rounds until ctx ends, then releases the controller lease. The
// lease is renewed every third of a lease (one write); the registrations
// are read twice as often, which is what bounds how soon after a broker's
// last heartbeat it can be declared dead. The first round runs at once, so
// a fresh cluster has a controller (and coordinator shards) at once.
func (c *Controller) Run(ctx context.Context) {
	interval := c.opts.Lease.Duration / 6
	t := c.clock.NewTimer(0)
	defer t.Stop()
	wasController := false
	for round := 0; ; round++ {
		select {
		case <-ctx.Done():
			rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			_ = c.lease.Release(rctx)
			cancel()
			return
		case <-t.C():
		}
		rctx, cancel := context.WithTimeout(ctx, 2*interval)
		var held bool
		if round%2 == 0 {
			st, err := c.lease.Tick(rctx)
			held = err == nil && st.Held
		} else {
			held = c.lease.StillValid()
		}
		if held && !wasController {
			epoch, _ := c.lease.Valid()
			c.log.Info("became controller", "epoch", epoch)
			c.lastLive, c.lastRestarted = nil, nil
			// Every broker reports the controller in Metadata: tell them.
			if err := c.meta.NotifyChange(rctx); err != nil {
				c.log.Warn("announce the new controller", "err", err)
			}
		}
		if err := c.Round(rctx, held); err != nil && ctx.Err() == nil {
			c.log.Warn("controller", "err", err)
		}
		wasController = held
		if c.opts.Role != nil {
			c.opts.Role(held)
		}
		cancel()
		t.Reset(interval)
	}
}

// valid reports whether this broker may still act as the controller.
func (c *Controller) valid() bool { return c.lease.StillValid() }

// Round runs one round: judge liveness and, as controller, fence the
// frozen, elect leaders, reassign, balance and assign shards.
func (c *Controller) Round(ctx context.Context, isController bool) error {
	brokers, err := c.meta.Brokers(ctx)
	if err != nil {
		return err
	}
	now := c.clock.Now()
	v := c.live.Observe(brokers, now)
	if !isController || !c.valid() {
		c.live.Applied(v) // only the controller acts on restarts
		return nil
	}
	for _, br := range v.Frozen {
		// Frozen for a full lease: it has stopped acting. Fence it, so a
		// paused process that wakes up must re-register (new epoch) and
		// re-read its partitions before it may lead again.
		if err := c.meta.FenceBroker(ctx, br.ID, br.Version); err != nil && !errors.Is(err, metastore.ErrConditionFailed) {
			return err
		}
		c.log.Warn("broker declared dead", "broker", br.ID, "incarnation", br.Incarnation)
	}
	for id := range v.Live {
		delete(c.reassigned, id)
	}
	due := map[int32]bool{} // dead long enough for their replicas to move
	for id, dead := range v.DeadFor {
		if dead >= c.opts.ReassignAfter && !c.reassigned[id] {
			due[id] = true
		}
	}
	if iv := c.opts.LeaderRebalanceInterval; iv > 0 && now.Sub(c.lastBalance) >= iv {
		c.lastBalance = now
		if err := c.balanceLeaders(ctx, v); err != nil {
			c.log.Warn("balance leaders", "err", err)
		}
	}
	if iv := c.opts.ReplicaBalanceInterval; iv > 0 && now.Sub(c.lastPlacement) >= iv && c.lastLive != nil {
		c.lastPlacement = now
		if err := c.balanceReplicas(ctx, v, brokers); err != nil {
			c.log.Warn("balance replicas", "err", err)
		}
	}
	if len(due) == 0 && c.lastLive != nil && maps.Equal(v.Live, c.lastLive) && maps.Equal(v.Restarted, c.lastRestarted) {
		return nil // nothing changed since the last scan
	}
	changed, retry, err := c.electAll(ctx, v)
	if err != nil || !c.valid() {
		return err
	}
	moved, err := c.assignShards(ctx, v.Live)
	switch {
	case errors.Is(err, metastore.ErrConditionFailed):
		retry = true // a shard changed meanwhile: look again next round
	case err != nil:
		return err
	}
	changed = changed || moved
	if !retry {
		c.lastLive, c.lastRestarted = v.Live, v.Restarted
		c.live.Applied(v)
		for id := range due {
			c.reassigned[id] = true
		}
	}
	if changed && c.opts.Changed != nil {
		return c.opts.Changed(ctx)
	}
	return nil
}

// electAll scans every partition: it elects leaders of partitions whose
// leader is gone (or restarted) and moves replicas off brokers dead too
// long. retry reports writes that lost a race (scan again next round).
func (c *Controller) electAll(ctx context.Context, v View) (changed, retry bool, err error) {
	topics, err := c.meta.Topics(ctx)
	if err != nil {
		return false, false, err
	}
	for _, t := range topics {
		states, err := c.meta.Partitions(ctx, t.ID)
		if err != nil {
			return changed, retry, err
		}
		cfg, err := c.opts.Defaults.Resolve(t.Configs)
		if err != nil {
			continue
		}
		for _, st := range states {
			next, ok := st.Elect(v.Live, v.Restarted, cfg.UncleanElection)
			if moved, ok2 := ReassignDead(next, v, c.opts.ReassignAfter); ok2 {
				next, ok = moved, true
				c.log.Info("replicas of a dead broker reassigned", "topic", t.Name, "partition", st.Partition, "from", st.Replicas, "to", next.Replicas)
			}
			if !ok {
				continue
			}
			if !c.valid() {
				return changed, retry, nil // lost the lease mid-round: act no further
			}
			if _, err := c.meta.UpdatePartition(ctx, next); err != nil {
				if errors.Is(err, metastore.ErrConditionFailed) || errors.Is(err, metastore.ErrFenced) {
					retry = true // changed meanwhile: scan again next round
					continue
				}
				return changed, retry, err
			}
			changed = true
			c.log.Info("leader elected", "topic", t.Name, "partition", st.Partition,
				"leader", next.Leader, "leaderEpoch", next.LeaderEpoch, "isr", next.ISR)
		}
	}
	return changed, retry, nil
}

// assignShards writes PlanShards' moves; it reports whether anything moved.
func (c *Controller) assignShards(ctx context.Context, live map[int32]bool) (bool, error) {
	stored, err := c.meta.CoordinatorShards(ctx)
	if err != nil {
		return false, err
	}
	changed := false
	for _, m := range PlanShards(stored, live) {
		if !c.valid() {
			return changed, nil
		}
		next, err := c.meta.AssignShard(ctx, m.Shard, m.To)
		if err != nil {
			return changed, err
		}
		changed = true
		c.log.Info("group coordinator shard assigned", "shard", m.Shard.Shard, "broker", m.To, "epoch", next.Epoch)
	}
	return changed, nil
}

// parts reads every partition state with its topic's name.
func (c *Controller) parts(ctx context.Context) ([]Part, error) {
	topics, err := c.meta.Topics(ctx)
	if err != nil {
		return nil, err
	}
	var out []Part
	for _, t := range topics {
		states, err := c.meta.Partitions(ctx, t.ID)
		if err != nil {
			return nil, err
		}
		for _, st := range states {
			out = append(out, Part{Name: t.Name, State: st})
		}
	}
	return out, nil
}

// balanceLeaders writes PlanLeaderBalance's moves.
func (c *Controller) balanceLeaders(ctx context.Context, v View) error {
	parts, err := c.parts(ctx)
	if err != nil {
		return err
	}
	draining, err := Draining(ctx, c.meta)
	if err != nil {
		return err
	}
	moved := false
	for _, m := range PlanLeaderBalance(parts, v.Live, v.Restarted, draining) {
		if !c.valid() {
			return nil
		}
		if _, err := c.meta.UpdatePartition(ctx, m.State); err != nil {
			if errors.Is(err, metastore.ErrConditionFailed) || errors.Is(err, metastore.ErrFenced) {
				continue // changed meanwhile: the next check decides again
			}
			return err
		}
		moved = true
		c.log.Info("leadership back to the preferred replica", "topic", m.Name, "partition", m.State.Partition, "leader", m.State.Leader, "leaderEpoch", m.State.LeaderEpoch)
	}
	if moved && c.opts.Changed != nil {
		return c.opts.Changed(ctx)
	}
	return nil
}

// balanceReplicas starts PlanPlacement's reassignments (each throttled by
// its leader). Nothing is read past the change counter while no metadata
// changed since a pass that found nothing to move.
func (c *Controller) balanceReplicas(ctx context.Context, v View, brokers []metastore.Broker) error {
	version, err := c.meta.ChangeVersion(ctx)
	if err != nil {
		return err
	}
	if c.placementSettled && version == c.placementVersion && maps.Equal(v.Live, c.placementLive) {
		return nil
	}
	c.placementSettled = false
	draining, err := Draining(ctx, c.meta)
	if err != nil {
		return err
	}
	registered := map[int32]bool{}
	eligible := map[int32]bool{}
	for _, br := range brokers {
		registered[br.ID] = true
		if v.Live[br.ID] && !v.Restarted[br.ID] && !draining[br.ID] {
			eligible[br.ID] = true
		}
	}
	parts, err := c.parts(ctx)
	if err != nil {
		return err
	}
	moves, settled, stuck := PlanPlacement(Placement{Parts: parts, Racks: v.Racks, Eligible: eligible, Draining: draining, MaxMoves: c.opts.MaxReassignments})
	for _, p := range stuck {
		c.log.Warn("cannot drain: no broker can take the replica", "topic", p.Name, "partition", p.State.Partition, "replicas", p.State.Replicas)
	}
	if settled {
		c.placementSettled, c.placementVersion, c.placementLive = true, version, v.Live
	}
	started := 0
	for _, m := range moves {
		if !c.valid() {
			return nil
		}
		next, err := m.Part.State.StartReassignment(m.Target, func(id int32) bool { return registered[id] })
		if err != nil {
			c.log.Warn("plan reassignment", "topic", m.Part.Name, "partition", m.Part.State.Partition, "err", err)
			continue
		}
		if _, err := c.meta.UpdatePartition(ctx, next); err != nil {
			if errors.Is(err, metastore.ErrConditionFailed) || errors.Is(err, metastore.ErrFenced) {
				continue // changed meanwhile: the next pass decides again
			}
			return err
		}
		started++
		c.log.Info("replica move started", "topic", m.Part.Name, "partition", m.Part.State.Partition,
			"from", m.Part.State.Replicas, "to", m.Target, "draining", draining[firstRemoved(m.Part.State.Replicas, m.Target)])
	}
	if started > 0 && c.opts.Changed != nil {
		return c.opts.Changed(ctx)
	}
	return nil
}

// HandOver moves leadership of the partitions self leads (in states) and
// its coordinator shards to other live brokers, for a broker about to
// stop. Errors are logged: the controller takes over a lease later anyway.
func HandOver(ctx context.Context, meta *metastore.Meta, log *slog.Logger, self int32, states []metastore.PartitionState, shards map[int32]metastore.CoordinatorShard, live map[int32]bool) {
	raced := 0
	for _, m := range PlanHandOver(states, self, live) {
		_, err := meta.UpdatePartition(ctx, m)
		switch {
		case errors.Is(err, metastore.ErrConditionFailed) || errors.Is(err, metastore.ErrFenced):
			raced++ // changed meanwhile (an election, an ISR change): nothing to hand over
		case err != nil:
			log.Warn("hand over leadership", "partition", m.Partition, "err", err)
		}
	}
	if raced > 0 {
		log.Info("hand over leadership: partitions changed meanwhile, left as they are", "partitions", raced)
	}
	for _, m := range PlanShardHandOver(shards, self, live) {
		if _, err := meta.AssignShard(ctx, m.Shard, m.To); err != nil {
			log.Warn("hand over coordinator shard", "shard", m.Shard.Shard, "err", err)
		}
	}
}

// Place assigns replicas to new partitions [from, to) over the brokers
// registered now (PlaceReplicas), for CreateTopics and CreatePartitions.
func Place(ctx context.Context, meta *metastore.Meta, from, to int32, rf int16) ([]metastore.PartitionState, error) {
	brokers, err := meta.Brokers(ctx)
	if err != nil {
		return nil, err
	}
	draining, err := Draining(ctx, meta)
	if err != nil {
		return nil, err
	}
	return PlaceReplicas(brokers, draining, from, to, rf)
}

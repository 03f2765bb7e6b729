package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/stratamq/strata/brokerfleet/internal/catalog"
	"github.com/stratamq/strata/brokerfleet/internal/controller"
	"github.com/stratamq/strata/brokerfleet/internal/partition"
	"github.com/stratamq/strata/brokerfleet/internal/security"
	"github.com/stratamq/strata/brokerfleet/internal/tier"
	"github.com/stratamq/strata/brokerfleet/internal/topic"
	"github.com/stratamq/strata/pkg/clock"
	"github.com/stratamq/strata/pkg/metastore"
)

// Errors of topic administration, mapped to Kafka codes in errors.go.
var (
	errInvalidPartitions  = errors.New("invalid partition count")
	errInvalidReplication = errors.New("invalid replication factor")
	errInvalidRequest     = errors.New("invalid request")
	errTopicExists        = errors.New("topic already exists")
	errUnknownTopic       = errors.New("unknown topic")
	errNotLeader          = errors.New("not the leader")
)

// admin makes topic and broker-config changes: metastore writes, each
// followed by a reconcile, so the answering broker's view shows the change
// when the request is answered.
type admin struct {
	cfg      *Config
	ctx      context.Context
	log      *slog.Logger
	meta     *metastore.Meta
	cat      *catalog.Catalog
	defaults topic.Defaults
	tier     *tier.Manager
	clock    clock.Clock
}

// sync makes the metadata changes this broker just made visible on every
// live broker before the client is answered (read-your-writes: kadm,
// Terraform providers and operators read back what they wrote, from any
// broker). It asks for a sync at the current change version and waits
// until every live broker acknowledged applying it, at most syncWait; a
// broker that cannot apply it in time (cut off from the metastore) does
// not hold the answer back longer. Costs, per change: one request and one
// acknowledgement per broker; nothing in steady state.
func (a *admin) sync(ctx context.Context) {
	v, err := a.meta.ChangeVersion(ctx)
	if err == nil {
		err = a.meta.RequestSync(ctx, v)
	}
	if err != nil {
		a.log.Warn("read-your-writes: request sync", "err", err)
		return
	}
	wait := syncWait(a.cfg.WatchInterval)
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	t := a.clock.NewTicker(max(a.cfg.WatchInterval/10, 5*time.Millisecond))
	defer t.Stop()
	for {
		acks, err := a.meta.SyncAcks(ctx)
		behind := []int32{}
		if err == nil {
			for id := range a.cat.Snapshot().Peers() {
				if id != a.cfg.NodeID && acks[id] < v {
					behind = append(behind, id)
				}
			}
			if len(behind) == 0 {
				return
			}
		}
		select {
		case <-ctx.Done():
			a.log.Warn("read-your-writes: brokers did not apply a metadata change in time", "version", v, "brokers", behind, "waited", wait, "err", err)
			return
		case <-t.C():
		}
	}
}

// syncIfAny runs admin.sync when any of n answered items succeeded (code
// 0 from code(i)).
func syncIfAny(b *Broker, cc *clientConn, n int, code func(i int) int16) {
	for i := range n {
		if code(i) == 0 {
			b.admin.sync(cc.ctx)
			return
		}
	}
}

// syncWait bounds how long a metadata change waits for the other brokers:
// two polls of theirs and a margin.
func syncWait(watch time.Duration) time.Duration { return 2*watch + time.Second }

// createApplyWait bounds how long a topic's creation waits for this
// broker to open its partitions before it answers.
const createApplyWait = 5 * time.Second

// updateRetries bounds read-modify-write retries when another writer
// changed a topic record between our read and our conditional write.
const updateRetries = 5

// createTopic validates and (unless validateOnly) creates a topic in the
// metastore, then opens its partitions here.
func (a *admin) createTopic(ctx context.Context, name string, partitions int32, rf int16, configs map[string]string, validateOnly bool) (*catalog.Topic, error) {
	if err := topic.ValidateName(name); err != nil {
		return nil, err
	}
	if partitions == -1 {
		partitions = a.cfg.DefaultPartitions
	}
	if partitions <= 0 {
		return nil, fmt.Errorf("%w: %d partitions; must be at least 1", errInvalidPartitions, partitions)
	}
	if partitions > maxPartitionsPerTopic {
		return nil, fmt.Errorf("%w: %d partitions; at most %d per topic", errInvalidPartitions, partitions, maxPartitionsPerTopic)
	}
	if rf == -1 {
		rf = a.cfg.DefaultReplicationFactor
	}
	if rf < 1 {
		return nil, fmt.Errorf("%w: %d; must be at least 1", errInvalidReplication, rf)
	}
	cfg, err := a.defaults.Resolve(configs)
	if err != nil {
		return nil, err
	}
	if err := a.checkTierConfig(cfg); err != nil {
		return nil, err
	}
	if other := a.collidingTopic(name); other != "" {
		return nil, fmt.Errorf("create topic %q: collides with %q ('.' and '_' are the same in metric names): %w", name, other, errTopicExists)
	}
	t := metastore.Topic{Name: name, ID: metastore.NewTopicID(), Partitions: partitions, ReplicationFactor: rf, Configs: configs}
	if validateOnly {
		if a.cat.Snapshot().Topic(name) != nil {
			return nil, fmt.Errorf("create topic %q: %w", name, errTopicExists)
		}
		return &catalog.Topic{Meta: t, Config: cfg}, nil
	}
	states, err := controller.Place(ctx, a.meta, 0, partitions, rf)
	if err != nil {
		return nil, err
	}
	if _, err := a.meta.CreateTopic(ctx, t, states); err != nil {
		if errors.Is(err, metastore.ErrConditionFailed) {
			return nil, fmt.Errorf("create topic %q: %w", name, errTopicExists)
		}
		return nil, err
	}
	a.log.Info("topic created", "topic", name, "id", t.ID.String(), "partitions", partitions)
	// Apply it here, so this broker answers for it at once; but the topic
	// exists now, and opening thousands of partition logs can take longer
	// than a client waits for its answer (it would retry into
	// TOPIC_ALREADY_EXISTS). As in Kafka, success means created: after
	// createApplyWait the answer goes without the local apply, which goes
	// on (and the watch applies the topic in any case).
	applied := make(chan error, 1)
	go func() {
		actx, cancel := context.WithTimeout(a.ctx, metaTimeout) // the broker's: it outlives the answer
		defer cancel()
		applied <- a.cat.Reconcile(actx)
	}()
	timer := a.clock.NewTimer(createApplyWait)
	defer timer.Stop()
	select {
	case err := <-applied:
		if err != nil {
			return nil, err
		}
	case <-timer.C():
		a.log.Info("topic created; its partitions are still being opened", "topic", name)
		return &catalog.Topic{Meta: t, Config: cfg}, nil // no States: not served yet
	}
	ts := a.cat.Snapshot().Topic(name)
	if ts == nil || ts.Meta.ID != t.ID {
		return nil, fmt.Errorf("create topic %q: deleted again at once: %w", name, errUnknownTopic)
	}
	return ts, nil
}

func (a *admin) collidingTopic(name string) string {
	key := topic.CollisionKey(name)
	for _, t := range a.cat.Snapshot().Topics() {
		if other := t.Meta.Name; other != name && topic.CollisionKey(other) == key {
			return other
		}
	}
	return ""
}

// updateTopic re-reads a topic, applies edit and writes it back, retrying
// when another writer got there first.
func (a *admin) updateTopic(ctx context.Context, name string, edit func(*metastore.Topic) ([]metastore.PartitionState, error), validateOnly bool) error {
	for attempt := 0; ; attempt++ {
		t, err := a.meta.Topic(ctx, name)
		if errors.Is(err, metastore.ErrNotFound) {
			return fmt.Errorf("topic %q: %w", name, errUnknownTopic)
		}
		if err != nil {
			return err
		}
		newParts, err := edit(&t)
		if err != nil || validateOnly {
			return err
		}
		_, err = a.meta.UpdateTopic(ctx, t, newParts)
		if errors.Is(err, metastore.ErrConditionFailed) && attempt < updateRetries {
			continue
		}
		if err != nil {
			return err
		}
		return a.cat.Reconcile(ctx)
	}
}

// deleteTopic removes a topic from the metastore and its logs from here.
func (a *admin) deleteTopic(ctx context.Context, name string) (metastore.Topic, error) {
	for attempt := 0; ; attempt++ {
		t, err := a.meta.Topic(ctx, name)
		if errors.Is(err, metastore.ErrNotFound) {
			return metastore.Topic{}, fmt.Errorf("delete topic %q: %w", name, errUnknownTopic)
		}
		if err != nil {
			return metastore.Topic{}, err
		}
		err = a.meta.DeleteTopic(ctx, t)
		if errors.Is(err, metastore.ErrConditionFailed) && attempt < updateRetries {
			continue
		}
		if err != nil {
			return metastore.Topic{}, err
		}
		a.log.Info("topic deleted", "topic", name, "id", t.ID.String())
		if a.tier != nil {
			a.tier.RemoveTopic(t)
		}
		return t, a.cat.Reconcile(ctx)
	}
}

// createPartitions grows a topic to count partitions.
func (a *admin) createPartitions(ctx context.Context, name string, count int32, validateOnly bool) error {
	return a.updateTopic(ctx, name, func(t *metastore.Topic) ([]metastore.PartitionState, error) {
		if count <= t.Partitions {
			return nil, fmt.Errorf("%w: topic %q has %d partitions; the new count %d must be larger", errInvalidPartitions, name, t.Partitions, count)
		}
		if count > maxPartitionsPerTopic {
			return nil, fmt.Errorf("%w: %d partitions; at most %d per topic", errInvalidPartitions, count, maxPartitionsPerTopic)
		}
		states, err := controller.Place(ctx, a.meta, t.Partitions, count, t.ReplicationFactor)
		if err != nil {
			return nil, err
		}
		t.Partitions = count
		return states, nil
	}, validateOnly)
}

// setTopicConfigs edits a topic's config overrides.
func (a *admin) setTopicConfigs(ctx context.Context, name string, edit func(map[string]string) error, validateOnly bool) error {
	return a.updateTopic(ctx, name, func(t *metastore.Topic) ([]metastore.PartitionState, error) {
		overrides := make(map[string]string, len(t.Configs))
		for k, v := range t.Configs {
			overrides[k] = v
		}
		if err := edit(overrides); err != nil {
			return nil, err
		}
		cfg, err := a.defaults.Resolve(overrides)
		if err != nil {
			return nil, err
		}
		if err := a.checkTierConfig(cfg); err != nil {
			return nil, err
		}
		t.Configs = overrides
		return nil, nil
	}, validateOnly)
}

// metadataWait bounds how long a produce waits for this broker to learn
// of a partition it does not know yet (a topic created through another
// broker): the watcher applies changes every -watch-interval. Answering at
// once with UNKNOWN_TOPIC_OR_PARTITION cost clients up to 5 s (franz-go
// refreshes metadata at most every 5 s) on new topics in a three-broker
// cluster. NOT_LEADER is still answered at once: a client sending to a
// former leader must move on without delay.
const metadataWait = 2 * time.Second

// awaitLeader is leaderOf for a write. If this broker does not know the
// partition, it waits up to metadataWait for the watcher's next reconciles
// (no extra metastore reads) before answering. If its view names another
// leader of a partition it hosts, it checks once whether that view is
// stale (catalog.CatchUp): the metastore may already name it leader.
func (b *Broker) awaitLeader(ctx context.Context, topicName string, idx int32) (*partition.Partition, int16) {
	var timeout <-chan time.Time
	caughtUp := false
	for {
		ch := b.cat.Reconciled()
		s := b.cat.Snapshot()
		p, code := leaderOf(s, topicName, idx)
		switch {
		case code == kerr.NotLeaderForPartition.Code && !caughtUp && hosts(s, topicName, idx):
			caughtUp = true
			cctx, cancel := context.WithTimeout(ctx, metaTimeout)
			_, err := b.cat.CatchUp(cctx)
			cancel()
			if err != nil {
				return p, code
			}
			continue
		case code != kerr.UnknownTopicOrPartition.Code:
			return p, code
		}
		if timeout == nil {
			t := b.clock.NewTimer(metadataWait)
			defer t.Stop()
			timeout = t.C()
		}
		select {
		case <-ch:
		case <-timeout:
			return p, code
		case <-ctx.Done():
			return p, code
		}
	}
}

// aheadOfView reports whether a request knows more of a partition than
// this broker's view s: it names a newer leader epoch (epoch; -1: none),
// or this broker hosts the partition and the request treats it as leader
// (asLeader) while s names another. Either means s may be stale.
func aheadOfView(s *catalog.Snapshot, name string, idx, epoch int32, asLeader bool) bool {
	t := s.Topic(name)
	if t == nil {
		return false
	}
	st, p, ok := t.Partition(idx)
	if !ok || p == nil {
		return false
	}
	return epoch > st.LeaderEpoch || (asLeader && st.Leader != s.Self())
}

// catchUpIf re-reads this broker's view once (catalog.CatchUp) when
// ahead is true, for a request that suggests the view is stale.
func catchUpIf(b *Broker, ctx context.Context, ahead bool) {
	if !ahead {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, metaTimeout)
	defer cancel()
	if _, err := b.cat.CatchUp(ctx); err != nil && ctx.Err() == nil {
		b.log.Debug("catch up the view", "err", err)
	}
}

// hosts reports whether this broker has a replica of the partition in s.
func hosts(s *catalog.Snapshot, topicName string, idx int32) bool {
	t := s.Topic(topicName)
	if t == nil {
		return false
	}
	_, p, ok := t.Partition(idx)
	return ok && p != nil
}

// checkTierConfig refuses "object" durability on a broker without a tier.
func (a *admin) checkTierConfig(cfg topic.Config) error {
	if cfg.Durability == topic.DurabilityObject && a.tier == nil {
		return fmt.Errorf("%w: %s=%s needs the S3 tier (brokerfleet serve -bucket)", topic.ErrInvalidConfig, topic.Durability, topic.DurabilityObject)
	}
	return nil
}

// leaderOf returns the local log of a partition this broker leads in s, or
// the Kafka error to answer: UNKNOWN_TOPIC_OR_PARTITION for a partition
// that does not exist, NOT_LEADER_OR_FOLLOWER for one led elsewhere (the
// client refreshes its metadata and goes there).
func leaderOf(s *catalog.Snapshot, name string, idx int32) (*partition.Partition, int16) {
	p, err := s.Leader(name, idx)
	switch {
	case errors.Is(err, catalog.ErrUnknownPartition):
		return nil, kerr.UnknownTopicOrPartition.Code
	case err != nil:
		return nil, kerr.NotLeaderForPartition.Code
	}
	return p, 0
}

// currentLeader returns the leader and leader epoch s knows for a
// partition, and the leader's address, for NOT_LEADER_OR_FOLLOWER answers
// that tell the client where to go (KIP-951).
func currentLeader(s *catalog.Snapshot, name string, idx int32) (leader, epoch int32, host string, port int32, ok bool) {
	t := s.Topic(name)
	if t == nil {
		return 0, 0, "", 0, false
	}
	st, _, found := t.Partition(idx)
	if !found || st.Leader < 0 {
		return 0, 0, "", 0, false
	}
	br, live := s.Peers()[st.Leader]
	if !live {
		return 0, 0, "", 0, false
	}
	h, p, err := security.SplitHostPort(br.Endpoint)
	if err != nil {
		return 0, 0, "", 0, false
	}
	return st.Leader, st.LeaderEpoch, h, p, true
}

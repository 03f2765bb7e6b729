package broker

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/stratamq/strata/brokerfleet/internal/partition"
	"github.com/stratamq/strata/brokerfleet/internal/topic"
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

// updateRetries bounds read-modify-write retries when another writer
// changed a topic record between our read and our conditional write.
const updateRetries = 5

// createTopic validates and (unless validateOnly) creates a topic in the
// metastore, then opens its partitions here.
func (b *Broker) createTopic(ctx context.Context, name string, partitions int32, rf int16, configs map[string]string, validateOnly bool) (*topicState, error) {
	if err := topic.ValidateName(name); err != nil {
		return nil, err
	}
	if partitions == -1 {
		partitions = b.cfg.DefaultPartitions
	}
	if partitions <= 0 {
		return nil, fmt.Errorf("%w: %d partitions; must be at least 1", errInvalidPartitions, partitions)
	}
	if partitions > maxPartitionsPerTopic {
		return nil, fmt.Errorf("%w: %d partitions; at most %d per topic", errInvalidPartitions, partitions, maxPartitionsPerTopic)
	}
	if rf == -1 {
		rf = b.cfg.DefaultReplicationFactor
	}
	if rf < 1 {
		return nil, fmt.Errorf("%w: %d; must be at least 1", errInvalidReplication, rf)
	}
	cfg, err := b.defaults.Resolve(configs)
	if err != nil {
		return nil, err
	}
	if err := b.checkTierConfig(cfg); err != nil {
		return nil, err
	}
	if other := b.collidingTopic(name); other != "" {
		return nil, fmt.Errorf("create topic %q: collides with %q ('.' and '_' are the same in metric names): %w", name, other, errTopicExists)
	}
	t := metastore.Topic{Name: name, ID: metastore.NewTopicID(), Partitions: partitions, ReplicationFactor: rf, Configs: configs}
	if validateOnly {
		if b.lookup(name) != nil {
			return nil, fmt.Errorf("create topic %q: %w", name, errTopicExists)
		}
		return &topicState{meta: t, cfg: cfg}, nil
	}
	states, err := b.place(ctx, 0, partitions, rf)
	if err != nil {
		return nil, err
	}
	if _, err := b.meta.CreateTopic(ctx, t, states); err != nil {
		if errors.Is(err, metastore.ErrConditionFailed) {
			return nil, fmt.Errorf("create topic %q: %w", name, errTopicExists)
		}
		return nil, err
	}
	b.log.Info("topic created", "topic", name, "id", t.ID.String(), "partitions", partitions)
	if err := b.reconcile(ctx); err != nil {
		return nil, err
	}
	ts := b.lookup(name)
	if ts == nil || ts.meta.ID != t.ID {
		return nil, fmt.Errorf("create topic %q: deleted again at once: %w", name, errUnknownTopic)
	}
	return ts, nil
}

// place assigns replicas to new partitions [from, to) over the live
// brokers: racks interleaved so a partition's replicas span racks, and
// successive partitions start on successive brokers so leadership spreads.
// The first replica leads, at leader epoch 0.
func (b *Broker) place(ctx context.Context, from, to int32, rf int16) ([]metastore.PartitionState, error) {
	all, err := b.meta.Brokers(ctx)
	if err != nil {
		return nil, err
	}
	draining, err := b.draining(ctx)
	if err != nil {
		return nil, err
	}
	var live []metastore.Broker
	for _, br := range all {
		if br.Live && !draining[br.ID] {
			live = append(live, br)
		}
	}
	if int(rf) > len(live) {
		return nil, fmt.Errorf("%w: %d replicas but %d live brokers", errInvalidReplication, rf, len(live))
	}
	order := interleaveRacks(live)
	out := make([]metastore.PartitionState, 0, to-from)
	for p := from; p < to; p++ {
		replicas := make([]int32, rf)
		for r := range replicas {
			replicas[r] = order[(int(p)+r)%len(order)].ID
		}
		out = append(out, metastore.PartitionState{Partition: p, Replicas: replicas, Leader: replicas[0], ISR: slices.Clone(replicas)})
	}
	return out, nil
}

// interleaveRacks orders brokers so that consecutive ones are in different
// racks where possible: rack A's first, rack B's first, ..., rack A's second.
func interleaveRacks(brokers []metastore.Broker) []metastore.Broker {
	byRack := map[string][]metastore.Broker{}
	var racks []string
	for _, br := range brokers {
		if _, ok := byRack[br.Rack]; !ok {
			racks = append(racks, br.Rack)
		}
		byRack[br.Rack] = append(byRack[br.Rack], br)
	}
	slices.Sort(racks)
	var out []metastore.Broker
	for i := 0; len(out) < len(brokers); i++ {
		for _, r := range racks {
			if i < len(byRack[r]) {
				out = append(out, byRack[r][i])
			}
		}
	}
	return out
}

func (b *Broker) collidingTopic(name string) string {
	key := topic.CollisionKey(name)
	b.mu.RLock()
	defer b.mu.RUnlock()
	for other := range b.topics {
		if other != name && topic.CollisionKey(other) == key {
			return other
		}
	}
	return ""
}

// updateTopic re-reads a topic, applies edit and writes it back, retrying
// when another writer got there first.
func (b *Broker) updateTopic(ctx context.Context, name string, edit func(*metastore.Topic) ([]metastore.PartitionState, error), validateOnly bool) error {
	for attempt := 0; ; attempt++ {
		t, err := b.meta.Topic(ctx, name)
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
		_, err = b.meta.UpdateTopic(ctx, t, newParts)
		if errors.Is(err, metastore.ErrConditionFailed) && attempt < updateRetries {
			continue
		}
		if err != nil {
			return err
		}
		return b.reconcile(ctx)
	}
}

// deleteTopic removes a topic from the metastore and its logs from here.
func (b *Broker) deleteTopic(ctx context.Context, name string) (metastore.Topic, error) {
	for attempt := 0; ; attempt++ {
		t, err := b.meta.Topic(ctx, name)
		if errors.Is(err, metastore.ErrNotFound) {
			return metastore.Topic{}, fmt.Errorf("delete topic %q: %w", name, errUnknownTopic)
		}
		if err != nil {
			return metastore.Topic{}, err
		}
		err = b.meta.DeleteTopic(ctx, t)
		if errors.Is(err, metastore.ErrConditionFailed) && attempt < updateRetries {
			continue
		}
		if err != nil {
			return metastore.Topic{}, err
		}
		b.log.Info("topic deleted", "topic", name, "id", t.ID.String())
		b.tiering.removeTopic(t)
		return t, b.reconcile(ctx)
	}
}

// createPartitions grows a topic to count partitions.
func (b *Broker) createPartitions(ctx context.Context, name string, count int32, validateOnly bool) error {
	return b.updateTopic(ctx, name, func(t *metastore.Topic) ([]metastore.PartitionState, error) {
		if count <= t.Partitions {
			return nil, fmt.Errorf("%w: topic %q has %d partitions; the new count %d must be larger", errInvalidPartitions, name, t.Partitions, count)
		}
		if count > maxPartitionsPerTopic {
			return nil, fmt.Errorf("%w: %d partitions; at most %d per topic", errInvalidPartitions, count, maxPartitionsPerTopic)
		}
		states, err := b.place(ctx, t.Partitions, count, t.ReplicationFactor)
		if err != nil {
			return nil, err
		}
		t.Partitions = count
		return states, nil
	}, validateOnly)
}

// setTopicConfigs edits a topic's config overrides.
func (b *Broker) setTopicConfigs(ctx context.Context, name string, edit func(map[string]string) error, validateOnly bool) error {
	return b.updateTopic(ctx, name, func(t *metastore.Topic) ([]metastore.PartitionState, error) {
		overrides := make(map[string]string, len(t.Configs))
		for k, v := range t.Configs {
			overrides[k] = v
		}
		if err := edit(overrides); err != nil {
			return nil, err
		}
		cfg, err := b.defaults.Resolve(overrides)
		if err != nil {
			return nil, err
		}
		if err := b.checkTierConfig(cfg); err != nil {
			return nil, err
		}
		t.Configs = overrides
		return nil, nil
	}, validateOnly)
}

// reconcile makes the local state match the metastore: the live brokers,
// and for every topic its partition states, opening the partitions this
// broker has replicas of, closing those moved away, and removing the logs
// of deleted topics. Only topics this broker loaded from the metastore are
// ever removed, so a lost or empty metastore never deletes local data.
func (b *Broker) reconcile(ctx context.Context) error {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	defer b.signalReconciled()
	brokers, err := b.meta.Brokers(ctx)
	if err != nil {
		return err
	}
	list, err := b.meta.Topics(ctx)
	if err != nil {
		return err
	}
	shards, err := b.meta.CoordinatorShards(ctx)
	if err != nil {
		return err
	}
	b.applyShards(shards)
	peers := make(map[int32]metastore.Broker, len(brokers))
	for _, br := range brokers {
		if br.Live {
			peers[br.ID] = br
		}
	}
	b.mu.Lock()
	b.peers = peers
	have := make(map[string]*topicState, len(b.topics))
	for n, ts := range b.topics {
		have[n] = ts
	}
	b.mu.Unlock()

	want := make(map[string]metastore.Topic, len(list))
	for _, t := range list {
		want[t.Name] = t
	}
	var errs []error
	for name, ts := range have {
		if t, ok := want[name]; !ok || t.ID != ts.meta.ID {
			b.removeTopic(ts)
		}
	}
	for _, t := range list {
		states, err := b.partitionStates(ctx, t)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		cfg, err := b.defaults.Resolve(t.Configs)
		if err != nil {
			errs = append(errs, fmt.Errorf("topic %q: %w", t.Name, err))
			continue
		}
		cur := have[t.Name]
		if cur == nil || cur.meta.ID != t.ID {
			ts, err := b.openTopic(t, cfg, states)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			b.swapTopic(ts)
			continue
		}
		next := &topicState{meta: t, cfg: cfg, states: states, parts: make([]*partition.Partition, len(states))}
		copy(next.parts, cur.parts)
		for i, st := range states {
			p := next.parts[i]
			switch {
			case p == nil && b.hosts(st):
				if p, err = b.openPartition(t, int32(i), cfg); err != nil {
					errs = append(errs, err)
					continue
				}
				next.parts[i] = p
			case p != nil && !b.hosts(st):
				// Moved away: the log is no longer this broker's to keep.
				if err := p.Remove(); err != nil {
					b.log.Warn("remove moved partition", "topic", t.Name, "partition", i, "err", err)
				}
				next.parts[i] = nil
				continue
			case p == nil:
				continue
			}
			b.applyState(p, st)
			if cfg != cur.cfg {
				p.SetConfig(cfg)
			}
		}
		b.swapTopic(next)
	}
	b.updateFollowing()
	return errors.Join(errs...)
}

// updateFollowing points the follower fetch loops at the current leaders.
func (b *Broker) updateFollowing() {
	byLeader := map[int32][]followed{}
	addrs := map[int32]string{}
	b.mu.RLock()
	for id, br := range b.peers {
		addrs[id] = b.cfg.Security.InterBrokerEndpoint(br)
	}
	for _, ts := range b.topics {
		for i, st := range ts.states {
			p := ts.parts[i]
			if p == nil || st.Leader == b.cfg.NodeID || st.Leader < 0 {
				continue
			}
			byLeader[st.Leader] = append(byLeader[st.Leader], followed{topic: ts.meta.Name, index: int32(i), epoch: st.LeaderEpoch, p: p})
		}
	}
	b.mu.RUnlock()
	if b.ctx.Err() != nil {
		return
	}
	b.repl.update(byLeader, addrs)
}

// partitionStates reads a topic's partition states, one per partition
// (a state missing in the metastore reads as leaderless).
func (b *Broker) partitionStates(ctx context.Context, t metastore.Topic) ([]metastore.PartitionState, error) {
	stored, err := b.meta.Partitions(ctx, t.ID)
	if err != nil {
		return nil, err
	}
	states := make([]metastore.PartitionState, t.Partitions)
	for i := range states {
		states[i] = metastore.PartitionState{Topic: t.ID, Partition: int32(i), Leader: -1}
	}
	for _, st := range stored {
		if st.Partition >= 0 && st.Partition < t.Partitions {
			states[st.Partition] = st
		}
	}
	return states, nil
}

// removeTopic unpublishes a topic and deletes its logs.
func (b *Broker) removeTopic(ts *topicState) {
	b.mu.Lock()
	if cur := b.topics[ts.meta.Name]; cur != nil && cur.meta.ID == ts.meta.ID {
		delete(b.topics, ts.meta.Name)
	}
	delete(b.byID, ts.meta.ID)
	b.mu.Unlock()
	for _, p := range ts.parts {
		if p == nil {
			continue
		}
		if err := p.Remove(); err != nil {
			b.log.Warn("remove partition log", "topic", ts.meta.Name, "partition", p.Index(), "err", err)
		}
	}
	if err := b.fs.RemoveAll(path.Dir(b.partitionDir(ts.meta, 0))); err != nil {
		b.log.Warn("remove topic directory", "topic", ts.meta.Name, "err", err)
	}
	// The groups this broker coordinates lose their offsets of the topic.
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
		defer cancel()
		if err := b.coord.ForgetTopic(ctx, ts.meta.Name); err != nil && b.ctx.Err() == nil {
			b.log.Warn("delete committed offsets of a deleted topic", "topic", ts.meta.Name, "err", err)
		}
	}()
}

// swapTopic publishes a new immutable topicState.
func (b *Broker) swapTopic(ts *topicState) {
	b.mu.Lock()
	if old := b.topics[ts.meta.Name]; old != nil && old.meta.ID != ts.meta.ID {
		delete(b.byID, old.meta.ID)
	}
	b.topics[ts.meta.Name] = ts
	b.byID[ts.meta.ID] = ts
	b.mu.Unlock()
}

// metadataWait bounds how long a produce waits for this broker to learn
// of a partition it does not know yet (a topic created through another
// broker): the watcher applies changes every -watch-interval. Answering at
// once with UNKNOWN_TOPIC_OR_PARTITION cost clients up to 5 s (franz-go
// refreshes metadata at most every 5 s) on new topics in a three-broker
// cluster. NOT_LEADER is still answered at once: a client sending to a
// former leader must move on without delay.
const metadataWait = 2 * time.Second

// reconciledSignal returns a channel closed when the next reconcile ends.
func (b *Broker) reconciledSignal() <-chan struct{} {
	b.reconciledMu.Lock()
	defer b.reconciledMu.Unlock()
	if b.reconciled == nil {
		b.reconciled = make(chan struct{})
	}
	return b.reconciled
}

func (b *Broker) signalReconciled() {
	b.reconciledMu.Lock()
	if b.reconciled != nil {
		close(b.reconciled)
		b.reconciled = nil
	}
	b.reconciledMu.Unlock()
}

// awaitLeader is leaderPartition for a write: if this broker does not know
// the partition, it waits up to metadataWait for the watcher's next
// reconciles (no extra metastore reads) before answering.
func (b *Broker) awaitLeader(ctx context.Context, topicName string, idx int32) (*partition.Partition, int16) {
	var timeout <-chan time.Time
	for {
		ch := b.reconciledSignal()
		p, code := b.leaderPartition(topicName, idx)
		if code != kerr.UnknownTopicOrPartition.Code {
			return p, code
		}
		if timeout == nil {
			t := time.NewTimer(metadataWait)
			defer t.Stop()
			timeout = t.C
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

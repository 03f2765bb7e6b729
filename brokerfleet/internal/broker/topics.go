package broker

import (
	"errors"
	"fmt"
	"path"

	"github.com/stratamq/strata/brokerfleet/internal/partition"
	"github.com/stratamq/strata/brokerfleet/internal/topic"
)

// Errors of topic administration, mapped to Kafka codes in errors.go.
var (
	errInvalidPartitions  = errors.New("invalid partition count")
	errInvalidReplication = errors.New("invalid replication factor")
	errInvalidRequest     = errors.New("invalid request")
)

// createTopic validates and (unless validateOnly) creates a topic.
func (b *Broker) createTopic(name string, partitions int32, rf int16, configs map[string]string, validateOnly bool) (*topicState, error) {
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
		rf = 1
	}
	if rf != 1 {
		return nil, fmt.Errorf("%w: %d; this cluster has 1 broker", errInvalidReplication, rf)
	}
	cfg, err := b.defaults.Resolve(configs)
	if err != nil {
		return nil, err
	}
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	if b.lookup(name) != nil {
		return nil, fmt.Errorf("create topic %q: %w", name, topic.ErrExists)
	}
	t := topic.Topic{Name: name, ID: topic.NewID(), Partitions: partitions, ReplicationFactor: rf, Configs: configs}
	if validateOnly {
		return &topicState{meta: t, cfg: cfg}, nil
	}
	ts, err := b.openTopic(t)
	if err != nil {
		return nil, err
	}
	if err := b.catalog.Create(t); err != nil {
		for _, p := range ts.parts {
			p.Remove()
		}
		return nil, err
	}
	b.mu.Lock()
	b.topics[name] = ts
	b.byID[t.ID] = ts
	b.mu.Unlock()
	b.log.Info("topic created", "topic", name, "id", t.ID.String(), "partitions", partitions)
	return ts, nil
}

// deleteTopic removes a topic and its logs.
func (b *Broker) deleteTopic(name string) (topic.Topic, error) {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	t, err := b.catalog.Delete(name)
	if err != nil {
		return topic.Topic{}, err
	}
	b.mu.Lock()
	ts := b.topics[name]
	delete(b.topics, name)
	delete(b.byID, t.ID)
	b.mu.Unlock()
	if ts != nil {
		for _, p := range ts.parts {
			if err := p.Remove(); err != nil {
				b.log.Warn("remove partition log", "topic", name, "partition", p.Index(), "err", err)
			}
		}
	}
	if err := b.fs.RemoveAll(path.Dir(b.partitionDir(t, 0))); err != nil {
		b.log.Warn("remove topic directory", "topic", name, "err", err)
	}
	b.log.Info("topic deleted", "topic", name, "id", t.ID.String())
	return t, nil
}

// createPartitions grows a topic to count partitions.
func (b *Broker) createPartitions(name string, count int32, validateOnly bool) error {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	ts := b.lookup(name)
	if ts == nil {
		return fmt.Errorf("create partitions for %q: %w", name, topic.ErrNotFound)
	}
	have := int32(len(ts.parts))
	if count <= have {
		return fmt.Errorf("%w: topic %q has %d partitions; the new count %d must be larger", errInvalidPartitions, name, have, count)
	}
	if count > maxPartitionsPerTopic {
		return fmt.Errorf("%w: %d partitions; at most %d per topic", errInvalidPartitions, count, maxPartitionsPerTopic)
	}
	if validateOnly {
		return nil
	}
	next := &topicState{meta: ts.meta, cfg: ts.cfg, parts: append([]*partition.Partition(nil), ts.parts...)}
	next.meta.Partitions = count
	for i := have; i < count; i++ {
		p, err := b.openPartition(ts.meta, i, ts.cfg)
		if err != nil {
			for _, p := range next.parts[have:] {
				p.Remove()
			}
			return err
		}
		next.parts = append(next.parts, p)
	}
	if _, err := b.catalog.Update(name, func(t *topic.Topic) error { t.Partitions = count; return nil }); err != nil {
		for _, p := range next.parts[have:] {
			p.Remove()
		}
		return err
	}
	b.swapTopic(next)
	return nil
}

// setTopicConfigs replaces a topic's config overrides.
func (b *Broker) setTopicConfigs(name string, edit func(map[string]string) error, validateOnly bool) error {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	ts := b.lookup(name)
	if ts == nil {
		return fmt.Errorf("alter configs of %q: %w", name, topic.ErrNotFound)
	}
	overrides := make(map[string]string, len(ts.meta.Configs))
	for k, v := range ts.meta.Configs {
		overrides[k] = v
	}
	if err := edit(overrides); err != nil {
		return err
	}
	cfg, err := b.defaults.Resolve(overrides)
	if err != nil {
		return err
	}
	if validateOnly {
		return nil
	}
	meta, err := b.catalog.Update(name, func(t *topic.Topic) error { t.Configs = overrides; return nil })
	if err != nil {
		return err
	}
	next := &topicState{meta: meta, cfg: cfg, parts: ts.parts}
	for _, p := range next.parts {
		p.SetConfig(cfg)
	}
	b.swapTopic(next)
	return nil
}

// swapTopic publishes a new immutable topicState.
func (b *Broker) swapTopic(ts *topicState) {
	b.mu.Lock()
	b.topics[ts.meta.Name] = ts
	b.byID[ts.meta.ID] = ts
	b.mu.Unlock()
}

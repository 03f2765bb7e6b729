package broker

// Group configs (Kafka's GroupConfig, KIP-932's share.* among them): set
// per group with IncrementalAlterConfigs or AlterConfigs on a GROUP
// resource, stored in the metastore, read through a short cache by the
// group coordinator and the share partitions.

import (
	"context"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/share"
	"github.com/stratamq/strata/pkg/metastore"
)

// groupConfigTTL is how long a group's configs are cached: a change made
// through another broker applies here within it.
const groupConfigTTL = time.Second

type groupConfigs struct {
	meta     *metastore.Meta
	defaults share.Config

	mu    sync.Mutex
	cache map[string]groupConfigEntry
}

type groupConfigEntry struct {
	vals map[string]string
	at   time.Time
}

func newGroupConfigs(meta *metastore.Meta, defaults share.Config) *groupConfigs {
	return &groupConfigs{meta: meta, defaults: defaults, cache: map[string]groupConfigEntry{}}
}

// share returns a group's share config from the cache, reading it when
// the cached copy is older than groupConfigTTL (the defaults if the read
// fails and nothing is cached).
func (gc *groupConfigs) share(group string) share.Config {
	gc.mu.Lock()
	e, ok := gc.cache[group]
	gc.mu.Unlock()
	if ok && time.Since(e.at) < groupConfigTTL {
		return gc.defaults.With(e.vals)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if cfg, err := gc.fresh(ctx, group); err == nil {
		return cfg
	}
	return gc.defaults.With(e.vals)
}

// fresh reads a group's configs from the metastore.
func (gc *groupConfigs) fresh(ctx context.Context, group string) (share.Config, error) {
	vals, err := gc.meta.GroupConfigs(ctx, group)
	if err != nil {
		return share.Config{}, err
	}
	gc.mu.Lock()
	if len(gc.cache) > 10000 {
		clear(gc.cache)
	}
	gc.cache[group] = groupConfigEntry{vals: vals, at: time.Now()}
	gc.mu.Unlock()
	return gc.defaults.With(vals), nil
}

// raw returns a group's stored configs.
func (gc *groupConfigs) raw(ctx context.Context, group string) (map[string]string, error) {
	return gc.meta.GroupConfigs(ctx, group)
}

// alter edits a group's configs: names are Kafka's group configs, values
// checked against their bounds (INVALID_CONFIG).
func (gc *groupConfigs) alter(ctx context.Context, group string, edit func(map[string]string) error, validateOnly bool) error {
	if group == "" {
		return coded(kerr.InvalidRequest, "a group resource needs a group name")
	}
	check := func(m map[string]string) error {
		if err := edit(m); err != nil {
			return err
		}
		for k, v := range m {
			name, ok := share.Canonical(k)
			if !ok {
				return coded(kerr.InvalidConfig, "unknown group config %q", k)
			}
			if err := share.Validate(name, v); err != nil {
				return coded(kerr.InvalidConfig, "%v", err)
			}
			if name != k {
				delete(m, k)
				m[name] = v
			}
		}
		return nil
	}
	if validateOnly {
		cur, err := gc.meta.GroupConfigs(ctx, group)
		if err != nil {
			return err
		}
		if cur == nil {
			cur = map[string]string{}
		}
		return check(cur)
	}
	if err := gc.meta.AlterGroupConfigs(ctx, group, check); err != nil {
		return err
	}
	gc.mu.Lock()
	delete(gc.cache, group)
	gc.mu.Unlock()
	return nil
}

// describeGroupConfigs is DescribeConfigs of a GROUP resource: every
// group config with its effective value.
func describeGroupConfigs(b *Broker, req *kmsg.DescribeConfigsRequest, rr kmsg.DescribeConfigsRequestResource, sr *kmsg.DescribeConfigsResponseResource, want func(string) bool) {
	ctx, cancel := context.WithTimeout(b.ctx, metaTimeout)
	defer cancel()
	vals, err := b.groupCfg.raw(ctx, rr.ResourceName)
	if err != nil {
		sr.ErrorCode, sr.ErrorMessage = errCodeOf(err), errorMessage(err)
		return
	}
	eff := b.groupCfg.defaults.With(vals)
	for _, name := range share.ConfigNames() {
		if !want(name) {
			continue
		}
		_, set := vals[name]
		source := kmsg.ConfigSourceDefaultConfig
		if set {
			source = kmsg.ConfigSourceGroupConfig
		}
		kind := kmsg.ConfigTypeInt
		switch name {
		case share.CfgAutoReset, share.CfgIsolation, share.CfgDeadLetter:
			kind = kmsg.ConfigTypeString
		case share.CfgDeadLetterOn:
			kind = kmsg.ConfigTypeBoolean
		}
		sr.Configs = append(sr.Configs, describedConfig(req, name, eff.Value(name), "share group config (KIP-932)", kind, source, !set, false))
	}
}

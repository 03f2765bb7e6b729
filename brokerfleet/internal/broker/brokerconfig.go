package broker

import (
	"context"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// cfgDraining is the one dynamic broker config: a draining broker gets no
// new replicas, and the controller moves its replicas and leadership to
// the others (throttled), after which it may be stopped. It is kept in the
// metastore by broker id, so it holds across restarts until removed.
const cfgDraining = "strata.broker.draining"

// alterBrokerConfigs edits a broker's dynamic configs. name is the broker
// id; an empty name (cluster-wide defaults in Kafka) is refused.
func (b *Broker) alterBrokerConfigs(name string, edit func(map[string]string) error, validateOnly bool) error {
	id, err := strconv.ParseInt(name, 10, 32)
	if err != nil || id < 0 {
		return coded(kerr.InvalidRequest, "broker resource %q: name a broker id; cluster-wide broker configs are static (brokerfleet flags)", name)
	}
	ctx, cancel := context.WithTimeout(b.ctx, metaTimeout)
	defer cancel()
	check := func(m map[string]string) error {
		if err := edit(m); err != nil {
			return err
		}
		for k, v := range m {
			if k != cfgDraining {
				return coded(kerr.InvalidConfig, "broker config %q cannot be altered: only %s is dynamic; the others are brokerfleet flags", k, cfgDraining)
			}
			if _, err := strconv.ParseBool(v); err != nil {
				return coded(kerr.InvalidConfig, "broker config %s: %q is not true or false", k, v)
			}
		}
		if validateOnly {
			return errValidateOnly
		}
		return nil
	}
	err = b.meta.EditBrokerConfigs(ctx, int32(id), check)
	if err == errValidateOnly {
		return nil
	}
	if err == nil {
		b.log.Info("broker config changed", "broker", id)
	}
	return err
}

// errValidateOnly stops a validate-only edit before it is written.
var errValidateOnly = coded(kerr.InvalidRequest, "validate only")

// draining returns the brokers marked draining.
func (b *Broker) draining(ctx context.Context) (map[int32]bool, error) {
	cfgs, err := b.meta.BrokerConfigs(ctx)
	if err != nil {
		return nil, err
	}
	out := map[int32]bool{}
	for id, c := range cfgs {
		if v, _ := strconv.ParseBool(c[cfgDraining]); v {
			out[id] = true
		}
	}
	return out, nil
}

// describeDynamicBrokerConfigs lists a broker's dynamic configs with their
// current values (the default, false, when unset).
func (b *Broker) describeDynamicBrokerConfigs(ctx context.Context, id int32) ([]brokerConfig, bool, error) {
	cfgs, err := b.meta.BrokerConfigs(ctx)
	if err != nil {
		return nil, false, err
	}
	v, set := cfgs[id][cfgDraining]
	if !set {
		v = "false"
	}
	return []brokerConfig{{cfgDraining, v, "Whether the controller moves every replica and leadership off this broker so that it can be stopped (brokerfleet brokers drain).", kmsg.ConfigTypeBoolean}}, set, nil
}

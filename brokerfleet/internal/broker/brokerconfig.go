package broker

import (
	"context"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/controller"
)

// cfgDraining is the one dynamic broker config (controller.ConfigDraining).
const cfgDraining = controller.ConfigDraining

// alterBrokerConfigs edits a broker's dynamic configs. name is the broker
// id; an empty name (cluster-wide defaults in Kafka) is refused.
func (a *admin) alterBrokerConfigs(name string, edit func(map[string]string) error, validateOnly bool) error {
	id, err := strconv.ParseInt(name, 10, 32)
	if err != nil || id < 0 {
		return coded(kerr.InvalidRequest, "broker resource %q: name a broker id; cluster-wide broker configs are static (brokerfleet flags)", name)
	}
	ctx, cancel := context.WithTimeout(a.ctx, metaTimeout)
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
	err = a.meta.EditBrokerConfigs(ctx, int32(id), check)
	if err == errValidateOnly {
		return nil
	}
	if err == nil {
		a.log.Info("broker config changed", "broker", id)
	}
	return err
}

// errValidateOnly stops a validate-only edit before it is written.
var errValidateOnly = coded(kerr.InvalidRequest, "validate only")

// describeDynamicBrokerConfigs lists a broker's dynamic configs with their
// current values (the default, false, when unset).
func (a *admin) describeDynamicBrokerConfigs(ctx context.Context, id int32) ([]brokerConfig, bool, error) {
	cfgs, err := a.meta.BrokerConfigs(ctx)
	if err != nil {
		return nil, false, err
	}
	v, set := cfgs[id][cfgDraining]
	if !set {
		v = "false"
	}
	return []brokerConfig{{cfgDraining, v, "Whether the controller moves every replica and leadership off this broker so that it can be stopped (brokerfleet brokers drain).", kmsg.ConfigTypeBoolean}}, set, nil
}

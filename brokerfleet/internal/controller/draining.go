package controller

import (
	"context"
	"strconv"

	"github.com/stratamq/strata/pkg/metastore"
)

// ConfigDraining is the one dynamic broker config: a draining broker gets
// no new replicas, and the controller moves its replicas and leadership to
// the others (throttled), after which it may be stopped. It is kept in the
// metastore by broker id, so it holds across restarts until removed.
const ConfigDraining = "strata.broker.draining"

// Draining returns the brokers marked draining.
func Draining(ctx context.Context, meta *metastore.Meta) (map[int32]bool, error) {
	cfgs, err := meta.BrokerConfigs(ctx)
	if err != nil {
		return nil, err
	}
	return DrainingOf(cfgs), nil
}

// DrainingOf returns the brokers whose configs mark them draining.
func DrainingOf(cfgs map[int32]map[string]string) map[int32]bool {
	out := map[int32]bool{}
	for id, c := range cfgs {
		if v, _ := strconv.ParseBool(c[ConfigDraining]); v {
			out[id] = true
		}
	}
	return out
}

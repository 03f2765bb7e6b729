package broker

import (
	"context"
	"fmt"
	"slices"

	"github.com/stratamq/strata/pkg/metastore"
)

// AutoNodeID as Config.NodeID makes the broker claim an id at start: the
// lowest id whose registration no live broker holds (a broker that stopped
// cleanly released it; one that died was fenced by the controller),
// preferring ids not marked draining, else one past the highest. The claim
// is the registration lease itself, taken with a conditional write, so two
// brokers starting together never share an id. A broker that takes over an
// id of a dead one inherits its replicas and catches up from their leaders
// like any restarted broker.
const AutoNodeID int32 = -1

// claimNodeID finds and takes an id, returning it with its held lease.
func claimNodeID(ctx context.Context, cfg Config) (int32, *metastore.Lease, error) {
	const attempts = 10
	for attempt := 0; attempt < attempts; attempt++ {
		brokers, err := cfg.Meta.Brokers(ctx)
		if err != nil {
			return 0, nil, fmt.Errorf("claim a node id: %w", err)
		}
		cfgs, err := cfg.Meta.BrokerConfigs(ctx)
		if err != nil {
			return 0, nil, fmt.Errorf("claim a node id: %w", err)
		}
		draining := func(id int32) bool { return cfgs[id][cfgDraining] == "true" }
		var free []int32
		next := int32(0)
		for _, br := range brokers {
			if !br.Live {
				free = append(free, br.ID)
			}
			next = max(next, br.ID+1)
		}
		slices.SortStableFunc(free, func(a, b int32) int {
			if draining(a) != draining(b) {
				if draining(a) {
					return 1
				}
				return -1
			}
			return int(a - b)
		})
		free = append(free, next)
		for _, id := range free {
			lease, err := cfg.Meta.BrokerLease(metastore.Broker{ID: id, Endpoint: cfg.Advertise, Listeners: cfg.Security.Advertised(cfg.Advertise), Rack: cfg.Rack, Incarnation: cfg.Incarnation}, cfg.Lease)
			if err != nil {
				return 0, nil, err
			}
			st, err := lease.Tick(ctx)
			if err != nil {
				return 0, nil, fmt.Errorf("claim node id %d: %w", id, err)
			}
			if st.Held {
				return id, lease, nil
			}
			// Taken meanwhile by another broker: try the next.
		}
	}
	return 0, nil, fmt.Errorf("claim a node id: every free id was taken by another broker %d times", attempts)
}

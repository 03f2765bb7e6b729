package metastore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
)

// Broker is a broker's registration. Its record doubles as the broker's
// heartbeat lease: the holder is "<id>/<incarnation>", so a restarted
// broker is a new holder and must wait out (or be handed) the old lease.
type Broker struct {
	ID          int32  `json:"id"`
	Endpoint    string `json:"endpoint"` // host:port for Kafka clients
	Rack        string `json:"rack,omitempty"`
	Incarnation string `json:"incarnation"`
	Epoch       int64  `json:"-"` // lease epoch: grows with every new incarnation
	Version     int64  `json:"-"` // grows with every heartbeat
	Live        bool   `json:"-"` // holder field set (not released)
	// Listeners maps every listener's name to its advertised host:port
	// (Endpoint is the default listener's); empty for one-listener brokers.
	Listeners map[string]string `json:"listeners,omitempty"`
}

// brokerRecord is the lease record plus the registration.
type brokerRecord struct {
	leaseRecord
	Broker
}

func brokerKey(id int32) Key { return Key{PK: pkBrokers, SK: strconv.Itoa(int(id))} }

// BrokerLease returns the heartbeat lease for a broker incarnation. Each
// Tick is one conditional write, whatever the number of partitions: the
// control plane's DynamoDB writes scale with brokers.
func (m *Meta) BrokerLease(b Broker, opts LeaseOptions) (*Lease, error) {
	l, err := NewLease(m.s, brokerKey(b.ID), fmt.Sprintf("%d/%s", b.ID, b.Incarnation), opts)
	if err != nil {
		return nil, err
	}
	l.extra = func(rec leaseRecord) []byte { return encodeJSON(brokerRecord{leaseRecord: rec, Broker: b}) }
	return l, nil
}

// Brokers lists the registered brokers by id. Whether one is alive is for
// the caller to judge by watching Version move (a Lease-style contender),
// never by comparing clocks.
func (m *Meta) Brokers(ctx context.Context) ([]Broker, error) {
	items, err := m.s.Query(ctx, pkBrokers, "")
	if err != nil {
		return nil, fmt.Errorf("metastore: list brokers: %w", err)
	}
	out := make([]Broker, 0, len(items))
	for _, it := range items {
		var rec brokerRecord
		if err := json.Unmarshal(it.Value, &rec); err != nil {
			return nil, fmt.Errorf("metastore: decode %s: %w", it.Key, err)
		}
		b := rec.Broker
		b.Epoch, b.Version, b.Live = rec.leaseRecord.Epoch, it.Version, rec.Holder != ""
		out = append(out, b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// FenceBroker marks a broker's registration released if it is still at
// version (the controller saw it frozen for a full lease): the broker can
// no longer renew it and must register under a new epoch.
func (m *Meta) FenceBroker(ctx context.Context, id int32, version int64) error {
	k := brokerKey(id)
	it, err := m.s.Get(ctx, k)
	if err != nil {
		return fmt.Errorf("metastore: fence broker %d: %w", id, err)
	}
	if it.Version != version {
		return fmt.Errorf("metastore: fence broker %d: %w", id, ErrConditionFailed)
	}
	var rec brokerRecord
	if err := json.Unmarshal(it.Value, &rec); err != nil {
		return fmt.Errorf("metastore: decode %s: %w", k, err)
	}
	rec.Holder = ""
	if _, err := m.s.Put(ctx, Item{Key: k, Value: encodeJSON(rec)}, IfVersion(version)); err != nil {
		return fmt.Errorf("metastore: fence broker %d: %w", id, err)
	}
	return m.bump(ctx)
}

// BrokerConfigs returns the dynamic configs of every broker that has any,
// by broker id. They outlive registrations: a drained broker stays drained
// across restarts until the config is removed.
func (m *Meta) BrokerConfigs(ctx context.Context) (map[int32]map[string]string, error) {
	items, err := m.s.Query(ctx, pkBrokerCf, "")
	if err != nil {
		return nil, fmt.Errorf("metastore: list broker configs: %w", err)
	}
	out := make(map[int32]map[string]string, len(items))
	for _, it := range items {
		id, err := strconv.ParseInt(it.SK, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("metastore: broker config key %s: %w", it.Key, err)
		}
		var cfg map[string]string
		if err := json.Unmarshal(it.Value, &cfg); err != nil {
			return nil, fmt.Errorf("metastore: decode %s: %w", it.Key, err)
		}
		if len(cfg) > 0 {
			out[int32(id)] = cfg
		}
	}
	return out, nil
}

// EditBrokerConfigs applies edit to a broker's dynamic configs with a
// compare-and-set, retrying when another writer got there first.
func (m *Meta) EditBrokerConfigs(ctx context.Context, id int32, edit func(map[string]string) error) error {
	k := Key{PK: pkBrokerCf, SK: strconv.Itoa(int(id))}
	for attempt := 0; ; attempt++ {
		cfg := map[string]string{}
		cond := IfAbsent()
		it, err := m.s.Get(ctx, k)
		switch {
		case err == nil:
			if err := json.Unmarshal(it.Value, &cfg); err != nil {
				return fmt.Errorf("metastore: decode %s: %w", k, err)
			}
			if cfg == nil {
				cfg = map[string]string{}
			}
			cond = IfVersion(it.Version)
		case !errors.Is(err, ErrNotFound):
			return fmt.Errorf("metastore: broker %d configs: %w", id, err)
		}
		if err := edit(cfg); err != nil {
			return err
		}
		_, err = m.s.Put(ctx, Item{Key: k, Value: encodeJSON(cfg)}, cond)
		if errors.Is(err, ErrConditionFailed) && attempt < 5 {
			continue
		}
		if err != nil {
			return fmt.Errorf("metastore: broker %d configs: %w", id, err)
		}
		return m.bump(ctx)
	}
}

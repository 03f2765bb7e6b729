package metastore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// Key layout in the one table. Partition keys group what is queried
// together; versioned records that fence writers are never deleted.
const (
	pkCluster    = "cluster"      // sk "changes": bumped on every metadata change
	pkBrokers    = "brokers"      // sk broker id: registration and heartbeat lease
	pkBrokerCf   = "brokerconfig" // sk broker id: dynamic broker configs (e.g. draining)
	pkTopics     = "topics"       // sk topic name
	pkLeases     = "leases"       // sk lease name ("controller", "group-shard/N")
	pkCounters   = "counters"     // counters: "producer-ids", ...
	pkPartPfx    = "partitions/"  // + topic id; sk zero-padded partition
	pkGroupPfx   = "group/"       // + group; sk "generation" and "offset/<topic>/<partition>"
	pkGroupIdx   = "groups/"      // + shard; sk group name: the groups a shard coordinates
	pkCoord      = "coordinators" // sk zero-padded shard: which broker coordinates it
	pkManifest   = "manifest/"    // + topic id; sk zero-padded partition
	pkTxnPfx     = "txns/"        // + zero-padded shard; sk transactional id
	pkPendingIdx = "txnpending/"  // + zero-padded shard; sk "<producer id>/<group>": groups with pending transactional offsets
	skChanges    = "changes"      //
	skGen        = "generation"   //
	skOffPfx     = "offset/"      //
	skPendingPfx = "pending/"     // + "<producer id>/<topic>/<partition>": transactional offsets not yet committed
	skPIDs       = "producer-ids" //
	pidBlock     = int64(1000)    // producer ids reserved per allocation
	partDigits   = "%06d"         // partition sort-key format
)

// ErrFenced is returned when a write carries an epoch or generation older
// than the stored one: the writer has been superseded.
var ErrFenced = errors.New("metastore: fenced by a newer epoch")

// Meta is the typed control plane over a Store.
type Meta struct {
	s Store
}

// New wraps s.
func New(s Store) *Meta { return &Meta{s: s} }

// Store returns the underlying store.
func (m *Meta) Store() Store { return m.s }

func encodeJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("metastore: encode %T: %v", v, err)) // only our own record types are encoded
	}
	return b
}

func decodeJSON(it Item, v any) error {
	if err := json.Unmarshal(it.Value, v); err != nil {
		return fmt.Errorf("metastore: decode %s: %w", it.Key, err)
	}
	return nil
}

func partKey(p int32) string { return fmt.Sprintf(partDigits, p) }

func parsePartKey(sk string) (int32, error) {
	n, err := strconv.ParseInt(sk, 10, 32)
	return int32(n), err
}

// bump records that metadata changed, so watchers re-read it.
func (m *Meta) bump(ctx context.Context) error {
	_, err := m.s.Put(ctx, Item{Key: Key{PK: pkCluster, SK: skChanges}}, Always)
	if err != nil {
		return fmt.Errorf("metastore: record change: %w", err)
	}
	return nil
}

// NotifyChange moves the change counter without another change, for
// events watchers should see that are not metadata writes (a broker
// registering or shutting down).
func (m *Meta) NotifyChange(ctx context.Context) error { return m.bump(ctx) }

// ChangeVersion returns the metadata change counter: it grows whenever
// topics, configs or partition state change. Polling it is one strongly
// consistent read, whatever the number of topics and partitions.
func (m *Meta) ChangeVersion(ctx context.Context) (int64, error) {
	it, err := m.s.Get(ctx, Key{PK: pkCluster, SK: skChanges})
	if errors.Is(err, ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("metastore: read change version: %w", err)
	}
	return it.Version, nil
}

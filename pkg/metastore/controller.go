package metastore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// controllerKey is the controller lease: the broker holding it places
// replicas, elects leaders and assigns coordinator shards.
var controllerKey = Key{PK: "leases", SK: "controller"}

// ControllerLease returns the controller lease for one broker incarnation
// (holder "<id>/<incarnation>", so a restarted broker is a new holder).
func (m *Meta) ControllerLease(id int32, incarnation string, opts LeaseOptions) (*Lease, error) {
	return NewLease(m.s, controllerKey, fmt.Sprintf("%d/%s", id, incarnation), opts)
}

// Controller returns the id of the broker named in the controller lease,
// or false when no broker holds it (never taken, or released). The holder
// named may have stopped and not been replaced yet: the record changes
// only when another broker takes the lease over.
func (m *Meta) Controller(ctx context.Context) (int32, bool, error) {
	it, err := m.s.Get(ctx, controllerKey)
	if errors.Is(err, ErrNotFound) {
		return -1, false, nil
	}
	if err != nil {
		return -1, false, fmt.Errorf("metastore: controller lease: %w", err)
	}
	var rec leaseRecord
	if err := json.Unmarshal(it.Value, &rec); err != nil {
		return -1, false, fmt.Errorf("metastore: decode controller lease: %w", err)
	}
	idText, _, ok := strings.Cut(rec.Holder, "/")
	if !ok {
		return -1, false, nil
	}
	id, err := strconv.ParseInt(idText, 10, 32)
	if err != nil {
		return -1, false, fmt.Errorf("metastore: controller lease holder %q: %w", rec.Holder, err)
	}
	return int32(id), true, nil
}

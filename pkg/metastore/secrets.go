package metastore

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
)

// skSecretPfx + name, under pkCluster: a random secret the cluster's
// brokers share (for example the key of the fake SCRAM credentials that
// unknown users get, so that every broker answers them alike).
const skSecretPfx = "secret/"

// ClusterSecret returns the 32 random bytes stored as the cluster's
// secret called name, creating them on first use (the first writer wins,
// so every caller gets the same bytes). They protect nothing stored: they
// are for values that must agree across brokers without being guessable.
func (m *Meta) ClusterSecret(ctx context.Context, name string) ([]byte, error) {
	k := Key{PK: pkCluster, SK: skSecretPfx + name}
	for attempt := 0; ; attempt++ {
		it, err := m.s.Get(ctx, k)
		if err == nil && len(it.Value) > 0 {
			return it.Value, nil
		}
		if err != nil && !errors.Is(err, ErrNotFound) {
			return nil, fmt.Errorf("metastore: cluster secret %s: %w", name, err)
		}
		secret := make([]byte, 32)
		_, _ = rand.Read(secret)
		_, err = m.s.Put(ctx, Item{Key: k, Value: secret}, IfAbsent())
		switch {
		case err == nil:
			return secret, nil
		case errors.Is(err, ErrConditionFailed) && attempt < 3:
			continue // another broker created it first: read theirs
		default:
			return nil, fmt.Errorf("metastore: cluster secret %s: %w", name, err)
		}
	}
}

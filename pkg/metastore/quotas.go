package metastore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// pkQuotas holds client quotas (KIP-546), one item per entity; sk is a
// digest of the entity, whose names may be longer than a sort key.
const pkQuotas = "quotas"

// QuotaEntityPart is one component of a quota entity: a type ("user",
// "client-id") and a name, nil for the type's default (Kafka's
// <default>).
type QuotaEntityPart struct {
	Type string  `json:"type"`
	Name *string `json:"name,omitempty"`
}

// ClientQuota is the quota values (Kafka's keys, such as
// producer_byte_rate) set for one entity. The entity's parts are sorted by
// type, so equal entities compare equal.
type ClientQuota struct {
	Entity []QuotaEntityPart  `json:"entity"`
	Values map[string]float64 `json:"values"`
}

// QuotaAlteration sets and removes values of one entity.
type QuotaAlteration struct {
	Entity []QuotaEntityPart
	Set    map[string]float64
	Remove []string
}

// CanonicalQuotaEntity returns the parts sorted by type.
func CanonicalQuotaEntity(parts []QuotaEntityPart) []QuotaEntityPart {
	out := slices.Clone(parts)
	slices.SortFunc(out, func(a, b QuotaEntityPart) int { return strings.Compare(a.Type, b.Type) })
	return out
}

func quotaKey(entity []QuotaEntityPart) Key {
	sum := sha256.Sum256(encodeJSON(CanonicalQuotaEntity(entity)))
	return Key{PK: pkQuotas, SK: hex.EncodeToString(sum[:])}
}

// quotaRetries bounds the read-modify-write retries of one alteration
// racing others on the same entity.
const quotaRetries = 8

// AlterClientQuotas applies each alteration to its entity's stored values
// (a conditional read-modify-write, so concurrent alterations of one entity
// are not lost; an entity left with no values is deleted) and records one
// change, so brokers reload them. It returns one error per alteration, nil
// where it was applied.
func (m *Meta) AlterClientQuotas(ctx context.Context, alts []QuotaAlteration) []error {
	errs := make([]error, len(alts))
	changed := false
	for i, a := range alts {
		errs[i] = m.alterClientQuota(ctx, a)
		changed = changed || errs[i] == nil
	}
	if changed {
		if err := m.bump(ctx); err != nil {
			for i := range errs {
				if errs[i] == nil {
					errs[i] = err
				}
			}
		}
	}
	return errs
}

func (m *Meta) alterClientQuota(ctx context.Context, a QuotaAlteration) error {
	key := quotaKey(a.Entity)
	for range quotaRetries {
		cur, err := m.s.Get(ctx, key)
		q := ClientQuota{Entity: CanonicalQuotaEntity(a.Entity), Values: map[string]float64{}}
		cond := IfAbsent()
		switch {
		case errors.Is(err, ErrNotFound):
		case err != nil:
			return fmt.Errorf("metastore: read quota: %w", err)
		default:
			// Decode into a fresh value: decoding into q would write
			// through the *string names it shares with the caller's entity.
			var stored ClientQuota
			if err := decodeJSON(cur, &stored); err != nil {
				return err
			}
			if stored.Values != nil {
				q.Values = stored.Values
			}
			cond = IfVersion(cur.Version)
		}
		maps.Copy(q.Values, a.Set)
		for _, k := range a.Remove {
			delete(q.Values, k)
		}
		switch {
		case len(q.Values) == 0 && cur.Version == 0:
			return nil // nothing stored, nothing to store
		case len(q.Values) == 0:
			err = m.s.Delete(ctx, key, cond)
		default:
			_, err = m.s.Put(ctx, Item{Key: key, Value: encodeJSON(q)}, cond)
		}
		if !errors.Is(err, ErrConditionFailed) {
			if err != nil {
				return fmt.Errorf("metastore: write quota: %w", err)
			}
			return nil
		}
	}
	return fmt.Errorf("metastore: write quota: %w after %d tries", ErrConditionFailed, quotaRetries)
}

// ClientQuotas lists every stored entity's quotas.
func (m *Meta) ClientQuotas(ctx context.Context) ([]ClientQuota, error) {
	items, err := m.s.Query(ctx, pkQuotas, "")
	if err != nil {
		return nil, fmt.Errorf("metastore: list quotas: %w", err)
	}
	out := make([]ClientQuota, 0, len(items))
	for _, it := range items {
		var q ClientQuota
		if err := decodeJSON(it, &q); err != nil {
			return nil, err
		}
		out = append(out, q)
	}
	return out, nil
}

package metastore_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratamq/strata/pkg/metastore"
)

func name(s string) *string { return &s }

// TestClientQuotasAlterMergeRemoveAndRace: values merge per entity, the
// entity's part order does not matter, removing the last value deletes
// the entity, and concurrent alterations of one entity all land.
func TestClientQuotasAlterMergeRemoveAndRace(t *testing.T) {
	ctx := context.Background()
	m := openMeta(t)
	v0, err := m.ChangeVersion(ctx)
	require.NoError(t, err)
	alice := []metastore.QuotaEntityPart{{Type: "user", Name: name("alice")}, {Type: "client-id", Name: nil}}
	aliceReordered := []metastore.QuotaEntityPart{alice[1], alice[0]}
	errs := m.AlterClientQuotas(ctx, []metastore.QuotaAlteration{
		{Entity: alice, Set: map[string]float64{"producer_byte_rate": 1024}},
		{Entity: aliceReordered, Set: map[string]float64{"consumer_byte_rate": 2048}},
	})
	require.Equal(t, []error{nil, nil}, errs)
	v1, err := m.ChangeVersion(ctx)
	require.NoError(t, err)
	require.Greater(t, v1, v0, "an alteration records a change")

	qs, err := m.ClientQuotas(ctx)
	require.NoError(t, err)
	require.Len(t, qs, 1)
	require.Equal(t, metastore.CanonicalQuotaEntity(alice), qs[0].Entity)
	require.Equal(t, map[string]float64{"producer_byte_rate": 1024, "consumer_byte_rate": 2048}, qs[0].Values)

	require.Equal(t, []error{nil}, m.AlterClientQuotas(ctx, []metastore.QuotaAlteration{{Entity: alice, Remove: []string{"producer_byte_rate", "consumer_byte_rate"}}}))
	qs, err = m.ClientQuotas(ctx)
	require.NoError(t, err)
	require.Empty(t, qs, "an entity with no values left is deleted")

	// Removing from an absent entity is not an error and stores nothing.
	require.Equal(t, []error{nil}, m.AlterClientQuotas(ctx, []metastore.QuotaAlteration{{Entity: alice, Remove: []string{"request_percentage"}}}))

	var wg sync.WaitGroup
	keys := []string{"producer_byte_rate", "consumer_byte_rate", "request_percentage"}
	for i, k := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			require.Equal(t, []error{nil}, m.AlterClientQuotas(ctx, []metastore.QuotaAlteration{{Entity: alice, Set: map[string]float64{k: float64(i + 1)}}}))
		}()
	}
	wg.Wait()
	qs, err = m.ClientQuotas(ctx)
	require.NoError(t, err)
	require.Len(t, qs, 1)
	require.Len(t, qs[0].Values, 3, "concurrent alterations of one entity are all kept")
}

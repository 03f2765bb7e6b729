package objstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratamq/strata/pkg/latency"
	"github.com/stratamq/strata/pkg/objstore"
)

// Every request through a Delayed waits its model's time, then reaches
// the store; a context that ends first ends the wait with its error.
func TestDelayedWaitsThenPassesThrough(t *testing.T) {
	ctx := context.Background()
	in := latency.NewInjector(latency.Model{P50: 30 * time.Millisecond, P99: 30 * time.Millisecond})
	d := objstore.NewDelayed(objstore.NewMemory(), in)
	start := time.Now()
	require.NoError(t, d.Put(ctx, "a/b", []byte("v"), objstore.PutOptions{}))
	got, err := d.Get(ctx, "a/b", 0, -1)
	require.NoError(t, err)
	require.Equal(t, "v", string(got))
	objs, err := d.List(ctx, "a/")
	require.NoError(t, err)
	require.Len(t, objs, 1)
	prefixes, err := d.ListPrefixes(ctx, "")
	require.NoError(t, err)
	require.Equal(t, []string{"a/"}, prefixes)
	require.NoError(t, d.Delete(ctx, "a/b"))
	require.GreaterOrEqual(t, time.Since(start), 5*30*time.Millisecond)

	in.SetModel(latency.Model{P50: time.Minute, P99: time.Minute})
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, d.Put(short, "c", nil, objstore.PutOptions{}), context.DeadlineExceeded)
	in.SetModel(latency.Model{})
	_, err = d.Get(ctx, "c", 0, -1)
	require.ErrorIs(t, err, objstore.ErrNotFound, "the cut-short put never reached the store")
}

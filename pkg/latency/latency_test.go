package latency

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	m, err := Parse("s3-standard")
	require.NoError(t, err)
	require.Equal(t, Model{P50: 25 * time.Millisecond, P99: 80 * time.Millisecond}, m)
	m, err = Parse(" 5ms, 20ms ")
	require.NoError(t, err)
	require.Equal(t, Model{P50: 5 * time.Millisecond, P99: 20 * time.Millisecond}, m)
	require.Equal(t, "5ms,20ms", m.String())
	m, err = Parse("")
	require.NoError(t, err)
	require.True(t, m.IsZero())
	for _, bad := range []string{"s3", "5ms", "20ms,5ms", "0s,5ms", "x,5ms", "5ms,y", "1s,2m"} {
		_, err := Parse(bad)
		require.Error(t, err, bad)
	}
}

// Draws follow the model: their median and 99th percentile land near the
// model's (10,000 draws: within a few percent).
func TestDrawsMatchTheModel(t *testing.T) {
	for _, name := range []string{"s3-standard", "s3-express", "dynamodb"} {
		m := Presets[name]
		in := NewInjector(m)
		ds := make([]time.Duration, 20000)
		for i := range ds {
			ds[i] = in.Draw()
		}
		slices.Sort(ds)
		p50, p99 := ds[len(ds)/2], ds[len(ds)*99/100]
		require.InEpsilon(t, float64(m.P50), float64(p50), 0.05, "%s p50 %v", name, p50)
		require.InEpsilon(t, float64(m.P99), float64(p99), 0.08, "%s p99 %v", name, p99)
		require.InEpsilon(t, float64(m.P99), float64(m.Quantile(0.99)), 0.001)
	}
	var none *Injector
	require.Zero(t, none.Draw())
	require.Zero(t, NewInjector(Model{}).Draw())
}

func TestWaitEndsWithItsContext(t *testing.T) {
	in := NewInjector(Model{P50: time.Minute, P99: time.Minute})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	require.ErrorIs(t, in.Wait(ctx), context.DeadlineExceeded)
	require.Less(t, time.Since(start), 10*time.Second)
	in.SetModel(Model{})
	require.NoError(t, in.Wait(context.Background()))
}

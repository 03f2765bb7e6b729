package retry

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestExponentialBackoff(t *testing.T) {
	plain := ExponentialBackoff(time.Second, 10*time.Second, 0, nil)
	var got []time.Duration
	for a := 1; a <= 6; a++ {
		got = append(got, plain(a))
	}
	require.Equal(t, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}, got)

	a := ExponentialBackoff(time.Second, time.Minute, 0.2, rand.NewPCG(1, 2))
	b := ExponentialBackoff(time.Second, time.Minute, 0.2, rand.NewPCG(1, 2))
	distinct := map[time.Duration]bool{}
	for i := 0; i < 100; i++ {
		d := a(3)
		require.Equal(t, d, b(3), "same seed, same delays")
		require.GreaterOrEqual(t, d, 3200*time.Millisecond)
		require.LessOrEqual(t, d, 4800*time.Millisecond)
		distinct[d] = true
	}
	require.Greater(t, len(distinct), 50, "jitter spreads the delays")

	require.NoError(t, DefaultPolicy().Validate())
	require.ErrorIs(t, Policy{MaxAttempts: 0, Backoff: plain}.Validate(), ErrInvalidPolicy)
	require.ErrorIs(t, Policy{MaxAttempts: 1}.Validate(), ErrInvalidPolicy)
}

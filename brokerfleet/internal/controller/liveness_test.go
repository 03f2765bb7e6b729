package controller

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratamq/strata/pkg/metastore"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func reg(id int32, version int64, incarnation string, live bool) metastore.Broker {
	return metastore.Broker{ID: id, Version: version, Incarnation: incarnation, Live: live, Rack: "az-" + string(rune('a'+id))}
}

// A broker whose registration stands still for a full lease, on the
// observer's own clock, is frozen (fenced by the controller) and not live;
// one that heartbeats stays live; a new incarnation counts as restarted
// until applied; dead time is measured from when it was first judged so.
func TestLivenessJudgesOnTheLocalClock(t *testing.T) {
	const lease = 6 * time.Second
	l := NewLiveness(lease)
	v := l.Observe([]metastore.Broker{reg(0, 1, "a", true), reg(1, 1, "b", true), reg(2, 1, "c", false)}, t0)
	require.Equal(t, map[int32]bool{0: true, 1: true}, v.Live, "first sight counts as live; a released registration does not")
	require.Empty(t, v.Frozen)
	require.Equal(t, map[int32]time.Duration{2: 0}, v.DeadFor)

	// 5 s later broker 0 heartbeated, broker 1 did not: still within its
	// lease.
	v = l.Observe([]metastore.Broker{reg(0, 2, "a", true), reg(1, 1, "b", true), reg(2, 1, "c", false)}, t0.Add(5*time.Second))
	require.Equal(t, map[int32]bool{0: true, 1: true}, v.Live)
	require.Empty(t, v.Frozen)

	// A full lease without a heartbeat: frozen.
	v = l.Observe([]metastore.Broker{reg(0, 3, "a", true), reg(1, 1, "b", true), reg(2, 1, "c", false)}, t0.Add(lease))
	require.Equal(t, map[int32]bool{0: true}, v.Live)
	require.Len(t, v.Frozen, 1)
	require.Equal(t, int32(1), v.Frozen[0].ID)
	require.Equal(t, map[int32]time.Duration{1: 0, 2: lease}, v.DeadFor)

	// Broker 1 comes back as a new incarnation: live, and restarted until
	// the controller applied it.
	v = l.Observe([]metastore.Broker{reg(0, 4, "a", true), reg(1, 2, "b2", true), reg(2, 1, "c", false)}, t0.Add(lease+time.Second))
	require.True(t, v.Live[1])
	require.Equal(t, map[int32]bool{1: true}, v.Restarted)
	require.NotContains(t, v.DeadFor, int32(1), "dead time resets once live")
	v2 := l.Observe([]metastore.Broker{reg(0, 5, "a", true), reg(1, 3, "b2", true), reg(2, 1, "c", false)}, t0.Add(lease+2*time.Second))
	require.Equal(t, map[int32]bool{1: true}, v2.Restarted, "a restart counts until applied")
	l.Applied(v2)
	v3 := l.Observe([]metastore.Broker{reg(0, 6, "a", true), reg(1, 4, "b2", true), reg(2, 1, "c", false)}, t0.Add(lease+3*time.Second))
	require.Empty(t, v3.Restarted)
}

// A paused observer does not declare everybody dead at once: what counts
// is how long it saw a registration stand still, and a registration it
// has just read again after the pause moved.
func TestLivenessAfterTheObserverPaused(t *testing.T) {
	l := NewLiveness(6 * time.Second)
	l.Observe([]metastore.Broker{reg(0, 1, "a", true), reg(1, 1, "b", true)}, t0)
	// The observer was paused for a minute; meanwhile both heartbeated.
	v := l.Observe([]metastore.Broker{reg(0, 20, "a", true), reg(1, 21, "b", true)}, t0.Add(time.Minute))
	require.Equal(t, map[int32]bool{0: true, 1: true}, v.Live)
	require.Empty(t, v.Frozen)
}

package quota

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratamq/strata/pkg/clock"
	"github.com/stratamq/strata/pkg/metastore"
)

func str(s string) *string { return &s }

func entity(user, client *string, userSet, clientSet bool) []metastore.QuotaEntityPart {
	var e []metastore.QuotaEntityPart
	if userSet {
		e = append(e, metastore.QuotaEntityPart{Type: EntityUser, Name: user})
	}
	if clientSet {
		e = append(e, metastore.QuotaEntityPart{Type: EntityClientID, Name: client})
	}
	return e
}

// TestPrecedenceIsKafkas: with all eight levels configured (each with its
// own bound), removing them from the most specific down exposes the next
// level, in the order of Kafka's default quota callback.
func TestPrecedenceIsKafkas(t *testing.T) {
	levels := []struct {
		entity []metastore.QuotaEntityPart
		user   string // the names the rate is kept under
		client string
	}{
		{entity(str("alice"), str("app"), true, true), "alice", "app"},
		{entity(str("alice"), nil, true, true), "alice", "app"},
		{entity(str("alice"), nil, true, false), "alice", ""},
		{entity(nil, str("app"), true, true), "alice", "app"},
		{entity(nil, nil, true, true), "alice", "app"},
		{entity(nil, nil, true, false), "alice", ""},
		{entity(nil, str("app"), false, true), "", "app"},
		{entity(nil, nil, false, true), "", "app"},
	}
	for first := range levels {
		var qs []metastore.ClientQuota
		for i, l := range levels[first:] {
			qs = append(qs, metastore.ClientQuota{Entity: l.entity, Values: map[string]float64{Keys[Produce]: float64(100 * (first + i + 1))}})
		}
		// A quota of another kind at the most specific level does not
		// hide the produce quota below it.
		qs = append(qs, metastore.ClientQuota{Entity: entity(str("alice"), str("app"), true, true), Values: map[string]float64{Keys[Fetch]: 7}})
		m := New(Options{Clock: clock.NewFake(time.Unix(0, 0))})
		m.Set(qs)
		m.mu.Lock()
		bound, key, ok := m.lookup(Produce, "alice", "app")
		m.mu.Unlock()
		require.True(t, ok)
		require.Equal(t, float64(100*(first+1)), bound, "level %d", first+1)
		require.Equal(t, sensorKey{Produce, levels[first].user, levels[first].client}, key, "level %d", first+1)
		require.Equal(t, 7.0, m.Bound(Fetch, "alice", "app"))
		require.Zero(t, m.Bound(Request, "alice", "app"))
	}
}

// TestSharingFollowsTheMatchedLevel: a user's quota is shared by all its
// client ids; the default user's quota is each user's own.
func TestSharingFollowsTheMatchedLevel(t *testing.T) {
	fc := clock.NewFake(time.Unix(0, 0))
	m := New(Options{Clock: fc})
	m.Set([]metastore.ClientQuota{
		{Entity: entity(str("alice"), nil, true, false), Values: map[string]float64{Keys[Produce]: 100}},
		{Entity: entity(nil, nil, true, false), Values: map[string]float64{Keys[Produce]: 100}},
	})
	// 10 windows' worth of quota (the initial span) is free; more is not.
	require.Zero(t, m.Record(Produce, "alice", "a", 600))
	require.NotZero(t, m.Record(Produce, "alice", "b", 600), "alice's client ids share her quota")
	require.Zero(t, m.Record(Produce, "bob", "a", 600))
	require.Zero(t, m.Record(Produce, "carol", "a", 600), "each user has the default user's quota to itself")
	require.NotZero(t, m.Record(Produce, "carol", "b", 600))
}

// TestThrottleTime: the throttle time is the debt over the quota, a new
// client may burst one quota window (11 s) of its quota, and the debt is
// bounded by one burst.
func TestThrottleTime(t *testing.T) {
	fc := clock.NewFake(time.Unix(0, 0))
	m := New(Options{Clock: fc})
	m.Set([]metastore.ClientQuota{{Entity: entity(nil, str("c"), false, true), Values: map[string]float64{Keys[Produce]: 100, Keys[Request]: 50}}})
	require.Zero(t, m.Record(Produce, "", "c", 1100), "the burst")
	require.Equal(t, 9*time.Second, m.Record(Produce, "", "c", 900))
	// A huge request owes at most one burst's time.
	require.Equal(t, 11*time.Second, m.Record(Produce, "", "c", 1e9))
	fc.Advance(11 * time.Second)
	require.Zero(t, m.Record(Produce, "", "c", 0), "repaid")
	require.Equal(t, time.Second, m.Record(Produce, "", "c", 100))
	// Request time: 5.5 thread-seconds (50% of 11 s) free, then 50% of a
	// second per second.
	require.Zero(t, m.Record(Request, "", "c", 5.5))
	require.Equal(t, 2*time.Second, m.Record(Request, "", "c", 1))
	// Without a quota nothing is throttled or kept.
	require.Zero(t, m.Record(Produce, "", "other", 1e12))
	m.mu.Lock()
	require.Len(t, m.sensors, 2)
	m.mu.Unlock()
	// A changed bound starts a new allowance.
	m.Set([]metastore.ClientQuota{{Entity: entity(nil, str("c"), false, true), Values: map[string]float64{Keys[Produce]: 1000}}})
	require.Zero(t, m.Record(Produce, "", "c", 11000))
}

// TestAProducerThatHonoursThrottlesGetsItsQuota simulates producers
// that send as fast as they may, waiting out each throttle: after the
// burst, over any 30 s, each gets its quota within 1% (plus one request's
// worth: a 30 s span holds whole requests), and never more than the burst
// ahead of it.
func TestAProducerThatHonoursThrottlesGetsItsQuota(t *testing.T) {
	const bound = 256 << 10
	for _, chunk := range []float64{1 << 10, 16 << 10, 256 << 10, 1 << 20} {
		fc := clock.NewFake(time.Unix(0, 0))
		m := New(Options{Clock: fc})
		m.Set([]metastore.ClientQuota{{Entity: entity(str("p"), nil, true, false), Values: map[string]float64{Keys[Produce]: bound}}})
		start := fc.Now()
		sent := 0.0
		var marks []float64 // bytes sent by each second
		for fc.Now().Sub(start) < 120*time.Second {
			sent += chunk
			th := m.Record(Produce, "p", "x", chunk)
			fc.Advance(th + time.Millisecond) // 1 ms per request
			for len(marks) <= int(fc.Now().Sub(start)/time.Second) {
				marks = append(marks, sent)
			}
			elapsed := fc.Now().Sub(start).Seconds()
			require.LessOrEqual(t, sent, bound*(elapsed+11)+chunk, "chunk %v at %.1fs", chunk, elapsed)
		}
		for from := 12; from+30 < len(marks); from++ {
			got := (marks[from+30] - marks[from]) / 30
			require.InEpsilon(t, bound, got, 0.01+chunk/bound/30, "chunks of %v, %ds to %ds: %.0f B/s", chunk, from, from+30, got)
		}
	}
}

// TestIdleRatesAreSwept: client ids that come and go do not grow the
// map without bound.
func TestIdleRatesAreSwept(t *testing.T) {
	fc := clock.NewFake(time.Unix(0, 0))
	m := New(Options{Clock: fc})
	m.Set([]metastore.ClientQuota{{Entity: entity(nil, nil, false, true), Values: map[string]float64{Keys[Produce]: 100}}})
	for i := range 1000 {
		m.Record(Produce, "", string(rune('a'+i%26))+time.Duration(i).String(), 1)
	}
	fc.Advance(2 * time.Minute)
	m.Record(Produce, "", "new", 1)
	m.mu.Lock()
	defer m.mu.Unlock()
	require.Len(t, m.sensors, 1)
}

package metrics

import (
	"slices"
	"time"
)

// The lag history: each group refresh (SetGroups) appends one sample per
// group and partition this broker coordinates to a bounded ring, which the
// console draws as lag over time (GroupLag). It is memory only: a
// coordinator that moves or restarts starts a new history, and a group
// that leaves the refresh (deleted, or coordinated elsewhere) is dropped.
const (
	// LagHistorySamples is how many samples a series keeps: 30 minutes at
	// the default GroupStatsInterval of 5 s.
	LagHistorySamples = 360
	// LagHistorySeries bounds the series (group, topic, partition) a
	// broker keeps, so a broker coordinating very many groups holds at
	// most LagHistorySeries × LagHistorySamples samples (24 bytes each:
	// about 17 MiB). Series beyond it are not recorded.
	LagHistorySeries = 2048
)

// LagSample is a partition's committed offset and log end offset at one
// refresh; End < 0 when the log end could not be learned.
type LagSample struct {
	At        time.Time
	Committed int64
	End       int64
}

// LagSeries is one group partition's samples, oldest first.
type LagSeries struct {
	Topic     string
	Partition int32
	Samples   []LagSample
}

type lagKey struct {
	group, topic string
	partition    int32
}

// lagRing is one series' ring buffer.
type lagRing struct {
	buf  [LagHistorySamples]lagSample
	next int // where the next sample goes
	n    int // samples held
}

// lagSample is LagSample without the time.Time's location pointer.
type lagSample struct {
	atMs, committed, end int64
}

func (r *lagRing) add(s lagSample) {
	r.buf[r.next] = s
	r.next = (r.next + 1) % len(r.buf)
	r.n = min(r.n+1, len(r.buf))
}

func (r *lagRing) samples() []LagSample {
	out := make([]LagSample, 0, r.n)
	start := (r.next - r.n + len(r.buf)) % len(r.buf)
	for i := range r.n {
		s := r.buf[(start+i)%len(r.buf)]
		out = append(out, LagSample{At: time.UnixMilli(s.atMs), Committed: s.committed, End: s.end})
	}
	return out
}

// recordLag appends groups' offsets at now to the history and drops the
// series no longer reported. Holds m.groupsMu.
func (m *Broker) recordLag(groups []GroupStat, now time.Time) {
	if m.lag == nil {
		m.lag = map[lagKey]*lagRing{}
	}
	seen := make(map[lagKey]bool, len(m.lag))
	for _, g := range groups {
		for _, o := range g.Offsets {
			k := lagKey{g.Group, o.Topic, o.Partition}
			seen[k] = true
			r := m.lag[k]
			if r == nil {
				if len(m.lag) >= LagHistorySeries {
					continue
				}
				r = &lagRing{}
				m.lag[k] = r
			}
			r.add(lagSample{now.UnixMilli(), o.Committed, o.End})
		}
	}
	for k := range m.lag {
		if !seen[k] {
			delete(m.lag, k)
		}
	}
}

// GroupLag returns the lag history of group on this broker, by topic and
// partition; false when this broker has none (it does not coordinate the
// group, or the group has no committed offsets).
func (m *Broker) GroupLag(group string) ([]LagSeries, bool) {
	if m == nil {
		return nil, false
	}
	m.groupsMu.Lock()
	defer m.groupsMu.Unlock()
	var out []LagSeries
	for k, r := range m.lag {
		if k.group == group {
			out = append(out, LagSeries{Topic: k.topic, Partition: k.partition, Samples: r.samples()})
		}
	}
	slices.SortFunc(out, func(a, b LagSeries) int {
		if a.Topic != b.Topic {
			if a.Topic < b.Topic {
				return -1
			}
			return 1
		}
		return int(a.Partition) - int(b.Partition)
	})
	return out, len(out) > 0
}

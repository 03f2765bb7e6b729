package metrics

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The cleaner's series come from its stats at scrape time: counters,
// per-replica dirty ratio and age of the last clean (from broker start
// when none), and the count of uncleanable replicas.
func TestCleanerSeries(t *testing.T) {
	m := New()
	start := time.Unix(1_000_000, 0)
	now := start
	stats := CleanerStats{ReadBytes: 300, WrittenBytes: 100, Passes: 4, DirtyBytes: 250, BusySeconds: 1.5, Partitions: []CleanerPartition{
		{Topic: "a", Partition: 0, DirtyRatio: 0.25, LastClean: start.Add(40 * time.Second)},
		{Topic: "a", Partition: 1, DirtyRatio: 0.75, Uncleanable: true},
		{Topic: "b", Partition: 0, Uncleanable: true},
	}}
	m.CollectCleaner(func() CleanerStats { return stats }, func() time.Time { return now })
	now = start.Add(time.Minute)
	fams, err := m.Gatherer().Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, f := range fams {
		for _, s := range f.GetMetric() {
			key := f.GetName()
			for _, l := range s.GetLabel() {
				key += "," + l.GetValue() // labels come sorted: partition, topic
			}
			if s.GetCounter() != nil {
				got[key] = s.GetCounter().GetValue()
			} else if s.GetGauge() != nil {
				got[key] = s.GetGauge().GetValue()
			}
		}
	}
	for k, v := range map[string]float64{
		"strata_cleaner_read_bytes_total":             300,
		"strata_cleaner_written_bytes_total":          100,
		"strata_cleaner_passes_total":                 4,
		"strata_cleaner_dirty_ratio,0,a":              0.25,
		"strata_cleaner_dirty_ratio,1,a":              0.75,
		"strata_cleaner_seconds_since_last_clean,0,a": 20,
		"strata_cleaner_seconds_since_last_clean,1,a": 60,
		"strata_cleaner_uncleanable_partitions":       2,
	} {
		require.Equal(t, v, got[k], k)
	}
}

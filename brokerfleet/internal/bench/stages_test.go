package bench

import (
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestStagesBetweenScrapes: percentiles come from the difference of two
// scrapes, interpolated within buckets, in the stages' order.
func TestStagesBetweenScrapes(t *testing.T) {
	inf := math.Inf(1)
	before := stageCounts{"append": {0.001: 10, 0.002: 10, inf: 10}}
	after := stageCounts{
		"append":           {0.001: 60, 0.002: 110, inf: 110}, // 50 in (0, 1 ms], 50 in (1, 2 ms]
		"response_written": {0.001: 0, 0.002: 100, inf: 100},  // all in (1, 2 ms]
		"follower_acked":   {0.001: 0, 0.002: 0, inf: 0},      // nothing: left out
		"unknown_stage":    {0.001: 5, inf: 5},                // not a stage of the report
	}
	got := stagesBetween(before, after)
	require.Len(t, got, 2)
	require.Equal(t, "append", got[0].Name)
	require.EqualValues(t, 100, got[0].Count)
	require.InDelta(t, 1000, got[0].P50, 1e-6) // the 50th of 100 is the top of the first bucket
	require.InDelta(t, 1980, got[0].P99, 1e-6) // 49 of 50 into (1, 2 ms]
	require.Equal(t, "response_written", got[1].Name)
	require.InDelta(t, 1500, got[1].P50, 1e-6)
	// Beyond the last finite bound: that bound.
	require.InDelta(t, 0.002, bucketQuantile(0.99, []float64{0.001, 0.002, inf}, []uint64{0, 1, 100}), 1e-12)
}

// TestScalingTable: a workload at several partition counts is compared
// with its fewest partitions, per target.
func TestScalingTable(t *testing.T) {
	r := &Report{Results: []Result{
		{Target: "dev", Workload: "1KiB unkeyed p12 acks=all", Partitions: 12, Acks: "all", RecordBytes: 1024, Records: 10, ProduceMBps: 200, ConsumeMBps: 400},
		{Target: "dev", Workload: "1KiB unkeyed p1000 acks=all", Partitions: 1000, Acks: "all", RecordBytes: 1024, Records: 10, ProduceMBps: 160, ConsumeMBps: 100},
		{Target: "kfake", Workload: "1KiB unkeyed p12 acks=all", Partitions: 12, Acks: "all", RecordBytes: 1024, Records: 10, ProduceMBps: 300, ConsumeMBps: 300},
	}}
	var b strings.Builder
	r.scalingTable(&b)
	require.Equal(t, "\npartition scaling on dev (1KiB unkeyed p12 acks=all, as p12): p1000 produce 0.80× consume 0.25×;\n", b.String())
}

// TestPeerTable: Strata's workloads against JetStream's run of the same
// records, the baseline left out.
func TestPeerTable(t *testing.T) {
	r := &Report{Baseline: "kfake", Results: []Result{
		{Target: "dev", Workload: "w", RecordBytes: 1024, Records: 10, Acks: "all", ProduceMBps: 200, ConsumeMBps: 400, OneInFlightLatency: Latency{P99: 600}},
		{Target: "kfake", Workload: "w", RecordBytes: 1024, Records: 10, Acks: "all", ProduceMBps: 300, ConsumeMBps: 300},
		{Target: "jetstream", Workload: "w", RF: 3, RecordBytes: 1024, Records: 10, Acks: "all", ProduceMBps: 40, ConsumeMBps: 100, OneInFlightLatency: Latency{P99: 1200}},
	}}
	var b strings.Builder
	r.peerTable(&b)
	require.Equal(t, "\nvs jetstream R3: w on dev: produce 5.00×, consume 4.00×, one-in-flight p99 0.50× (0.60 vs 1.20 ms)\n", b.String())
}

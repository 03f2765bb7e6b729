package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratamq/strata/brokerfleet/internal/bench"
)

// TestBenchMeasuresEveryTarget runs `brokerfleet bench` on two small
// workloads against dev and kfake (each a child process) and a running dev
// cluster given by -bootstrap, and checks the JSON report: every workload
// on every target, record counts, sane percentiles, ratios against kfake
// in the table, CPU and memory for the child processes only, the idle
// measurement, a group join of each protocol and the time to ready after
// a kill -9.
func TestBenchMeasuresEveryTarget(t *testing.T) {
	other := startDev(t, t.TempDir())
	out := filepath.Join(t.TempDir(), "bench.json")
	prof := t.TempDir()
	cmd := exec.Command(binPath, "bench", "-bytes", "2MiB", "-record-bytes", "100B,64KiB", "-keyed", "true",
		"-partitions", "3", "-acks", "all", "-durability", "replicated,fsync", "-latency-samples", "50",
		"-disk-bytes", "8MiB", "-idle-partitions", "30", "-idle-for", "1s", "-bootstrap", other.addr,
		"-restart-bytes", "4MiB", "-restart-segment-bytes", "1MiB", "-groups", "2",
		"-progress=false", "-json", out, "-profile", prof, "-data", t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "stderr: %s", stderr.String())

	b, err := os.ReadFile(out)
	require.NoError(t, err)
	var rep bench.Report
	require.NoError(t, json.Unmarshal(b, &rep))
	require.Equal(t, "kfake", rep.Baseline)
	require.Greater(t, rep.DiskWriteMBps, 0.0)

	// 2 sizes × 2 durability modes on dev and bootstrap, 2 sizes on kfake.
	count := map[string]int{}
	var devCPU float64
	for _, r := range rep.Results {
		count[r.Target]++
		require.Empty(t, r.Error, "%s on %s", r.Workload, r.Target)
		require.Equal(t, int64(2<<20)/int64(r.RecordBytes), r.Records, r.Workload)
		require.True(t, r.Keyed)
		require.Greater(t, r.ProduceMBps, 0.0)
		require.Greater(t, r.ConsumeMBps, 0.0)
		l := r.OneInFlightLatency
		require.Equal(t, int64(50), l.Count)
		require.True(t, 0 < l.P50 && l.P50 <= l.P99 && l.P99 <= l.P999 && l.P999 <= l.Max, "%+v", l)
		require.Equal(t, r.Records, r.LoadedLatency.Count)
		switch r.Target {
		case "dev", "kfake":
			require.Greater(t, r.PeakRSS, int64(1<<20), "%s: peak memory of the child process", r.Target)
			require.GreaterOrEqual(t, r.ProduceCPU, 0.0)
			if r.Target == "dev" {
				devCPU += r.ProduceCPU + r.ConsumeCPU // /proc counts in 10 ms ticks: kfake may use less
			}
		case "bootstrap":
			require.Zero(t, r.PeakRSS, "no process to measure behind -bootstrap")
		}
		if r.Target == "dev" {
			// The one-in-flight phase's stages, from dev's own metrics:
			// each produce was appended, sent to both followers, acked by
			// them, committed and answered.
			got := map[string]bench.Stage{}
			for _, s := range r.Stages {
				got[s.Name] = s
				require.True(t, 0 < s.P50 && s.P50 <= s.P99, "%s: %+v", r.Workload, s)
			}
			for _, name := range []string{"append", "follower_fetch_answered", "follower_append", "follower_acked", "high_watermark_advanced", "response_written"} {
				require.GreaterOrEqual(t, got[name].Count, int64(50), "%s: stage %s of %+v", r.Workload, name, r.Stages)
			}
			require.GreaterOrEqual(t, got["follower_acked"].P50, got["follower_fetch_answered"].P50, "%s: acked after answered", r.Workload)
		} else {
			require.Empty(t, r.Stages, "%s: stages come from Strata's metrics", r.Target)
		}
		if r.Target == "kfake" {
			require.Equal(t, 1, r.RF)
			require.Empty(t, r.Durability)
		} else {
			require.Equal(t, 3, r.RF)
			require.Contains(t, []string{"replicated", "fsync"}, r.Durability)
		}
	}
	require.Equal(t, map[string]int{"dev": 4, "bootstrap": 4, "kfake": 2}, count)
	require.Greater(t, devCPU, 0.0, "CPU of the dev process")

	require.NotNil(t, rep.Idle)
	require.Equal(t, 30, rep.Idle.Partitions)
	require.Greater(t, rep.Idle.RSSAfter, int64(0))
	require.GreaterOrEqual(t, rep.Idle.CPUPercent, 0.0)

	// A second member joined a group of each protocol and consumed.
	require.Len(t, rep.Groups, 2)
	for i, proto := range []string{"classic", "consumer"} {
		g := rep.Groups[i]
		require.Equal(t, proto, g.Protocol)
		require.Equal(t, 2, g.Members)
		require.Greater(t, g.JoinSeconds, 0.0)
		require.GreaterOrEqual(t, g.MaxPauseSeconds, 0.0)
	}

	// The dev target was killed with SIGKILL and came back on its data.
	require.NotNil(t, rep.Restart)
	require.Equal(t, int64(4<<20), rep.Restart.LogBytes)
	require.Greater(t, rep.Restart.ServeSeconds, 0.0)
	require.GreaterOrEqual(t, rep.Restart.ISRSeconds, rep.Restart.ServeSeconds)

	// The table shows each row once, with ratios to kfake on the others.
	table := stdout.String()
	require.Contains(t, table, "100B keyed p3 acks=all fsync")
	require.Contains(t, table, "64KiB keyed p3 acks=all replicated")
	require.Equal(t, 10, strings.Count(table, " p3 acks=all")-strings.Count(table, "stages, one in flight:"), table)
	require.Equal(t, 4, strings.Count(table, "stages, one in flight:"), "one breakdown per dev workload: %s", table)
	require.Contains(t, table, "idle: 30 partitions")
	require.Contains(t, table, "restart after kill -9: 4MiB")
	require.Contains(t, table, "group join: consumer protocol, member 2 of 2")

	for _, f := range []string{"dev.cpu.pprof", "dev.allocs.pprof", "client.cpu.pprof"} {
		st, err := os.Stat(filepath.Join(prof, f))
		require.NoError(t, err, f)
		require.Greater(t, st.Size(), int64(0), f)
	}
}

// TestBenchJetStream runs one small workload on dev and on the JetStream
// target (three NATS nodes in a child process): every record published
// and read back, latency percentiles in order, CPU and memory of the
// child, and the table's comparison line.
func TestBenchJetStream(t *testing.T) {
	out := filepath.Join(t.TempDir(), "bench.json")
	cmd := exec.Command(binPath, "bench", "-targets", "dev,jetstream", "-bytes", "2MiB", "-latency-samples", "50",
		"-disk-bytes", "0", "-progress=false", "-json", out, "-data", t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "stderr: %s", stderr.String())
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	var rep bench.Report
	require.NoError(t, json.Unmarshal(b, &rep))
	require.Len(t, rep.Results, 2)
	js := rep.Results[1]
	require.Equal(t, "jetstream", js.Target)
	require.Empty(t, js.Error)
	require.Equal(t, 3, js.RF)
	require.Equal(t, int64(2<<20/1024), js.Records)
	require.Equal(t, js.Records, js.LoadedLatency.Count, "every publish acknowledged")
	require.Greater(t, js.ProduceMBps, 0.0)
	require.Greater(t, js.ConsumeMBps, 0.0)
	l := js.OneInFlightLatency
	require.Equal(t, int64(50), l.Count)
	require.True(t, 0 < l.P50 && l.P50 <= l.P99 && l.P99 <= l.Max, "%+v", l)
	require.Greater(t, js.PeakRSS, int64(1<<20))
	require.Empty(t, js.Stages)
	require.Contains(t, stdout.String(), "vs jetstream R3: 1KiB unkeyed p12 acks=all replicated on dev: produce ")
}

// TestBenchCompaction runs the compaction measurement on a tiny workload
// (4 MiB of 100 B records over the 10,000 keys, 64 KiB segments): both produce
// throughputs, a cleaner throughput from its passes, and a compacted log
// far smaller than the delete topic's.
func TestBenchCompaction(t *testing.T) {
	cmd := exec.Command(binPath, "bench", "-compaction-only", "-bytes", "4MiB", "-record-bytes", "100B", "-partitions", "2",
		"-compaction-segment-bytes", "65536", "-progress=false")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "stderr: %s", stderr.String())
	out := stdout.String()
	t.Log("\n" + out)
	for _, want := range []string{"produce, cleanup.policy=delete", "produce, cleanup.policy=compact, cleaner running", "cleaner throughput (dirty log processed)", "compacted log size"} {
		require.Contains(t, out, want)
	}
	var logMB, deleteMB float64
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "compacted log size") {
			_, err := fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(l, "compacted log size")), "%f MB (delete topic: %f MB)", &logMB, &deleteMB)
			require.NoError(t, err, l)
		}
	}
	require.Positive(t, deleteMB)
	require.Less(t, logMB, deleteMB/2, "the compacted topic holds about one record per key (of four written)")
	err := exec.Command(binPath, "bench", "-compaction-only", "-tier").Run()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit)
	require.Equal(t, 2, exit.ExitCode(), "-compaction-only with -tier is a usage error")
}

// TestBenchShareGroups runs the share-group measurement on a tiny topic
// (2 MiB of 1 KiB records in 12 partitions): for 1 and 2 consumers a
// share group and a classic group each read every record once, the
// brokers counted every offset acknowledged, and the figures are filled.
func TestBenchShareGroups(t *testing.T) {
	out := filepath.Join(t.TempDir(), "bench.json")
	cmd := exec.Command(binPath, "bench", "-targets", "dev", "-bytes", "1MiB", "-latency-samples", "10", "-disk-bytes", "0",
		"-share", "1,2", "-share-bytes", "2MiB", "-progress=false", "-json", out, "-data", t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "stderr: %s", stderr.String())
	t.Log("\n" + stdout.String())

	b, err := os.ReadFile(out)
	require.NoError(t, err)
	var rep bench.Report
	require.NoError(t, json.Unmarshal(b, &rep))
	s := rep.Share
	require.NotNil(t, s)
	require.Equal(t, 12, s.Partitions)
	require.Equal(t, 3, s.RF)
	require.Equal(t, int64(2<<20)/1024, s.Records)
	require.Len(t, s.Runs, 4, "share and classic for each of 1 and 2 consumers")
	for i, r := range s.Runs {
		require.Equal(t, []int{1, 1, 2, 2}[i], r.Consumers)
		require.Equal(t, []string{"share", "classic"}[i%2], r.Group)
		require.Equal(t, s.Records, r.Records, "%s group of %d: every record acknowledged once", r.Group, r.Consumers)
		require.GreaterOrEqual(t, r.Deliveries, r.Records)
		require.True(t, r.Active >= 1 && r.Active <= r.Consumers, "%+v", r)
		require.Positive(t, r.MBps)
		require.InDelta(t, r.RecordsPerSec, float64(r.Records)/r.Seconds, 1)
		l := r.AckLatency
		require.Positive(t, l.Count)
		require.True(t, 0 < l.P50 && l.P50 <= l.P99 && l.P99 <= l.Max, "%+v", l)
		require.Positive(t, r.MetastoreWrites, "%s group of %d", r.Group, r.Consumers)
		require.InDelta(t, float64(r.MetastoreWrites)*1000/float64(r.Records), r.WritesPerThousand, 1e-9)
		if r.Group == "share" {
			require.Equal(t, r.Records, r.BrokerAcked, "the brokers counted every acknowledgement")
			require.Positive(t, r.ShareStateWrites)
			require.LessOrEqual(t, r.ShareStateWrites, r.MetastoreWrites)
		} else {
			require.Zero(t, r.BrokerAcked)
		}
	}
	table := stdout.String()
	require.Contains(t, table, "share groups: 2048 records of 1KiB in 12 partitions × RF 3 on dev")
	require.Contains(t, table, "metastore writes/1,000")
}

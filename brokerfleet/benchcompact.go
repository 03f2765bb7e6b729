package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/stratamq/strata/brokerfleet/internal/bench"
	"github.com/stratamq/strata/brokerfleet/internal/broker"
)

// compactResult is what the compaction run measures.
type compactResult struct {
	records, keys   int64
	produced        int64 // bytes of record values per topic
	deleteMBps      float64
	compactMBps     float64 // produce throughput while the cleaner runs
	cleanerDirtyMB  float64 // dirty log the cleaner processed, whole run
	cleanerBusySecs float64
	cleanerReadMB   float64
	cleanerWriteMB  float64
	passes          float64
	settle          time.Duration // from the last ack until the table was compacted
	logMB           float64       // the compacted topic's log once compacted
	deleteLogMB     float64
}

// benchCompaction produces the same keyed workload (cfg, with 10,000
// keys) to a topic with cleanup.policy=delete and to one with
// cleanup.policy=compact on one in-process broker, the cleaner running
// while the second is produced, and reports both produce throughputs and
// the cleaner's throughput: dirty log processed over the time spent in
// passes, from the broker's metrics.
func benchCompaction(ctx context.Context, cfg bench.Config, segmentBytes int64, stderr io.Writer) (compactResult, error) {
	res := compactResult{keys: 10000}
	cfg.Keyed = true
	dir, err := os.MkdirTemp("", "strata-bench-compaction-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	mf := metaFlags{spec: "embedded"}
	meta, closer, err := mf.open(ctx, dir)
	if err != nil {
		return res, err
	}
	defer closer.Close()
	bcfg := broker.DefaultConfig()
	bcfg.DataDir, bcfg.Meta = filepath.Join(dir, "broker-0"), meta
	bcfg.MaintenanceInterval, bcfg.Cleaner.Backoff = 200*time.Millisecond, 100*time.Millisecond
	bcfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return res, err
	}
	bcfg.Advertise = ln.Addr().String()
	b, err := broker.New(bcfg)
	if err != nil {
		ln.Close()
		return res, err
	}
	defer b.Close()
	go b.Serve(ln)
	addr := ln.Addr().String()

	prod, value, err := bench.Producer(cfg, "", addr)
	if err != nil {
		return res, err
	}
	defer prod.Close()
	adm := kadm.NewClient(prod)
	seg := fmt.Sprint(segmentBytes)
	for name, policy := range map[string]string{"bench-delete": "delete", "bench-compact": "compact"} {
		r, err := adm.CreateTopic(ctx, cfg.Partitions, 1, map[string]*string{
			"cleanup.policy": kadm.StringPtr(policy), "segment.bytes": &seg, "segment.ms": kadm.StringPtr("1000"),
		}, name)
		if err == nil {
			err = r.Err
		}
		if err != nil {
			return res, fmt.Errorf("create %s: %w", name, err)
		}
	}
	res.records = cfg.Records()
	res.produced = res.records * int64(cfg.RecordBytes)
	pctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	mb := float64(res.produced) / 1e6
	for _, name := range []string{"bench-delete", "bench-compact"} {
		p, _, err := bench.Producer(cfg, name, addr)
		if err != nil {
			return res, err
		}
		d, err := bench.Produce(pctx, cfg, p, value, res.records, nil, nil)
		p.Close()
		if err != nil {
			return res, fmt.Errorf("produce to %s: %w", name, err)
		}
		if name == "bench-delete" {
			res.deleteMBps = mb / d.Seconds()
		} else {
			res.compactMBps = mb / d.Seconds()
		}
	}

	// The cleaner finishes: every key once, apart from the active
	// segments' records (segment.ms rolls them within a second).
	start := time.Now()
	var last float64 = -1
	for stable := 0; stable < 5; time.Sleep(time.Second) {
		if err := pctx.Err(); err != nil {
			return res, fmt.Errorf("waiting for the cleaner: %w", err)
		}
		m, err := cleanerSeries(b.Gatherer())
		if err != nil {
			return res, err
		}
		if m["strata_cleaner_dirty_bytes_total"] == last {
			stable++
		} else {
			stable, last = 0, m["strata_cleaner_dirty_bytes_total"]
			res.settle = time.Since(start)
		}
	}
	m, err := cleanerSeries(b.Gatherer())
	if err != nil {
		return res, err
	}
	res.cleanerDirtyMB = m["strata_cleaner_dirty_bytes_total"] / 1e6
	res.cleanerBusySecs = m["strata_cleaner_busy_seconds_total"]
	res.cleanerReadMB = m["strata_cleaner_read_bytes_total"] / 1e6
	res.cleanerWriteMB = m["strata_cleaner_written_bytes_total"] / 1e6
	res.passes = m["strata_cleaner_passes_total"]
	res.logMB = float64(logBytes(bcfg.DataDir, "bench-compact")) / 1e6
	res.deleteLogMB = float64(logBytes(bcfg.DataDir, "bench-delete")) / 1e6
	if res.passes == 0 {
		return res, errors.New("the cleaner made no pass")
	}
	return res, nil
}

// cleanerSeries reads a broker's unlabelled counters (the cleaner's).
func cleanerSeries(g prometheus.Gatherer) (map[string]float64, error) {
	fams, err := g.Gather()
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			if m.GetCounter() != nil && len(m.GetLabel()) == 0 {
				out[f.GetName()] += m.GetCounter().GetValue()
			}
		}
	}
	return out, nil
}

// logBytes sums the segment files of a topic's logs under a broker's data
// directory.
func logBytes(dataDir, topicName string) int64 {
	var n int64
	matches, _ := filepath.Glob(filepath.Join(dataDir, "logs", topicName+"-*", "*", "*.log"))
	for _, m := range matches {
		if st, err := os.Stat(m); err == nil {
			n += st.Size()
		}
	}
	return n
}

func runCompactionBench(ctx context.Context, cfg bench.Config, segmentBytes int64, stdout, stderr io.Writer) error {
	if segmentBytes < 1024 {
		return usageError{fmt.Errorf("invalid value %d for flag -compaction-segment-bytes: below 1024", segmentBytes)}
	}
	fmt.Fprintln(stdout, "== strata: compacted topics")
	r, err := benchCompaction(ctx, cfg, segmentBytes, stderr)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "workload: %d records of %d B over %d keys, %d partitions, acks=%s, %s segments, one broker, 1 cleaner thread\n\n",
		r.records, cfg.RecordBytes, r.keys, cfg.Partitions, cfg.Acks, bench.Size(segmentBytes))
	fmt.Fprintf(stdout, "%-48s %10.1f MB/s\n", "produce, cleanup.policy=delete", r.deleteMBps)
	fmt.Fprintf(stdout, "%-48s %10.1f MB/s  (ratio %.2f)\n", "produce, cleanup.policy=compact, cleaner running", r.compactMBps, r.compactMBps/r.deleteMBps)
	fmt.Fprintf(stdout, "%-48s %10.1f MB/s  (%.0f MB dirty in %.1f s of passes, %d passes)\n", "cleaner throughput (dirty log processed)",
		r.cleanerDirtyMB/max(r.cleanerBusySecs, 1e-9), r.cleanerDirtyMB, r.cleanerBusySecs, int(r.passes))
	fmt.Fprintf(stdout, "%-48s %10.0f MB read, %.0f MB written\n", "cleaner I/O", r.cleanerReadMB, r.cleanerWriteMB)
	fmt.Fprintf(stdout, "%-48s %10.1f s\n", "compacted after the last ack in", r.settle.Seconds())
	fmt.Fprintf(stdout, "%-48s %10.1f MB (delete topic: %.1f MB)\n", "compacted log size", r.logMB, r.deleteLogMB)
	return nil
}

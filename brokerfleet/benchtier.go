package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratamq/strata/brokerfleet/internal/bench"
	"github.com/stratamq/strata/brokerfleet/internal/broker"
	"github.com/stratamq/strata/brokerfleet/internal/tier"
	"github.com/stratamq/strata/pkg/latency"
	"github.com/stratamq/strata/pkg/objstore"
	"github.com/stratamq/strata/pkg/objstore/s3local"
	"github.com/stratamq/strata/pkg/objstore/s3store"
)

// tierResult is what the S3-tier run measures.
type tierResult struct {
	segmentBytes   int64
	uploadedBytes  int64 // segment bytes the manifests reference
	puts, putBytes int64
	gets           int64
	uploadWait     time.Duration // from the last ack until every closed segment was in the manifest
	localMBps      float64       // consume from local disk
	s3MBps         float64       // consume with everything closed only in S3
	fromS3Share    float64       // share of the consumed offsets below the local log start
	// strata.durability=object: one-in-flight acks=all latency, and the
	// S3 PUTs and throughput of a burst.
	objP50, objP99  time.Duration
	objP999, objMax time.Duration
	objFlushes      int64 // flushes of the run without a latency model and the metastore writes they made
	objMetaWrites   int64
	objPaced        int64 // of which waited for the flush interval
	// the same one-in-flight latency with the stand-ins behind latency
	// models (the S3 model named, DynamoDB's preset on the metastore)
	objModels           []objLatency
	objBurstMBps        float64
	objBurstPuts        int64
	objBurstSecs        float64
	objBurstFlushes     int64
	objBurstMetaWrites  int64
	objBurstIndexBytes  int64
	objectFlushInterval time.Duration
	objSamples          int
}

// objLatency is object-durability latency under one S3 latency model.
type objLatency struct {
	s3, meta                latency.Model
	p50, p99, p999, maximum time.Duration
	flushes, metaWrites     int64 // of the run: metastore writes per flush is their ratio
	paced                   int64 // flushes that waited for the flush interval
}

// benchTier produces cfg.TotalBytes into two topics of one broker tiering
// to an in-process S3 stand-in (gofakes3, in memory, through the real
// SDK): one keeps its local segments, the other deletes them once
// uploaded. It reports S3 requests per GiB uploaded and consume
// throughput from local disk versus from S3.
func benchTier(ctx context.Context, cfg bench.Config, segmentBytes int64, models []latency.Model, stdout, stderr io.Writer) (tierResult, error) {
	res := tierResult{segmentBytes: segmentBytes}
	dir, err := os.MkdirTemp("", "strata-bench-tier-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	srv, err := s3local.Start("", s3local.WithBuckets("bench"))
	if err != nil {
		return res, err
	}
	defer srv.Close()
	st, err := s3store.Open(ctx, s3store.Options{Bucket: "bench", Endpoint: srv.URL()})
	if err != nil {
		return res, err
	}
	counting := objstore.NewCounting(st)
	// No latency until the object-durability models are measured.
	s3Lat, metaLat := latency.NewInjector(latency.Model{}), latency.NewInjector(latency.Model{})
	mf := metaFlags{spec: "embedded", latency: metaLat}
	meta, closer, err := mf.open(ctx, dir)
	if err != nil {
		return res, err
	}
	defer closer.Close()
	bcfg := broker.DefaultConfig()
	bcfg.DataDir, bcfg.Meta, bcfg.Objects = filepath.Join(dir, "broker-0"), meta, objstore.NewDelayed(counting, s3Lat)
	bcfg.TierInterval, bcfg.MaintenanceInterval = 200*time.Millisecond, 200*time.Millisecond
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

	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return res, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	seg := strconv.FormatInt(segmentBytes, 10)
	topics := map[string]string{"tier-local": "-1", "tier-s3": "0"} // local.retention.ms
	for name, local := range topics {
		r, err := adm.CreateTopic(ctx, cfg.Partitions, 1, map[string]*string{"segment.bytes": &seg, "local.retention.ms": &local}, name)
		if err == nil {
			err = r.Err
		}
		if err != nil {
			return res, fmt.Errorf("create %s: %w", name, err)
		}
	}
	n := cfg.TotalBytes / int64(cfg.RecordBytes)
	pctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	for _, name := range []string{"tier-local", "tier-s3"} {
		prod, value, err := bench.Producer(cfg, name, addr)
		if err != nil {
			return res, err
		}
		_, err = bench.Produce(pctx, cfg, prod, value, n, nil, nil)
		prod.Close()
		if err != nil {
			return res, fmt.Errorf("produce to %s: %w", name, err)
		}
	}

	// Wait until every closed segment is uploaded and, for tier-s3, gone
	// from local disk.
	start := time.Now()
	for {
		if err := pctx.Err(); err != nil {
			return res, fmt.Errorf("waiting for uploads: %w", err)
		}
		done, uploaded, err := tierSettled(pctx, adm, b)
		if err != nil {
			return res, err
		}
		if done {
			res.uploadedBytes = uploaded
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	res.uploadWait = time.Since(start)
	c := counting.Counts()
	res.puts, res.putBytes = c.Puts, c.PutBytes

	local, err := adm.ListOffsetsAfterMilli(pctx, -4, "tier-s3")
	if err != nil {
		return res, err
	}
	var below int64
	local.Each(func(o kadm.ListedOffset) { below += o.Offset })
	res.fromS3Share = float64(below) / float64(n)

	bytes := float64(n*int64(cfg.RecordBytes)) / 1e6
	d, err := bench.Consume(pctx, "tier-local", n, nil, addr)
	if err != nil {
		return res, fmt.Errorf("consume tier-local: %w", err)
	}
	res.localMBps = bytes / d.Seconds()
	counting.Reset()
	d, err = bench.Consume(pctx, "tier-s3", n, nil, addr)
	if err != nil {
		return res, fmt.Errorf("consume tier-s3: %w", err)
	}
	res.s3MBps = bytes / d.Seconds()
	res.gets = counting.Counts().Gets

	// "object" durability: acknowledged once in S3 and in the manifest.
	res.objectFlushInterval, res.objSamples = bcfg.ObjectFlushInterval, cfg.Latency
	obj := "tier-object"
	r, err := adm.CreateTopic(ctx, cfg.Partitions, 1, map[string]*string{"strata.durability": kadm.StringPtr("object")}, obj)
	if err == nil {
		err = r.Err
	}
	if err != nil {
		return res, fmt.Errorf("create %s: %w", obj, err)
	}
	prod, value, err := bench.Producer(cfg, obj, addr)
	if err != nil {
		return res, err
	}
	defer prod.Close()
	oneInFlight := func() (objLatency, error) {
		before := broker.WALStats(b)
		// -latency-samples of them: p99.9 is the maximum below 1,000.
		lats := make([]time.Duration, 0, cfg.Latency)
		for i := 0; i < cap(lats); i++ {
			t0 := time.Now()
			if err := prod.ProduceSync(pctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
				return objLatency{}, fmt.Errorf("produce to %s: %w", obj, err)
			}
			lats = append(lats, time.Since(t0))
		}
		slices.Sort(lats)
		after := broker.WALStats(b)
		return objLatency{p50: lats[len(lats)/2], p99: lats[len(lats)*99/100], p999: lats[len(lats)*999/1000], maximum: lats[len(lats)-1],
			flushes: after.Flushes - before.Flushes, metaWrites: after.MetaWrites - before.MetaWrites, paced: after.Paced - before.Paced}, nil
	}
	l, err := oneInFlight()
	if err != nil {
		return res, err
	}
	res.objP50, res.objP99, res.objP999, res.objMax = l.p50, l.p99, l.p999, l.maximum
	res.objFlushes, res.objMetaWrites, res.objPaced = l.flushes, l.metaWrites, l.paced
	for _, m := range models {
		s3Lat.SetModel(m)
		metaLat.SetModel(latency.Presets["dynamodb"])
		l, err := oneInFlight()
		if err != nil {
			return res, err
		}
		l.s3, l.meta = m, latency.Presets["dynamodb"]
		res.objModels = append(res.objModels, l)
	}
	s3Lat.SetModel(latency.Model{})
	metaLat.SetModel(latency.Model{})
	counting.Reset()
	before := broker.WALStats(b)
	burst := min(n, (256<<20)/int64(cfg.RecordBytes))
	d, err = bench.Produce(pctx, cfg, prod, value, burst, nil, nil)
	if err != nil {
		return res, fmt.Errorf("produce to %s: %w", obj, err)
	}
	res.objBurstSecs = d.Seconds()
	res.objBurstMBps = float64(burst*int64(cfg.RecordBytes)) / 1e6 / d.Seconds()
	res.objBurstPuts = counting.Counts().Puts
	after := broker.WALStats(b)
	res.objBurstFlushes, res.objBurstMetaWrites = after.Flushes-before.Flushes, after.MetaWrites-before.MetaWrites
	res.objBurstIndexBytes = after.IndexBytes - before.IndexBytes
	return res, nil
}

// tierSettled reports whether both bench topics have every closed segment
// in their manifests and tier-s3 has deleted them locally; it returns the
// bytes the manifests reference.
func tierSettled(ctx context.Context, adm *kadm.Client, b *broker.Broker) (bool, int64, error) {
	var uploaded int64
	settled := true
	for _, name := range []string{"tier-local", "tier-s3"} {
		t, err := b.Meta().Topic(ctx, name)
		if err != nil {
			return false, 0, err
		}
		for p := int32(0); p < t.Partitions; p++ {
			man, err := b.Meta().Manifest(ctx, t.ID, p)
			if err != nil {
				return false, 0, err
			}
			for _, s := range man.Segments {
				uploaded += s.IndexPos
			}
			if closed := b.ClosedSegmentEnd(name, p); tier.End(man) < closed {
				settled = false
			}
		}
	}
	if !settled {
		return false, 0, nil
	}
	local, err := adm.ListOffsetsAfterMilli(ctx, -4, "tier-s3")
	if err != nil {
		return false, 0, err
	}
	ok := true
	local.Each(func(o kadm.ListedOffset) {
		if o.Err != nil || o.Offset < b.ClosedSegmentEnd("tier-s3", o.Partition) {
			ok = false // uploaded segments not deleted locally yet
		}
	})
	return ok, uploaded, nil
}

func reportTier(w io.Writer, r tierResult) {
	gib := float64(r.uploadedBytes) / (1 << 30)
	fmt.Fprintf(w, "workload: two topics, %d MiB segments, one broker tiering to gofakes3 (in memory) through the AWS SDK\n\n", r.segmentBytes>>20)
	fmt.Fprintf(w, "%-44s %10.1f\n", "S3 PUTs per GiB uploaded", float64(r.puts)/gib)
	fmt.Fprintf(w, "%-44s %10.1f  (one PUT per segment: 1 per GiB at the default 1 GiB segment.bytes)\n", "  expected at this segment size", float64(1<<30)/float64(r.segmentBytes))
	fmt.Fprintf(w, "%-44s %10.2f GiB in %d PUTs (%.0f MiB per PUT)\n", "uploaded", gib, r.puts, float64(r.putBytes)/float64(max(r.puts, 1))/(1<<20))
	fmt.Fprintf(w, "%-44s %10.1f s\n", "last closed segment uploaded after", r.uploadWait.Seconds())
	fmt.Fprintf(w, "%-44s %10.1f MB/s\n", "consume from local disk", r.localMBps)
	fmt.Fprintf(w, "%-44s %10.1f MB/s  (%.0f%% of the offsets from S3, %d ranged GETs)\n", "consume from the S3 tier", r.s3MBps, 100*r.fromS3Share, r.gets)
	fmt.Fprintf(w, "%-44s %10.2f\n", "ratio S3 / local", r.s3MBps/r.localMBps)
	fmt.Fprintf(w, "\nstrata.durability=object (acks=all waits for the S3 PUT and the WAL index write; group commits, under load at most one per %v)\n", r.objectFlushInterval)
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	perFlush := func(writes, flushes int64) float64 { return float64(writes) / float64(max(flushes, 1)) }
	fmt.Fprintf(w, "%-44s %10.1f ms / %.1f ms / %.1f ms / %.1f ms  (%d flushes, %d paced by the interval, %.2f metastore writes per flush)\n", fmt.Sprintf("produce latency p50/p99/p99.9/max (%d, 1 in flight)", r.objSamples),
		ms(r.objP50), ms(r.objP99), ms(r.objP999), ms(r.objMax), r.objFlushes, r.objPaced, perFlush(r.objMetaWrites, r.objFlushes))
	for _, m := range r.objModels {
		fmt.Fprintf(w, "%-44s %10.1f ms / %.1f ms / %.1f ms / %.1f ms  (S3 p50 %v, p99 %v; metastore p50 %v, p99 %v; %d flushes, %d paced, %.2f metastore writes per flush)\n",
			"  with "+m.s3.String()+" and dynamodb latency", ms(m.p50), ms(m.p99), ms(m.p999), ms(m.maximum), m.s3.P50, m.s3.P99, m.meta.P50, m.meta.P99, m.flushes, m.paced, perFlush(m.metaWrites, m.flushes))
	}
	fmt.Fprintf(w, "%-44s %10.1f MB/s, %d PUTs in %.1f s (%.1f PUTs/s, at most 1 per flush interval per broker under load)\n",
		"burst throughput", r.objBurstMBps, r.objBurstPuts, r.objBurstSecs, float64(r.objBurstPuts)/r.objBurstSecs)
	fmt.Fprintf(w, "%-44s %10.2f  (%d flushes, %d metastore writes; one per flush whatever the partitions in it; WAL index items of %.1f KB on average)\n",
		"  metastore writes per flush", perFlush(r.objBurstMetaWrites, r.objBurstFlushes), r.objBurstFlushes, r.objBurstMetaWrites,
		float64(r.objBurstIndexBytes)/1024/float64(max(r.objBurstFlushes, 1)))
}

package partition

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stratamq/strata/brokerfleet/internal/topic"
	"github.com/stratamq/strata/pkg/segment"
)

// BenchmarkOpenLongLog opens a partition whose log holds
// STRATA_BENCH_LOG_MIB MiB (default 1024) of 16 KiB idempotent batches in
// 128 MiB segments, on the real filesystem (page cache warm), after a
// clean close: from the newest snapshot, and by walking every header as
// before snapshots (the snapshots removed). Report: ns/op is the time to
// open.
//
//	go test -run '^$' -bench OpenLongLog -benchtime 3x ./brokerfleet/internal/partition/
func BenchmarkOpenLongLog(b *testing.B) {
	mib := 1024
	if v, err := strconv.Atoi(os.Getenv("STRATA_BENCH_LOG_MIB")); err == nil && v > 0 {
		mib = v
	}
	dir := b.TempDir()
	fs := segment.OS()
	cfg := testConfig(topic.DurabilityReplicated)
	cfg.SegmentBytes = 128 << 20
	open := func() *Partition {
		l, err := segment.Open(segment.Options{FS: fs, Dir: filepath.Join(dir, "t-0")})
		if err != nil {
			b.Fatal(err)
		}
		p, err := New(Options{Topic: "t", Index: 0, Log: l, Config: cfg})
		if err != nil {
			b.Fatal(err)
		}
		return p
	}
	p := open()
	s := idem(1, 0, 0, 16)
	s.valueLen = 1000
	start := time.Now()
	for seq := int32(0); p.LogEndOffset()*1024 < int64(mib)<<20; seq += 16 {
		s.pid, s.seq = int64(1+seq%64), seq/64*16
		batch := buildBatch(s)
		h, _ := segment.ParseHeader(batch)
		if _, err := p.Append(batch, h); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("wrote %d MiB in %v", mib, time.Since(start).Round(time.Millisecond))
	if err := p.Close(); err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{"snapshot", "walk"} {
		if name == "walk" {
			names, _ := os.ReadDir(filepath.Join(dir, "t-0"))
			for _, n := range names {
				if filepath.Ext(n.Name()) == ".snapshot" {
					_ = os.Remove(filepath.Join(dir, "t-0", n.Name()))
				}
			}
		}
		b.Run(name, func(b *testing.B) {
			for range b.N {
				if err := open().Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

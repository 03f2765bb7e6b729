// Package bench measures produce and fetch throughput and one-in-flight
// produce latency against a Strata broker and, in the same run, against
// franz-go's in-memory kfake as the baseline, and reports both side by side.
package bench

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"sort"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Config is one benchmark run.
type Config struct {
	RecordBytes int           // value size of each record
	TotalBytes  int64         // volume produced (and then fetched) per target
	Partitions  int32         // partitions of the benchmark topic
	Latency     int           // one-in-flight produces timed for percentiles
	Timeout     time.Duration // per phase
	Compression string        // producer codec: none, gzip, snappy, lz4, zstd
	Text        bool          // compressible text values instead of random bytes
}

var codecs = map[string]kgo.CompressionCodec{
	"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
	"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
}

// DefaultConfig is what `make bench` runs.
func DefaultConfig() Config {
	return Config{RecordBytes: 1024, TotalBytes: 1 << 30, Partitions: 6, Latency: 5000, Timeout: 5 * time.Minute, Compression: "none"}
}

// Validate names the first bad field as its flag.
func (c Config) Validate() error {
	switch {
	case c.RecordBytes < 1:
		return fmt.Errorf("record-bytes: %d is below 1", c.RecordBytes)
	case c.TotalBytes < int64(c.RecordBytes):
		return fmt.Errorf("bytes: %d is below one record", c.TotalBytes)
	case c.Partitions < 1:
		return fmt.Errorf("partitions: %d is below 1", c.Partitions)
	case c.Latency < 1:
		return fmt.Errorf("latency-samples: %d is below 1", c.Latency)
	case c.Timeout <= 0:
		return fmt.Errorf("timeout: %v is not positive", c.Timeout)
	}
	if _, ok := codecs[c.Compression]; !ok {
		return fmt.Errorf("compression: %q is not one of none, gzip, snappy, lz4, zstd", c.Compression)
	}
	return nil
}

// Result is one target's measurements.
type Result struct {
	Target      string
	ProduceMBps float64 // MB/s (10^6 bytes) of record values, acks=all
	FetchMBps   float64
	LatencyP50  time.Duration
	LatencyP99  time.Duration
	Records     int64
	ProduceTime time.Duration
	FetchTime   time.Duration
}

// Run benchmarks the cluster at addrs with a topic of rf replicas.
func Run(ctx context.Context, cfg Config, target string, rf int, addrs ...string) (Result, error) {
	res := Result{Target: target}
	topic := fmt.Sprintf("bench-%d", time.Now().UnixNano())
	admCl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		return res, err
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	if r, err := adm.CreateTopic(ctx, cfg.Partitions, int16(rf), nil, topic); err != nil || r.Err != nil {
		return res, fmt.Errorf("create topic on %s: %v %v", target, err, r.Err)
	}

	n := cfg.TotalBytes / int64(cfg.RecordBytes)
	res.Records = n
	pctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	prod, value, err := Producer(cfg, topic, addrs...)
	if err != nil {
		return res, err
	}
	defer prod.Close()
	if res.ProduceTime, err = Produce(pctx, prod, value, n); err != nil {
		return res, fmt.Errorf("produce to %s: %w", target, err)
	}
	res.ProduceMBps = float64(n*int64(cfg.RecordBytes)) / 1e6 / res.ProduceTime.Seconds()
	if res.FetchTime, err = Consume(pctx, topic, n, addrs...); err != nil {
		return res, fmt.Errorf("fetch from %s: %w", target, err)
	}
	res.FetchMBps = float64(n*int64(cfg.RecordBytes)) / 1e6 / res.FetchTime.Seconds()

	// One-in-flight latency.
	lats := make([]time.Duration, 0, cfg.Latency)
	for i := 0; i < cfg.Latency; i++ {
		t0 := time.Now()
		if err := prod.ProduceSync(pctx, &kgo.Record{Value: value}).FirstErr(); err != nil {
			return res, fmt.Errorf("latency produce to %s: %w", target, err)
		}
		lats = append(lats, time.Since(t0))
	}
	sort.Slice(lats, func(i, j int) bool { return lats[i] < lats[j] })
	res.LatencyP50 = lats[len(lats)/2]
	res.LatencyP99 = lats[len(lats)*99/100]
	return res, nil
}

// Producer returns an acks=all idempotent producer to topic with many
// batches in flight, and the value to send (random bytes, or letters with
// cfg.Text: with no compression the broker moves every byte, as it would
// for compressed or encrypted payloads).
func Producer(cfg Config, topic string, addrs ...string) (*kgo.Client, []byte, error) {
	value := make([]byte, cfg.RecordBytes)
	rand.Read(value)
	if cfg.Text {
		for i := range value {
			value[i] = 'a' + value[i]%26
		}
	}
	prod, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(0), kgo.ProducerBatchCompression(codecs[cfg.Compression]),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedBytes(256<<20))
	return prod, value, err
}

// Produce sends n records of value and returns how long it took.
func Produce(ctx context.Context, prod *kgo.Client, value []byte, n int64) (time.Duration, error) {
	var failed atomic.Int64
	var firstErr atomic.Value
	start := time.Now()
	for i := int64(0); i < n; i++ {
		prod.Produce(ctx, &kgo.Record{Value: value}, func(_ *kgo.Record, err error) {
			if err != nil && failed.Add(1) == 1 {
				firstErr.Store(err)
			}
		})
	}
	if err := prod.Flush(ctx); err != nil {
		return 0, err
	}
	if failed.Load() > 0 {
		return 0, fmt.Errorf("%d records failed, first: %v", failed.Load(), firstErr.Load())
	}
	return time.Since(start), nil
}

// Consume reads n records of topic from the start with one consumer and
// returns how long it took.
func Consume(ctx context.Context, topic string, n int64, addrs ...string) (time.Duration, error) {
	cons, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(64<<20), kgo.FetchMaxPartitionBytes(8<<20))
	if err != nil {
		return 0, err
	}
	defer cons.Close()
	start := time.Now()
	for got := int64(0); got < n; {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return 0, fmt.Errorf("%d of %d records: %w", got, n, err)
		}
		if errs := fs.Errors(); len(errs) > 0 {
			return 0, errs[0].Err
		}
		got += int64(fs.NumRecords())
	}
	return time.Since(start), nil
}

// Report prints strata and baseline side by side with their ratio.
func Report(w io.Writer, cfg Config, strata, base Result) {
	payload := "random bytes"
	if cfg.Text {
		payload = "random letters"
	}
	fmt.Fprintf(w, "workload: %d records of %d %s (%.0f MiB), compression %s, %d partitions, acks=all, one producer, one consumer\n\n",
		strata.Records, cfg.RecordBytes, payload, float64(strata.Records*int64(cfg.RecordBytes))/(1<<20), cfg.Compression, cfg.Partitions)
	fmt.Fprintf(w, "%-36s %14s %14s %8s\n", "metric", strata.Target, base.Target, "ratio")
	row := func(name string, a, b float64, unit string) {
		fmt.Fprintf(w, "%-36s %9.1f %-4s %9.1f %-4s %8.2f\n", name, a, unit, b, unit, a/b)
	}
	row("produce throughput", strata.ProduceMBps, base.ProduceMBps, "MB/s")
	row("fetch throughput", strata.FetchMBps, base.FetchMBps, "MB/s")
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	row("produce latency p50 (1 in flight)", us(strata.LatencyP50), us(base.LatencyP50), "µs")
	row("produce latency p99 (1 in flight)", us(strata.LatencyP99), us(base.LatencyP99), "µs")
}

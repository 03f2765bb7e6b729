// Package bench measures a Kafka cluster the way `brokerfleet bench`
// reports it: produce and consume throughput, produce latency (under load
// and one in flight, in HDR histograms), and the CPU time and peak memory
// of the process serving it, for a matrix of workloads (record size, keys,
// partitions, acks, durability). Strata and franz-go's in-memory kfake run
// in the same invocation so every figure has a baseline beside it.
package bench

import (
	"context"
	"crypto/rand"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Config is one workload.
type Config struct {
	RecordBytes int           // value size of each record
	TotalBytes  int64         // volume produced (and then fetched) per target
	Partitions  int32         // partitions of the benchmark topic
	Keyed       bool          // records carry one of 10,000 keys (hash partitioning); else none (sticky partitioning)
	Acks        string        // "all" (idempotent), "1" (leader only, idempotence off), or "txn-<every>": transactional, committing every duration ("txn-100ms") or count of records ("txn-1000")
	Durability  string        // strata.durability of the topic; "" leaves the broker's default
	Latency     int           // one-in-flight produces timed for the latency percentiles
	Timeout     time.Duration // per phase
	Compression string        // producer codec: none, gzip, snappy, lz4, zstd
	Text        bool          // compressible text values instead of random bytes
}

var codecs = map[string]kgo.CompressionCodec{
	"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(), "snappy": kgo.SnappyCompression(),
	"lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression(),
}

// DefaultConfig is the reference workload: 1 GiB of 1 KiB records
// over 12 partitions with acks=all.
func DefaultConfig() Config {
	return Config{RecordBytes: 1024, TotalBytes: 1 << 30, Partitions: 12, Acks: "all", Durability: "replicated",
		Latency: 5000, Timeout: 10 * time.Minute, Compression: "none"}
}

// Validate names the first bad field as its flag.
func (c Config) Validate() error {
	switch {
	case c.RecordBytes < 1:
		return fmt.Errorf("record-bytes: %d is below 1", c.RecordBytes)
	case c.RecordBytes > 900<<10:
		return fmt.Errorf("record-bytes: %d is above 900 KiB (records must fit a 1 MiB batch)", c.RecordBytes)
	case c.TotalBytes < int64(c.RecordBytes):
		return fmt.Errorf("bytes: %d is below one record", c.TotalBytes)
	case c.Partitions < 1:
		return fmt.Errorf("partitions: %d is below 1", c.Partitions)
	case c.Acks != "all" && c.Acks != "1" && !c.transactional():
		return fmt.Errorf("acks: %q is not all, 1 or txn-<every> (txn-100ms, txn-1000)", c.Acks)
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

// Name is the workload's short label, e.g. "1KiB keyed p12 acks=all replicated".
func (c Config) Name() string {
	keys := "unkeyed"
	if c.Keyed {
		keys = "keyed"
	}
	s := fmt.Sprintf("%s %s p%d acks=%s", Size(int64(c.RecordBytes)), keys, c.Partitions, c.Acks)
	if c.Durability != "" {
		s += " " + c.Durability
	}
	return s
}

// commitEvery returns how a transactional workload commits: after every
// (a duration), or after records; ok is false for the others.
func (c Config) commitEvery() (every time.Duration, records int64, ok bool) {
	v, found := strings.CutPrefix(c.Acks, "txn-")
	if !found {
		return 0, 0, false
	}
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return d, 0, true
	}
	if n, err := strconv.ParseInt(v, 10, 64); err == nil && n > 0 {
		return 0, n, true
	}
	return 0, 0, false
}

func (c Config) transactional() bool { _, _, ok := c.commitEvery(); return ok }

// Records is how many records the workload produces.
func (c Config) Records() int64 { return c.TotalBytes / int64(c.RecordBytes) }

// Producer returns a producer to topic with many batches in flight (acks
// as cfg.Acks), and the value to send: random bytes, or letters with
// cfg.Text. With no compression the broker moves every byte, as it would
// for compressed or encrypted payloads.
func Producer(cfg Config, topic string, addrs ...string) (*kgo.Client, []byte, error) {
	value := make([]byte, cfg.RecordBytes)
	rand.Read(value)
	if cfg.Text {
		for i := range value {
			value[i] = 'a' + value[i]%26
		}
	}
	opts := []kgo.Opt{kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(topic),
		kgo.ProducerLinger(0), kgo.ProducerBatchCompression(codecs[cfg.Compression]),
		kgo.ProducerBatchMaxBytes(1 << 20), kgo.MaxBufferedBytes(64 << 20)}
	switch {
	case cfg.Acks == "1":
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	case cfg.transactional():
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.TransactionalID(fmt.Sprintf("%s-%x", topic, value[:4])))
	default:
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	}
	prod, err := kgo.NewClient(opts...)
	return prod, value, err
}

// keys are the 10,000 keys of keyed workloads.
var keys = func() [][]byte {
	k := make([][]byte, 10000)
	for i := range k {
		k[i] = []byte("key-" + strconv.Itoa(i))
	}
	return k
}()

// Produce sends n records of value (keyed if cfg.Keyed), records each
// one's time from Produce to acknowledgement in lat (if not nil), calls
// progress with the bytes acknowledged so far, and returns how long it
// took.
func Produce(ctx context.Context, cfg Config, prod *kgo.Client, value []byte, n int64, lat *Hist, progress func(int64)) (time.Duration, error) {
	var failed, acked atomic.Int64
	var firstErr atomic.Value
	var latMu sync.Mutex
	start := time.Now()
	every, perTxn, txn := cfg.commitEvery()
	var txnStart time.Time
	var inTxn int64
	for i := int64(0); i < n; i++ {
		if txn && inTxn == 0 {
			if err := prod.BeginTransaction(); err != nil {
				return 0, err
			}
			txnStart = time.Now()
		}
		if txn {
			inTxn++
		}
		r := &kgo.Record{Value: value}
		if cfg.Keyed {
			r.Key = keys[i%int64(len(keys))]
		}
		t0 := time.Now()
		prod.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil && failed.Add(1) == 1 {
				firstErr.Store(err)
			}
			if lat != nil {
				d := time.Since(t0)
				latMu.Lock()
				lat.Record(d)
				latMu.Unlock()
			}
			if a := acked.Add(1); progress != nil && a%1024 == 0 {
				progress(1024 * int64(len(value)))
			}
		})
		if txn && (i == n-1 || (perTxn > 0 && inTxn >= perTxn) || (every > 0 && time.Since(txnStart) >= every)) {
			// Commit: the flush waits for the transaction's records, as a
			// transactional application's commit does.
			if err := prod.Flush(ctx); err != nil {
				return 0, err
			}
			if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
				return 0, fmt.Errorf("commit: %w", err)
			}
			inTxn = 0
		}
	}
	if err := prod.Flush(ctx); err != nil {
		return 0, err
	}
	if progress != nil {
		progress(acked.Load() % 1024 * int64(len(value)))
	}
	if failed.Load() > 0 {
		return 0, fmt.Errorf("%d records failed, first: %v", failed.Load(), firstErr.Load())
	}
	return time.Since(start), nil
}

// Consume reads n records of topic from the start with one consumer,
// calling progress with the bytes read, and returns how long it took.
func Consume(ctx context.Context, topic string, n int64, progress func(int64), addrs ...string) (time.Duration, error) {
	return consume(ctx, topic, n, progress, false, addrs)
}

// ConsumeCommitted is Consume at read_committed.
func ConsumeCommitted(ctx context.Context, topic string, n int64, progress func(int64), addrs ...string) (time.Duration, error) {
	return consume(ctx, topic, n, progress, true, addrs)
}

func consume(ctx context.Context, topic string, n int64, progress func(int64), committed bool, addrs []string) (time.Duration, error) {
	opts := []kgo.Opt{kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(64 << 20), kgo.FetchMaxPartitionBytes(8 << 20)}
	if committed {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cons, err := kgo.NewClient(opts...)
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
		var b int64
		fs.EachRecord(func(r *kgo.Record) { b += int64(len(r.Value)) })
		got += int64(fs.NumRecords())
		if progress != nil {
			progress(b)
		}
	}
	return time.Since(start), nil
}

// CreateTopic creates the workload's topic with rf replicas (and its
// durability, if set) and waits until every partition has a leader.
func CreateTopic(ctx context.Context, cfg Config, adm *kadm.Client, topic string, rf int) error {
	var configs map[string]*string
	if cfg.Durability != "" {
		configs = map[string]*string{"strata.durability": kadm.StringPtr(cfg.Durability)}
	}
	r, err := adm.CreateTopic(ctx, cfg.Partitions, int16(rf), configs, topic)
	if err == nil {
		err = r.Err
	}
	if err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	for {
		md, err := adm.Metadata(ctx, topic)
		if err == nil {
			ready := 0
			for _, p := range md.Topics[topic].Partitions {
				if p.Leader >= 0 && p.Err == nil {
					ready++
				}
			}
			if ready == int(cfg.Partitions) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("topic %s: partitions without a leader: %w", topic, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Warm produces one empty record to each of the topic's partitions with
// acks=all and waits for them all. A topic's leaders are elected before
// its followers have opened their replicas; with 1,000 partitions that
// opening (a directory, files and fsyncs per replica) would otherwise run
// during the timed produce and be counted against it.
func Warm(ctx context.Context, topic string, partitions int32, addrs ...string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		return err
	}
	defer cl.Close()
	recs := make([]*kgo.Record, partitions)
	for i := range recs {
		recs[i] = &kgo.Record{Partition: int32(i)}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("warm topic %s: %w", topic, err)
	}
	return nil
}

// Size formats a byte count the way the flags take it (100B, 1KiB, 64MiB).
func Size(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Target is a cluster under test.
type Target struct {
	Name   string
	Addrs  []string
	RF     int   // replication factor of the benchmark topics
	Proc   *Proc // the process serving it, for CPU and memory; nil if unknown
	Strata bool  // takes strata.* topic configs (durability)
	// JetStream: Addrs are NATS URLs of a JetStream cluster (RunJetStream).
	JetStream bool
	// Metrics are the brokers' Prometheus endpoints (Strata only), for
	// the stage breakdown of the one-in-flight phase; nil: none.
	Metrics []string
}

// cpu is the CPU time of the target's process so far (0 when unknown).
func (t Target) cpu() time.Duration {
	if t.Proc == nil {
		return 0
	}
	d, _ := t.Proc.CPU()
	return d
}

// Result is one workload's measurements on one target.
type Result struct {
	Target      string `json:"target"`
	Workload    string `json:"workload"`
	RecordBytes int    `json:"record_bytes"`
	Keyed       bool   `json:"keyed"`
	Partitions  int32  `json:"partitions"`
	Acks        string `json:"acks"`
	Durability  string `json:"durability,omitempty"`
	RF          int    `json:"replication_factor"`
	Records     int64  `json:"records"`
	Bytes       int64  `json:"bytes"`

	ProduceMBps    float64 `json:"produce_mbps"` // MB/s (10^6 bytes) of record values
	ConsumeMBps    float64 `json:"consume_mbps"`
	ProduceSeconds float64 `json:"produce_seconds"`
	ConsumeSeconds float64 `json:"consume_seconds"`
	// Latency from Produce to acknowledgement with the producer's buffer
	// full (includes queueing in the client), and of one record at a time.
	LoadedLatency      Latency `json:"produce_latency_loaded"`
	OneInFlightLatency Latency `json:"produce_latency_one_in_flight"`
	// Where the one-in-flight produces spent their time, from the
	// target's own histograms (targets with Metrics only).
	Stages []Stage `json:"produce_stages_one_in_flight,omitempty"`
	// CPU of the serving process in cores (CPU seconds per second) while
	// producing and consuming, and its peak resident memory over the
	// workload; zero when the target's process is unknown.
	ProduceCPU float64 `json:"produce_cpu_cores,omitempty"`
	ConsumeCPU float64 `json:"consume_cpu_cores,omitempty"`
	PeakRSS    int64   `json:"peak_rss_bytes,omitempty"`
	Error      string  `json:"error,omitempty"`
}

// Run measures one workload on one target: create a topic, produce
// cfg.TotalBytes, consume it back, time cfg.Latency produces one at a
// time, delete the topic. progress receives bytes as they are produced and
// consumed (2 × TotalBytes in all).
func Run(ctx context.Context, cfg Config, t Target, progress func(int64)) (Result, error) {
	n := cfg.Records()
	res := Result{Target: t.Name, Workload: cfg.Name(), RecordBytes: cfg.RecordBytes, Keyed: cfg.Keyed,
		Partitions: cfg.Partitions, Acks: cfg.Acks, RF: t.RF, Records: n, Bytes: n * int64(cfg.RecordBytes)}
	if t.Strata {
		res.Durability = cfg.Durability
	} else {
		cfg.Durability = ""
	}
	err := run(ctx, cfg, t, &res, progress)
	if err != nil {
		res.Error = err.Error()
	}
	return res, err
}

func run(ctx context.Context, cfg Config, t Target, res *Result, progress func(int64)) error {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	topic := fmt.Sprintf("bench-%d", time.Now().UnixNano())
	admCl, err := kgo.NewClient(kgo.SeedBrokers(t.Addrs...))
	if err != nil {
		return err
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)
	if err := CreateTopic(ctx, cfg, adm, topic, t.RF); err != nil {
		return err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		adm.DeleteTopics(dctx, topic)
	}()
	if err := Warm(ctx, topic, cfg.Partitions, t.Addrs...); err != nil {
		return err
	}
	if t.Proc != nil {
		t.Proc.ResetPeak()
	}
	cpu := t.cpu

	prod, value, err := Producer(cfg, topic, t.Addrs...)
	if err != nil {
		return err
	}
	defer prod.Close()
	loaded := NewHist()
	c0 := cpu()
	d, err := Produce(ctx, cfg, prod, value, res.Records, loaded, progress)
	if err != nil {
		return fmt.Errorf("produce to %s: %w", t.Name, err)
	}
	c1 := cpu()
	res.ProduceSeconds, res.ProduceMBps = d.Seconds(), float64(res.Bytes)/1e6/d.Seconds()
	res.ProduceCPU = (c1 - c0).Seconds() / d.Seconds()
	res.LoadedLatency = loaded.Summary()

	consume := Consume
	if cfg.transactional() {
		consume = ConsumeCommitted // a transactional workload is read as its consumers would
	}
	if d, err = consume(ctx, topic, res.Records+int64(cfg.Partitions), progress, t.Addrs...); err != nil { // and Warm's
		return fmt.Errorf("consume from %s: %w", t.Name, err)
	}
	c2 := cpu()
	res.ConsumeSeconds, res.ConsumeMBps = d.Seconds(), float64(res.Bytes)/1e6/d.Seconds()
	res.ConsumeCPU = (c2 - c1).Seconds() / d.Seconds()

	var stagesBefore stageCounts
	if len(t.Metrics) > 0 {
		if stagesBefore, err = scrapeStages(ctx, t.Metrics); err != nil {
			return err
		}
	}
	one := NewHist()
	for i := 0; i < cfg.Latency; i++ {
		r := &kgo.Record{Value: value}
		if cfg.Keyed {
			r.Key = keys[i%len(keys)]
		}
		t0 := time.Now()
		if cfg.transactional() {
			// One record per transaction: the latency of a commit.
			if err := prod.BeginTransaction(); err != nil {
				return err
			}
		}
		if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
			return fmt.Errorf("one-in-flight produce to %s: %w", t.Name, err)
		}
		if cfg.transactional() {
			if err := prod.EndTransaction(ctx, kgo.TryCommit); err != nil {
				return fmt.Errorf("one-in-flight commit on %s: %w", t.Name, err)
			}
		}
		one.Record(time.Since(t0))
	}
	res.OneInFlightLatency = one.Summary()
	if len(t.Metrics) > 0 {
		after, err := scrapeStages(ctx, t.Metrics)
		if err != nil {
			return err
		}
		res.Stages = stagesBetween(stagesBefore, after)
	}
	if t.Proc != nil {
		if _, peak, err := t.Proc.Memory(); err == nil {
			res.PeakRSS = peak
		}
	}
	return nil
}

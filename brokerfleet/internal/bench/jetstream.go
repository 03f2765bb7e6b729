package bench

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// jetStreamWindow bounds the asynchronous publishes awaiting their
// acknowledgement, as the producer buffer bounds Kafka's.
const jetStreamWindow = 4096

// RunJetStream measures one workload on a NATS JetStream cluster: a
// stream of t.RF replicas on file storage, published to asynchronously
// (at most jetStreamWindow unacknowledged) for throughput with each
// acknowledgement timed (the loaded latency), read back with an ordered
// consumer, then cfg.Latency synchronous publishes, each waiting for its
// acknowledgement from the stream's quorum: one record in flight. A
// stream has no partitions and no keys; durability modes do not apply.
func RunJetStream(ctx context.Context, cfg Config, t Target, progress func(int64)) (Result, error) {
	n := cfg.Records()
	res := Result{Target: t.Name, Workload: cfg.Name(), RecordBytes: cfg.RecordBytes, Keyed: cfg.Keyed,
		Partitions: cfg.Partitions, Acks: cfg.Acks, RF: t.RF, Records: n, Bytes: n * int64(cfg.RecordBytes)}
	err := runJetStream(ctx, cfg, t, &res, progress)
	if err != nil {
		res.Error = err.Error()
	}
	return res, err
}

func runJetStream(ctx context.Context, cfg Config, t Target, res *Result, progress func(int64)) error {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	nc, err := nats.Connect(strings.Join(t.Addrs, ","), nats.MaxReconnects(-1))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(jetStreamWindow))
	if err != nil {
		return err
	}
	name := fmt.Sprintf("bench-%d", time.Now().UnixNano())
	subject := name + ".records"
	stream, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subject},
		Replicas: t.RF, Storage: jetstream.FileStorage, MaxMsgSize: int32(max(cfg.RecordBytes+1024, 1<<20))})
	if err != nil {
		return fmt.Errorf("create stream: %w", err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		js.DeleteStream(dctx, name)
	}()
	if t.Proc != nil {
		t.Proc.ResetPeak()
	}
	cpu := t.cpu
	n := res.Records
	value := make([]byte, cfg.RecordBytes)
	rand.Read(value)

	// Throughput: asynchronous publishes, each acknowledgement timed.
	loaded := NewHist()
	var latMu sync.Mutex
	var wg sync.WaitGroup
	var pubErr error
	c0 := cpu()
	start := time.Now()
	for i := int64(0); i < n; i++ {
		sent := time.Now()
		f, err := js.PublishAsync(subject, value)
		if err != nil {
			return fmt.Errorf("publish: %w", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-f.Ok():
				latMu.Lock()
				loaded.Record(time.Since(sent))
				latMu.Unlock()
				progress(int64(len(value)))
			case err := <-f.Err():
				latMu.Lock()
				pubErr = errors.Join(pubErr, err)
				latMu.Unlock()
			case <-ctx.Done():
			}
		}()
	}
	wg.Wait()
	d := time.Since(start)
	if pubErr != nil {
		return fmt.Errorf("publish: %w", pubErr)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	c1 := cpu()
	res.ProduceSeconds, res.ProduceMBps = d.Seconds(), float64(res.Bytes)/1e6/d.Seconds()
	res.ProduceCPU = (c1 - c0).Seconds() / d.Seconds()
	res.LoadedLatency = loaded.Summary()

	// Consume: an ordered consumer from the start.
	cons, err := stream.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	if err != nil {
		return fmt.Errorf("ordered consumer: %w", err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(jetStreamWindow))
	if err != nil {
		return err
	}
	start = time.Now()
	for got := int64(0); got < n; got++ {
		m, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			it.Stop()
			return fmt.Errorf("consume after %d of %d: %w", got, n, err)
		}
		progress(int64(len(m.Data())))
	}
	d = time.Since(start)
	it.Stop()
	c2 := cpu()
	res.ConsumeSeconds, res.ConsumeMBps = d.Seconds(), float64(res.Bytes)/1e6/d.Seconds()
	res.ConsumeCPU = (c2 - c1).Seconds() / d.Seconds()

	// One in flight: a synchronous publish waits for the quorum's ack.
	one := NewHist()
	for i := 0; i < cfg.Latency; i++ {
		t0 := time.Now()
		if _, err := js.Publish(ctx, subject, value); err != nil {
			return fmt.Errorf("one-in-flight publish: %w", err)
		}
		one.Record(time.Since(t0))
	}
	res.OneInFlightLatency = one.Summary()
	if t.Proc != nil {
		if _, peak, err := t.Proc.Memory(); err == nil {
			res.PeakRSS = peak
		}
	}
	return nil
}

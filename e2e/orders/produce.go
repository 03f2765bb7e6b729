package orders

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ProducerConfig configures the order service.
type ProducerConfig struct {
	Seeds      []string // Kafka bootstrap brokers
	Registries []string // schema registry URLs, tried in order
	Run        string   // order ids are <Run>-<number>
	From       int      // first order number
	Count      int      // how many orders
	Rate       float64  // orders per second; 0: as fast as acks allow
}

func (c ProducerConfig) validate() error {
	switch {
	case len(c.Seeds) == 0:
		return errors.New("orders: producer: no bootstrap brokers")
	case len(c.Registries) == 0:
		return errors.New("orders: producer: no schema registry")
	case c.Run == "":
		return errors.New("orders: producer: no run id")
	case c.Count < 0 || c.From < 0 || c.Rate < 0:
		return errors.New("orders: producer: negative count, start or rate")
	}
	return nil
}

// Produce registers the order schema and produces orders From..From+Count-1
// to Topic, keyed by order id, with franz-go's idempotent producer and
// acks=all; acked counts acknowledged orders as they come. It returns once
// every order is acknowledged, or with the first failure.
func Produce(ctx context.Context, cfg ProducerConfig, acked *atomic.Int64) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	codec, err := NewCodec(cfg.Registries...)
	if err != nil {
		return err
	}
	if _, err := codec.Register(ctx); err != nil {
		return err
	}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(cfg.Seeds...),
		kgo.DefaultProduceTopic(Topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), // idempotence (franz-go's default) needs acks=all
		kgo.RecordDeliveryTimeout(2*time.Minute),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
		kgo.ProducerLinger(5*time.Millisecond),
	)
	if err != nil {
		return fmt.Errorf("orders: producer client: %w", err)
	}
	defer cl.Close()

	var mu sync.Mutex
	var first error
	start := time.Now()
	for i := cfg.From; i < cfg.From+cfg.Count; i++ {
		if cfg.Rate > 0 {
			due := start.Add(time.Duration(float64(i-cfg.From) / cfg.Rate * float64(time.Second)))
			if d := time.Until(due); d > time.Millisecond {
				select {
				case <-ctx.Done():
				case <-time.After(d):
				}
			}
		}
		if ctx.Err() != nil {
			break
		}
		o := Generate(cfg.Run, i)
		v, err := codec.Encode(o)
		if err != nil {
			return err
		}
		cl.Produce(ctx, &kgo.Record{Key: []byte(o.ID), Value: v}, func(r *kgo.Record, err error) {
			if err != nil {
				mu.Lock()
				if first == nil {
					first = fmt.Errorf("orders: produce %s: %w", r.Key, err)
				}
				mu.Unlock()
				return
			}
			if acked != nil {
				acked.Add(1)
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		return fmt.Errorf("orders: flush: %w", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if first == nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return first
}

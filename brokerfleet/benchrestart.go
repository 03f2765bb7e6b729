package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratamq/strata/brokerfleet/internal/bench"
)

// restartRun measures the dev target's time to ready after kill -9: it
// fills a 12-partition topic of RF rf with logBytes of 1 KiB records
// (acks=all, uncompressed random bytes), kills the dev process with SIGKILL, starts it again on the
// same data and times until it serves (its "ready" line) and until every
// partition of the topic has a leader and a full ISR again. The
// restarted target replaces t in *live.
func restartRun(ctx context.Context, t *benchTarget, f benchFlags, dir string, logBytes int64, rf int, stderr io.Writer) (*bench.Restart, *benchTarget, error) {
	const topic, parts = "bench-restart", 12
	res := &bench.Restart{Target: t.Name, Partitions: parts, RF: rf, LogBytes: logBytes}
	cl, err := kgo.NewClient(kgo.SeedBrokers(t.Addrs...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedBytes(64<<20),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	if err != nil {
		return nil, t, err
	}
	adm := kadm.NewClient(cl)
	if r, err := adm.CreateTopic(ctx, parts, int16(rf), map[string]*string{"segment.bytes": kadm.StringPtr(fmt.Sprint(f.restartSegmentBytes))}, topic); err != nil || r.Err != nil {
		cl.Close()
		return nil, t, fmt.Errorf("create %s: %v", topic, errors.Join(err, r.Err))
	}
	fmt.Fprintf(stderr, "restart: writing %s to %s (RF %d)\n", bench.Size(logBytes), topic, rf)
	value := make([]byte, 1024) // random and uncompressed: the log holds what was asked
	rand.Read(value)
	var produceErr error
	var failed = make(chan error, 1)
	for n := int64(0); n < logBytes; n += int64(len(value)) {
		cl.Produce(ctx, &kgo.Record{Topic: topic, Value: value}, func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case failed <- err:
				default:
				}
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		produceErr = err
	}
	select {
	case err := <-failed:
		produceErr = errors.Join(produceErr, err)
	default:
	}
	cl.Close()
	if produceErr != nil {
		return nil, t, fmt.Errorf("restart: produce: %w", produceErr)
	}

	fmt.Fprintln(stderr, "restart: kill -9 and start again on the same data")
	t.cmd.Process.Kill()
	t.cmd.Wait()
	t.cmd = nil
	start := time.Now()
	nt, err := startTargetOn(ctx, t.Name, f, dir, false)
	if err != nil {
		return nil, t, err
	}
	res.ServeSeconds = time.Since(start).Seconds()
	cl2, err := kgo.NewClient(kgo.SeedBrokers(nt.Addrs...))
	if err != nil {
		return nil, nt, err
	}
	defer cl2.Close()
	adm = kadm.NewClient(cl2)
	for {
		md, err := adm.Metadata(ctx, topic)
		full := 0
		if err == nil {
			for _, p := range md.Topics[topic].Partitions {
				if p.Leader >= 0 && len(p.ISR) == rf && p.Err == nil {
					full++
				}
			}
		}
		if full == parts {
			break
		}
		if time.Since(start) > 10*time.Minute || ctx.Err() != nil {
			return nil, nt, fmt.Errorf("restart: %d of %d partitions led with a full ISR after %v", full, parts, time.Since(start).Round(time.Second))
		}
		time.Sleep(50 * time.Millisecond)
	}
	res.ISRSeconds = time.Since(start).Seconds()
	return res, nt, nil
}

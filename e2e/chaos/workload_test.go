//go:build chaos

package chaos

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	producers       = 3
	keysPerProducer = 20
	consumers       = 2
	// maxInFlightPerKey bounds a key's sends awaiting an answer; a key
	// at its bound is skipped, so a partition that stalls holds back
	// only its own keys and the others' acknowledgement gaps measure
	// their own availability.
	maxInFlightPerKey = 25
	sendEvery         = 4 * time.Millisecond
)

// workload is the clients: idempotent acks=all producers writing unique
// values to their own keys, and assign-mode consumers reading every
// partition from the start, all recording into one history.
type workload struct {
	t    *testing.T
	c    *cluster
	h    *History
	stop chan struct{}
	wg   sync.WaitGroup
	prod []*kgo.Client
	cons []*kgo.Client
	// consCtx ends the consumers.
	consCtx    context.Context
	consCancel context.CancelFunc
	consWG     sync.WaitGroup
}

func startWorkload(t *testing.T, c *cluster, h *History) *workload {
	w := &workload{t: t, c: c, h: h, stop: make(chan struct{})}
	w.consCtx, w.consCancel = context.WithCancel(context.Background())
	for p := range producers {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...), kgo.DefaultProduceTopic(topicName),
			kgo.RequiredAcks(kgo.AllISRAcks()), // idempotent: kgo's default
			kgo.RecordDeliveryTimeout(45*time.Second), kgo.ProduceRequestTimeout(2*time.Second),
			// A request to a paused or cut-off leader is given up after 3 s
			// (the default overhead of 10 s would hide the failover).
			kgo.RequestTimeoutOverhead(time.Second),
			kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
			kgo.MetadataMinAge(250*time.Millisecond), kgo.ClientID(fmt.Sprintf("chaos-producer-%d", p)))
		require.NoError(t, err)
		w.prod = append(w.prod, cl)
		w.wg.Add(1)
		go w.produce(p, cl)
	}
	for i := range consumers {
		offsets := map[int32]kgo.Offset{}
		for p := int32(0); p < partitions; p++ {
			offsets[p] = kgo.NewOffset().AtStart()
		}
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topicName: offsets}),
			kgo.FetchMaxWait(500*time.Millisecond), kgo.MetadataMinAge(250*time.Millisecond),
			kgo.ClientID(fmt.Sprintf("chaos-consumer-%d", i)))
		require.NoError(t, err)
		w.cons = append(w.cons, cl)
		w.consWG.Add(1)
		go w.consume(10+i, cl)
	}
	return w
}

// produce sends key k's values "<key>:<n>" in order, n = 0, 1, ...
func (w *workload) produce(p int, cl *kgo.Client) {
	defer w.wg.Done()
	var mu sync.Mutex
	inFlight := make([]int, keysPerProducer)
	seq := make([]int, keysPerProducer)
	tick := time.NewTicker(sendEvery)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-w.stop:
			return
		case <-tick.C:
		}
		k := i % keysPerProducer
		mu.Lock()
		full := inFlight[k] >= maxInFlightPerKey
		if !full {
			inFlight[k]++
		}
		mu.Unlock()
		if full {
			continue
		}
		key := fmt.Sprintf("p%d-k%02d", p, k)
		value := fmt.Sprintf("%s:%d", key, seq[k])
		seq[k]++
		w.h.Add(Op{Process: p, Type: Invoke, F: FSend, Key: key, Value: value})
		cl.Produce(context.Background(), &kgo.Record{Key: []byte(key), Value: []byte(value)}, func(r *kgo.Record, err error) {
			mu.Lock()
			inFlight[k]--
			mu.Unlock()
			if err != nil {
				// A broker's rejection of the record itself is a
				// definite failure; anything else (a timeout, a lost
				// connection, an error franz-go passed on from another
				// batch of the partition) may or may not have stored it:
				// unknown.
				typ := Info
				if definiteRejection(err) {
					typ = Fail
				}
				w.h.Add(Op{Process: p, Type: typ, F: FSend, Key: key, Value: value, Error: err.Error()})
				return
			}
			w.h.Add(Op{Process: p, Type: OK, F: FSend, Key: key, Value: value, Partition: r.Partition, Offset: r.Offset})
		})
	}
}

func (w *workload) consume(process int, cl *kgo.Client) {
	defer w.consWG.Done()
	for w.consCtx.Err() == nil {
		w.h.Add(Op{Process: process, Type: Invoke, F: FPoll})
		fs := cl.PollFetches(w.consCtx)
		if fs.IsClientClosed() {
			return
		}
		var recs []Rec
		fs.EachRecord(func(r *kgo.Record) {
			recs = append(recs, Rec{Partition: r.Partition, Offset: r.Offset, Key: string(r.Key), Value: string(r.Value)})
		})
		var errs []string
		fs.EachError(func(_ string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				errs = append(errs, fmt.Sprintf("partition %d: %v", p, err))
			}
		})
		if len(recs) > 0 || len(errs) == 0 {
			w.h.Add(Op{Process: process, Type: OK, F: FPoll, Recs: recs})
		} else {
			w.h.Add(Op{Process: process, Type: Info, F: FPoll, Error: fmt.Sprint(errs)})
		}
	}
}

// Finish stops sending, waits up to a minute and a half for the answers
// of what was sent, and stops the consumers.
func (w *workload) Finish() {
	close(w.stop)
	w.wg.Wait()
	for _, cl := range w.prod {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		if err := cl.Flush(ctx); err != nil {
			w.t.Logf("producer flush: %v (the unanswered sends stay indeterminate)", err)
		}
		cancel()
		cl.Close()
	}
	w.consCancel()
	for _, cl := range w.cons {
		cl.Close()
	}
	w.consWG.Wait()
}

// finalRead reads every partition from its start up to its end offset
// (the high watermark, all producers stopped and the ISR full) and
// records one FFinal op per partition. It returns the ends.
func finalRead(t *testing.T, c *cluster, h *History) map[int32]int64 {
	t.Helper()
	adm, done := c.admin()
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var lends kadm.ListedOffsets
	waitFor(t, time.Minute, "end offsets", func() bool {
		var err error
		lends, err = adm.ListEndOffsets(ctx, topicName)
		return err == nil && lends.Error() == nil && len(lends[topicName]) == partitions
	})
	ends := map[int32]int64{}
	offsets := map[int32]kgo.Offset{}
	lends.Each(func(o kadm.ListedOffset) {
		ends[o.Partition] = o.Offset
		offsets[o.Partition] = kgo.NewOffset().AtStart()
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topicName: offsets}),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.ClientID("chaos-final"))
	require.NoError(t, err)
	defer cl.Close()
	recs := map[int32][]Rec{}
	next := map[int32]int64{}
	complete := func() bool {
		for p, e := range ends {
			if next[p] < e {
				return false
			}
		}
		return true
	}
	for !complete() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Errorf("final read incomplete after 3 minutes: read up to %v of %v", next, ends)
			break
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= ends[r.Partition] {
				return
			}
			recs[r.Partition] = append(recs[r.Partition], Rec{Partition: r.Partition, Offset: r.Offset, Key: string(r.Key), Value: string(r.Value)})
			next[r.Partition] = r.Offset + 1
		})
	}
	for p, e := range ends {
		if next[p] >= e {
			h.Add(Op{Process: 100, Type: OK, F: FFinal, Partition: p, End: e, Recs: recs[p]})
		}
	}
	return ends
}

// definiteRejection reports whether a produce error means the broker
// refused the record for what it is, so it was certainly not stored.
func definiteRejection(err error) bool {
	for _, e := range []*kerr.Error{kerr.MessageTooLarge, kerr.RecordListTooLarge, kerr.InvalidRecord, kerr.InvalidTopicException, kerr.TopicAuthorizationFailed, kerr.InvalidRequiredAcks} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

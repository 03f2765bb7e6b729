package broker

// Dead letters of share groups (KIP-1191, with Strata's retry headers): a
// record a consumer REJECTs, or that reaches share.delivery.count.limit,
// is copied to the group's dead-letter topic (errors.deadletterqueue.topic.name,
// or <topic>.dlq with errors.deadletterqueue.enable) with the headers of
// pkg/retry (origin topic, partition and offset, attempts = deliveries,
// last error), so the DLQ console lists, decodes and replays it like any
// dead letter. The copy is made by the partition's leader, after the
// archive, by a producer of this broker: at most once (a leader that
// dies before it sends loses the copy, not the archive).

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/records"
	"github.com/stratamq/strata/brokerfleet/internal/share"
	"github.com/stratamq/strata/pkg/metastore"
	"github.com/stratamq/strata/pkg/retry"
	"github.com/stratamq/strata/pkg/segment"
)

// dlqQueue bounds the dead letters waiting to be copied.
const dlqQueue = 10000

type dlqItem struct {
	key  metastore.ShareKey
	dead share.Archived
}

// dlqWriter copies dead letters to their topics, one goroutine per broker.
type dlqWriter struct {
	b  *Broker
	ch chan dlqItem

	once sync.Once
	cl   *kgo.Client
	err  error
}

func newDLQWriter(b *Broker) *dlqWriter {
	w := &dlqWriter{b: b, ch: make(chan dlqItem, dlqQueue)}
	b.wg.Add(1)
	go w.run()
	return w
}

// add queues dead letters; it never blocks (a full queue drops them,
// logged: they stay archived).
func (w *dlqWriter) add(key metastore.ShareKey, dead []share.Archived) {
	for _, d := range dead {
		select {
		case w.ch <- dlqItem{key, d}:
		default:
			w.b.log.Warn("share dead-letter queue full: letter not copied", "group", key.Group, "offset", d.Offset)
		}
	}
}

func (w *dlqWriter) run() {
	defer w.b.wg.Done()
	defer func() {
		if w.cl != nil {
			w.cl.Close()
		}
	}()
	for {
		select {
		case <-w.b.ctx.Done():
			return
		case it := <-w.ch:
			if err := w.copy(it); err != nil && w.b.ctx.Err() == nil {
				w.b.log.Warn("copy share dead letter", "group", it.key.Group, "partition", it.key.Partition, "offset", it.dead.Offset, "err", err)
			}
		}
	}
}

// client is the broker's own producer, to its default listener.
func (w *dlqWriter) client() (*kgo.Client, error) {
	w.once.Do(func() {
		h, p := w.b.Addr()
		w.cl, w.err = kgo.NewClient(kgo.SeedBrokers(fmt.Sprintf("%s:%d", h, p)), kgo.RecordPartitioner(retry.Partitioner()),
			kgo.ProducerLinger(5*time.Millisecond), kgo.AllowAutoTopicCreation())
	})
	return w.cl, w.err
}

func (w *dlqWriter) copy(it dlqItem) error {
	cfg := w.b.groupCfg.share(it.key.Group)
	s := w.b.cat.Snapshot()
	t := s.TopicByID(it.key.Topic)
	if t == nil {
		return nil // deleted
	}
	target := cfg.DeadLetterTopicFor(t.Meta.Name)
	if target == "" || target == t.Meta.Name {
		return nil
	}
	p, code := leaderOf(s, t.Meta.Name, it.key.Partition)
	if code != 0 {
		return fmt.Errorf("read dead letter: %w", kerr.ErrorForCode(code))
	}
	rec, err := readRecord(p.Read, it.dead.Offset, t.Meta.Name, it.key.Partition)
	if err != nil || rec == nil {
		return err
	}
	cl, err := w.client()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(w.b.ctx, 30*time.Second)
	defer cancel()
	w.ensureTopic(ctx, cl, target, int32(len(t.States)))
	why := fmt.Sprintf("share group %s: delivered %d times without acknowledgement (share.delivery.count.limit %d)", it.key.Group, it.dead.Count, cfg.DeliveryLimit)
	if it.dead.Rejected {
		why = fmt.Sprintf("share group %s: rejected by a consumer after %d deliveries", it.key.Group, it.dead.Count)
	}
	now := time.Now()
	st := retry.State{Attempts: int(it.dead.Count), OriginTopic: t.Meta.Name, OriginPartition: it.key.Partition,
		OriginOffset: it.dead.Offset, FirstFailure: now, LastError: why, Function: "share-group:" + it.key.Group,
		History: []retry.Failure{{Attempt: int(it.dead.Count), At: now, Error: why}}}
	rec.Topic, rec.Headers = target, st.Headers(rec.Headers)
	return cl.ProduceSync(ctx, rec).FirstErr()
}

// ensureTopic creates the dead-letter topic with its origin's partition
// count if it does not exist.
func (w *dlqWriter) ensureTopic(ctx context.Context, cl *kgo.Client, name string, partitions int32) {
	if w.b.cat.Snapshot().Topic(name) != nil {
		return
	}
	_, err := kadm.NewClient(cl).CreateTopic(ctx, partitions, -1, nil, name)
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		w.b.log.Warn("create share dead-letter topic", "topic", name, "err", err)
	}
}

// readRecord reads the record at offset from a leader's log.
func readRecord(read func([]byte, int64, int, bool) ([]byte, error), offset int64, topic string, partition int32) (*kgo.Record, error) {
	data, err := read(nil, offset, 1, true)
	if err != nil {
		return nil, err
	}
	var out *kgo.Record
	err = segment.Split(data, func(h segment.Header, batch []byte) error {
		if out != nil || offset < h.BaseOffset || offset > h.LastOffset() || h.IsControl() {
			return nil
		}
		body, err := records.Body(batch, h, records.Bound(0, len(batch)))
		if err != nil {
			return err
		}
		return records.Entries(body, h, func(e records.Entry) error {
			if e.Offset != offset {
				return nil
			}
			var r kmsg.Record
			if err := r.ReadFrom(e.Raw); err != nil {
				return err
			}
			kr := &kgo.Record{Key: r.Key, Value: r.Value, Topic: topic, Partition: partition, Offset: offset,
				Timestamp: time.UnixMilli(e.Timestamp)}
			for _, hd := range r.Headers {
				kr.Headers = append(kr.Headers, kgo.RecordHeader{Key: hd.Key, Value: hd.Value})
			}
			out = kr
			return nil
		})
	})
	return out, err
}

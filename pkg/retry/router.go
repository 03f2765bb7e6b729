package retry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Partitioner keeps re-produced records on the partition number they came
// from. Clients' default partitioners differ (franz-go, Java and KafkaJS
// hash keys with murmur2, librdkafka with CRC32, Sarama with FNV-1a), so
// re-hashing the key of a record first produced by another client could
// move it to another partition, out of order with its key's other records.
// Every record produced through this partitioner must set Record.Partition:
// that partition is used when the topic has it; otherwise (a retry topic
// with fewer partitions than its origin) the key is hashed with murmur2 like
// the Java client, and records without a key use Partition modulo the count.
func Partitioner() kgo.Partitioner {
	return kgo.BasicConsistentPartitioner(func(topic string) func(*kgo.Record, int) int {
		hashed := kgo.StickyKeyPartitioner(nil).ForTopic(topic)
		return func(r *kgo.Record, n int) int {
			switch {
			case int(r.Partition) < n && r.Partition >= 0:
				return int(r.Partition)
			case r.Key != nil:
				return hashed.Partition(r, n)
			default:
				return int(r.Partition) % n
			}
		}
	})
}

// Router sends failed records to <origin>.retry, or to <origin>.dlq once
// they have failed Policy.MaxAttempts times, and redelivers records to their
// origin. Its methods return only after the broker acknowledged the
// produce, so a caller commits the consumed offset only after that: a record
// is never lost, at worst delivered twice.
type Router struct {
	cl       *kgo.Client
	policy   Policy
	function string
	now      func() time.Time
}

// NewRouter routes through cl, which must use Partitioner (GroupOpts
// includes it). function names the handler in the records' headers; now is
// the clock (nil: time.Now).
func NewRouter(cl *kgo.Client, p Policy, function string, now func() time.Time) (*Router, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if now == nil {
		now = time.Now
	}
	return &Router{cl: cl, policy: p, function: function, now: now}, nil
}

// Policy is the router's policy.
func (r *Router) Policy() Policy { return r.policy }

// Routed says where a failed record went.
type Routed struct {
	Topic string
	State State
}

// Next is the state a record has after failing with cause: its previous
// state (or a first failure at its own position) with one more attempt, the
// error appended to the history and, unless exhausted, a not-before time.
// exhausted is true when the record belongs in the dead-letter topic.
// Headers that do not parse, or whose origin the record may not name
// (State.CheckOrigin), are not followed: the record is a first failure at
// its own position, exhausted, and the reason is added to the error.
func (r *Router) Next(rec *kgo.Record, cause error) (st State, exhausted bool) {
	now := r.now().UTC()
	st, ok, err := Parse(rec.Headers)
	if err == nil && ok {
		err = st.CheckOrigin(rec.Topic)
	}
	if err != nil {
		// Malformed retry headers, or an origin this record may not name:
		// keep the record, but neither loop on it nor follow its headers: it
		// goes straight to OriginOf(its topic).dlq, with the reason.
		st, ok = State{}, false
		if cause.Error() != err.Error() {
			cause = fmt.Errorf("%v (and %v)", cause, err)
		}
		defer func() { exhausted = true; st.NotBefore = time.Time{} }()
	}
	if !ok {
		st = State{OriginTopic: OriginOf(rec.Topic), OriginPartition: rec.Partition, OriginOffset: rec.Offset, FirstFailure: now}
		if st.OriginTopic != rec.Topic {
			st.OriginOffset = -1 // read from X.retry or X.dlq: its offset in X is unknown
		}
	}
	st.Attempts++
	st.LastError = cause.Error()
	st.Function = r.function
	st.History = append(st.History, Failure{Attempt: st.Attempts, At: now, Error: st.LastError})
	if st.Attempts >= r.policy.MaxAttempts {
		st.NotBefore = time.Time{}
		return st, true
	}
	st.NotBefore = now.Add(r.policy.Backoff(st.Attempts))
	return st, false
}

// Fail routes records that failed with cause to their retry or dead-letter
// topics and waits for the broker's acknowledgement.
func (r *Router) Fail(ctx context.Context, cause error, recs ...*kgo.Record) ([]Routed, error) {
	out := make([]Routed, len(recs))
	prod := make([]*kgo.Record, len(recs))
	for i, rec := range recs {
		st, exhausted := r.Next(rec, cause)
		topic := RetryTopic(st.OriginTopic)
		if exhausted {
			topic = DLQTopic(st.OriginTopic)
		}
		out[i] = Routed{Topic: topic, State: st}
		prod[i] = r.copyTo(rec, topic, st.OriginPartition, st.Headers(rec.Headers))
	}
	if err := r.cl.ProduceSync(ctx, prod...).FirstErr(); err != nil {
		return nil, fmt.Errorf("retry: route failed records: %w", err)
	}
	return out, nil
}

// DeadLetter moves a record whose headers say it is exhausted to its
// origin's dead-letter topic, headers (and so its history) unchanged. An
// origin rec may not name is refused (State.CheckOrigin).
func (r *Router) DeadLetter(ctx context.Context, rec *kgo.Record, st State) error {
	if err := st.CheckOrigin(rec.Topic); err != nil {
		return err
	}
	st.NotBefore = time.Time{}
	if err := r.cl.ProduceSync(ctx, r.copyTo(rec, DLQTopic(st.OriginTopic), st.OriginPartition, st.Headers(rec.Headers))).FirstErr(); err != nil {
		return fmt.Errorf("retry: dead-letter %s/%d@%d: %w", st.OriginTopic, st.OriginPartition, st.OriginOffset, err)
	}
	return nil
}

// Redeliver produces rec back to its origin topic and partition with its
// headers, so the next failure continues its history. An origin rec may
// not name is refused (State.CheckOrigin): nothing is produced.
func (r *Router) Redeliver(ctx context.Context, rec *kgo.Record, st State) error {
	if err := st.CheckOrigin(rec.Topic); err != nil {
		return err
	}
	if err := r.cl.ProduceSync(ctx, r.copyTo(rec, st.OriginTopic, st.OriginPartition, rec.Headers)).FirstErr(); err != nil {
		return fmt.Errorf("retry: redeliver %s/%d@%d: %w", st.OriginTopic, st.OriginPartition, st.OriginOffset, err)
	}
	return nil
}

func (r *Router) copyTo(rec *kgo.Record, topic string, partition int32, hs []kgo.RecordHeader) *kgo.Record {
	return &kgo.Record{Topic: topic, Partition: partition, Key: rec.Key, Value: rec.Value, Headers: hs}
}

// EnsureTopics creates the retry and dead-letter topics of origins that do
// not exist yet, with as many partitions as their origin so every record
// keeps its partition number.
func EnsureTopics(ctx context.Context, cl *kgo.Client, origins ...string) error {
	adm := kadm.NewClient(cl)
	md, err := adm.Metadata(ctx, origins...)
	if err != nil {
		return fmt.Errorf("retry: metadata: %w", err)
	}
	for _, o := range origins {
		td, ok := md.Topics[o]
		if !ok || td.Err != nil {
			continue // the origin does not exist (yet): nothing to size by
		}
		for _, t := range []string{RetryTopic(o), DLQTopic(o)} {
			resp, err := adm.CreateTopic(ctx, int32(len(td.Partitions)), -1, nil, t)
			if err == nil {
				err = resp.Err
			}
			if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
				return fmt.Errorf("retry: create %s: %w", t, err)
			}
		}
	}
	return nil
}

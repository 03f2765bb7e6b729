// Package offsetlog publishes committed offsets to the __consumer_offsets
// topic in Kafka's record format, for tools that read consumer progress
// from that topic instead of asking for it (LinkedIn's Burrow, some lag
// exporters). Strata's committed offsets live in the metastore; this topic
// is a copy, written after each commit is stored, and nothing in the
// broker reads it back.
//
// Each commit is one record: the key is an OffsetCommitKey of version 1
// (group, topic, partition), the value an OffsetCommitValue of version 3
// (offset, leader epoch, metadata, commit time), as Kafka 2.1 and later
// write them; a group's records go to partition Partition(group, n), the
// one Kafka uses (the Java hash of the group id). Group metadata records
// (key version 2) and tombstones for deleted or expired offsets are not
// written.
//
// Publishing is best effort and never delays a commit: records are handed
// to a Kafka client of the cluster without waiting (TryProduce), and a
// record that finds the client's buffer full, or the topic not created
// yet, is dropped (counted in Dropped). Consumers commit again, so a
// reader catches up at the next commit. After a coordinator moves, the old
// coordinator's last records may land after the new one's first.
package offsetlog

import (
	"context"
	"log/slog"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/pkg/metastore"
)

// Topic is the name Kafka gives the topic.
const Topic = "__consumer_offsets"

// Partition is the partition of the topic that holds group's records when
// it has n partitions: Kafka's abs(groupId.hashCode()) % n, with Java's
// String.hashCode over the id's UTF-16 code units and Kafka's abs (the
// sign bit cleared).
func Partition(group string, n int32) int32 {
	var h int32
	for _, r := range group {
		if r >= 0x10000 { // a surrogate pair in Java
			r -= 0x10000
			h = 31*h + int32(0xD800+(r>>10))
			h = 31*h + int32(0xDC00+(r&0x3FF))
			continue
		}
		h = 31*h + int32(r)
	}
	return (h & 0x7fffffff) % n
}

// Record is the record of one committed offset of group.
func Record(group string, o metastore.Offset, partitions int32) *kgo.Record {
	k := kmsg.NewOffsetCommitKey()
	k.Version, k.Group, k.Topic, k.Partition = 1, group, o.Topic, o.Partition
	v := kmsg.NewOffsetCommitValue()
	v.Version, v.Offset, v.LeaderEpoch, v.Metadata, v.CommitTimestamp = 3, o.Offset, o.LeaderEpoch, o.Metadata, o.CommittedAt
	return &kgo.Record{Topic: Topic, Partition: Partition(group, partitions), Key: k.AppendTo(nil), Value: v.AppendTo(nil)}
}

// Producer hands records to a Kafka client without waiting; *kgo.Client
// is one (with a manual partitioner, so Record's partition holds).
type Producer interface {
	TryProduce(ctx context.Context, r *kgo.Record, promise func(*kgo.Record, error))
}

var _ Producer = (*kgo.Client)(nil)

// Feed publishes commits through a Producer.
type Feed struct {
	ctx        context.Context
	p          Producer
	partitions int32
	ready      func() bool
	log        *slog.Logger
	dropped    atomic.Int64
	failing    atomic.Bool // the last record failed: log only the first of a run
}

// New returns a feed writing to a topic of partitions partitions through
// p while ctx lasts; ready reports whether the topic exists (records are
// dropped until it does).
func New(ctx context.Context, p Producer, partitions int32, ready func() bool, log *slog.Logger) *Feed {
	return &Feed{ctx: ctx, p: p, partitions: partitions, ready: ready, log: log}
}

// Committed publishes the offsets just stored for group. It does not
// block, so it may run under the group's lock. Safe on a nil *Feed (a
// no-op).
func (f *Feed) Committed(group string, offs []metastore.Offset) {
	if f == nil {
		return
	}
	if !f.ready() {
		f.dropped.Add(int64(len(offs)))
		return
	}
	for _, o := range offs {
		f.p.TryProduce(f.ctx, Record(group, o, f.partitions), f.done)
	}
}

// done counts a record that was not written, logging the first of a run
// of failures.
func (f *Feed) done(r *kgo.Record, err error) {
	if err == nil {
		if f.failing.Swap(false) {
			f.log.Info("offsets topic: publishing again")
		}
		return
	}
	f.dropped.Add(1)
	if f.ctx.Err() == nil && !f.failing.Swap(true) {
		f.log.Warn("offsets topic: a commit record was not written (further failures are not logged until one is)", "partition", r.Partition, "err", err)
	}
}

// Dropped is how many commit records were not written.
func (f *Feed) Dropped() int64 {
	if f == nil {
		return 0
	}
	return f.dropped.Load()
}

package broker

// What ShareFetch and ShareAcknowledge share: resolving a session's
// partitions to the local leader and its share partition, reading the
// log for acquisition, applying acknowledgements and waiting for them
// to be stored.

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/stratamq/strata/brokerfleet/internal/catalog"
	"github.com/stratamq/strata/brokerfleet/internal/partition"
	"github.com/stratamq/strata/brokerfleet/internal/share"
	"github.com/stratamq/strata/pkg/metastore"
	"github.com/stratamq/strata/pkg/segment"
)

// shareTarget is one session partition resolved on this broker.
type shareTarget struct {
	tp    share.TP
	topic *catalog.Topic
	p     *partition.Partition // the local leader, nil with code set
	code  int16
	// leader hint for NOT_LEADER_OR_FOLLOWER
	leader, leaderEpoch int32
}

// resolveShare finds the local leader of tp.
func (b shareAPI) resolveShare(s *catalog.Snapshot, tp share.TP) shareTarget {
	t := shareTarget{tp: tp, leader: -1, leaderEpoch: -1}
	t.topic = s.TopicByID(tp.Topic)
	if t.topic == nil {
		t.code = kerr.UnknownTopicID.Code
		return t
	}
	p, code := leaderOf(s, t.topic.Meta.Name, tp.Partition)
	if p == nil {
		t.code = code
		if code == kerr.NotLeaderForPartition.Code {
			if l, epoch, _, _, ok := currentLeader(s, t.topic.Meta.Name, tp.Partition); ok && l != b.cfg.NodeID {
				t.leader, t.leaderEpoch = l, epoch
			}
		}
		return t
	}
	t.p = p
	return t
}

// sharePartition returns the share partition of group on t's local
// leader, loading it if need be.
func (b shareAPI) sharePartition(ctx context.Context, group string, t shareTarget, fresh bool) (*share.Partition, int16) {
	key := metastore.ShareKey{Group: group, Topic: t.tp.Topic, Partition: t.tp.Partition}
	lctx, cancel := context.WithTimeout(ctx, metaTimeout)
	defer cancel()
	sp, err := b.shares.Get(lctx, key, t.p.LeaderEpoch(), fresh, func() share.Init {
		cfg, err := b.groupCfg.fresh(lctx, group) // a new share partition starts from what the group says now
		if err != nil {
			cfg = b.groupCfg.share(group)
		}
		p := t.p
		return share.Init{LogStart: p.LogStartOffset(), HighWatermark: p.HighWatermark(), Config: cfg,
			ByTime: func(at time.Time) (int64, error) {
				off, _, ok, err := p.OffsetForTimestamp(at.UnixMilli())
				if err != nil || !ok {
					return p.HighWatermark(), err
				}
				return off, nil
			}}
	})
	switch {
	case errors.Is(err, share.ErrStaleLeader):
		return nil, kerr.NotLeaderForPartition.Code
	case err != nil:
		b.log.Warn("load share partition", "group", group, "topic", t.topic.Meta.Name, "partition", t.tp.Partition, "err", err)
		return nil, kerr.CoordinatorLoadInProgress.Code
	}
	return sp, 0
}

// shareReader reads a leader's committed batches for acquisition, from
// the S3 tier below the local log.
type shareReader struct {
	p         *partition.Partition
	committed bool // read_committed: up to the last stable offset
	// tier reads from the tier (nil without one).
	tier func(offset int64, maxBytes int) ([]byte, error)
}

func (r shareReader) LogStartOffset() int64 { return r.p.LogStartOffset() }

func (r shareReader) Read(offset int64, maxBytes int) ([]byte, []share.Batch, error) {
	read := r.p.Read
	if r.committed {
		read = r.p.ReadCommitted
	}
	data, err := read(nil, offset, maxBytes, true)
	if errors.Is(err, segment.ErrOffsetOutOfRange) && r.tier != nil && offset < r.p.LocalLogStartOffset() {
		data, err = r.tier(offset, max(maxBytes, 1))
	}
	if errors.Is(err, segment.ErrOffsetOutOfRange) {
		return nil, nil, nil // past the log, or gone: nothing to acquire now
	}
	if err != nil {
		return nil, nil, err
	}
	var bs []share.Batch
	var hs []segment.Header
	err = segment.Split(data, func(h segment.Header, _ []byte) error {
		bs = append(bs, share.Batch{Base: h.BaseOffset, Last: h.LastOffset(), Control: h.IsControl()})
		hs = append(hs, h)
		return nil
	})
	if r.committed && len(bs) > 0 {
		// An aborted transaction's batches are never delivered.
		aborted := r.p.AbortedTxns(bs[0].Base, bs[len(bs)-1].Last+1)
		for i, h := range hs {
			for _, a := range aborted {
				if h.IsTransactional() && h.ProducerID == a.ProducerID && a.FirstOffset <= h.BaseOffset && h.LastOffset() <= a.LastOffset {
					bs[i].Control = true
				}
			}
		}
	}
	return data, bs, err
}

// shareAcks applies one request's acknowledgements, partition by
// partition, and waits until they are stored: the code per partition.
func (b shareAPI) shareAcks(ctx context.Context, s *catalog.Snapshot, group, member string, acks map[share.TP][]share.AckBatch, renew bool, cfg share.Config) map[share.TP]int16 {
	out := make(map[share.TP]int16, len(acks))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for tp, batches := range acks {
		t := b.resolveShare(s, tp)
		if t.p == nil {
			out[tp] = t.code
			continue
		}
		sp, code := b.sharePartition(ctx, group, t, false)
		if code != 0 {
			out[tp] = code
			continue
		}
		code, err := sp.Ack(member, batches, renew, cfg)
		if err != nil || code != 0 {
			if err != nil {
				code = kerr.NotLeaderForPartition.Code
			}
			out[tp] = code
			continue
		}
		if b.cfg.UnsafeShareAckBeforeStore { // test-only: see Config
			// Stored by a write 2 s after the first unstored one, so
			// the last 0-2 s of acknowledgements are never durable.
			out[tp] = 0
			if _, scheduled := b.unsafeShareSyncs.LoadOrStore(sp, true); !scheduled {
				go func() {
					time.Sleep(2 * time.Second)
					b.unsafeShareSyncs.Delete(sp)
					sctx, cancel := context.WithTimeout(b.ctx, metaTimeout)
					defer cancel()
					sp.Sync(sctx)
				}()
			}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sctx, cancel := context.WithTimeout(ctx, metaTimeout)
			err := sp.Sync(sctx)
			cancel()
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				out[tp] = 0
			case errors.Is(err, share.ErrFenced):
				out[tp] = kerr.NotLeaderForPartition.Code
			default:
				out[tp] = kerr.RequestTimedOut.Code
			}
		}()
	}
	wg.Wait()
	return out
}

// shareRelease releases member's acquisitions on the partitions of its
// closed session.
func (b shareAPI) shareRelease(ctx context.Context, s *catalog.Snapshot, group, member string, parts []share.TP, cfg share.Config) {
	for _, tp := range parts {
		t := b.resolveShare(s, tp)
		if t.p == nil {
			continue
		}
		if sp, code := b.sharePartition(ctx, group, t, false); code == 0 {
			sp.ReleaseMember(member, cfg)
		}
	}
}

// shareDeadLetters receives records archived by a reject or the
// delivery limit.
func (b shareAPI) shareDeadLetters(key metastore.ShareKey, dead []share.Archived) {
	if w := b.dlq.Load(); w != nil {
		w.add(key, dead)
	}
}

// shareAPI is the broker seen by the share APIs: their helpers are its
// methods, not the Broker's.
type shareAPI struct{ *Broker }

// shareReaderFor is the reader of t's local leader.
func (b shareAPI) shareReaderFor(ctx context.Context, t shareTarget, committed bool) shareReader {
	r := shareReader{p: t.p, committed: committed}
	if b.tier != nil && !committed {
		id, idx := t.tp.Topic, t.tp.Partition
		r.tier = func(offset int64, maxBytes int) ([]byte, error) {
			tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			return b.tier.Read(tctx, id, idx, offset, maxBytes)
		}
	}
	return r
}

package broker

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/stratamq/strata/brokerfleet/internal/partition"
	"github.com/stratamq/strata/pkg/metastore"
)

// maintainISR is the leader's side of ISR management: followers that have
// not caught up for ReplicaLagMax leave the ISR, followers that reached the
// high watermark rejoin it. Each change is a compare-and-set on the
// partition's state, so it cannot overwrite a newer leader's.
func (b *Broker) maintainISR() {
	defer b.wg.Done()
	t := time.NewTicker(max(b.cfg.ReplicaLagMax/4, 50*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-t.C:
		}
		if !b.leaseValid() {
			continue
		}
		changed := false
		for _, c := range b.isrChanges() {
			// A member joins the leader's own ISR (so the high watermark
			// waits for it) before the metastore says it is in sync: an
			// election may pick any member the metastore lists.
			if p := b.partitionByID(c.Topic, c.Partition); p != nil {
				p.SetReplication(b.cfg.NodeID, true, c.Replicas, union(p.ISR(), c.ISR))
			}
			ctx, cancel := context.WithTimeout(b.ctx, metaTimeout)
			_, err := b.meta.UpdatePartition(ctx, c)
			cancel()
			switch {
			case err == nil:
				changed = true
				b.observeISRChange(c)
				b.log.Info("isr changed", "topic", c.Topic.String(), "partition", c.Partition, "isr", c.ISR, "replicas", c.Replicas, "leader", c.Leader)
			case errors.Is(err, metastore.ErrConditionFailed), errors.Is(err, metastore.ErrFenced):
				changed = true // someone else changed it: re-read
			default:
				b.log.Warn("update isr", "partition", c.Partition, "err", err)
			}
		}
		if changed {
			ctx, cancel := context.WithTimeout(b.ctx, metaTimeout)
			if err := b.reconcile(ctx); err != nil && b.ctx.Err() == nil {
				b.log.Warn("reload after isr change", "err", err)
			}
			cancel()
		}
	}
}

// isrChanges computes the ISR updates this broker, as leader, should make.
func (b *Broker) isrChanges() []metastore.PartitionState {
	b.mu.RLock()
	defer b.mu.RUnlock()
	var out []metastore.PartitionState
	for _, ts := range b.topics {
		for i, st := range ts.states {
			p := ts.parts[i]
			if p == nil || st.Leader != b.cfg.NodeID {
				continue
			}
			// A reassignment completes in the write that brings its whole
			// target into the ISR (or the next one, if it already is).
			if next, ok := st.ChangeISR(p.LaggingISR(b.cfg.ReplicaLagMax), p.CaughtUpOutOfSync()); ok {
				out = append(out, next)
			}
		}
	}
	return out
}

func union(a, b []int32) []int32 {
	out := slices.Clone(a)
	for _, x := range b {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

// partitionByID returns the local partition of a topic id, if hosted.
func (b *Broker) partitionByID(id metastore.TopicID, idx int32) *partition.Partition {
	b.mu.RLock()
	defer b.mu.RUnlock()
	ts := b.byID[id]
	if ts == nil || idx < 0 || int(idx) >= len(ts.parts) {
		return nil
	}
	return ts.parts[idx]
}

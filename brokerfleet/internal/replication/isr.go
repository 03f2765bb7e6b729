package replication

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/stratamq/strata/brokerfleet/internal/catalog"
	"github.com/stratamq/strata/brokerfleet/internal/partition"
	"github.com/stratamq/strata/pkg/clock"
	"github.com/stratamq/strata/pkg/metastore"
)

// ISROptions configures MaintainISR.
type ISROptions struct {
	// Catalog is the broker's view; ISR changes are made only while its
	// lease is valid, and re-read through it after they are written.
	Catalog *catalog.Catalog
	// Meta is where ISR changes are written.
	Meta *metastore.Meta
	// ReplicaLagMax is how long a follower may go without catching up to
	// the leader's log end before it leaves the ISR
	// (replica.lag.time.max.ms).
	ReplicaLagMax time.Duration
	// Changed runs after each ISR change written, with the state it
	// replaced (metrics count shrinks and expands).
	Changed func(prev, next metastore.PartitionState)
	// Clock drives the checks; nil means the real clock.
	Clock clock.Clock
	// Logger receives operational logs; nil means slog.Default().
	Logger *slog.Logger
}

// metaTimeout bounds one metastore write of an ISR change.
const metaTimeout = 10 * time.Second

// MaintainISR is the leader's side of ISR management, until ctx ends:
// followers that have not caught up for ReplicaLagMax leave the ISR,
// followers that reached the high watermark rejoin it, and a reassignment
// completes in the write that brings its whole target in sync (see
// metastore.PartitionState.ChangeISR). Each change is a compare-and-set on
// the partition's state, so it cannot overwrite a newer leader's.
func MaintainISR(ctx context.Context, o ISROptions) {
	o.Clock = clock.Or(o.Clock)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	t := o.Clock.NewTicker(max(o.ReplicaLagMax/4, 50*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		if !o.Catalog.LeaseValid() {
			continue
		}
		changed := false
		for _, c := range ISRChanges(o.Catalog.Snapshot(), o.ReplicaLagMax) {
			// A member joins the leader's own ISR (so the high watermark
			// waits for it) before the metastore says it is in sync: an
			// election may pick any member the metastore lists.
			c.Part.SetReplication(o.Catalog.Snapshot().Self(), true, c.Next.Replicas, union(c.Part.ISR(), c.Next.ISR))
			wctx, cancel := context.WithTimeout(ctx, metaTimeout)
			_, err := o.Meta.UpdatePartition(wctx, c.Next)
			cancel()
			switch {
			case err == nil:
				changed = true
				if o.Changed != nil {
					o.Changed(c.Prev, c.Next)
				}
				o.Logger.Info("isr changed", "topic", c.Topic, "partition", c.Next.Partition, "isr", c.Next.ISR, "replicas", c.Next.Replicas, "leader", c.Next.Leader)
			case errors.Is(err, metastore.ErrConditionFailed), errors.Is(err, metastore.ErrFenced):
				changed = true // someone else changed it: re-read
			default:
				o.Logger.Warn("update isr", "topic", c.Topic, "partition", c.Next.Partition, "err", err)
			}
		}
		if changed {
			rctx, cancel := context.WithTimeout(ctx, metaTimeout)
			if err := o.Catalog.Reconcile(rctx); err != nil && ctx.Err() == nil {
				o.Logger.Warn("reload after isr change", "err", err)
			}
			cancel()
		}
	}
}

// ISRChange is one ISR update a leader should write.
type ISRChange struct {
	Topic      string
	Prev, Next metastore.PartitionState
	Part       *partition.Partition
}

// ISRChanges computes the ISR updates this broker, as leader of the
// partitions in s, should make now.
func ISRChanges(s *catalog.Snapshot, maxLag time.Duration) []ISRChange {
	var out []ISRChange
	for _, l := range s.Led(nil) {
		if next, ok := l.State.ChangeISR(l.Part.LaggingISR(maxLag), l.Part.CaughtUpOutOfSync()); ok {
			out = append(out, ISRChange{Topic: l.Topic.Meta.Name, Prev: l.State, Next: next, Part: l.Part})
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

package catalog

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/stratamq/strata/pkg/metastore"
)

// metaTimeout bounds one metastore operation made on the registration's
// behalf.
const metaTimeout = 10 * time.Second

// updateRetries bounds read-modify-write retries of one partition state.
const updateRetries = 5

// Register ticks the registration lease once: a fresh broker then serves
// at once, while a restarted one keeps trying in Heartbeat until its
// previous lease runs out.
func (c *Catalog) Register(ctx context.Context) {
	st, err := c.lease.Tick(ctx)
	if err != nil {
		c.log.Warn("first broker heartbeat failed", "err", err)
		return
	}
	if st.Held {
		c.registered(ctx, st.Epoch)
	}
}

// Heartbeat keeps this incarnation registered until ctx ends: one
// conditional write per interval, whatever the number of partitions. Then
// the lease is released, so a restarted broker need not wait it out.
//
// Re-registering (re-reading the partition states under a new epoch) runs
// in its own goroutine: done inline it delayed the next renewals, so a
// broker resumed after a pause lost the lease it had just regained and
// was declared dead a second time.
func (c *Catalog) Heartbeat(ctx context.Context, interval time.Duration) {
	epochs := make(chan int64, 1) // the latest epoch to re-register under
	done := make(chan struct{})
	defer func() { <-done }()
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case epoch := <-epochs:
				if epoch == c.actEpoch.Load() {
					continue // a later tick asked again while it ran
				}
				rctx, cancel := context.WithTimeout(ctx, metaTimeout)
				c.registered(rctx, epoch)
				cancel()
			}
		}
	}()
	register := func(epoch int64) {
		select {
		case <-epochs: // replaced by the newer one
		default:
		}
		epochs <- epoch
	}
	t := c.opts.Clock.NewTimer(interval)
	defer t.Stop()
	held := c.LeaseValid()
	for {
		select {
		case <-ctx.Done():
			rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			if err := c.lease.Release(rctx); err != nil {
				c.log.Warn("release broker lease", "err", err)
			} else if err := c.meta.NotifyChange(rctx); err != nil {
				c.log.Warn("announce shutdown", "err", err)
			}
			cancel()
			return
		case <-t.C():
		}
		tctx, cancel := context.WithTimeout(ctx, interval)
		st, err := c.lease.Tick(tctx)
		cancel()
		switch {
		case err != nil && ctx.Err() == nil:
			c.log.Warn("broker heartbeat failed", "err", err)
		case st.Held && (!held || st.Epoch != c.actEpoch.Load()):
			// Newly held, or held under a new epoch: fenced and re-acquired
			// between two ticks (the controller can declare a broker dead
			// while the metastore was unreachable to it) without a tick ever
			// reporting the loss. Acting needs the partition states re-read
			// under the new epoch either way.
			if !held {
				c.log.Info("broker registered", "epoch", st.Epoch, "incarnation", c.opts.Incarnation)
			}
			register(st.Epoch)
		case !st.Held && held:
			c.log.Warn("broker registration lost", "holder", st.Holder)
		case !st.Held && err == nil:
			c.log.Info("waiting for the previous incarnation's lease to expire", "holder", st.Holder)
		}
		held = st.Held
		t.Reset(interval)
	}
}

// registered runs when this broker (re)acquires its registration under a
// new epoch: it tells the others (through the change counter, so their
// Metadata answers list it), re-reads the partition states, and only then
// may act as a leader under that epoch. A broker fenced while paused thus
// learns of the leaders elected meanwhile before it accepts a write.
func (c *Catalog) registered(ctx context.Context, epoch int64) {
	if err := c.meta.NotifyChange(ctx); err != nil {
		c.log.Warn("announce registration", "err", err)
	}
	if err := c.Reconcile(ctx); err != nil {
		c.log.Warn("re-read partitions after registering", "err", err)
		return
	}
	if c.actEpoch.Load() == 0 {
		c.leaveISRs(ctx)
	}
	c.actEpoch.Store(epoch)
}

// leaveISRs takes this new incarnation out of the ISR of every partition it
// follows (metastore.PartitionState.LeaveISR): its log may have lost a
// tail, or the whole disk, since its previous life. The controller does
// the same when it sees the new incarnation; doing it here too covers a
// controller that restarted and forgot the old one.
func (c *Catalog) leaveISRs(ctx context.Context) {
	self := c.opts.NodeID
	var leave []metastore.PartitionState
	for _, t := range c.Snapshot().topics {
		for _, st := range t.States {
			if _, ok := st.LeaveISR(self); ok {
				leave = append(leave, st)
			}
		}
	}
	changed := false
	for _, st := range leave {
		for attempt := 0; attempt < updateRetries; attempt++ {
			next, ok := st.LeaveISR(self)
			if !ok {
				break
			}
			_, err := c.meta.UpdatePartition(ctx, next)
			if err == nil {
				changed = true
				break
			}
			if !errors.Is(err, metastore.ErrConditionFailed) {
				c.log.Warn("leave the ISR after a restart", "partition", st.Partition, "err", err)
				break
			}
			states, err := c.meta.Partitions(ctx, st.Topic)
			if err != nil || int(st.Partition) >= len(states) {
				break
			}
			st = states[st.Partition]
		}
	}
	if changed {
		if err := c.Reconcile(ctx); err != nil {
			c.log.Warn("re-read partitions after leaving the ISR", "err", err)
		}
	}
}

// LeaseValid reports whether this broker may act as a leader now: its
// registration lease is held, not past its safe deadline, and its
// partition states were re-read under the current epoch.
func (c *Catalog) LeaseValid() bool {
	epoch, ok := c.lease.Valid()
	return ok && epoch == c.actEpoch.Load()
}

// Healthy returns nil when the broker may act (LeaseValid); otherwise the
// error says why.
func (c *Catalog) Healthy() error {
	epoch, ok := c.lease.Valid()
	switch {
	case !ok:
		return errors.New("broker registration lease not held (registering, renewals failing, or fenced)")
	case epoch != c.actEpoch.Load():
		return fmt.Errorf("partition states not yet re-read under registration epoch %d", epoch)
	}
	return nil
}

// Ready returns nil once the broker has been Healthy and caught up (every
// partition it hosts whose leader is live lists it in the ISR) at the same
// time. It is latched: a broker ready once stays ready, whatever its lease
// or its followers do later, so that a metastore outage, which makes every
// broker lose its lease, never makes a deployment replace a healthy fleet
// (and lose the segments not yet in S3), and a follower that falls behind
// later is not taken for a new one.
func (c *Catalog) Ready() error {
	if c.caughtUp.Load() {
		return nil
	}
	if err := c.Healthy(); err != nil {
		return err
	}
	s := c.Snapshot()
	behind, example := 0, ""
	for _, t := range s.Topics() {
		for i, st := range t.States {
			if t.Parts[i] == nil || st.Leader < 0 || slices.Contains(st.ISR, s.self) || !s.Live(st.Leader) {
				continue // not hosted, nobody to catch up from, or in sync
			}
			behind++
			if example == "" {
				example = fmt.Sprintf("%s-%d", t.Meta.Name, i)
			}
		}
	}
	if behind > 0 {
		return fmt.Errorf("catching up: %d partitions not in sync yet (e.g. %s)", behind, example)
	}
	c.caughtUp.Store(true)
	return nil
}

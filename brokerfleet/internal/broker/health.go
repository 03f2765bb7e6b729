package broker

import (
	"errors"
	"fmt"
	"slices"
)

// ErrClosed is returned by Healthy when the broker has been closed.
var ErrClosed = errors.New("broker closed")

// Healthy returns nil when the broker may act: it holds its registration
// lease, short of the lease's safe deadline, and has re-read the partition
// states under the lease's current epoch (the same test a leader passes
// before it accepts a write). Otherwise the error says why; a load
// balancer or container health check should then treat it as unhealthy.
func (b *Broker) Healthy() error {
	if b.ctx.Err() != nil {
		return ErrClosed
	}
	epoch, ok := b.lease.Valid()
	switch {
	case !ok:
		return errors.New("broker registration lease not held (registering, renewals failing, or fenced)")
	case epoch != b.actEpoch.Load():
		return fmt.Errorf("partition states not yet re-read under registration epoch %d", epoch)
	}
	return nil
}

// Ready returns nil once the broker is Healthy and has caught up: every
// partition it hosts whose leader is live lists it in the ISR. Catching up
// is latched: a broker ready once stays ready while Healthy, so a follower
// that falls behind later is not taken for a new one. Deployments that
// replace brokers one at a time (ECS rolling updates) wait for Ready, so a
// replacement on an empty disk is in sync before the next broker stops.
func (b *Broker) Ready() error {
	if err := b.Healthy(); err != nil {
		return err
	}
	if b.caughtUp.Load() {
		return nil
	}
	b.mu.RLock()
	behind, example := 0, ""
	for name, ts := range b.topics {
		for i, st := range ts.states {
			if ts.parts[i] == nil || st.Leader < 0 || slices.Contains(st.ISR, b.cfg.NodeID) {
				continue
			}
			if _, live := b.peers[st.Leader]; !live {
				continue // nobody to catch up from
			}
			behind++
			if example == "" {
				example = fmt.Sprintf("%s-%d", name, i)
			}
		}
	}
	b.mu.RUnlock()
	if behind > 0 {
		return fmt.Errorf("catching up: %d partitions not in sync yet (e.g. %s)", behind, example)
	}
	b.caughtUp.Store(true)
	return nil
}

package broker

import "sync"

// replicaWaiters are the follower fetches parked at this broker, by the
// replica id that sent them. A partition this broker hosts calls wake
// with its replicas whenever its records, high watermark, log start or
// role change (partition.Options.WakeReplicas), so a parked follower
// fetch registers one channel here instead of one per partition of its
// session on every fetch (with 1,000 partitions that registration was as
// costly as the read). Each fetch re-reads its partitions when woken, so
// a wake for a partition it does not hold costs one read, no more.
type replicaWaiters struct {
	mu  sync.Mutex // a leaf: taken under partition locks
	byR map[int32]map[chan struct{}]struct{}
}

// watch registers ch for changes of partitions replica follows; the
// returned func unregisters it.
func (w *replicaWaiters) watch(replica int32, ch chan struct{}) (cancel func()) {
	w.mu.Lock()
	if w.byR == nil {
		w.byR = map[int32]map[chan struct{}]struct{}{}
	}
	set := w.byR[replica]
	if set == nil {
		set = map[chan struct{}]struct{}{}
		w.byR[replica] = set
	}
	set[ch] = struct{}{}
	w.mu.Unlock()
	return func() {
		w.mu.Lock()
		delete(w.byR[replica], ch)
		if len(w.byR[replica]) == 0 {
			delete(w.byR, replica)
		}
		w.mu.Unlock()
	}
}

// wake signals, without blocking, every fetch parked by one of replicas.
func (w *replicaWaiters) wake(replicas []int32) {
	w.mu.Lock()
	for _, id := range replicas {
		for ch := range w.byR[id] {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
	w.mu.Unlock()
}

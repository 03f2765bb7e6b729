package broker

import (
	"sync"

	"github.com/stratamq/strata/brokerfleet/internal/partition"
)

// replicaWaiters are the follower fetches parked at this broker, by the
// replica id that sent them. A partition this broker hosts calls wake
// with its replicas whenever its records, high watermark, log start or
// role change (partition.Options.WakeReplicas), so a parked follower
// fetch registers one channel here instead of one per partition of its
// session on every fetch (with 1,000 partitions that registration was as
// costly as the read). Each fetch re-reads its partitions when woken, so
// a wake for a partition it does not hold costs one read, no more.
//
// The same calls feed a change log per replica id (only for ids that
// asked for one, see since): the partitions that changed, in order. A
// follower's fetch session reads the log to learn which of its quiet
// partitions may have news (quietskip.go), so a fetch of a session with
// 1,000 partitions, a few of them busy, looks at those few.
type replicaWaiters struct {
	mu   sync.Mutex // a leaf: taken under partition locks
	byR  map[int32]map[chan struct{}]struct{}
	logs map[int32]*changeLog
}

// changeLogMax bounds a change log: when it is full it is emptied, and a
// reader it no longer reaches back for looks at every partition once.
const changeLogMax = 1 << 14

// maxChangeLogs bounds the replica ids with a change log (a fetch names
// its replica id itself).
const maxChangeLogs = 1024

// changeLog is one replica id's change log: ents holds the entries with
// sequence numbers next-len(ents) to next-1.
type changeLog struct {
	next uint64
	ents []*partition.Partition
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

// wake signals, without blocking, every fetch parked by one of replicas,
// and logs p as changed for each of them that keeps a change log.
func (w *replicaWaiters) wake(p *partition.Partition, replicas []int32) {
	w.mu.Lock()
	for _, id := range replicas {
		if l := w.logs[id]; l != nil {
			if len(l.ents) == changeLogMax {
				clear(l.ents)
				l.ents = l.ents[:0]
			}
			l.ents = append(l.ents, p)
			l.next++
		}
		for ch := range w.byR[id] {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
	w.mu.Unlock()
}

// since appends to dst the partitions logged as changed for replica from
// sequence number from on, and returns dst and the sequence number to
// read from next. ok is false when the log does not reach back to from
// (another reader emptied it, or it did not exist: it does from now on);
// dst then holds nothing new, and next is where the log stands. A read
// empties the log: a replica has one fetch session per leader, and a
// second one (a lingering session) only looks at everything more often.
func (w *replicaWaiters) since(replica int32, from uint64, dst []*partition.Partition) (_ []*partition.Partition, next uint64, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	l := w.logs[replica]
	if l == nil {
		if len(w.logs) >= maxChangeLogs {
			return dst, 0, false
		}
		if w.logs == nil {
			w.logs = map[int32]*changeLog{}
		}
		l = &changeLog{next: 1} // 0 is no reader's position
		w.logs[replica] = l
		return dst, l.next, false
	}
	first := l.next - uint64(len(l.ents))
	ok = from >= first && from <= l.next
	if ok {
		dst = append(dst, l.ents[from-first:]...)
	}
	clear(l.ents) // no partition kept alive by the log
	l.ents = l.ents[:0]
	return dst, l.next, ok
}

package segment

import (
	"fmt"
	"sync"
)

// syncer implements group commit and tracks the flushed offset.
//
// busy is a lock held while one goroutine fsyncs the active segment (the
// leader of a group commit) and by operations that close segment files
// (retention, DeleteTo, TruncateTo, Close, Remove), so a file is never
// closed under a running fsync. Lock order: busy, then Log.mu, then
// syncer.mu. Append and roll only take Log.mu (and syncer.mu briefly), so
// appends proceed while an fsync runs.
type syncer struct {
	mu      sync.Mutex
	cond    sync.Cond // signalled when busy clears
	busy    bool
	flushed int64 // every batch below it is durable
}

func (s *syncer) init(flushed int64) {
	s.cond.L = &s.mu
	s.flushed = flushed
}

// acquire waits until no fsync or file-closing operation runs and takes the
// busy lock.
func (s *syncer) acquire() {
	s.mu.Lock()
	for s.busy {
		s.cond.Wait()
	}
	s.busy = true
	s.mu.Unlock()
}

func (s *syncer) release() {
	s.mu.Lock()
	s.busy = false
	s.cond.Broadcast()
	s.mu.Unlock()
}

// advance records that everything below off is durable.
func (s *syncer) advance(off int64) {
	s.mu.Lock()
	s.flushed = max(s.flushed, off)
	s.mu.Unlock()
}

// lower caps the flushed offset after a truncation.
func (s *syncer) lower(off int64) {
	s.mu.Lock()
	s.flushed = min(s.flushed, off)
	s.mu.Unlock()
}

func (s *syncer) get() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.flushed
}

// FlushedOffset returns the offset below which every batch is durable.
func (l *Log) FlushedOffset() int64 { return l.flush.get() }

// Flush returns once every batch below upTo is durable; an upTo beyond
// NextOffset is treated as NextOffset. Concurrent callers share fsyncs
// (group commit): if an fsync is running, a caller waits for it, and if it
// did not cover upTo, one of the waiters runs the next fsync, which covers
// everything appended until it starts. Segments are synced when rolled, so
// only the active segment is ever synced here. Flush returns at once if
// FlushedOffset is already at least upTo. A failed fsync makes the log
// unusable (see Log), as the kernel may have dropped the unsynced data.
func (l *Log) Flush(upTo int64) error {
	l.mu.RLock()
	upTo = min(upTo, l.active().next)
	l.mu.RUnlock()

	s := &l.flush
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.flushed < upTo {
		if s.busy {
			s.cond.Wait()
			continue
		}
		s.busy = true
		s.mu.Unlock()
		synced, err := l.syncActive()
		s.mu.Lock()
		s.busy = false
		s.cond.Broadcast()
		if err != nil {
			return fmt.Errorf("segment: flush to %d: %w", upTo, err)
		}
		// A truncation may have moved NextOffset below upTo meanwhile.
		upTo = min(upTo, synced)
	}
	return nil
}

// syncActive fsyncs the active segment and advances the flushed offset to
// the NextOffset seen before the fsync, which it returns. The caller holds
// the busy lock, so the file stays open.
func (l *Log) syncActive() (int64, error) {
	l.mu.RLock()
	if err := l.usable(); err != nil {
		l.mu.RUnlock()
		return 0, err
	}
	seg := l.active()
	target := seg.next
	l.mu.RUnlock()

	if err := seg.file.Sync(); err != nil {
		err = fmt.Errorf("sync segment %d: %w", seg.base, err)
		l.mu.Lock()
		l.fail(err)
		l.mu.Unlock()
		return 0, err
	}
	l.flush.advance(target)
	return target, nil
}

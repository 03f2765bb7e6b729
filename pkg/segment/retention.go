package segment

import (
	"errors"
	"fmt"
	"io"
	"math"
	"time"
)

// DeleteTo makes offset the log start offset (DeleteRecords). An offset at
// or below StartOffset is a no-op; one above NextOffset gives
// ErrOffsetOutOfRange. Segments whose batches all lie below offset are
// deleted; the active segment is never deleted, so if offset is NextOffset
// and the active segment is not empty it is rolled first. The new start
// offset is persisted in the checkpoint before DeleteTo returns.
func (l *Log) DeleteTo(offset int64) error {
	l.flush.acquire()
	defer l.flush.release()
	l.mu.Lock()
	defer l.mu.Unlock()
	defer l.noteNext()
	if err := l.usable(); err != nil {
		return fmt.Errorf("segment: delete to %d: %w", offset, err)
	}
	next := l.active().next
	if offset > next {
		return fmt.Errorf("segment: delete to %d: log holds [%d, %d): %w", offset, l.start, next, ErrOffsetOutOfRange)
	}
	if offset <= l.start {
		return nil
	}
	if offset == next {
		if err := l.roll(); err != nil {
			return fmt.Errorf("segment: delete to %d: %w", offset, err)
		}
	}
	n := 0
	for n < len(l.segs)-1 && l.segs[n].next <= offset {
		n++
	}
	if err := l.advanceStart(offset, n); err != nil {
		return fmt.Errorf("segment: delete to %d: %w", offset, err)
	}
	return nil
}

// ApplyRetention deletes the oldest segments: while a segment's maximum
// timestamp is older than Now()-retention, then while the log without the
// oldest segment still holds at least retentionBytes. retention <= 0 and
// retentionBytes < 0 mean unlimited. The active segment is never deleted,
// but if it and all segments before it are expired by time it is rolled
// first, so an idle expired partition empties. StartOffset advances to the
// base of the new first segment and is persisted. It returns the number of
// deleted segments.
func (l *Log) ApplyRetention(retention time.Duration, retentionBytes int64) (removed int, err error) {
	return l.ApplyRetentionBelow(retention, retentionBytes, math.MaxInt64)
}

// ApplyRetentionBelow is ApplyRetention that deletes only segments lying
// wholly below limit: a leader's high watermark (Kafka deletes nothing
// its followers may still need), and with an object tier the upload end
// as well. It rolls the expired active segment only when the whole log
// lies below limit: an upload end never reaches the active segment, so a
// tiered log is not rolled on every check (that would upload a stream of
// tiny segments; rolling is segment.bytes' and segment.ms' job).
func (l *Log) ApplyRetentionBelow(retention time.Duration, retentionBytes, limit int64) (removed int, err error) {
	l.flush.acquire()
	defer l.flush.release()
	l.mu.Lock()
	defer l.mu.Unlock()
	defer l.noteNext()
	if err := l.usable(); err != nil {
		return 0, fmt.Errorf("segment: apply retention: %w", err)
	}
	n := 0 // delete l.segs[:n]
	if retention > 0 {
		cutoff := l.now().Add(-retention).UnixMilli()
		for n < len(l.segs) && !l.segs[n].empty() && l.segs[n].idx.maxTs < cutoff {
			n++
		}
		if n == len(l.segs) && l.active().next <= limit { // the non-empty active segment is expired too
			if err := l.roll(); err != nil {
				return 0, fmt.Errorf("segment: apply retention: %w", err)
			}
		}
	}
	if retentionBytes >= 0 {
		left := l.size()
		for _, s := range l.segs[:n] {
			left -= s.size
		}
		for n < len(l.segs)-1 && left-l.segs[n].size >= retentionBytes {
			left -= l.segs[n].size
			n++
		}
	}
	for n > 0 && l.segs[n-1].next > limit {
		n--
	}
	if n == 0 {
		return 0, nil
	}
	if n == len(l.segs) {
		// Rolled above, but the active segment itself is never deleted.
		n--
		if n == 0 {
			return 0, nil
		}
	}
	if err := l.advanceStart(l.segs[n].base, n); err != nil {
		return 0, fmt.Errorf("segment: apply retention: %w", err)
	}
	return n, nil
}

// advanceStart raises the start offset to offset (never lowers it),
// persists it, then deletes the first n segments, which must lie wholly
// below it. A crash between the two leaves segments below the start offset,
// which Open deletes.
func (l *Log) advanceStart(offset int64, n int) error {
	old := l.start
	l.start = max(l.start, offset)
	if err := l.writeCheckpoint(false); err != nil {
		l.start = old
		return err
	}
	doomed := l.segs[:n:n]
	l.segs = append([]*segment(nil), l.segs[n:]...)
	return l.removeSegments(doomed)
}

// TruncateTo removes every batch at and after offset, which must be a batch
// boundary in [StartOffset, NextOffset], or lie in a gap the cleaner left
// (then NextOffset becomes the end of the last batch before it); otherwise
// the error wraps ErrOffsetOutOfRange. Later segments are deleted and the
// segment holding offset is cut and becomes the active one. Used for log
// reconciliation with a leader (KIP-101).
func (l *Log) TruncateTo(offset int64) error {
	l.flush.acquire()
	defer l.flush.release()
	l.mu.Lock()
	defer l.mu.Unlock()
	defer l.noteNext()
	if err := l.usable(); err != nil {
		return fmt.Errorf("segment: truncate to %d: %w", offset, err)
	}
	next := l.active().next
	if offset == next {
		return nil
	}
	if offset < l.start || offset > next {
		return fmt.Errorf("segment: truncate to %d: log holds [%d, %d): %w", offset, l.start, next, ErrOffsetOutOfRange)
	}
	k := l.find(offset)
	s := l.segs[k]
	wasActive := k == len(l.segs)-1
	idx, pos, end, err := s.cutIndex(offset)
	if err != nil {
		return fmt.Errorf("segment: truncate to %d: %w", offset, err)
	}
	if end < l.start {
		// offset and the start offset lie in the same gap: the log would
		// end below its start.
		return fmt.Errorf("segment: truncate to %d: the batches before it end at %d, below the start offset %d: %w", offset, end, l.start, ErrOffsetOutOfRange)
	}
	// Nothing changed yet. From here on, a crash leaves a contiguous prefix
	// of the old log: later segments go newest first, then the index files
	// of s (which describe the bytes being cut), then the cut itself.
	// The flushed offset is lowered first: if a step fails, NextOffset may
	// already be lower, and appends there are not durable.
	l.flush.lower(end)
	// Snapshots past the cut describe batches about to go.
	if err := l.removeSnapshotsAbove(end); err != nil {
		return fmt.Errorf("segment: truncate to %d: %w", offset, err)
	}
	if err := l.dropFrom(k + 1); err != nil {
		return fmt.Errorf("segment: truncate to %d: %w", offset, err)
	}
	if err := l.removeIndexFiles(s); err != nil {
		return fmt.Errorf("segment: truncate to %d: %w", offset, err)
	}
	// Memory follows the cut even if it fails: the log refuses writes then,
	// and reads must not reach for bytes the file may no longer hold.
	s.idx, s.size, s.next = idx, pos, end
	s.tail = nil // unknown again until the next append
	if !wasActive {
		s.created = l.now() // reopened for appends: its segment.ms age restarts
	}
	if err := s.file.Truncate(pos); err != nil {
		err = fmt.Errorf("truncate segment %d to %d: %w", s.base, pos, err)
		l.fail(err)
		return fmt.Errorf("segment: truncate to %d: %w", offset, err)
	}
	if err := s.file.Sync(); err != nil {
		err = fmt.Errorf("sync segment %d: %w", s.base, err)
		l.fail(err)
		return fmt.Errorf("segment: truncate to %d: %w", offset, err)
	}
	if err := l.writeCheckpoint(false); err != nil {
		return fmt.Errorf("segment: truncate to %d: %w", offset, err)
	}
	l.lowerCleaned(end)
	return nil
}

// cutIndex returns the index s would have if cut before the first batch
// starting at or after offset, that batch's position, and the segment's end
// after the cut: offset, or the end of the last batch kept when offset
// lies in a gap left by the cleaner (no record between the two). It walks
// headers from the last offset entry below offset, which also yields the
// maximum timestamp of the remaining batches: the last remaining time
// entry covers everything up to that offset entry. An offset inside a
// batch wraps ErrOffsetOutOfRange.
func (s *segment) cutIndex(offset int64) (segIndex, int64, int64, error) {
	if offset <= s.base {
		return newSegIndex(), 0, s.base, nil
	}
	idx := s.idx
	idx.truncate(s.rel(offset))
	if len(idx.offsets) == 0 {
		// The first batch starts at or after offset (a cleaned segment).
		return newSegIndex(), 0, s.base, nil
	}
	maxTs := idx.lastTimeEntryTs()
	end := s.base
	sc := scanner{f: s.file, pos: int64(idx.offsets[len(idx.offsets)-1].pos), end: s.size}
	for {
		h, p, _, err := sc.next()
		if errors.Is(err, io.EOF) {
			err = fmt.Errorf("offset %d missing: %w", offset, ErrCorrupt)
		}
		if err != nil {
			return segIndex{}, 0, 0, fmt.Errorf("segment %d: %w", s.base, err)
		}
		switch {
		case h.BaseOffset >= offset:
			idx.maxTs = maxTs
			if h.BaseOffset == offset {
				end = offset
			}
			return idx, p, end, nil
		case h.LastOffset() >= offset:
			return segIndex{}, 0, 0, fmt.Errorf("offset %d inside batch [%d, %d], not a batch boundary: %w", offset, h.BaseOffset, h.LastOffset(), ErrOffsetOutOfRange)
		}
		maxTs = max(maxTs, h.MaxTimestamp)
		idx.lastRel = s.rel(h.BaseOffset)
		end = h.LastOffset() + 1
	}
}

// ResetTo empties the log and makes offset both its start and its next
// offset (Kafka's truncate-fully-and-start-at): for a replica whose log
// lies wholly below what the leader, or the object tier, still holds. The
// old segments are removed first, then an empty segment at offset is
// created and the checkpoint records the new start; a crash midway leaves
// an empty log at the old start, which is reset again.
func (l *Log) ResetTo(offset int64) error {
	l.flush.acquire()
	defer l.flush.release()
	l.mu.Lock()
	defer l.mu.Unlock()
	defer l.noteNext()
	if err := l.usable(); err != nil {
		return fmt.Errorf("segment: reset to %d: %w", offset, err)
	}
	if offset < 0 {
		return fmt.Errorf("segment: reset to %d: negative offset: %w", offset, ErrOffsetOutOfRange)
	}
	// The owner starts over with no state: so must a reopened log.
	if err := l.removeSnapshotsAbove(-1); err != nil {
		l.fail(err)
		return fmt.Errorf("segment: reset to %d: %w", offset, err)
	}
	if len(l.segs) == 1 && l.segs[0].empty() && l.segs[0].base == offset {
		l.start = offset
		return l.writeCheckpoint(false)
	}
	// The old segments stay open until the new one exists: if a step fails,
	// the log refuses writes but reads still see the old batches (deleted
	// files stay readable through open handles), and reopening recovers
	// from what is left.
	// None of the old batches counts as durable any more.
	l.flush.lower(l.start)
	doomed := l.segs
	if err := l.removeSegmentFiles(doomed); err != nil {
		l.fail(err)
		return fmt.Errorf("segment: reset to %d: %w", offset, err)
	}
	s, err := l.createSegment(offset)
	if err != nil {
		l.fail(err)
		return fmt.Errorf("segment: reset to %d: %w", offset, err)
	}
	_ = closeSegments(doomed) // their files are deleted: nothing is lost
	l.segs = []*segment{s}
	l.start = offset
	l.flush.lower(offset)
	l.flush.advance(offset)
	if err := l.writeCheckpoint(false); err != nil {
		return fmt.Errorf("segment: reset to %d: %w", offset, err)
	}
	l.lowerCleaned(offset)
	return nil
}

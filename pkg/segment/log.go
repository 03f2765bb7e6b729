package segment

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Option defaults.
const (
	DefaultSegmentBytes       = 1 << 30
	DefaultSegmentMs          = 7 * 24 * time.Hour
	DefaultIndexIntervalBytes = 4096
)

var (
	// ErrOffsetOutOfRange is returned when an offset is below StartOffset or
	// above NextOffset, and by TruncateTo when the offset is not a batch
	// boundary.
	ErrOffsetOutOfRange = errors.New("segment: offset out of range")
	// ErrNotContiguous is returned when an appended batch's base offset is
	// not NextOffset (for the first batch) or the previous batch's last
	// offset plus one.
	ErrNotContiguous = errors.New("segment: batch offsets not contiguous")
	// ErrClosed is returned when a Log is used after Close or Remove.
	ErrClosed = errors.New("segment: log closed")
)

// Options configures a Log.
type Options struct {
	FS  FS     // required
	Dir string // required; created if missing
	// SegmentBytes: the active segment is rolled when an append would push
	// it past this size. 0 means DefaultSegmentBytes.
	SegmentBytes int64
	// SegmentMs: the active segment is rolled when it got its first batch
	// longer ago than this (checked on Append and MaybeRoll). 0 means
	// DefaultSegmentMs; a negative value disables time-based rolling.
	SegmentMs time.Duration
	// IndexIntervalBytes is the number of log bytes between offset index
	// entries. 0 means DefaultIndexIntervalBytes; 1 indexes every batch.
	IndexIntervalBytes int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

func (o Options) withDefaults() (Options, error) {
	switch {
	case o.FS == nil:
		return o, errors.New("segment: options: FS is required")
	case o.Dir == "":
		return o, errors.New("segment: options: Dir is required")
	case o.SegmentBytes < 0:
		return o, fmt.Errorf("segment: options: SegmentBytes %d is negative", o.SegmentBytes)
	case o.IndexIntervalBytes < 0:
		return o, fmt.Errorf("segment: options: IndexIntervalBytes %d is negative", o.IndexIntervalBytes)
	}
	o.SegmentBytes, o.SegmentMs = segmentConfig(o.SegmentBytes, o.SegmentMs)
	if o.IndexIntervalBytes == 0 {
		o.IndexIntervalBytes = DefaultIndexIntervalBytes
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o, nil
}

// segmentConfig applies the defaults of SegmentBytes and SegmentMs.
func segmentConfig(segmentBytes int64, segmentMs time.Duration) (int64, time.Duration) {
	if segmentBytes <= 0 {
		segmentBytes = DefaultSegmentBytes
	}
	if segmentMs == 0 {
		segmentMs = DefaultSegmentMs
	}
	return segmentBytes, segmentMs
}

// SegmentInfo describes one segment of a Log.
type SegmentInfo struct {
	BaseOffset   int64
	NextOffset   int64 // offset after the last batch (exclusive end)
	Size         int64 // bytes
	MaxTimestamp int64 // largest batch MaxTimestamp; -1 if the segment is empty
	Active       bool  // the segment appends go to
}

// Log is a partition log. It is safe for concurrent use: Read,
// FindTimestamp, ScanHeaders and the accessors run in parallel with each
// other; Append and the operations that roll, delete or truncate segments
// are serialized with everything else. The fsync run by Flush blocks
// neither appends nor reads; operations that delete or truncate segments
// wait for it.
type Log struct {
	fs       FS
	dir      string
	interval int
	now      func() time.Time

	mu           sync.RWMutex
	nextOff      atomic.Int64 // the active segment's next offset (noteNext)
	activeBase   atomic.Int64 // and its base
	segs         []*segment   // oldest first; the last one is active; never empty while open
	start        int64        // log start offset, in [segs[0].base, NextOffset]
	segmentBytes int64
	segmentMs    time.Duration
	closed       bool
	// failed is set when the files may no longer match the in-memory state
	// (a failed fsync, or a failed undo of a partial write). Appends, rolls
	// and flushes then fail; reopening recovers from the files.
	failed error
	// rewriting is set while a Rewrite of closed segments is in progress.
	rewriting bool
	// cleaned is the cleaner's checkpoint: the log is compacted below it
	// (read through CleanedOffset, which clamps it to the log).
	cleaned int64
	// gapped: batches may leave gaps (the cleaner checkpoint exists).
	gapped bool
	// marks are the segments rewritten since AckRewritten (base ->
	// generation), markGen the last generation given; persisted in the
	// cleaner checkpoint.
	marks   map[int64]uint64
	markGen uint64

	flush syncer
}

func (l *Log) active() *segment { return l.segs[len(l.segs)-1] }

// find returns the index of the segment containing offset: the last one
// whose base is at most offset, or 0.
func (l *Log) find(offset int64) int {
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > offset })
	return max(i-1, 0)
}

// usable returns an error if the log may not be written to; l.mu held.
func (l *Log) usable() error {
	if l.closed {
		return ErrClosed
	}
	if l.failed != nil {
		return fmt.Errorf("log unusable after earlier failure: %w", l.failed)
	}
	return nil
}

func (l *Log) fail(err error) {
	if l.failed == nil {
		l.failed = err
	}
}

// validOffsets reports whether the offsets of h are usable: non-negative
// and without overflow of LastOffset()+1.
func validOffsets(h Header) bool {
	return h.BaseOffset >= 0 && h.LastOffset() >= h.BaseOffset && h.LastOffset() < math.MaxInt64
}

// Append appends batches, one or more whole RecordBatch v2 whose offsets are
// already assigned: the first BaseOffset is NextOffset and every next batch
// starts at the previous LastOffset()+1. Framing is validated, CRCs are not
// (the caller does that). It rolls the active segment first if needed,
// writes all bytes with a single File.Write and updates the indexes. The
// data is durable only after Flush.
func (l *Log) Append(batches []byte) error { return l.append(batches, false) }

// AppendFrom is Append for batches copied from another replica's log,
// whose cleaner may have removed records (compacted topics): base offsets
// must increase, but a batch may start past NextOffset or past the
// previous batch's end, leaving a gap of offsets that hold no record. The
// log end then follows the last batch.
func (l *Log) AppendFrom(batches []byte) error { return l.append(batches, true) }

func (l *Log) append(batches []byte, gaps bool) error {
	if len(batches) == 0 {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	defer l.noteNext()
	if err := l.usable(); err != nil {
		return fmt.Errorf("segment: append: %w", err)
	}
	next := l.active().next
	expected, lastBase := next, next
	err := Split(batches, func(h Header, _ []byte) error {
		if h.BaseOffset != expected && (!gaps || h.BaseOffset < expected) {
			return fmt.Errorf("batch base offset %d, want %d: %w", h.BaseOffset, expected, ErrNotContiguous)
		}
		if !validOffsets(h) {
			return fmt.Errorf("batch base offset %d: last offset delta %d overflows: %w", h.BaseOffset, h.LastOffsetDelta, ErrCorrupt)
		}
		lastBase, expected = h.BaseOffset, h.LastOffset()+1
		return nil
	})
	if err != nil {
		return fmt.Errorf("segment: append at offset %d: %w", next, err)
	}
	if gaps && !l.gapped && expected-next != int64(countOffsets(batches)) {
		// The first gap: recovery must accept gaps from now on.
		if err := l.writeCleaned(l.cleaned); err != nil {
			return fmt.Errorf("segment: append at offset %d: %w", next, err)
		}
	}
	if len(batches) > maxSegmentPos || lastBase-next > maxSegmentPos {
		return fmt.Errorf("segment: append at offset %d: %d bytes over %d offsets do not fit one segment", next, len(batches), expected-next)
	}
	if l.shouldRoll(int64(len(batches)), lastBase) {
		if err := l.roll(); err != nil {
			return fmt.Errorf("segment: append at offset %d: %w", next, err)
		}
	}
	s := l.active()
	pos := s.size
	if n, err := s.file.Write(batches); err != nil || n != len(batches) {
		if err == nil {
			err = io.ErrShortWrite
		}
		// Cut a partial write so the file matches memory again.
		if terr := s.file.Truncate(pos); terr != nil {
			l.fail(fmt.Errorf("cut partial write of segment %d: %w", s.base, terr))
		}
		return fmt.Errorf("segment: append at offset %d: write segment %d: %w", next, s.base, err)
	}
	if s.empty() {
		s.created = l.now()
	}
	p := pos
	_ = Split(batches, func(h Header, b []byte) error {
		s.idx.add(s.rel(h.BaseOffset), uint32(p), h.MaxTimestamp, l.interval)
		s.tail = appendTail(s.tail, tailBatch{pos: uint32(p), lastRel: s.rel(h.LastOffset()), size: uint32(len(b)), records: h.NumRecords})
		p += int64(len(b))
		return nil
	})
	s.size, s.next = p, expected
	return nil
}

// countOffsets returns the number of offsets the batches span, gaps left
// out (batches is valid: Split succeeded on it).
func countOffsets(batches []byte) int {
	n := 0
	_ = Split(batches, func(h Header, _ []byte) error {
		n += int(h.LastOffsetDelta) + 1
		return nil
	})
	return n
}

// shouldRoll reports whether the active segment must be rolled before
// appending n bytes whose last batch has base offset lastBase; l.mu held.
func (l *Log) shouldRoll(n, lastBase int64) bool {
	s := l.active()
	switch {
	case s.empty():
		return false
	case s.size+n > l.segmentBytes, s.size+n > maxSegmentPos, lastBase-s.base > maxSegmentPos:
		return true
	}
	return l.expired(s)
}

// expired reports whether s got its first batch more than segment.ms ago.
func (l *Log) expired(s *segment) bool {
	return l.segmentMs > 0 && !s.empty() && l.now().Sub(s.created) > l.segmentMs
}

// roll closes the active segment, unless it is empty, and starts a new one
// at NextOffset: it syncs the old segment, writes its index files, creates
// the new log file and records the new segment as the recovery point;
// l.mu held.
func (l *Log) roll() error {
	old := l.active()
	if old.empty() {
		return nil
	}
	if err := old.file.Sync(); err != nil {
		err = fmt.Errorf("roll segment %d: sync: %w", old.base, err)
		l.fail(err)
		return err
	}
	l.flush.advance(old.next)
	old.idx.finalize()
	old.tail = nil // closed: reads there are rare, the tail's memory is not
	if err := l.writeIndexFiles(old); err != nil {
		return fmt.Errorf("roll segment %d: %w", old.base, err)
	}
	s, err := l.createSegment(old.next)
	if err != nil {
		return fmt.Errorf("roll segment %d: %w", old.base, err)
	}
	l.segs = append(l.segs, s)
	if err := l.writeCheckpoint(false); err != nil {
		return fmt.Errorf("roll segment %d: %w", old.base, err)
	}
	return nil
}

// createSegment creates an empty segment file at base. The file must not
// exist: stale bytes in it could pass for batches after a crash. No
// segment of the log is at base when this is called, so a file found
// there is a leftover (of a failed create, or of a deletion that failed in
// TruncateTo) and is replaced. If the create fails, the file is removed as
// far as possible: it can exist all the same (OS creates it before the
// fsync of the directory fails).
func (l *Log) createSegment(base int64) (*segment, error) {
	s := &segment{base: base, next: base, idx: newSegIndex()}
	name := s.path(l.dir, logSuffix)
	const flag = os.O_CREATE | os.O_EXCL | os.O_RDWR
	f, err := l.fs.OpenFile(name, flag, 0o644)
	if errors.Is(err, fs.ErrExist) {
		if err = l.fs.Remove(name); err == nil {
			f, err = l.fs.OpenFile(name, flag, 0o644)
		}
	}
	if err != nil {
		_ = l.fs.Remove(name)
		return nil, fmt.Errorf("create segment %d: %w", base, err)
	}
	s.file = f
	return s, nil
}

// writeIndexFiles writes the index files of a closed segment.
func (l *Log) writeIndexFiles(s *segment) error {
	if err := writeFileAtomic(l.fs, s.path(l.dir, indexSuffix), encodeOffsetIndex(s.idx.offsets)); err != nil {
		return err
	}
	return writeFileAtomic(l.fs, s.path(l.dir, timeIndexSuffix), encodeTimeIndex(s.idx.times))
}

// removeIndexFiles removes the index files of s, if any.
func (l *Log) removeIndexFiles(s *segment) error {
	var errs []error
	for _, suffix := range []string{indexSuffix, timeIndexSuffix} {
		if err := l.fs.Remove(s.path(l.dir, suffix)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeSegments closes and deletes the files of segs, in order. It stops
// deleting at the first log file it cannot delete, so the log files left
// are still contiguous with the segments after segs: a gap would make Open
// drop every segment after it. Open deletes the ones left once they lie
// below the start offset.
func (l *Log) removeSegments(segs []*segment) error {
	return errors.Join(closeSegments(segs), l.removeSegmentFiles(segs))
}

// closeSegments closes the files of segs.
func closeSegments(segs []*segment) error {
	var errs []error
	for _, s := range segs {
		if err := s.file.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close segment %d: %w", s.base, err))
		}
	}
	return errors.Join(errs...)
}

// removeSegmentFiles deletes the files of segs, in order, up to the first
// log file it cannot delete (see removeSegments). Open handles stay usable.
func (l *Log) removeSegmentFiles(segs []*segment) error {
	var errs []error
	for _, s := range segs {
		if err := l.fs.Remove(s.path(l.dir, logSuffix)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove segment %d: %w", s.base, err))
			break
		}
		if err := l.removeIndexFiles(s); err != nil {
			errs = append(errs, fmt.Errorf("remove segment %d: %w", s.base, err))
		}
	}
	return errors.Join(errs...)
}

// dropFrom removes the segments from index i on, newest first, so that a
// crash midway leaves a contiguous log.
func (l *Log) dropFrom(i int) error {
	var errs []error
	for j := len(l.segs) - 1; j >= i; j-- {
		errs = append(errs, l.removeSegments(l.segs[j:j+1]))
	}
	clear(l.segs[i:])
	l.segs = l.segs[:i]
	return errors.Join(errs...)
}

// Read appends to dst whole batches, starting with the batch that contains
// offset, and may continue into following segments. It stops before a
// batch whose LastOffset() >= maxOffset (the high watermark) and before
// maxBytes would be exceeded, except that the first batch is returned whole
// even if it alone exceeds maxBytes (KIP-74). Reading NextOffset, or finding
// no qualifying batch, returns dst unchanged. An offset below StartOffset or
// above NextOffset gives ErrOffsetOutOfRange; StartOffset may lie inside a
// batch, which is then returned whole.
func (l *Log) Read(dst []byte, offset int64, maxBytes int, maxOffset int64) ([]byte, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return dst, fmt.Errorf("segment: read offset %d: %w", offset, ErrClosed)
	}
	if next := l.active().next; offset < l.start || offset > next {
		return dst, fmt.Errorf("segment: read offset %d: log holds [%d, %d): %w", offset, l.start, next, ErrOffsetOutOfRange)
	}
	if offset == l.active().next || offset >= maxOffset {
		return dst, nil
	}
	n := len(dst)
	lim := readLimits{budget: int64(maxBytes), maxOffset: maxOffset, first: true}
	for i := l.find(offset); i < len(l.segs); i++ {
		var cont bool
		var err error
		dst, cont, err = l.segs[i].read(dst, offset, &lim)
		if err != nil {
			return dst[:n], fmt.Errorf("segment: read offset %d: %w", offset, err)
		}
		if !cont {
			break
		}
	}
	return dst, nil
}

// FindTimestamp returns a copy of the first batch at or after StartOffset
// whose MaxTimestamp is at least ts, and ok=false if there is none. Segments
// whose maximum timestamp is below ts are skipped, and within a segment the
// time index bounds the scan to about one index interval.
func (l *Log) FindTimestamp(ts int64) (batch []byte, ok bool, err error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return nil, false, fmt.Errorf("segment: find timestamp %d: %w", ts, ErrClosed)
	}
	for i := l.find(l.start); i < len(l.segs); i++ {
		s := l.segs[i]
		if s.empty() || s.idx.maxTs < ts || s.next <= l.start {
			continue
		}
		pos := s.idx.timeStart(ts)
		if l.start > s.base {
			startPos, _ := s.idx.floor(s.rel(l.start), s.size)
			pos = max(pos, startPos)
		}
		sc := scanner{f: s.file, pos: pos, end: s.size}
		for {
			h, p, _, err := sc.next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, false, fmt.Errorf("segment: find timestamp %d in segment %d: %w", ts, s.base, err)
			}
			if h.LastOffset() < l.start || h.MaxTimestamp < ts {
				continue
			}
			b := make([]byte, h.Size())
			if n, err := s.file.ReadAt(b, p); n < len(b) {
				if err == nil || errors.Is(err, io.EOF) {
					err = io.ErrUnexpectedEOF
				}
				return nil, false, fmt.Errorf("segment: find timestamp %d: read segment %d at %d: %w", ts, s.base, p, err)
			}
			return b, true, nil
		}
	}
	return nil, false, nil
}

// StartOffset returns the log start offset, the earliest readable offset.
func (l *Log) StartOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.start
}

// NextOffset returns the log end offset, the offset of the next appended record.
func (l *Log) NextOffset() int64 { return l.nextOff.Load() }

// noteNext publishes the active segment's next offset and base for
// NextOffset and ActiveBase, which read them without the lock (every fetch asks it of every partition
// of its session). Every writer of l.mu defers it, so it runs before the
// unlock: a reader never sees an offset the log does not hold.
func (l *Log) noteNext() {
	if len(l.segs) > 0 {
		l.nextOff.Store(l.active().next)
		l.activeBase.Store(l.active().base)
	}
}

// ActiveBase returns the base offset of the active segment: it changes
// when the log rolls.
func (l *Log) ActiveBase() int64 { return l.activeBase.Load() }

// Size returns the number of bytes of all segments.
func (l *Log) Size() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.size()
}

func (l *Log) size() int64 {
	var n int64
	for _, s := range l.segs {
		n += s.size
	}
	return n
}

// Segments describes the segments, oldest first.
func (l *Log) Segments() []SegmentInfo {
	l.mu.RLock()
	defer l.mu.RUnlock()
	infos := make([]SegmentInfo, len(l.segs))
	for i, s := range l.segs {
		maxTs := s.idx.maxTs
		if s.empty() {
			maxTs = -1
		}
		infos[i] = SegmentInfo{BaseOffset: s.base, NextOffset: s.next, Size: s.size, MaxTimestamp: maxTs, Active: i == len(l.segs)-1}
	}
	return infos
}

// ScanHeaders calls fn with the header of every batch whose LastOffset() is
// at least from, in offset order, starting with the batch containing from
// (found through the offset index of its segment), until fn returns false.
// A from below the first segment starts at the first batch; batches below
// StartOffset that are still stored are included. fn runs with the log
// read-locked and must not call methods of l.
func (l *Log) ScanHeaders(from int64, fn func(h Header) bool) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return fmt.Errorf("segment: scan headers from %d: %w", from, ErrClosed)
	}
	for i := l.find(from); i < len(l.segs); i++ {
		s := l.segs[i]
		if from >= s.next {
			continue
		}
		var pos int64
		if from > s.base {
			pos, _ = s.idx.floor(s.rel(from), s.size)
		}
		sc := scanner{f: s.file, pos: pos, end: s.size}
		for {
			h, _, _, err := sc.next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return fmt.Errorf("segment: scan headers in segment %d: %w", s.base, err)
			}
			if h.LastOffset() < from {
				continue
			}
			if !fn(h) {
				return nil
			}
		}
	}
	return nil
}

// MaybeRoll rolls the active segment if it is not empty and got its first
// batch more than segment.ms ago. Call it periodically.
func (l *Log) MaybeRoll() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	defer l.noteNext()
	if err := l.usable(); err != nil {
		return fmt.Errorf("segment: maybe roll: %w", err)
	}
	if !l.expired(l.active()) {
		return nil
	}
	if err := l.roll(); err != nil {
		return fmt.Errorf("segment: maybe roll: %w", err)
	}
	return nil
}

// OpenSegment opens a new read-only handle on the closed segment whose base
// offset is base, and returns it with the segment's size in bytes (its
// batches, verbatim). The handle stays readable if retention deletes the
// segment meanwhile (on POSIX filesystems and MemFS); the caller closes it.
func (l *Log) OpenSegment(base int64) (File, int64, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if err := l.usable(); err != nil {
		return nil, 0, fmt.Errorf("segment: open segment %d: %w", base, err)
	}
	for i, s := range l.segs {
		if s.base != base {
			continue
		}
		if i == len(l.segs)-1 {
			return nil, 0, fmt.Errorf("segment: open segment %d: it is the active segment", base)
		}
		f, err := l.fs.OpenFile(s.path(l.dir, logSuffix), os.O_RDONLY, 0)
		if err != nil {
			return nil, 0, fmt.Errorf("segment: open segment %d: %w", base, err)
		}
		return f, s.size, nil
	}
	return nil, 0, fmt.Errorf("segment: open segment %d: no such segment: %w", base, ErrOffsetOutOfRange)
}

// Roll closes a non-empty active segment and starts a new one (the object
// tier rolls topics whose recent batches sit in shared WAL objects, so a
// segment upload can replace them).
func (l *Log) Roll() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	defer l.noteNext()
	if err := l.usable(); err != nil {
		return fmt.Errorf("segment: roll: %w", err)
	}
	if err := l.roll(); err != nil {
		return fmt.Errorf("segment: roll: %w", err)
	}
	return nil
}

// SetSegmentConfig changes segment.bytes and segment.ms at runtime, with the
// same defaults as Options: segmentBytes <= 0 means DefaultSegmentBytes,
// segmentMs 0 means DefaultSegmentMs and a negative segmentMs disables
// time-based rolling.
func (l *Log) SetSegmentConfig(segmentBytes int64, segmentMs time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	defer l.noteNext()
	l.segmentBytes, l.segmentMs = segmentConfig(segmentBytes, segmentMs)
}

// Close flushes the log, writes the index files of the active segment and a
// checkpoint marking a clean shutdown, and closes all files. After a failure
// (see Log) nothing is flushed and the next Open recovers. Close is
// idempotent.
func (l *Log) Close() error {
	l.flush.acquire()
	defer l.flush.release()
	l.mu.Lock()
	defer l.mu.Unlock()
	defer l.noteNext()
	if l.closed {
		return nil
	}
	l.closed = true
	var errs []error
	if l.failed == nil {
		errs = append(errs, l.closeClean())
	}
	errs = append(errs, l.closeFiles())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("segment: close %s: %w", l.dir, err)
	}
	return nil
}

func (l *Log) closeClean() error {
	s := l.active()
	if err := s.file.Sync(); err != nil {
		return fmt.Errorf("sync segment %d: %w", s.base, err)
	}
	l.flush.advance(s.next)
	if !s.empty() {
		s.idx.finalize()
		if err := l.writeIndexFiles(s); err != nil {
			return err
		}
	}
	return l.writeCheckpoint(true)
}

func (l *Log) closeFiles() error { return closeSegments(l.segs) }

// Remove closes the log without flushing and deletes its directory, as for
// a deleted topic.
func (l *Log) Remove() error {
	l.flush.acquire()
	defer l.flush.release()
	l.mu.Lock()
	defer l.mu.Unlock()
	defer l.noteNext()
	if !l.closed {
		l.closed = true
		_ = l.closeFiles() // the files are deleted next
	}
	if err := l.fs.RemoveAll(l.dir); err != nil {
		return fmt.Errorf("segment: remove %s: %w", l.dir, err)
	}
	return nil
}

func (l *Log) checkpointPath() string { return filepath.Join(l.dir, checkpointName) }

// writeCheckpoint persists the start offset and, as recovery point, the base
// of the active segment; l.mu held.
func (l *Log) writeCheckpoint(clean bool) error {
	c := checkpoint{start: l.start, recoveryPoint: l.active().base, clean: clean}
	return writeFileAtomic(l.fs, l.checkpointPath(), encodeCheckpoint(c))
}

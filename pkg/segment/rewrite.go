package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
)

// Rewriting closed segments, for the log cleaner of compacted topics.
//
// A Rewrite replaces consecutive closed segments [base, next) by one
// segment at base holding a subset of their batches, at the same offsets,
// whose last batch ends at next (so segments stay contiguous). The swap is
// crash-safe:
//
//  1. the new batches go to <base>.cleaned, which is fsynced;
//  2. <base>.cleaned is renamed to <base>.swap: the commit point;
//  3. the index files of the old segments are removed, then their log
//     files, newest first, except <base>.log;
//  4. <base>.swap is renamed over <base>.log; the new index files follow.
//
// Open deletes a .cleaned file (the rewrite never committed: the old
// segments are whole) and completes a .swap file: it removes the log and
// index files of every segment whose base lies in [base, next) of the
// swap, where next is the end of the swap file's last batch, and renames
// the swap to <base>.log. A crash at any step therefore leaves either the
// old segments or the new one. A failure after the commit point makes the
// Log refuse writes until it is reopened, which completes the swap.

const (
	cleanedSuffix = ".cleaned"
	swapSuffix    = ".swap"

	// cleanerCheckpointName holds the offset below which the log is clean
	// and the marks of rewritten segments (see Rewritten). A log that has
	// one may have gaps between batches: recovery then requires increasing
	// offsets, not contiguous ones. Version 1 held the offset only.
	cleanerCheckpointName    = "cleaner-checkpoint"
	cleanerCheckpointMagic   = "STCL"
	cleanerCheckpointVersion = 2
	cleanerCheckpointV1Size  = 4 + 1 + 8 + 4
	cleanerCheckpointHead    = 4 + 1 + 8 + 8 + 4 // magic, version, cleaned, generation, mark count
	cleanerCheckpointMark    = 16                // base, generation

	rewriteBuffer = 1 << 20 // bytes collected before a write to the .cleaned file
)

// ErrRewriteConflict is returned by Rewrite.Commit when the segments being
// replaced changed meanwhile (retention, DeleteRecords, truncation, reset
// or close of the log): nothing was replaced, and the caller may try again.
var ErrRewriteConflict = errors.New("segment: segments changed during the rewrite")

// Rewrite is a replacement of consecutive closed segments being written.
// It is used by one goroutine; the log stays fully usable meanwhile.
type Rewrite struct {
	l          *Log
	srcs       []*segment
	sizes      []int64 // sizes of srcs when the rewrite began
	base, next int64
	name       string
	f          File
	buf        []byte
	size       int64 // bytes written, buffered included
	idx        segIndex
	last       int64 // LastOffset of the last batch added; base-1 if none
	done       bool
}

// BeginRewrite starts replacing the closed segments whose base offsets are
// bases (consecutive segments of the log, oldest first, not the active
// one). Only one rewrite of a log may be in progress.
func (l *Log) BeginRewrite(bases []int64) (*Rewrite, error) {
	if len(bases) == 0 {
		return nil, errors.New("segment: begin rewrite: no segments")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	defer l.noteNext()
	if err := l.usable(); err != nil {
		return nil, fmt.Errorf("segment: begin rewrite: %w", err)
	}
	if l.rewriting {
		return nil, errors.New("segment: begin rewrite: a rewrite is in progress")
	}
	i := -1
	for k, s := range l.segs {
		if s.base == bases[0] {
			i = k
			break
		}
	}
	if i < 0 || i+len(bases) > len(l.segs)-1 {
		return nil, fmt.Errorf("segment: begin rewrite at %d: not a closed segment: %w", bases[0], ErrRewriteConflict)
	}
	w := &Rewrite{l: l, base: bases[0], last: bases[0] - 1, idx: newSegIndex()}
	var total int64
	for k, b := range bases {
		s := l.segs[i+k]
		if s.base != b {
			return nil, fmt.Errorf("segment: begin rewrite: segment %d is not consecutive: %w", b, ErrRewriteConflict)
		}
		w.srcs = append(w.srcs, s)
		w.sizes = append(w.sizes, s.size)
		total += s.size
		w.next = s.next
	}
	if total > maxSegmentPos || w.next-w.base > maxSegmentPos {
		return nil, fmt.Errorf("segment: begin rewrite at %d: %d bytes over %d offsets do not fit one segment", w.base, total, w.next-w.base)
	}
	if !l.gapped {
		// Recovery must know from now on that batches may leave gaps.
		if err := l.writeCleaned(l.cleaned); err != nil {
			return nil, fmt.Errorf("segment: begin rewrite: %w", err)
		}
	}
	w.name = filepath.Join(l.dir, segmentName(w.base, cleanedSuffix))
	const flag = os.O_CREATE | os.O_EXCL | os.O_RDWR
	f, err := l.fs.OpenFile(w.name, flag, 0o644)
	if errors.Is(err, fs.ErrExist) {
		if err = l.fs.Remove(w.name); err == nil {
			f, err = l.fs.OpenFile(w.name, flag, 0o644)
		}
	}
	if err != nil {
		_ = l.fs.Remove(w.name)
		return nil, fmt.Errorf("segment: begin rewrite at %d: %w", w.base, err)
	}
	w.f = f
	l.rewriting = true
	return w, nil
}

// Base and Next return the offset range the rewrite replaces.
func (w *Rewrite) Base() int64 { return w.base }

// Next is the end of the range: the last batch added must end there.
func (w *Rewrite) Next() int64 { return w.next }

// Add appends one whole batch. Batches come in offset order, within [Base,
// Next); they may leave gaps. The CRC is the caller's business.
func (w *Rewrite) Add(batch []byte) error {
	if w.done {
		return errors.New("segment: rewrite: already committed or aborted")
	}
	h, err := ParseHeader(batch)
	if err != nil {
		return fmt.Errorf("segment: rewrite at %d: %w", w.base, err)
	}
	switch {
	case h.Size() != len(batch):
		return fmt.Errorf("segment: rewrite at %d: batch of %d bytes says %d: %w", w.base, len(batch), h.Size(), ErrCorrupt)
	case !validOffsets(h) || h.BaseOffset <= w.last || h.LastOffset() >= w.next:
		return fmt.Errorf("segment: rewrite of [%d, %d): batch [%d, %d] after %d: %w", w.base, w.next, h.BaseOffset, h.LastOffset(), w.last, ErrNotContiguous)
	case w.size+int64(len(batch)) > maxSegmentPos:
		return fmt.Errorf("segment: rewrite at %d: more than %d bytes", w.base, maxSegmentPos)
	}
	w.idx.add(uint32(h.BaseOffset-w.base), uint32(w.size), h.MaxTimestamp, w.l.interval)
	w.buf = append(w.buf, batch...)
	w.size += int64(len(batch))
	w.last = h.LastOffset()
	if len(w.buf) >= rewriteBuffer {
		return w.write()
	}
	return nil
}

func (w *Rewrite) write() error {
	if len(w.buf) == 0 {
		return nil
	}
	n, err := w.f.Write(w.buf)
	if err == nil && n != len(w.buf) {
		err = io.ErrShortWrite
	}
	w.buf = w.buf[:0]
	if err != nil {
		return fmt.Errorf("segment: rewrite at %d: write: %w", w.base, err)
	}
	return nil
}

// Abort drops the rewrite: the new file is deleted, the log is untouched.
func (w *Rewrite) Abort() {
	if w.done {
		return
	}
	w.done = true
	_ = w.f.Close()
	_ = w.l.fs.Remove(w.name)
	w.l.mu.Lock()
	w.l.rewriting = false
	w.l.mu.Unlock()
}

// Commit makes the new segment durable and swaps it in for the old ones,
// unless they changed since BeginRewrite (ErrRewriteConflict, nothing
// replaced). The last batch added must end at Next. Reads and appends
// wait only for the renames and removals of the swap, not for the fsync.
// On any error the rewrite is over (aborted, or after the commit point
// the log refuses writes until reopened).
func (w *Rewrite) Commit() error {
	if w.done {
		return errors.New("segment: rewrite: already committed or aborted")
	}
	if w.last != w.next-1 {
		w.Abort()
		return fmt.Errorf("segment: rewrite of [%d, %d): the last batch ends at %d, the segments at %d", w.base, w.next, w.last+1, w.next)
	}
	err := w.write()
	if err == nil {
		err = w.f.Sync()
	}
	if err != nil {
		w.Abort()
		return fmt.Errorf("segment: rewrite at %d: %w", w.base, err)
	}
	l := w.l
	l.flush.acquire()
	defer l.flush.release()
	l.mu.Lock()
	defer l.mu.Unlock()
	defer l.noteNext()
	i, err := w.located()
	if err != nil {
		w.abortLocked()
		return err
	}
	// Mark the new segment rewritten before the commit point: a crash
	// after it leaves the mark (a copy elsewhere is refreshed once more
	// than needed), never a rewritten segment without one.
	marks := make(map[int64]uint64, len(l.marks)+1)
	for b, g := range l.marks {
		if b < w.base || b >= w.next {
			marks[b] = g
		}
	}
	marks[w.base] = l.markGen + 1
	if err := l.writeCleanerState(l.cleaned, marks, l.markGen+1); err != nil {
		w.abortLocked()
		return fmt.Errorf("segment: rewrite at %d: %w", w.base, err)
	}
	swap := filepath.Join(l.dir, segmentName(w.base, swapSuffix))
	if err := l.fs.Rename(w.name, swap); err != nil {
		w.abortLocked()
		return fmt.Errorf("segment: rewrite at %d: %w", w.base, err)
	}
	w.done = true
	l.rewriting = false
	// Past the commit point: a failure leaves the swap for Open to finish.
	failed := func(err error) error {
		err = fmt.Errorf("segment: swap in rewritten segment %d: %w", w.base, err)
		l.fail(err)
		_ = w.f.Close()
		return err
	}
	for _, s := range w.srcs {
		if err := l.removeIndexFiles(s); err != nil {
			return failed(err)
		}
	}
	for k := len(w.srcs) - 1; k >= 1; k-- {
		if err := l.fs.Remove(w.srcs[k].path(l.dir, logSuffix)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return failed(err)
		}
	}
	if err := l.fs.Rename(swap, filepath.Join(l.dir, segmentName(w.base, logSuffix))); err != nil {
		return failed(err)
	}
	w.idx.finalize()
	ns := &segment{base: w.base, next: w.next, size: w.size, file: w.f, idx: w.idx}
	_ = closeSegments(w.srcs)
	segs := make([]*segment, 0, len(l.segs)-len(w.srcs)+1)
	segs = append(segs, l.segs[:i]...)
	segs = append(segs, ns)
	segs = append(segs, l.segs[i+len(w.srcs):]...)
	l.segs = segs
	// Without index files the segment is rebuilt by a scan at the next
	// Open (it lies below the recovery point): not worth failing for.
	_ = l.writeIndexFiles(ns)
	return nil
}

// located returns where the rewrite's segments are in l.segs, or
// ErrRewriteConflict if they are not all there, unchanged and closed;
// l.mu held.
func (w *Rewrite) located() (int, error) {
	l := w.l
	if err := l.usable(); err != nil {
		return 0, fmt.Errorf("segment: rewrite at %d: %w: %w", w.base, ErrRewriteConflict, err)
	}
	for i, s := range l.segs {
		if s != w.srcs[0] {
			continue
		}
		if i+len(w.srcs) > len(l.segs)-1 {
			break
		}
		for k, src := range w.srcs {
			if l.segs[i+k] != src || src.size != w.sizes[k] {
				return 0, fmt.Errorf("segment: rewrite at %d: %w", w.base, ErrRewriteConflict)
			}
		}
		if w.srcs[len(w.srcs)-1].next != w.next {
			break
		}
		return i, nil
	}
	return 0, fmt.Errorf("segment: rewrite at %d: %w", w.base, ErrRewriteConflict)
}

// abortLocked is Abort with l.mu held.
func (w *Rewrite) abortLocked() {
	w.done = true
	_ = w.f.Close()
	_ = w.l.fs.Remove(w.name)
	w.l.rewriting = false
}

// ReadBatches calls fn with every whole batch of the first size bytes of f
// (a handle from OpenSegment), in order, reading about a megabyte at a
// time. The batch bytes are valid until fn returns. It stops at the first
// error fn returns, returning it as is; bad framing wraps ErrCorrupt.
func ReadBatches(f File, size int64, fn func(h Header, batch []byte) error) error {
	sc := scanner{f: f, end: size, whole: true}
	for {
		h, _, batch, err := sc.next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("segment: read batches: %w", err)
		}
		if err := fn(h, batch); err != nil {
			return err
		}
	}
}

// CleanedOffset returns the offset below which the cleaner has compacted
// the log (its first dirty offset), at least StartOffset.
func (l *Log) CleanedOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return min(max(l.cleaned, l.start), l.active().next)
}

// SetCleanedOffset records, durably, that the log is compacted below off.
func (l *Log) SetCleanedOffset(off int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	defer l.noteNext()
	if err := l.usable(); err != nil {
		return fmt.Errorf("segment: set cleaned offset: %w", err)
	}
	return l.writeCleaned(off)
}

// writeCleaned persists off as the cleaned offset; l.mu held.
func (l *Log) writeCleaned(off int64) error {
	return l.writeCleanerState(off, l.marks, l.markGen)
}

// writeCleanerState persists the cleaner checkpoint (marks of segments no
// longer in the log are left out) and then adopts it; l.mu held.
func (l *Log) writeCleanerState(off int64, marks map[int64]uint64, gen uint64) error {
	live := make(map[int64]bool, len(l.segs))
	for _, s := range l.segs {
		live[s.base] = true
	}
	kept := make(map[int64]uint64, len(marks))
	for b, g := range marks {
		if live[b] {
			kept[b] = g
		}
	}
	b := make([]byte, 0, cleanerCheckpointHead+cleanerCheckpointMark*len(kept)+4)
	b = append(b, cleanerCheckpointMagic...)
	b = append(b, cleanerCheckpointVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(off))
	b = binary.BigEndian.AppendUint64(b, gen)
	b = binary.BigEndian.AppendUint32(b, uint32(len(kept)))
	for _, base := range slices.Sorted(maps.Keys(kept)) {
		b = binary.BigEndian.AppendUint64(b, uint64(base))
		b = binary.BigEndian.AppendUint64(b, kept[base])
	}
	b = binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
	if err := writeFileAtomic(l.fs, filepath.Join(l.dir, cleanerCheckpointName), b); err != nil {
		return fmt.Errorf("segment: cleaner checkpoint: %w", err)
	}
	l.cleaned, l.gapped, l.marks, l.markGen = off, true, kept, gen
	return nil
}

// lowerCleaned caps the cleaned offset after a truncation or reset; l.mu
// held. A failed write is harmless: Open clamps the offset to the log, and
// records counted as clean that are not are merely kept.
func (l *Log) lowerCleaned(off int64) {
	l.pruneMarks()
	if l.cleaned > off {
		_ = l.writeCleaned(off)
		l.cleaned = off
	}
}

// readCleaned loads the cleaner checkpoint (offset 0 and no marks if
// missing or corrupt). Its presence says the log may have gaps.
func (l *Log) readCleaned() {
	b, err := readFile(l.fs, filepath.Join(l.dir, cleanerCheckpointName))
	l.gapped = err == nil
	l.cleaned, l.marks, l.markGen = 0, nil, 0
	if err != nil || len(b) < cleanerCheckpointV1Size || string(b[:4]) != cleanerCheckpointMagic ||
		crc32.Checksum(b[:len(b)-4], castagnoli) != binary.BigEndian.Uint32(b[len(b)-4:]) {
		return
	}
	switch {
	case b[4] == 1 && len(b) == cleanerCheckpointV1Size:
		l.cleaned = int64(binary.BigEndian.Uint64(b[5:]))
	case b[4] == cleanerCheckpointVersion && len(b) >= cleanerCheckpointHead+4:
		n := int64(binary.BigEndian.Uint32(b[21:]))
		if int64(len(b)) != cleanerCheckpointHead+cleanerCheckpointMark*n+4 {
			return
		}
		l.cleaned = int64(binary.BigEndian.Uint64(b[5:]))
		l.markGen = binary.BigEndian.Uint64(b[13:])
		l.marks = make(map[int64]uint64, n)
		for i := int64(0); i < n; i++ {
			at := cleanerCheckpointHead + cleanerCheckpointMark*i
			l.marks[int64(binary.BigEndian.Uint64(b[at:]))] = binary.BigEndian.Uint64(b[at+8:])
		}
		l.pruneMarks()
	}
}

// pruneMarks forgets the marks of segments no longer in the log (in
// memory; the next checkpoint write leaves them out too); l.mu held.
func (l *Log) pruneMarks() {
	live := make(map[int64]bool, len(l.segs))
	for _, s := range l.segs {
		live[s.base] = true
	}
	for b := range l.marks {
		if !live[b] {
			delete(l.marks, b)
		}
	}
}

// Rewritten returns the marks of the segments rewritten (Rewrite.Commit)
// since AckRewritten last cleared them: base offset -> the rewrite's
// generation. A copy of the log elsewhere (the object tier) holds older
// bytes for these segments. The marks survive restarts.
func (l *Log) Rewritten() map[int64]uint64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return maps.Clone(l.marks)
}

// AckRewritten clears the mark of the segment at base if it is still of
// generation gen (a segment rewritten again since keeps its new mark).
func (l *Log) AckRewritten(base int64, gen uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	defer l.noteNext()
	if g, ok := l.marks[base]; !ok || g != gen {
		return nil
	}
	if err := l.usable(); err != nil {
		return fmt.Errorf("segment: ack rewritten segment %d: %w", base, err)
	}
	marks := maps.Clone(l.marks)
	delete(marks, base)
	return l.writeCleanerState(l.cleaned, marks, l.markGen)
}

// finishSwaps completes the swaps a crash interrupted and removes the
// files of rewrites that never committed (see the top of this file); it
// runs in Open before the segments are opened.
func (l *Log) finishSwaps(names []string) error {
	logs := map[int64]bool{}
	for _, name := range names {
		if base, ok := parseSegmentName(name, logSuffix); ok {
			logs[base] = true
		}
	}
	for _, name := range names {
		path := filepath.Join(l.dir, name)
		if _, ok := parseSegmentName(name, cleanedSuffix); ok {
			if err := l.fs.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			continue
		}
		base, ok := parseSegmentName(name, swapSuffix)
		if !ok {
			continue
		}
		next, err := swapEnd(l.fs, path)
		if err != nil {
			// Fsynced before its rename: unreadable means damaged since.
			// The old segments were only removed after the rename, so
			// keep whatever is left of them.
			if err := l.fs.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			continue
		}
		for b := range logs {
			if b < base || b >= next {
				continue
			}
			old := &segment{base: b}
			if err := l.removeIndexFiles(old); err != nil {
				return err
			}
			if b != base {
				if err := l.fs.Remove(old.path(l.dir, logSuffix)); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return err
				}
			}
		}
		if err := l.fs.Rename(path, filepath.Join(l.dir, segmentName(base, logSuffix))); err != nil {
			return err
		}
	}
	return nil
}

// swapEnd returns the end offset of the last batch of a swap file, which
// must hold whole batches with increasing offsets.
func swapEnd(fsys FS, path string) (int64, error) {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return 0, err
	}
	sc := scanner{f: f, end: size}
	next := int64(-1)
	for {
		h, _, _, err := sc.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return 0, err
		}
		if !validOffsets(h) || h.BaseOffset < next {
			return 0, fmt.Errorf("swap file %s: batch at %d after %d: %w", path, h.BaseOffset, next, ErrCorrupt)
		}
		next = h.LastOffset() + 1
	}
	if next < 0 {
		return 0, fmt.Errorf("swap file %s is empty: %w", path, ErrCorrupt)
	}
	return next, nil
}

package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Checkpoint file: magic, version, flags, start offset, recovery point, and
// a CRC-32C of the preceding bytes, big endian.
const (
	checkpointName    = "checkpoint"
	checkpointMagic   = "STCK"
	checkpointVersion = 1
	checkpointClean   = 1 // flags bit: the log was closed cleanly
	checkpointSize    = 4 + 1 + 1 + 8 + 8 + 4
)

type checkpoint struct {
	start         int64 // log start offset
	recoveryPoint int64 // segments from the one containing it are scanned after a crash
	clean         bool
}

func encodeCheckpoint(c checkpoint) []byte {
	b := make([]byte, 0, checkpointSize)
	b = append(b, checkpointMagic...)
	b = append(b, checkpointVersion)
	var flags byte
	if c.clean {
		flags |= checkpointClean
	}
	b = append(b, flags)
	b = binary.BigEndian.AppendUint64(b, uint64(c.start))
	b = binary.BigEndian.AppendUint64(b, uint64(c.recoveryPoint))
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func decodeCheckpoint(b []byte) (checkpoint, error) {
	switch {
	case len(b) != checkpointSize:
		return checkpoint{}, fmt.Errorf("decode checkpoint: size %d, want %d", len(b), checkpointSize)
	case string(b[:4]) != checkpointMagic || b[4] != checkpointVersion:
		return checkpoint{}, fmt.Errorf("decode checkpoint: bad magic or version %d", b[4])
	case crc32.Checksum(b[:checkpointSize-4], castagnoli) != binary.BigEndian.Uint32(b[checkpointSize-4:]):
		return checkpoint{}, errors.New("decode checkpoint: crc mismatch")
	}
	return checkpoint{
		clean:         b[5]&checkpointClean != 0,
		start:         int64(binary.BigEndian.Uint64(b[6:])),
		recoveryPoint: int64(binary.BigEndian.Uint64(b[14:])),
	}, nil
}

// readCheckpoint returns the checkpoint and whether a valid one exists. A
// corrupt checkpoint is treated as missing: everything is scanned.
func (l *Log) readCheckpoint() (checkpoint, bool, error) {
	b, err := readFile(l.fs, l.checkpointPath())
	if errors.Is(err, fs.ErrNotExist) {
		return checkpoint{}, false, nil
	}
	if err != nil {
		return checkpoint{}, false, err
	}
	c, err := decodeCheckpoint(b)
	if err != nil || c.start < 0 {
		return checkpoint{}, false, nil
	}
	return c, true, nil
}

// Open opens the log in opts.Dir, creating it if needed, and recovers it
// after a crash; see the package documentation.
func Open(opts Options) (*Log, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	l := &Log{
		fs:           o.FS,
		dir:          o.Dir,
		interval:     o.IndexIntervalBytes,
		now:          o.Now,
		segmentBytes: o.SegmentBytes,
		segmentMs:    o.SegmentMs,
	}
	l.flush.init(0)
	if err := l.recover(); err != nil {
		_ = l.closeFiles()
		return nil, fmt.Errorf("segment: open %s: %w", o.Dir, err)
	}
	l.noteNext()
	return l, nil
}

// recover loads the segments in l.dir; l is not shared yet.
func (l *Log) recover() error {
	if err := l.fs.MkdirAll(l.dir, 0o755); err != nil {
		return err
	}
	cp, haveCP, err := l.readCheckpoint()
	if err != nil {
		return err
	}
	if haveCP && cp.clean {
		// Clear the flag first: a crash during or after this Open must lead
		// to a scan.
		c := cp
		c.clean = false
		if err := writeFileAtomic(l.fs, l.checkpointPath(), encodeCheckpoint(c)); err != nil {
			return err
		}
	}
	if err := l.openSegments(); err != nil {
		return err
	}
	l.readCleaned()

	// Scan from the segment containing the recovery point; nothing after a
	// clean shutdown, everything without a checkpoint.
	scanFrom := 0
	if haveCP {
		scanFrom = l.find(cp.recoveryPoint)
		if cp.clean {
			scanFrom = len(l.segs)
		}
	}
	rebuilt := map[*segment]bool{} // segments whose index files must be written
	for i := 0; i < len(l.segs); i++ {
		s := l.segs[i]
		if i > 0 && s.base != l.segs[i-1].next {
			// A gap or overlap: only the contiguous prefix is the log.
			if err := l.dropFrom(i); err != nil {
				return err
			}
			break
		}
		var cut bool
		switch loaded, err := l.loadIndex(s, i >= scanFrom); {
		case err != nil:
			return err
		case i >= scanFrom:
			if cut, err = l.scanSegment(s, true); err != nil {
				return err
			}
			rebuilt[s] = true
		case !loaded:
			// Below the recovery point the data was synced; only the index is
			// lost, so the framing is checked but not the CRCs.
			if cut, err = l.scanSegment(s, false); err != nil {
				return err
			}
			rebuilt[s] = true
		}
		if cut {
			if err := l.dropFrom(i + 1); err != nil {
				return err
			}
			break
		}
	}

	if len(l.segs) == 0 {
		base := int64(0)
		if haveCP {
			base = cp.start
		}
		s, err := l.createSegment(base)
		if err != nil {
			return err
		}
		l.segs = append(l.segs, s)
	}
	l.start = l.segs[0].base
	if haveCP {
		l.start = max(l.start, cp.start)
	}
	if l.start > l.active().next {
		// Records below the start offset are deleted and those from
		// NextOffset on were lost in the crash: restart empty at the start.
		if err := l.dropFrom(0); err != nil {
			return err
		}
		s, err := l.createSegment(l.start)
		if err != nil {
			return err
		}
		l.segs = append(l.segs, s)
	}
	// Segments wholly below the start offset remain if a crash hit between
	// persisting a new start offset and deleting them.
	n := 0
	for n < len(l.segs)-1 && l.segs[n].next <= l.start {
		n++
	}
	if n > 0 {
		doomed := l.segs[:n:n]
		l.segs = append([]*segment(nil), l.segs[n:]...)
		if err := l.removeSegments(doomed); err != nil {
			return err
		}
	}

	for _, s := range l.segs[:len(l.segs)-1] {
		if rebuilt[s] {
			s.idx.finalize()
			if err := l.writeIndexFiles(s); err != nil {
				return err
			}
		}
	}
	// Index files exist only for closed segments: the active one changes.
	active := l.active()
	if err := l.removeIndexFiles(active); err != nil {
		return err
	}
	if !active.empty() {
		active.created = l.now()
	}
	// Everything recovered was synced: below the recovery point before the
	// checkpoint was written, above it by scanSegment.
	l.flush.flushed = active.next
	return l.writeCheckpoint(false)
}

// openSegments completes interrupted segment swaps (rewrite.go), opens the
// .log files of l.dir, oldest first, and removes temporary files and index
// files without a log file.
func (l *Log) openSegments() error {
	names, err := l.fs.ReadDir(l.dir)
	if err != nil {
		return err
	}
	if err := l.finishSwaps(names); err != nil {
		return err
	}
	if names, err = l.fs.ReadDir(l.dir); err != nil {
		return err
	}
	logs := map[int64]bool{}
	var indexes []string
	for _, name := range names {
		if base, ok := parseSegmentName(name, logSuffix); ok {
			logs[base] = true
			// Names are sorted and zero-padded, so bases come in order.
			s := &segment{base: base, next: base, idx: newSegIndex()}
			f, err := l.fs.OpenFile(filepath.Join(l.dir, name), os.O_RDWR, 0)
			if err != nil {
				return err
			}
			s.file = f
			l.segs = append(l.segs, s)
		} else if strings.HasSuffix(name, indexSuffix) || strings.HasSuffix(name, timeIndexSuffix) || strings.HasSuffix(name, tmpSuffix) {
			indexes = append(indexes, name)
		}
	}
	for _, name := range indexes {
		base, ok := parseSegmentName(name, indexSuffix)
		if !ok {
			base, ok = parseSegmentName(name, timeIndexSuffix)
		}
		if ok && logs[base] {
			continue
		}
		if err := l.fs.Remove(filepath.Join(l.dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// loadIndex loads the index files of s unless scan is set (the segment is
// scanned anyway), and sets the size and next offset of s from the file,
// walking the batches after the last offset entry. It returns false if the
// index files are missing or invalid, or the walk fails.
func (l *Log) loadIndex(s *segment, scan bool) (bool, error) {
	if scan {
		return false, nil
	}
	size, err := s.file.Size()
	if err != nil {
		return false, fmt.Errorf("segment %d: %w", s.base, err)
	}
	ob, err := readFile(l.fs, s.path(l.dir, indexSuffix))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	tb, err := readFile(l.fs, s.path(l.dir, timeIndexSuffix))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, err
	}
	offsets, err := decodeOffsetIndex(ob)
	if err != nil {
		return false, nil
	}
	times, err := decodeTimeIndex(tb)
	if err != nil {
		return false, nil
	}
	if len(offsets) == 0 || len(times) == 0 || int64(offsets[len(offsets)-1].pos) >= size {
		return false, nil // an empty segment has no index files
	}
	last := offsets[len(offsets)-1]
	sc := scanner{f: s.file, pos: int64(last.pos), end: size}
	next, lastRel, maxTs := s.base+int64(last.rel), last.rel, times[len(times)-1].ts
	for {
		h, pos, _, err := sc.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if errors.Is(err, ErrCorrupt) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("segment %d: %w", s.base, err)
		}
		if !l.follows(h, next) || !validOffsets(h) || pos > maxSegmentPos || h.BaseOffset-s.base > maxSegmentPos {
			return false, nil
		}
		next, lastRel, maxTs = h.LastOffset()+1, s.rel(h.BaseOffset), max(maxTs, h.MaxTimestamp)
	}
	if times[len(times)-1].rel > lastRel {
		return false, nil
	}
	s.idx = segIndex{offsets: offsets, times: times, maxTs: maxTs, lastRel: lastRel}
	s.size, s.next = size, next
	return true, nil
}

// follows reports whether a batch with header h may come after a batch
// ending at next: it must start at next, or anywhere past it in a log
// that may have gaps (one the cleaner rewrote, or copied from one).
func (l *Log) follows(h Header, next int64) bool {
	return h.BaseOffset == next || (l.gapped && h.BaseOffset > next)
}

// scanSegment rebuilds the index of s by walking all its batches, checking
// framing, offset contiguity from s.base (increasing offsets in a log that
// may have gaps, see follows) and, if checkCRC is set, CRCs. At
// the first invalid batch it cuts the file there and reports cut. A scanned
// or cut file is synced, so what was recovered is durable.
func (l *Log) scanSegment(s *segment, checkCRC bool) (cut bool, err error) {
	size, err := s.file.Size()
	if err != nil {
		return false, fmt.Errorf("segment %d: %w", s.base, err)
	}
	sc := scanner{f: s.file, end: size, whole: checkCRC}
	idx := newSegIndex()
	next, good := s.base, int64(0)
	for {
		h, pos, batch, err := sc.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if errors.Is(err, ErrCorrupt) {
			break
		}
		if err != nil {
			return false, fmt.Errorf("scan segment %d: %w", s.base, err)
		}
		if !l.follows(h, next) || !validOffsets(h) || pos > maxSegmentPos ||
			h.BaseOffset-s.base > maxSegmentPos || (checkCRC && !CheckCRC(batch)) {
			break
		}
		idx.add(s.rel(h.BaseOffset), uint32(pos), h.MaxTimestamp, l.interval)
		next, good = h.LastOffset()+1, pos+int64(h.Size())
	}
	s.idx, s.size, s.next = idx, good, next
	if good < size {
		cut = true
		// The index files describe the bytes being cut.
		if err := l.removeIndexFiles(s); err != nil {
			return false, err
		}
		if err := s.file.Truncate(good); err != nil {
			return false, fmt.Errorf("cut segment %d at %d: %w", s.base, good, err)
		}
	}
	if cut || checkCRC {
		if err := s.file.Sync(); err != nil {
			return false, fmt.Errorf("sync segment %d: %w", s.base, err)
		}
	}
	return cut, nil
}

package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
)

// Snapshots: the log's owner (the partition) keeps state derived from
// batch headers (producers, transactions, leader epochs) that it would
// otherwise rebuild by reading every header of the log when it opens. A
// snapshot is that state as of an offset: every batch below it, none at
// or after it. The log stores snapshots as <offset>.snapshot files and
// keeps them true to the batches: TruncateTo removes those past the new
// end and ResetTo removes all, before the batches change, so a snapshot
// on disk never describes batches the log no longer holds. (Retention and
// the cleaner leave them: what they remove was described by the state the
// running owner kept too.)
//
// File: magic, version, the offset, the owner's bytes and a CRC-32C of
// everything before it, big endian. Writes are atomic (a .tmp file,
// fsynced, renamed), and a torn or corrupt file is skipped for an older
// one: a snapshot only saves reading headers, it is never the only copy.
const (
	snapshotSuffix  = ".snapshot"
	snapshotMagic   = "STSN"
	snapshotVersion = 1
	snapshotHeader  = 4 + 1 + 8
	keepSnapshots   = 2 // the newest may be torn by a crash
)

func encodeSnapshot(offset int64, data []byte) []byte {
	b := make([]byte, 0, snapshotHeader+len(data)+4)
	b = append(b, snapshotMagic...)
	b = append(b, snapshotVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(offset))
	b = append(b, data...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func decodeSnapshot(b []byte) (int64, []byte, error) {
	switch {
	case len(b) < snapshotHeader+4:
		return 0, nil, fmt.Errorf("decode snapshot: %d bytes", len(b))
	case string(b[:4]) != snapshotMagic || b[4] != snapshotVersion:
		return 0, nil, errors.New("decode snapshot: bad magic or version")
	case crc32.Checksum(b[:len(b)-4], castagnoli) != binary.BigEndian.Uint32(b[len(b)-4:]):
		return 0, nil, errors.New("decode snapshot: crc mismatch")
	}
	return int64(binary.BigEndian.Uint64(b[5:])), b[snapshotHeader : len(b)-4], nil
}

// snapshotOffsets lists the offsets of the snapshot files, oldest first.
// Holds l.mu.
func (l *Log) snapshotOffsets() ([]int64, error) {
	names, err := l.fs.ReadDir(l.dir)
	if err != nil {
		return nil, err
	}
	var out []int64
	for _, name := range names {
		if !strings.HasSuffix(name, snapshotSuffix) {
			continue
		}
		if off, ok := parseSegmentName(name, snapshotSuffix); ok {
			out = append(out, off)
		}
	}
	slices.Sort(out)
	return out, nil
}

func (l *Log) snapshotPath(offset int64) string {
	return filepath.Join(l.dir, segmentName(offset, snapshotSuffix))
}

// removeSnapshotsAbove removes the snapshots past offset (all of them for
// a negative offset). Holds l.mu.
func (l *Log) removeSnapshotsAbove(offset int64) error {
	offs, err := l.snapshotOffsets()
	if err != nil {
		return err
	}
	for _, off := range offs {
		if offset >= 0 && off <= offset {
			continue
		}
		if err := l.fs.Remove(l.snapshotPath(off)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// WriteSnapshot stores data as the owner's state covering every batch
// below offset, which must not be past NextOffset, and removes older
// snapshots beyond the newest two. The caller must keep the log from
// changing (appends, truncation) while it runs, as the partition lock
// does: the state must be that of the batches below offset.
func (l *Log) WriteSnapshot(offset int64, data []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	defer l.noteNext()
	if err := l.usable(); err != nil {
		return fmt.Errorf("segment: write snapshot at %d: %w", offset, err)
	}
	if next := l.active().next; offset > next || offset < 0 {
		return fmt.Errorf("segment: write snapshot at %d: log ends at %d: %w", offset, next, ErrOffsetOutOfRange)
	}
	if err := writeFileAtomic(l.fs, l.snapshotPath(offset), encodeSnapshot(offset, data)); err != nil {
		return fmt.Errorf("segment: write snapshot at %d: %w", offset, err)
	}
	offs, err := l.snapshotOffsets()
	if err != nil {
		return fmt.Errorf("segment: write snapshot at %d: %w", offset, err)
	}
	for len(offs) > keepSnapshots {
		if err := l.fs.Remove(l.snapshotPath(offs[0])); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("segment: write snapshot at %d: %w", offset, err)
		}
		offs = offs[1:]
	}
	return nil
}

// LatestSnapshot returns the newest intact snapshot at or below upTo (and
// NextOffset): its offset and the owner's bytes. ok is false when there
// is none; unreadable or corrupt files are skipped.
func (l *Log) LatestSnapshot(upTo int64) (offset int64, data []byte, ok bool, err error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if err := l.usable(); err != nil {
		return 0, nil, false, fmt.Errorf("segment: read snapshot: %w", err)
	}
	offs, err := l.snapshotOffsets()
	if err != nil {
		return 0, nil, false, fmt.Errorf("segment: read snapshot: %w", err)
	}
	upTo = min(upTo, l.active().next)
	for i := len(offs) - 1; i >= 0; i-- {
		if offs[i] > upTo {
			continue
		}
		b, err := readFile(l.fs, l.snapshotPath(offs[i]))
		if err != nil {
			continue
		}
		off, data, err := decodeSnapshot(b)
		if err != nil || off != offs[i] {
			continue
		}
		return off, data, true, nil
	}
	return 0, nil, false, nil
}

package segment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sort"
)

const (
	offsetEntrySize = 8  // uint32 relative offset, uint32 position
	timeEntrySize   = 12 // int64 timestamp, uint32 relative offset

	// noTimestamp is the running maximum timestamp of an empty segment.
	noTimestamp = math.MinInt64
)

// errBadIndex is returned when an index file does not have the expected
// structure; the index is then rebuilt from the log file.
var errBadIndex = errors.New("segment: invalid index")

// offsetEntry maps the base offset of a batch, relative to the segment base,
// to the file position of the batch.
type offsetEntry struct{ rel, pos uint32 }

// timeEntry records that ts is the largest MaxTimestamp of the batches up to
// and including the batch whose base offset is rel (relative to the segment
// base).
type timeEntry struct {
	ts  int64
	rel uint32
}

// segIndex is the sparse in-memory index of one segment.
//
// Entries are added for the first batch of a segment and then for each batch
// that starts at least the index interval after the position of the previous
// entry (an "index point"). At an index point an offset entry is always
// added; a time entry is added if the running maximum timestamp is larger
// than the last time entry's. Hence, for every offset entry q, the last time
// entry at or before q carries the running maximum timestamp at q; timeStart
// relies on that. finalize may add one more time entry for the last batch.
// Offsets, positions and timestamps in the entries all strictly increase.
type segIndex struct {
	offsets []offsetEntry
	times   []timeEntry
	maxTs   int64  // largest MaxTimestamp of all batches; noTimestamp if none
	lastRel uint32 // relative base offset of the last batch, if any
}

func newSegIndex() segIndex { return segIndex{maxTs: noTimestamp} }

// add records a batch with relative base offset rel and maximum timestamp
// maxTs appended at position pos.
func (x *segIndex) add(rel, pos uint32, maxTs int64, interval int) {
	x.maxTs = max(x.maxTs, maxTs)
	x.lastRel = rel
	if n := len(x.offsets); n > 0 && int64(pos)-int64(x.offsets[n-1].pos) < int64(interval) {
		return
	}
	x.offsets = append(x.offsets, offsetEntry{rel: rel, pos: pos})
	if n := len(x.times); n == 0 || x.maxTs > x.times[n-1].ts {
		x.times = append(x.times, timeEntry{ts: x.maxTs, rel: rel})
	}
}

// finalize adds a time entry for the last batch if the last entry does not
// carry the maximum timestamp, so that the time index of a closed segment
// ends with the segment's maximum timestamp.
func (x *segIndex) finalize() {
	if len(x.offsets) == 0 {
		return
	}
	if n := len(x.times); n == 0 || x.times[n-1].ts < x.maxTs {
		x.times = append(x.times, timeEntry{ts: x.maxTs, rel: x.lastRel})
	}
}

// floor returns the position of the last offset entry whose relative offset
// is at most rel, and the position of the entry after it (end if none).
func (x *segIndex) floor(rel uint32, end int64) (pos, next int64) {
	i := sort.Search(len(x.offsets), func(i int) bool { return x.offsets[i].rel > rel })
	if i > 0 {
		pos = int64(x.offsets[i-1].pos)
	}
	next = end
	if i < len(x.offsets) {
		next = int64(x.offsets[i].pos)
	}
	return pos, next
}

// ceil returns the position of the first offset entry whose relative offset
// is at least rel, or end if there is none.
func (x *segIndex) ceil(rel uint32, end int64) int64 {
	i := sort.Search(len(x.offsets), func(i int) bool { return x.offsets[i].rel >= rel })
	if i < len(x.offsets) {
		return int64(x.offsets[i].pos)
	}
	return end
}

// timeStart returns a position from which a forward scan finds the first
// batch whose MaxTimestamp is at least ts, with no such batch before it.
// Let u be the first time entry with a timestamp >= ts; the running maximum
// at every index point before u is below ts, so the scan starts at the last
// offset entry before u. Without such a u (the maximum grew after the last
// time entry of the active segment) it starts at the last offset entry.
func (x *segIndex) timeStart(ts int64) int64 {
	i := sort.Search(len(x.times), func(i int) bool { return x.times[i].ts >= ts })
	j := len(x.offsets)
	if i < len(x.times) {
		u := x.times[i].rel
		j = sort.Search(len(x.offsets), func(j int) bool { return x.offsets[j].rel >= u })
	}
	if j == 0 {
		return 0
	}
	return int64(x.offsets[j-1].pos)
}

// truncate drops the entries of batches at relative offset rel and later.
// maxTs and lastRel must be recomputed by the caller.
func (x *segIndex) truncate(rel uint32) {
	i := sort.Search(len(x.offsets), func(i int) bool { return x.offsets[i].rel >= rel })
	x.offsets = x.offsets[:i:i]
	j := sort.Search(len(x.times), func(j int) bool { return x.times[j].rel >= rel })
	x.times = x.times[:j:j]
}

// lastTimeEntryTs returns the timestamp of the last time entry, or noTimestamp.
func (x *segIndex) lastTimeEntryTs() int64 {
	if len(x.times) == 0 {
		return noTimestamp
	}
	return x.times[len(x.times)-1].ts
}

func encodeOffsetIndex(entries []offsetEntry) []byte {
	b := make([]byte, 0, len(entries)*offsetEntrySize)
	for _, e := range entries {
		b = binary.BigEndian.AppendUint32(b, e.rel)
		b = binary.BigEndian.AppendUint32(b, e.pos)
	}
	return b
}

// decodeOffsetIndex decodes the contents of an .index file. It checks that
// the size is a multiple of the entry size, that the first entry is at
// position 0 and that relative offsets and positions strictly increase.
// The first entry's relative offset is that of the segment's first batch,
// which a cleaned segment may hold past its base.
func decodeOffsetIndex(b []byte) ([]offsetEntry, error) {
	if len(b)%offsetEntrySize != 0 {
		return nil, fmt.Errorf("decode offset index: size %d not a multiple of %d: %w", len(b), offsetEntrySize, errBadIndex)
	}
	entries := make([]offsetEntry, len(b)/offsetEntrySize)
	for i := range entries {
		e := offsetEntry{
			rel: binary.BigEndian.Uint32(b[i*offsetEntrySize:]),
			pos: binary.BigEndian.Uint32(b[i*offsetEntrySize+4:]),
		}
		switch {
		case i == 0 && e.pos != 0:
			return nil, fmt.Errorf("decode offset index: first entry (%d, %d) not at position 0: %w", e.rel, e.pos, errBadIndex)
		case i > 0 && (e.rel <= entries[i-1].rel || e.pos <= entries[i-1].pos):
			return nil, fmt.Errorf("decode offset index: entry %d not increasing: %w", i, errBadIndex)
		}
		entries[i] = e
	}
	return entries, nil
}

func encodeTimeIndex(entries []timeEntry) []byte {
	b := make([]byte, 0, len(entries)*timeEntrySize)
	for _, e := range entries {
		b = binary.BigEndian.AppendUint64(b, uint64(e.ts))
		b = binary.BigEndian.AppendUint32(b, e.rel)
	}
	return b
}

// decodeTimeIndex decodes the contents of a .timeindex file. It checks that
// the size is a multiple of the entry size and that timestamps and
// relative offsets strictly increase.
func decodeTimeIndex(b []byte) ([]timeEntry, error) {
	if len(b)%timeEntrySize != 0 {
		return nil, fmt.Errorf("decode time index: size %d not a multiple of %d: %w", len(b), timeEntrySize, errBadIndex)
	}
	entries := make([]timeEntry, len(b)/timeEntrySize)
	for i := range entries {
		e := timeEntry{
			ts:  int64(binary.BigEndian.Uint64(b[i*timeEntrySize:])),
			rel: binary.BigEndian.Uint32(b[i*timeEntrySize+8:]),
		}
		if i > 0 && (e.ts <= entries[i-1].ts || e.rel <= entries[i-1].rel) {
			return nil, fmt.Errorf("decode time index: entry %d not increasing: %w", i, errBadIndex)
		}
		entries[i] = e
	}
	return entries, nil
}

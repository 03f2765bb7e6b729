package segment

import (
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
	tmpSuffix       = ".tmp"

	// maxSegmentPos bounds the position of a batch and its base offset
	// relative to the segment base, both stored as uint32 in the index files.
	// The active segment is rolled before either would pass it.
	maxSegmentPos = math.MaxInt32

	headerChunk = 8 << 10 // read size when walking batch headers
	wholeChunk  = 1 << 20 // read size when scanning whole batches
)

// segment is one log file and its sparse indexes. Batches are stored back to
// back from position 0; the base offset of the first batch is base, and each
// following batch starts at the previous LastOffset()+1.
type segment struct {
	base    int64
	next    int64 // offset after the last batch
	size    int64 // bytes of whole batches in the file
	file    File
	idx     segIndex
	created time.Time // when the segment got its first batch (for segment.ms)
	// tail holds what walk needs of the newest batches appended to the
	// active segment since it was opened or last truncated, so a read at
	// the log end (a follower's, a consumer's at the tail) finds its
	// batches without reading their headers back from the file. Invariant:
	// the entries are contiguous and the last one ends at size; empty
	// means unknown (walk reads the headers then).
	tail []tailBatch
}

// tailBatch is what walk needs of one batch's header, in 16 bytes.
type tailBatch struct {
	pos     uint32 // in the file
	lastRel uint32 // last offset, relative to the segment base
	size    uint32
	records int32
}

// tailKeep is how many batches a tail keeps at least once it has that
// many: a follower reads what was appended since its last fetch, a few
// batches per partition at any partition count. It holds at most twice
// as many (appendTail drops the older half when full): 512 bytes for a
// partition that takes appends, none for one that does not.
const tailKeep = 16

// appendTail returns t with b appended, the older half dropped first
// when t holds 2*tailKeep entries (amortized: one copy per tailKeep
// appends, in the backing array t already has).
func appendTail(t []tailBatch, b tailBatch) []tailBatch {
	if len(t) == 2*tailKeep {
		t = t[:copy(t, t[tailKeep:])]
	}
	return append(t, b)
}

func (s *segment) empty() bool { return s.size == 0 }

// rel returns offset relative to the segment base; base <= offset < base+2^32.
func (s *segment) rel(offset int64) uint32 { return uint32(offset - s.base) }

func segmentName(base int64, suffix string) string {
	return fmt.Sprintf("%020d%s", base, suffix)
}

// parseSegmentName returns the base offset encoded in a file name of the
// form <20 digits><suffix>.
func parseSegmentName(name, suffix string) (int64, bool) {
	digits, ok := strings.CutSuffix(name, suffix)
	if !ok || len(digits) != 20 {
		return 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	base, err := strconv.ParseInt(digits, 10, 64)
	return base, err == nil
}

func (s *segment) path(dir, suffix string) string {
	return filepath.Join(dir, segmentName(s.base, suffix))
}

// scanner walks the batches of a file from a position. It reads ahead in
// chunks, so walking many small batches costs few reads.
type scanner struct {
	f     File
	pos   int64 // position of the next batch
	end   int64 // the walk stops here
	whole bool  // load whole batches, not only headers
	buf   []byte
	bufAt int64 // file position of buf[0]
}

// next returns the header, the position and, if s.whole is set, the bytes
// of the batch at s.pos, and moves past it. It returns io.EOF at s.end, an
// error wrapping ErrCorrupt if the bytes there are not a valid batch header
// or the batch runs past s.end, and other errors for failed reads. The
// batch bytes are valid until the next call.
func (s *scanner) next() (h Header, pos int64, batch []byte, err error) {
	pos = s.pos
	if pos >= s.end {
		return Header{}, pos, nil, io.EOF
	}
	if s.end-pos < HeaderSize {
		return Header{}, pos, nil, fmt.Errorf("batch at %d: %d bytes left, header needs %d: %w", pos, s.end-pos, HeaderSize, ErrCorrupt)
	}
	b, err := s.fill(pos, HeaderSize)
	if err != nil {
		return Header{}, pos, nil, err
	}
	if h, err = ParseHeader(b); err != nil {
		return Header{}, pos, nil, fmt.Errorf("batch at %d: %w", pos, err)
	}
	size := int64(h.Size())
	if size > s.end-pos {
		return Header{}, pos, nil, fmt.Errorf("batch at %d: size %d, %d bytes left: %w", pos, size, s.end-pos, ErrCorrupt)
	}
	if s.whole {
		if batch, err = s.fill(pos, size); err != nil {
			return Header{}, pos, nil, err
		}
	}
	s.pos = pos + size
	return h, pos, batch, nil
}

// fill returns the n bytes at pos, reading a chunk if they are not buffered.
// pos+n must not exceed s.end.
func (s *scanner) fill(pos, n int64) ([]byte, error) {
	if pos >= s.bufAt && pos+n <= s.bufAt+int64(len(s.buf)) {
		return s.buf[pos-s.bufAt : pos-s.bufAt+n], nil
	}
	chunk := int64(headerChunk)
	if s.whole {
		chunk = wholeChunk
	}
	want := min(max(n, chunk), s.end-pos)
	if int64(cap(s.buf)) < want {
		s.buf = make([]byte, want)
	}
	s.buf = s.buf[:want]
	k, err := s.f.ReadAt(s.buf, pos)
	if int64(k) < want {
		s.buf = s.buf[:0]
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("read %d bytes at %d: %w", want, pos, err)
	}
	s.bufAt = pos
	return s.buf[:n], nil
}

// readLimits is the state of a Log.Read carried from segment to segment.
type readLimits struct {
	budget    int64 // bytes left of maxBytes; may go negative after the first batch
	maxOffset int64 // batches whose LastOffset() >= maxOffset are not returned
	first     bool  // no batch has been returned yet
	minSpan   int64 // ReadSpan: the smallest record set left in its file
}

// read appends to dst the batches of s that Log.Read returns, starting at
// the batch containing offset (the first batch if offset <= s.base). It
// reports whether the read may continue into the next segment, that is, all
// batches of s from the start were taken.
//
// One ReadAt loads a window that starts at the offset index entry at or
// below offset and ends where no more batches can be returned: at the
// segment end, at the first index entry whose batch has a base offset >=
// maxOffset, or the remaining byte budget past the index entry after offset
// (the batch containing offset starts before that entry). The bytes to
// return are then moved to the front of the window.
func (s *segment) read(dst []byte, offset int64, lim *readLimits) ([]byte, bool, error) {
	winStart, end, winEnd, ok := s.window(offset, lim)
	if !ok {
		return dst, false, nil
	}

	base := len(dst)
	loaded := int64(0) // bytes of the window read so far, from winStart
	load := func(n int64) error {
		if n <= loaded {
			return nil
		}
		dst = growTo(dst, base+int(n))
		k, err := s.file.ReadAt(dst[base+int(loaded):base+int(n)], winStart+loaded)
		if int64(k) < n-loaded {
			if err == nil || errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return fmt.Errorf("read segment %d at %d: %w", s.base, winStart+loaded, err)
		}
		loaded = n
		return nil
	}
	if err := load(winEnd - winStart); err != nil {
		return dst[:base], false, err
	}

	var p int64         // position of the next batch, relative to winStart
	var from int64 = -1 // first returned byte, relative to winStart
	cont := true
	for winStart+p < end {
		if lim.first {
			// The first batch is returned whole even past the window.
			if err := load(min(p+HeaderSize, s.size-winStart)); err != nil {
				return dst[:base], false, err
			}
		}
		if loaded-p < HeaderSize {
			cont = false
			break
		}
		h, err := ParseHeader(dst[base+int(p) : base+int(loaded)])
		if err != nil {
			return dst[:base], false, fmt.Errorf("read segment %d at %d: %w", s.base, winStart+p, err)
		}
		size := int64(h.Size())
		if h.LastOffset() < offset {
			p += size // before the requested offset; lies inside the window
			continue
		}
		if h.LastOffset() >= lim.maxOffset || (!lim.first && size > lim.budget) {
			cont = false
			break
		}
		if lim.first {
			if winStart+p+size > s.size {
				return dst[:base], false, fmt.Errorf("read segment %d: batch at %d runs past end: %w", s.base, winStart+p, ErrCorrupt)
			}
			if err := load(p + size); err != nil {
				return dst[:base], false, err
			}
		} else if p+size > loaded {
			cont = false
			break
		}
		if from < 0 {
			from = p
		}
		p += size
		lim.budget -= size
		lim.first = false
	}
	if winStart+p < s.size {
		cont = false
	}
	if from < 0 {
		return dst[:base], cont, nil
	}
	n := copy(dst[base:], dst[base+int(from):base+int(p)])
	return dst[:base+n], cont, nil
}

// window returns the part of s a read from offset looks at: the batch
// containing offset starts in [winStart, after] (after is where the next
// index entry points), no byte at or past end is returned, and the byte
// budget ends at winEnd (the first batch may run past it). ok is false
// when the read can return nothing from s.
func (s *segment) window(offset int64, lim *readLimits) (winStart, end, winEnd int64, ok bool) {
	if !lim.first && lim.budget <= 0 {
		return 0, 0, 0, false
	}
	var after int64
	if offset > s.base {
		winStart, after = s.idx.floor(s.rel(offset), s.size)
	}
	end = s.size
	if lim.maxOffset < s.next {
		if lim.maxOffset <= s.base {
			return 0, 0, 0, false
		}
		end = s.idx.ceil(s.rel(lim.maxOffset), s.size)
	}
	winEnd = end
	if budget := max(lim.budget, 0); budget < end-after {
		winEnd = after + budget
	}
	return winStart, end, winEnd, true
}

// growTo returns b extended to length n, reallocating if needed.
func growTo(b []byte, n int) []byte {
	if n <= cap(b) {
		return b[:n]
	}
	nb := make([]byte, n, max(n, 2*cap(b)))
	copy(nb, b)
	return nb
}

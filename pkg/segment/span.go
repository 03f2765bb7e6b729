package segment

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"sync"
)

// A Span is a run of whole batches left in a segment file, for a reader
// that sends them to a socket with sendfile(2) instead of reading them
// into memory (Log.ReadSpan).
//
// It holds a reference to the segment's open file, taken under the log's
// read lock, so retention, compaction or closing the log cannot close the
// file under it: a removed file stays readable until the span is closed
// (the descriptor closes with the last reference). A truncation (a follower cutting its log back to a new
// leader's) can still shorten the file, so a sender that gets fewer bytes
// than Len must treat what it sent as cut short (Kafka closes the
// connection then, and so does the broker).
type Span struct {
	Pos, Len   int64   // the bytes, in the file
	Records    int     // records in the batches
	LastOffset int64   // of the last batch
	file       *osFile // referenced until Close
}

// FD returns the span's file descriptor, valid until Close.
func (s *Span) FD() int { return s.file.fd }

// Bytes reads the span into dst (appended) and returns it.
func (s *Span) Bytes(dst []byte) ([]byte, error) {
	out, err := appendRange(dst, s.file, s.Pos, s.Len)
	if err != nil {
		return out, fmt.Errorf("segment: read span: %w", err) // truncated since
	}
	return out, nil
}

// appendRange appends the n bytes of f at pos to dst; a short read is
// io.ErrUnexpectedEOF.
func appendRange(dst []byte, f io.ReaderAt, pos, n int64) ([]byte, error) {
	base := len(dst)
	dst = growTo(dst, base+int(n))
	if k, err := f.ReadAt(dst[base:], pos); k < int(n) {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return dst[:base], fmt.Errorf("read %d bytes at %d: %w", n, pos, err)
	}
	return dst, nil
}

// Close gives up the span's reference to its file; a second Close is
// os.ErrClosed.
func (s *Span) Close() error {
	if s.file == nil {
		return os.ErrClosed
	}
	f := s.file
	s.file = nil
	return f.release()
}

// ReadSpan is Read, except that when the record set it would return from
// the first segment it reads is at least minSpan bytes (and the file is a
// real one), it leaves it in the file: it returns dst unchanged and a Span
// the caller must close. A span never crosses a segment (as in Kafka, the
// fetch returns less and the next one goes on). Batch boundaries come from
// the batch headers alone, read in small pieces. minSpan <= 0 is Read.
func (l *Log) ReadSpan(dst []byte, offset int64, maxBytes int, maxOffset int64, minSpan int) ([]byte, *Span, error) {
	if minSpan <= 0 {
		out, err := l.Read(dst, offset, maxBytes, maxOffset)
		return out, nil, err
	}
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return dst, nil, fmt.Errorf("segment: read offset %d: %w", offset, ErrClosed)
	}
	if next := l.active().next; offset < l.start || offset > next {
		return dst, nil, fmt.Errorf("segment: read offset %d: log holds [%d, %d): %w", offset, l.start, next, ErrOffsetOutOfRange)
	}
	if offset == l.active().next || offset >= maxOffset {
		return dst, nil, nil
	}
	n := len(dst)
	lim := readLimits{budget: int64(maxBytes), maxOffset: maxOffset, first: true, minSpan: int64(minSpan)}
	for i := l.find(offset); i < len(l.segs); i++ {
		var cont bool
		var err error
		var sp *Span
		dst, sp, cont, err = l.segs[i].readOrSpan(dst, offset, &lim)
		if err != nil {
			return dst[:n], nil, fmt.Errorf("segment: read offset %d: %w", offset, err)
		}
		if sp != nil {
			return dst, sp, nil
		}
		if !cont {
			break
		}
	}
	return dst, nil, nil
}

// readOrSpan is read, or for a large first read of a real file, the
// batches it would return as a span (and cont false).
func (s *segment) readOrSpan(dst []byte, offset int64, lim *readLimits) ([]byte, *Span, bool, error) {
	f, ok := s.file.(*osFile)
	if !ok || !lim.first {
		dst, cont, err := s.read(dst, offset, lim)
		return dst, nil, cont, err
	}
	winStart, end, winEnd, ok := s.window(offset, lim)
	if !ok {
		return dst, nil, false, nil
	}
	if winEnd-winStart < lim.minSpan {
		dst, cont, err := s.read(dst, offset, lim)
		return dst, nil, cont, err
	}
	sp, cont, err := s.walk(offset, winStart, end, winEnd, lim)
	if err != nil || sp.Len == 0 {
		return dst, nil, cont, err
	}
	if sp.Len < lim.minSpan {
		// Smaller than the window promised (batches before offset, or
		// the high watermark inside it): cheaper to read.
		out, err := appendRange(dst, s.file, sp.Pos, sp.Len)
		if err != nil {
			return out, nil, false, fmt.Errorf("read segment %d: %w", s.base, err)
		}
		return out, nil, cont, nil
	}
	if !f.retain() {
		return dst, nil, false, fmt.Errorf("segment %d: span of a closed file: %w", s.base, os.ErrClosed)
	}
	sp.file = f
	return dst, sp, false, nil
}

// headerBufs holds walk's buffers: a fetch walks one segment per partition
// it leaves in the file, and a buffer on the stack escapes through
// File.ReadAt.
var headerBufs = sync.Pool{New: func() any { return new([4 << 10]byte) }}

// walk finds the batches read would return, from the headers alone: a
// Span without a descriptor, and whether the read may continue into the
// next segment. It follows read's rules exactly (positions absolute).
// From the segment's tail, when it reaches back to winStart, it reads no
// header from the file.
func (s *segment) walk(offset, winStart, end, winEnd int64, lim *readLimits) (*Span, bool, error) {
	sp := &Span{Pos: -1}
	tail := s.tail
	fromTail := len(tail) > 0 && int64(tail[0].pos) <= winStart
	if fromTail {
		// winStart is where a batch starts (an index entry, or 0).
		tail = tail[sort.Search(len(tail), func(i int) bool { return int64(tail[i].pos) >= winStart }):]
	}
	var buf []byte
	bufAt, bufLen := int64(0), 0 // buf holds the file's [bufAt, bufAt+bufLen)
	last := int64(0)             // size of the previous batch
	pos := winStart
	cont := true
	for pos < end {
		var b tailBatch
		if fromTail {
			if len(tail) == 0 || int64(tail[0].pos) != pos {
				return sp, false, fmt.Errorf("segment %d: tail does not reach %d: %w", s.base, pos, ErrCorrupt)
			}
			b, tail = tail[0], tail[1:]
		} else {
			if s.size-pos < HeaderSize {
				cont = false
				break
			}
			if pos < bufAt || pos+HeaderSize > bufAt+int64(bufLen) {
				if buf == nil {
					bp := headerBufs.Get().(*[4 << 10]byte)
					defer headerBufs.Put(bp)
					buf = bp[:]
				}
				// Batches larger than the buffer are jumped over: read
				// only the next header then.
				want := min(int64(len(buf)), s.size-pos)
				if last >= int64(len(buf)) {
					want = HeaderSize
				}
				k, err := s.file.ReadAt(buf[:want], pos)
				if int64(k) < want {
					if err == nil || errors.Is(err, io.EOF) {
						err = io.ErrUnexpectedEOF
					}
					return sp, false, fmt.Errorf("read segment %d header at %d: %w", s.base, pos, err)
				}
				bufAt, bufLen = pos, k
			}
			h, err := ParseHeader(buf[pos-bufAt : pos-bufAt+HeaderSize])
			if err != nil {
				return sp, false, fmt.Errorf("read segment %d at %d: %w", s.base, pos, err)
			}
			b = tailBatch{pos: uint32(pos), lastRel: s.rel(h.LastOffset()), size: uint32(h.Size()), records: h.NumRecords}
		}
		size, lastOffset := int64(b.size), s.base+int64(b.lastRel)
		last = size
		if lastOffset < offset {
			pos += size
			continue
		}
		if lastOffset >= lim.maxOffset || (!lim.first && size > lim.budget) {
			cont = false
			break
		}
		if lim.first {
			if pos+size > s.size {
				return sp, false, fmt.Errorf("read segment %d: batch at %d runs past end: %w", s.base, pos, ErrCorrupt)
			}
		} else if pos+size > winEnd {
			cont = false
			break
		}
		if sp.Pos < 0 {
			sp.Pos = pos
		}
		sp.Records += int(b.records)
		sp.LastOffset = lastOffset
		pos += size
		lim.budget -= size
		lim.first = false
	}
	if pos < s.size {
		cont = false
	}
	if sp.Pos < 0 {
		sp.Pos = pos
		return sp, cont, nil
	}
	sp.Len = pos - sp.Pos
	return sp, cont, nil
}

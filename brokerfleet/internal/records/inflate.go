package records

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Codec state bounds.
const (
	// MaxWindow is the largest zstd window accepted (RFC 8878 asks
	// decoders to support 8 MiB; producers use 2 MiB at the default level).
	// A frame that declares its content size (franz-go's, librdkafka's)
	// may instead use a window of that size, up to the batch's limit.
	MaxWindow = 8 << 20
	// readBuffer is the buffer records are parsed from.
	readBuffer = 32 << 10
)

// Kafka's codec numbers (the batch attributes' low three bits).
const (
	codecNone   = 0
	codecGzip   = 1
	codecSnappy = 2
	codecLz4    = 3
	codecZstd   = 4
)

// slots bounds the batches being inflated at once: inflating is CPU work,
// so more than one per core gains nothing, and each holds codec state.
var slots = make(chan struct{}, max(2, runtime.GOMAXPROCS(0)))

var (
	bufs  = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, readBuffer) }}
	gzips = sync.Pool{New: func() any { return new(gzip.Reader) }}
	lz4s  = sync.Pool{New: func() any { return lz4.NewReader(nil) }}
	zstds = sync.Pool{New: func() any {
		d, _ := zstd.NewReader(nil, zstd.WithDecoderLowmem(true), zstd.WithDecoderConcurrency(1),
			zstd.WithDecoderMaxMemory(MaxWindow), zstd.WithDecoderMaxWindow(MaxWindow))
		return d
	}}
)

// inflate returns a reader of body's records, decompressed with codec and
// cut after limit bytes, and the function that releases what it holds.
func inflate(body []byte, codec int8, limit int64) (*bufio.Reader, func(), error) {
	br := bufs.Get().(*bufio.Reader)
	if codec == codecNone {
		br.Reset(bytes.NewReader(body))
		return br, func() { br.Reset(nil); bufs.Put(br) }, nil
	}
	slots <- struct{}{}
	r, done, err := decoder(body, codec, limit)
	if err != nil {
		<-slots
		bufs.Put(br)
		return nil, nil, err
	}
	br.Reset(&bounded{r: r, left: limit})
	return br, func() {
		br.Reset(nil)
		bufs.Put(br)
		done()
		<-slots
	}, nil
}

// decoder returns codec's stream over body and the function that returns
// the decoder to its pool.
func decoder(body []byte, codec int8, limit int64) (io.Reader, func(), error) {
	src := bytes.NewReader(body)
	switch codec {
	case codecGzip:
		z := gzips.Get().(*gzip.Reader)
		if err := z.Reset(src); err != nil {
			gzips.Put(z)
			return nil, nil, fmt.Errorf("gzip: %w: %v", ErrMalformed, err)
		}
		return codecErrs{z}, func() { gzips.Put(z) }, nil
	case codecLz4:
		z := lz4s.Get().(*lz4.Reader)
		z.Reset(src)
		return codecErrs{z}, func() { z.Reset(nil); lz4s.Put(z) }, nil
	case codecZstd:
		z := zstds.Get().(*zstd.Decoder)
		// A frame with a declared content size may use a window of that
		// size: up to the limit (the bounded reader cuts the output there).
		if err := z.ResetWithOptions(src, zstd.WithDecoderMaxMemory(uint64(max(limit, MaxWindow))), zstd.WithDecoderMaxWindow(MaxWindow)); err != nil {
			zstds.Put(z)
			return nil, nil, fmt.Errorf("zstd: %w: %v", ErrMalformed, err)
		}
		return codecErrs{z}, func() { _ = z.Reset(nil); zstds.Put(z) }, nil
	case codecSnappy:
		return &snappyReader{src: body, limit: limit}, func() {}, nil
	}
	return nil, nil, fmt.Errorf("compression codec %d: %w", codec, ErrMalformed)
}

// bounded cuts a stream after left bytes: reading more is ErrTooLarge.
type bounded struct {
	r    io.Reader
	left int64
}

func (b *bounded) Read(p []byte) (int, error) {
	if b.left <= 0 {
		var one [1]byte
		n, err := io.ReadFull(b.r, one[:])
		if n > 0 {
			return 0, ErrTooLarge
		}
		if errors.Is(err, io.ErrUnexpectedEOF) {
			err = io.EOF
		}
		return 0, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}

// codecErrs classifies a codec's errors: a window or size the decoder
// refuses is ErrTooLarge, anything else but the end ErrMalformed.
type codecErrs struct{ r io.Reader }

func (c codecErrs) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	switch {
	case err == nil, errors.Is(err, io.EOF):
	case errors.Is(err, zstd.ErrWindowSizeExceeded), errors.Is(err, zstd.ErrDecoderSizeExceeded):
		err = fmt.Errorf("%w: %v", ErrTooLarge, err)
	default:
		err = fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return n, err
}

// xerialHeader starts the framing the Java client gives snappy: the magic,
// then two 4-byte versions, then chunks, each a 4-byte big-endian length
// and a raw snappy block.
var xerialHeader = []byte{130, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// snappyReader inflates a raw snappy block or xerial chunks one at a time;
// no block may declare more than the limit.
type snappyReader struct {
	src    []byte
	limit  int64
	xerial bool
	begun  bool
	buf    []byte
	out    []byte
}

func (s *snappyReader) Read(p []byte) (int, error) {
	for len(s.out) == 0 {
		if err := s.next(); err != nil {
			return 0, err
		}
	}
	n := copy(p, s.out)
	s.out = s.out[n:]
	return n, nil
}

// next decodes the next block into s.out.
func (s *snappyReader) next() error {
	if !s.begun {
		s.begun = true
		if len(s.src) > 16 && bytes.HasPrefix(s.src, xerialHeader) {
			s.xerial, s.src = true, s.src[16:]
		} else {
			return s.decode(s.src, func() { s.src = nil })
		}
	}
	if !s.xerial || len(s.src) == 0 {
		return io.EOF
	}
	if len(s.src) < 4 {
		return fmt.Errorf("snappy: truncated chunk length: %w", ErrMalformed)
	}
	size := binary.BigEndian.Uint32(s.src)
	if int64(size) > int64(len(s.src)-4) {
		return fmt.Errorf("snappy: chunk of %d bytes, %d left: %w", size, len(s.src)-4, ErrMalformed)
	}
	chunk := s.src[4 : 4+size]
	return s.decode(chunk, func() { s.src = s.src[4+size:] })
}

func (s *snappyReader) decode(block []byte, advance func()) error {
	n, err := s2.DecodedLen(block)
	switch {
	case err != nil:
		return fmt.Errorf("snappy: %w: %v", ErrMalformed, err)
	case int64(n) > s.limit:
		return fmt.Errorf("snappy: a block declares %d bytes: %w", n, ErrTooLarge)
	}
	if cap(s.buf) < n {
		s.buf = make([]byte, n)
	}
	out, err := s2.Decode(s.buf[:n], block)
	if err != nil {
		return fmt.Errorf("snappy: %w: %v", ErrMalformed, err)
	}
	advance()
	s.out = out
	if len(out) == 0 && !s.xerial {
		return io.EOF
	}
	return nil
}

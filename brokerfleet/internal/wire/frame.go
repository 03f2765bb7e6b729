// Package wire frames the Kafka protocol on a byte stream, for both sides:
// the broker's front end reads request frames and writes response frames;
// Conn is the client end that brokers use towards each other (follower
// fetches, SASL towards a leader). Messages themselves are kmsg's.
//
// Reading a frame never allocates far beyond the bytes that arrived: a
// frame's length prefix is checked against a limit before anything is
// allocated, and a large frame's buffer grows as its bytes arrive.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrFrameTooLarge is returned when a frame's length prefix exceeds the cap.
var ErrFrameTooLarge = errors.New("request frame too large")

// frameChunk bounds how much is allocated ahead of bytes actually received,
// so a hostile length prefix cannot make the broker allocate memory the
// peer never sends.
const frameChunk = 64 << 10

// ReadFrame reads one size-prefixed frame. A negative size or one above limit
// fails before anything is allocated; a large frame's buffer grows only as
// its bytes arrive (to at most eight times what arrived, after the first
// 64 KiB).
func ReadFrame(r io.Reader, limit int32) ([]byte, error) {
	return ReadFrameInto(r, limit, nil, 0)
}

// ReadFrameInto is ReadFrame for a connection whose peer is trusted with
// frames up to eager bytes (a leader answering this broker's own fetch):
// those are read into buf if it is large enough, else into one new buffer
// with room to spare (its size rounded up to a power of two, at most
// eager), so a caller reusing it does not allocate again for every
// slightly larger frame; nothing is grown or copied.
func ReadFrameInto(r io.Reader, limit int32, buf []byte, eager int) ([]byte, error) {
	size, err := ReadSize(r, limit)
	if err != nil {
		return nil, err
	}
	return readBody(r, size, buf, eager, nil)
}

// ReadSize reads a frame's size prefix, checked against limit (a negative
// size or one above limit is ErrFrameTooLarge). ReadBody reads the rest.
func ReadSize(r io.Reader, limit int32) (int, error) {
	var sz [4]byte
	if _, err := io.ReadFull(r, sz[:]); err != nil {
		return 0, err
	}
	return CheckSize(sz, limit)
}

// CheckSize decodes and checks a size prefix read by the caller.
func CheckSize(sz [4]byte, limit int32) (int, error) {
	n := int32(binary.BigEndian.Uint32(sz[:]))
	if n < 0 || n > limit {
		return 0, fmt.Errorf("%w: %d bytes, the limit is %d", ErrFrameTooLarge, n, limit)
	}
	return int(n), nil
}

// ReadBody reads a frame of size bytes whose size prefix was read; its
// buffer grows only as bytes arrive, as ReadFrame's does. grow (if not
// nil) is told, before each step allocates, by how many bytes the frame's
// buffer is about to grow (the steps add up to size); an error from it
// ends the read.
func ReadBody(r io.Reader, size int, grow func(n int) error) ([]byte, error) {
	return readBody(r, size, nil, 0, grow)
}

// ReadBodyInto is ReadBody into buf, which holds size bytes (a pooled
// buffer, see ReadBody's caller in the broker): grow is told of the same
// steps as ReadBody's, so the bytes a frame reserves still follow the
// bytes that arrive, but they land in place, nothing allocated, zeroed
// or copied.
func ReadBodyInto(r io.Reader, size int, buf []byte, grow func(n int) error) ([]byte, error) {
	if cap(buf) < size {
		return nil, fmt.Errorf("wire: a %d-byte buffer for a %d-byte frame", cap(buf), size)
	}
	buf = buf[:size]
	for have := 0; have < size; {
		next := growTo(have, size)
		if grow != nil {
			if err := grow(next - have); err != nil {
				return nil, err
			}
		}
		if _, err := io.ReadFull(r, buf[have:next]); err != nil {
			return nil, err
		}
		have = next
	}
	return buf, nil
}

// growTo is how far a frame's buffer of size bytes grows from have
// bytes: its first 64 KiB, then eightfold per step (straight to size
// once that is less than twice as far), so a frame of 4 MiB costs a copy
// of its first 576 KiB, and a peer still has to send an eighth of what
// it makes the broker allocate.
func growTo(have, size int) int {
	if have == 0 {
		return min(size, frameChunk)
	}
	if next := 8 * have; size >= 2*next {
		return next
	}
	return size
}

func readBody(r io.Reader, size int, buf []byte, eager int, grow func(int) error) ([]byte, error) {
	switch {
	case size <= cap(buf):
		buf = buf[:size]
	case size <= eager:
		buf = make([]byte, size, min(eager, 1<<bits.Len(uint(size-1))))
	default:
		n := growTo(0, size)
		if grow != nil {
			if err := grow(n); err != nil {
				return nil, err
			}
		}
		buf = make([]byte, n)
	}
	if _, err := io.ReadFull(r, buf); err != nil {
		return nil, err
	}
	for len(buf) < size {
		next := growTo(len(buf), size)
		if grow != nil {
			if err := grow(next - len(buf)); err != nil {
				return nil, err
			}
		}
		grown := make([]byte, next)
		copy(grown, buf)
		if _, err := io.ReadFull(r, grown[len(buf):]); err != nil {
			return nil, err
		}
		buf = grown
	}
	return buf, nil
}

// Header is a decoded request header.
type Header struct {
	Key           int16
	Version       int16
	CorrelationID int32
	ClientID      string
}

// ErrMalformed is returned for a frame that does not decode as what it
// claims to be.
var ErrMalformed = errors.New("malformed request")

// ParseRequest decodes a frame into its header and, when supported
// reports the key and version served, its request. An unsupported key or
// version returns a nil request with a nil error: the caller answers
// UNSUPPORTED_VERSION.
func ParseRequest(frame []byte, supported func(key int16) (lo, hi int16, ok bool)) (Header, kmsg.Request, error) {
	var h Header
	if len(frame) < 8 {
		return h, nil, fmt.Errorf("%w: %d-byte frame is shorter than a request header", ErrMalformed, len(frame))
	}
	r := kbin.Reader{Src: frame}
	h.Key = r.Int16()
	h.Version = r.Int16()
	h.CorrelationID = r.Int32()
	lo, hi, ok := supported(h.Key)
	if !ok || h.Version < lo || h.Version > hi {
		return h, nil, nil
	}
	if id := r.NullableString(); id != nil {
		h.ClientID = *id
	}
	req := kmsg.RequestForKey(h.Key)
	if req == nil {
		return h, nil, nil
	}
	req.SetVersion(h.Version)
	if req.IsFlexible() {
		kmsg.SkipTags(&r)
	}
	if err := r.Complete(); err != nil {
		return h, nil, fmt.Errorf("%w: header: %v", ErrMalformed, err)
	}
	// kmsg checks each array length against the minimum encoded size of its
	// elements before allocating them, so a hostile count cannot make it
	// allocate much more than the frame (TestHostileArrayLength...).
	if err := req.ReadFrom(r.Src); err != nil {
		return h, nil, fmt.Errorf("%w: %s v%d: %v", ErrMalformed, kmsg.NameForKey(h.Key), h.Version, err)
	}
	return h, req, nil
}

// AppendResponse encodes a response frame: size, correlation id, the
// response header's tag section (flexible responses other than
// ApiVersions), then the body.
func AppendResponse(dst []byte, corr int32, resp kmsg.Response) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(corr))
	if resp.IsFlexible() && resp.Key() != 18 {
		dst = append(dst, 0)
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}

// AppendUnsupported encodes the answer to a request whose key or version we
// do not serve: a body holding only UNSUPPORTED_VERSION. The connection is
// closed after it, as Kafka does, since the client cannot parse a body of
// an unknown shape anyway.
func AppendUnsupported(dst []byte, corr int32) []byte {
	dst = binary.BigEndian.AppendUint32(dst, 6)
	dst = binary.BigEndian.AppendUint32(dst, uint32(corr))
	return binary.BigEndian.AppendUint16(dst, uint16(35))
}

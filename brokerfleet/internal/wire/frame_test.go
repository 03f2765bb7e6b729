package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestReadFrameSizes reads frames below, at and across the growth steps
// back intact, and fails cleanly on truncated, negative and oversized
// ones.
func TestReadFrameSizes(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, frameChunk - 1, frameChunk, frameChunk + 1, 8*frameChunk + 3, 70 * frameChunk} {
		body := make([]byte, n)
		for i := range body {
			body[i] = byte(rng.IntN(256))
		}
		frame := binary.BigEndian.AppendUint32(nil, uint32(n))
		frame = append(frame, body...)
		got, err := ReadFrame(bytes.NewReader(frame), 100<<20)
		require.NoError(t, err, n)
		require.True(t, bytes.Equal(body, got), "frame of %d bytes read back differently", n)

		if n > 0 {
			_, err = ReadFrame(bytes.NewReader(frame[:len(frame)-1]), 100<<20)
			require.True(t, errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF), "truncated frame of %d: %v", n, err)
		}
	}
	_, err := ReadFrame(bytes.NewReader([]byte{0xff, 0xff, 0xff, 0xff}), 100<<20)
	require.ErrorIs(t, err, ErrFrameTooLarge)
	_, err = ReadFrame(bytes.NewReader(binary.BigEndian.AppendUint32(nil, 200<<20)), 100<<20)
	require.ErrorIs(t, err, ErrFrameTooLarge)
}

// TestReadFrameIntoReuses: a frame that fits the buffer given is read into
// it; an eager one that does not gets one buffer, its size rounded up to
// a power of two (at most eager), that the next slightly larger frame
// reuses.
func TestReadFrameIntoReuses(t *testing.T) {
	frame := func(n int) []byte {
		f := binary.BigEndian.AppendUint32(nil, uint32(n))
		return append(f, bytes.Repeat([]byte{7}, n)...)
	}
	buf := make([]byte, 0, 4<<20)
	got, err := ReadFrameInto(bytes.NewReader(frame(3<<20)), 1<<30, buf, 64<<20)
	require.NoError(t, err)
	require.Len(t, got, 3<<20)
	require.Same(t, &buf[:1][0], &got[0], "a frame that fits was not read into the buffer given")

	got, err = ReadFrameInto(bytes.NewReader(frame(10<<20)), 1<<30, buf, 64<<20)
	require.NoError(t, err)
	require.Len(t, got, 10<<20)
	require.Equal(t, 16<<20, cap(got), "an eager frame grew instead of being allocated once, rounded up")
	require.Equal(t, byte(7), got[len(got)-1])

	again, err := ReadFrameInto(bytes.NewReader(frame(12<<20)), 1<<30, got[:0], 64<<20)
	require.NoError(t, err)
	require.Len(t, again, 12<<20)
	require.Same(t, &got[0], &again[0], "a slightly larger frame was not read into the rounded-up buffer")

	got, err = ReadFrameInto(bytes.NewReader(frame(40<<20)), 1<<30, nil, 48<<20)
	require.NoError(t, err)
	require.Equal(t, 48<<20, cap(got), "the rounding stops at eager")
}

// FuzzReadFrame: any byte stream yields frames no larger than the cap, or
// an error; never a panic, and never a buffer much larger than the input.
func FuzzReadFrame(f *testing.F) {
	f.Add([]byte{0, 0, 0, 4, 1, 2, 3, 4})
	f.Add([]byte{0x7f, 0xff, 0xff, 0xff, 1})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0, 0x10, 0, 0, 1, 2, 3})
	f.Fuzz(func(t *testing.T, in []byte) {
		r := bytes.NewReader(in)
		for {
			fr, err := ReadFrame(r, 1<<20)
			if err != nil {
				return
			}
			if len(fr) > len(in) {
				t.Fatalf("frame of %d bytes from %d bytes of input", len(fr), len(in))
			}
		}
	})
}

// TestReadBodyGrowsAsBytesArrive: the steps ReadBody announces add up to
// the frame's size, and none is announced for bytes the peer never sent
// beyond the first chunk and one eightfold step.
func TestReadBodyGrowsAsBytesArrive(t *testing.T) {
	var steps []int
	grow := func(n int) error { steps = append(steps, n); return nil }
	body := bytes.Repeat([]byte{1}, 5<<20)
	got, err := ReadBody(bytes.NewReader(body), len(body), grow)
	require.NoError(t, err)
	require.Equal(t, body, got)
	sum := 0
	for _, n := range steps {
		sum += n
	}
	require.Equal(t, len(body), sum)
	require.Equal(t, frameChunk, steps[0])

	steps = nil
	_, err = ReadBody(bytes.NewReader(body[:100]), 100<<20, grow)
	require.Error(t, err)
	require.Equal(t, []int{frameChunk}, steps, "a 100 MiB prefix with 100 bytes sent")

	stop := errors.New("no budget")
	_, err = ReadBody(bytes.NewReader(body), len(body), func(n int) error {
		if n > frameChunk {
			return stop
		}
		return nil
	})
	require.ErrorIs(t, err, stop)
}

// TestReadBodyIntoSteps: ReadBodyInto announces exactly ReadBody's steps,
// fills the caller's buffer in place, and refuses one too small.
func TestReadBodyIntoSteps(t *testing.T) {
	body := make([]byte, 5<<20+123)
	for i := range body {
		body[i] = byte(i * 7)
	}
	var want, got []int
	_, err := ReadBody(bytes.NewReader(body), len(body), func(n int) error { want = append(want, n); return nil })
	require.NoError(t, err)
	buf := make([]byte, 8<<20)
	out, err := ReadBodyInto(bytes.NewReader(body), len(body), buf, func(n int) error { got = append(got, n); return nil })
	require.NoError(t, err)
	require.Equal(t, want, got)
	require.Equal(t, body, out)
	require.Same(t, &buf[0], &out[0], "read in place")

	got = nil
	_, err = ReadBodyInto(bytes.NewReader(body[:100]), 100<<20, make([]byte, 128<<20), func(n int) error { got = append(got, n); return nil })
	require.Error(t, err)
	require.Equal(t, []int{frameChunk}, got, "a 100 MiB prefix with 100 bytes sent")

	_, err = ReadBodyInto(bytes.NewReader(body), len(body), make([]byte, 1<<20), nil)
	require.Error(t, err, "a buffer smaller than the frame")
}

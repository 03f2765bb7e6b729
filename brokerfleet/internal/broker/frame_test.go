package broker

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
		got, err := readFrame(bytes.NewReader(frame), 100<<20)
		require.NoError(t, err, n)
		require.True(t, bytes.Equal(body, got), "frame of %d bytes read back differently", n)

		if n > 0 {
			_, err = readFrame(bytes.NewReader(frame[:len(frame)-1]), 100<<20)
			require.True(t, errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF), "truncated frame of %d: %v", n, err)
		}
	}
	_, err := readFrame(bytes.NewReader([]byte{0xff, 0xff, 0xff, 0xff}), 100<<20)
	require.ErrorIs(t, err, errFrameTooLarge)
	_, err = readFrame(bytes.NewReader(binary.BigEndian.AppendUint32(nil, 200<<20)), 100<<20)
	require.ErrorIs(t, err, errFrameTooLarge)
}

//go:build unix

package segment

import (
	"math/rand/v2"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestSpanHoldsItsFile: a span's descriptor stays open while the span
// is, through retention and the log's Close, and closes with the last of
// the span and the segment to let go; no descriptor is taken per span.
func TestSpanHoldsItsFile(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 2))
	l, bs := spanLog(t, rng)
	want, err := l.Read(nil, 0, 1<<20, 1<<40)
	require.NoError(t, err)
	_, a, err := l.ReadSpan(nil, 0, 1<<20, 1<<40, 1)
	require.NoError(t, err)
	require.NotNil(t, a)
	_, b, err := l.ReadSpan(nil, 0, 1<<20, 1<<40, 1)
	require.NoError(t, err)
	require.NotNil(t, b)
	f := a.file
	require.Same(t, f, b.file, "spans of one segment share its file")
	require.Equal(t, a.FD(), b.FD())
	require.EqualValues(t, 3, f.refs.Load(), "the segment's reference and one per span")

	require.NoError(t, a.Close())
	require.ErrorIs(t, a.Close(), os.ErrClosed)
	require.EqualValues(t, 2, f.refs.Load(), "a second Close gives up nothing")

	require.NoError(t, l.DeleteTo(bs[len(bs)-1].base)) // removes the span's segment
	require.NoError(t, l.Close())
	require.EqualValues(t, 1, f.refs.Load(), "the span holds the file open")
	got := make([]byte, b.Len)
	n, err := unix.Pread(b.FD(), got, b.Pos)
	require.NoError(t, err)
	require.Equal(t, int(b.Len), n)
	require.Equal(t, want[:b.Len], got, "the descriptor still reads the removed segment")

	require.NoError(t, b.Close())
	require.EqualValues(t, 0, f.refs.Load())
	_, err = f.Stat()
	require.ErrorIs(t, err, os.ErrClosed, "the file closes with the last reference")
	require.ErrorIs(t, f.Close(), os.ErrClosed)
}

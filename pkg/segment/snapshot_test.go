package segment

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSnapshots(t *testing.T) {
	m := NewMemFS()
	o := Options{FS: m, Dir: "d", SegmentBytes: 1 << 20, IndexIntervalBytes: 300}
	l := openLog(t, o)
	for i := range int64(30) {
		require.NoError(t, l.Append(makeBatch(i, 1, 1000, 1000, 10)))
	}
	_, _, ok, err := l.LatestSnapshot(1 << 62)
	require.NoError(t, err)
	require.False(t, ok, "none yet")

	require.ErrorIs(t, l.WriteSnapshot(31, []byte("x")), ErrOffsetOutOfRange, "past the log end")
	require.ErrorIs(t, l.WriteSnapshot(-1, []byte("x")), ErrOffsetOutOfRange)
	for _, off := range []int64{5, 10, 20, 30} {
		require.NoError(t, l.WriteSnapshot(off, []byte{byte(off)}))
	}
	off, data, ok, err := l.LatestSnapshot(1 << 62)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int64(30), off)
	require.Equal(t, []byte{30}, data)
	off, _, ok, err = l.LatestSnapshot(25)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int64(20), off, "the newest at or below upTo")
	_, _, ok, err = l.LatestSnapshot(15)
	require.NoError(t, err)
	require.False(t, ok, "only the newest two are kept")

	// A torn newest file: the older one is read.
	require.NoError(t, writeFileAtomic(m, l.snapshotPath(30), []byte("STSN\x01garbage")))
	off, _, ok, err = l.LatestSnapshot(1 << 62)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int64(20), off)

	// Survives a reopen; the cut removes what lies past it.
	require.NoError(t, l.Close())
	l = openLog(t, o)
	off, _, ok, err = l.LatestSnapshot(1 << 62)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, int64(20), off)
	require.NoError(t, l.TruncateTo(20))
	off, _, ok, _ = l.LatestSnapshot(1 << 62)
	require.True(t, ok)
	require.Equal(t, int64(20), off, "a snapshot at the cut describes what is kept")
	require.NoError(t, l.TruncateTo(19))
	_, _, ok, _ = l.LatestSnapshot(1 << 62)
	require.False(t, ok)

	require.NoError(t, l.WriteSnapshot(19, []byte("y")))
	require.NoError(t, l.ResetTo(100))
	_, _, ok, _ = l.LatestSnapshot(1 << 62)
	require.False(t, ok, "a reset removes every snapshot")
	require.NoError(t, l.Close())
}

func TestDecodeSnapshotRejectsDamage(t *testing.T) {
	good := encodeSnapshot(42, []byte("state"))
	off, data, err := decodeSnapshot(good)
	require.NoError(t, err)
	require.Equal(t, int64(42), off)
	require.Equal(t, []byte("state"), data)
	for i := range good {
		bad := append([]byte(nil), good...)
		bad[i] ^= 0x40
		_, _, err := decodeSnapshot(bad)
		require.Error(t, err, "byte %d flipped", i)
		_, _, err = decodeSnapshot(good[:i])
		require.Error(t, err, "cut to %d bytes", i)
	}
}

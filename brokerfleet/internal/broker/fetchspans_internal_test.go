package broker

import (
	"encoding/binary"
	"net"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratamq/strata/pkg/segment"
)

// framedBatch is a batch with valid framing (the log checks no more) of
// n records and size bytes, at base.
func framedBatch(base int64, n, size int) []byte {
	b := make([]byte, size)
	be := binary.BigEndian
	be.PutUint64(b[0:], uint64(base))
	be.PutUint32(b[8:], uint32(size-12))
	b[16] = 2 // magic
	be.PutUint32(b[23:], uint32(n-1))
	be.PutUint64(b[43:], ^uint64(0)) // no producer
	be.PutUint32(b[57:], uint32(n))
	for i := segment.HeaderSize; i < size; i++ {
		b[i] = byte(i)
	}
	return b
}

// TestSendSpanCutShort: a span whose file a truncation (a follower
// cutting its log back) shortened under it is an error, so the writer
// closes the connection instead of sending a frame shorter than its
// size; an intact span arrives byte for byte.
func TestSendSpanCutShort(t *testing.T) {
	if hole == nil {
		t.Skip("no sendfile on this platform")
	}
	l, err := segment.Open(segment.Options{FS: segment.OS(), Dir: t.TempDir()})
	require.NoError(t, err)
	defer l.Close()
	var want []byte
	for i := range 8 {
		bt := framedBatch(int64(i*10), 10, 100<<10)
		want = append(want, bt...)
		require.NoError(t, l.Append(bt))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	got := make(chan []byte, 2)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				var all []byte
				buf := make([]byte, 64<<10)
				for {
					n, err := c.Read(buf)
					all = append(all, buf[:n]...)
					if err != nil {
						got <- all
						return
					}
				}
			}()
		}
	}()
	send := func(sp *segment.Span) error {
		c, err := net.Dial("tcp", ln.Addr().String())
		require.NoError(t, err)
		defer c.Close()
		require.True(t, zeroCopyConn(c))
		return sendSpan(c, sp)
	}

	_, sp, err := l.ReadSpan(nil, 0, 1<<30, 1<<40, spanMinBytes)
	require.NoError(t, err)
	require.NotNil(t, sp)
	require.NoError(t, send(sp))
	require.Equal(t, want, <-got)
	require.Equal(t, 80, sp.Records)
	require.NoError(t, sp.Close())

	_, sp, err = l.ReadSpan(nil, 0, 1<<30, 1<<40, spanMinBytes)
	require.NoError(t, err)
	require.NoError(t, l.TruncateTo(30)) // the file now ends inside the span
	require.ErrorIs(t, send(sp), errSpanCut)
	require.Len(t, <-got, 3*100<<10, "what was there was sent")
	require.NoError(t, sp.Close())
}

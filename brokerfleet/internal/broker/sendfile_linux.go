package broker

import (
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	"github.com/stratamq/strata/pkg/segment"
	"golang.org/x/sys/unix"
)

// zeroCopyConn reports whether record sets can go to nc straight from
// their segment files (a plain TCP socket: TLS encrypts in user space).
func zeroCopyConn(nc net.Conn) bool {
	_, ok := nc.(*net.TCPConn)
	return ok
}

// holeBytes is the size of the read-only, never-written mapping whose
// slices stand in for record sets left in their files (fetchspans.go): a
// span's placeholder has its length, so what counts bytes (the fetch
// budget, quotas, metrics, the session) counts it right, and the pages
// are the kernel's shared zero page, so it costs no memory.
const holeBytes = maxSpanBytes + maxSpans

var hole = func() []byte {
	b, err := unix.Mmap(-1, 0, holeBytes, unix.PROT_READ, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil // no spans: every record set is read
	}
	return b
}()

// cork holds back partial segments on w (TCP_CORK) while a frame with
// spans is written in pieces, so the peer gets it in full segments and
// wakes once per segment, not once per piece; the returned func lets the
// rest go.
func cork(w io.Writer) func() {
	sc, ok := w.(syscall.Conn)
	if !ok {
		return func() {}
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return func() {}
	}
	set := func(v int) {
		_ = rc.Control(func(fd uintptr) { _ = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_CORK, v) })
	}
	set(1)
	return func() { set(0) }
}

// errSpanCut is a span whose file was truncated under it.
var errSpanCut = errors.New("record set shortened in its segment file while being sent")

// sendSpan writes sp to w (a socket) with sendfile(2), from the span's
// descriptor (its segment's, held open by the span) at the span's
// position (the file's offset is not used), waiting for the socket like
// any write (and its deadline).
func sendSpan(w io.Writer, sp *segment.Span) error {
	sc, ok := w.(syscall.Conn)
	if !ok {
		return fmt.Errorf("sendfile: %T has no descriptor", w)
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	off, remain := sp.Pos, sp.Len
	var serr error
	err = rc.Write(func(fd uintptr) bool {
		for remain > 0 {
			n, err := unix.Sendfile(int(fd), sp.FD(), &off, int(min(remain, 1<<30)))
			if n > 0 {
				remain -= int64(n)
			}
			switch {
			case errors.Is(err, unix.EAGAIN):
				return false // wait until the socket takes more
			case errors.Is(err, unix.EINTR):
				continue
			case err != nil:
				serr = fmt.Errorf("sendfile: %w", err)
				return true
			case n == 0:
				serr = errSpanCut
				return true
			}
		}
		return true
	})
	if err != nil {
		return err
	}
	return serr
}

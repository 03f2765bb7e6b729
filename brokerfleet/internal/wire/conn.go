package wire

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DialFunc opens a connection to addr.
type DialFunc func(ctx context.Context, addr string) (net.Conn, error)

// TCP is the plain TCP DialFunc.
func TCP(ctx context.Context, addr string) (net.Conn, error) {
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

// Conn is a plain Kafka client connection to another broker, one request
// at a time: no client library retries or metadata of its own get between
// a follower and its leader. It is not safe for concurrent use, except
// Close, which aborts a request in flight.
type Conn struct {
	c     net.Conn
	br    *bufio.Reader
	corr  int32
	f     *kmsg.RequestFormatter
	eager int
	buf   []byte
	resp  []byte // the last response frame (up to 8 MiB), reused by the next Do
}

// maxResponse caps a response frame a Conn accepts.
const maxResponse = 1 << 30

// NewConn wraps an open connection. Responses of up to eager bytes are
// read into one buffer of their size (the peer is trusted with them: it is
// a broker answering this one's own request); readBuf sizes the read
// buffer.
func NewConn(c net.Conn, clientID string, eager, readBuf int) *Conn {
	return &Conn{
		c:     c,
		br:    bufio.NewReaderSize(c, readBuf),
		f:     kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID)),
		eager: eager,
	}
}

// Dial connects to addr with dial (nil: TCP) and wraps the connection as
// NewConn does.
func Dial(ctx context.Context, dial DialFunc, addr, clientID string, eager int) (*Conn, error) {
	if dial == nil {
		dial = TCP
	}
	c, err := dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	return NewConn(c, clientID, eager, 256<<10), nil
}

// Do sends req and returns its response, within timeout. The response's
// byte fields (record sets) alias a buffer the next Do reuses: use them
// before calling Do again.
func (pc *Conn) Do(req kmsg.Request, timeout time.Duration) (kmsg.Response, error) {
	pc.corr++
	// Socket deadlines are the kernel's, on the real clock.
	if err := pc.c.SetDeadline(time.Now().Add(timeout)); err != nil {
		return nil, err
	}
	pc.buf = pc.f.AppendRequest(pc.buf[:0], req, pc.corr)
	if _, err := pc.c.Write(pc.buf); err != nil {
		return nil, err
	}
	frame, err := ReadFrameInto(pc.br, maxResponse, pc.resp, pc.eager)
	if err != nil {
		return nil, err
	}
	if cap(frame) <= 8<<20 {
		pc.resp = frame[:0] // kept for the next response; a larger one is not pinned
	}
	if len(frame) < 4 || int32(binary.BigEndian.Uint32(frame)) != pc.corr {
		return nil, fmt.Errorf("%w: response out of order", ErrMalformed)
	}
	body := frame[4:]
	if req.IsFlexible() && req.Key() != 18 {
		r := kbin.Reader{Src: body}
		kmsg.SkipTags(&r)
		if err := r.Complete(); err != nil {
			return nil, fmt.Errorf("%w: response header", ErrMalformed)
		}
		body = r.Src
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("%w: %s response: %v", ErrMalformed, kmsg.NameForKey(req.Key()), err)
	}
	return resp, nil
}

// Close closes the connection, aborting a request in flight.
func (pc *Conn) Close() error { return pc.c.Close() }

// SetDeadline sets the underlying connection's deadline.
func (pc *Conn) SetDeadline(t time.Time) error { return pc.c.SetDeadline(t) }

package broker

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

// peerConn is a plain Kafka connection to another broker, one request at a
// time, for replication: no client library retries or metadata of its own
// get between a follower and its leader.
type peerConn struct {
	c    net.Conn
	br   *bufio.Reader
	corr int32
	f    *kmsg.RequestFormatter
	buf  []byte
	resp []byte // the last response frame (up to 8 MiB), reused by the next do
}

func dialPeer(ctx context.Context, dial func(context.Context, string) (net.Conn, error), addr string, self int32) (*peerConn, error) {
	if dial == nil {
		var d net.Dialer
		dial = func(ctx context.Context, addr string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) }
	}
	c, err := dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	return &peerConn{
		c:  c,
		br: bufio.NewReaderSize(c, 256<<10),
		f:  kmsg.NewRequestFormatter(kmsg.FormatterClientID(fmt.Sprintf("strata-replica-%d", self))),
	}, nil
}

// do sends req and returns its response, within timeout. The response's
// byte fields (record sets) alias a buffer the next do reuses: use them
// before calling do again.
func (pc *peerConn) do(req kmsg.Request, timeout time.Duration) (kmsg.Response, error) {
	pc.corr++
	if err := pc.c.SetDeadline(time.Now().Add(timeout)); err != nil {
		return nil, err
	}
	pc.buf = pc.f.AppendRequest(pc.buf[:0], req, pc.corr)
	if _, err := pc.c.Write(pc.buf); err != nil {
		return nil, err
	}
	frame, err := readFrameInto(pc.br, 1<<30, pc.resp, 2*replicaFetchMaxBytes)
	if err != nil {
		return nil, err
	}
	if cap(frame) <= 8<<20 {
		pc.resp = frame[:0] // kept for the next response; a larger one is not pinned
	}
	if len(frame) < 4 || int32(binary.BigEndian.Uint32(frame)) != pc.corr {
		return nil, fmt.Errorf("%w: response out of order", errMalformed)
	}
	body := frame[4:]
	if req.IsFlexible() && req.Key() != 18 {
		r := kbin.Reader{Src: body}
		kmsg.SkipTags(&r)
		if err := r.Complete(); err != nil {
			return nil, fmt.Errorf("%w: response header", errMalformed)
		}
		body = r.Src
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("%w: %s response: %v", errMalformed, kmsg.NameForKey(req.Key()), err)
	}
	return resp, nil
}

func (pc *peerConn) close() { pc.c.Close() }

package broker

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stratamq/strata/brokerfleet/internal/security"
	"github.com/stratamq/strata/brokerfleet/internal/wire"
	"github.com/stratamq/strata/pkg/clock"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// pendingDepth bounds the requests decoded ahead of their responses on one
// connection (their bytes are bounded too: at most MaxRequestBytes per
// connection); a full queue stops the reader, pushing back on the client.
const pendingDepth = 32

// pending is a response slot, written in request order.
type pending struct {
	corr int32
	resp kmsg.Response        // ready response, or
	wait func() kmsg.Response // run by the writer, in order, to produce it
	raw  []byte               // a pre-encoded frame (unsupported version)
	last bool                 // close the connection after this one

	key   int16        // the request's API key, for metrics
	req   kmsg.Request // the request (nil if it could not be parsed)
	start time.Time    // when its frame was read

	throttle time.Duration // client quota throttle owed when it was served
	clientID string        // the request's client id and user, for quotas
	user     string        // (cc's may change while the writer runs)
	held     reservation   // the request's bytes, until the writer is done with it
}

// clientConn is what handlers know about the connection.
type clientConn struct {
	ctx      context.Context // cancelled when the connection or broker closes
	clientID string
	remote   string
	sec      *security.Session // nil when security is off
	muted    muter             // reads wait out client quota throttles
	zeroCopy bool              // record sets may go with sendfile (fetchspans.go)
}

// Buffers of idle connections go back to pools: a connection holds a read
// buffer only while bytes are buffered, and a write buffer only while
// responses are being written, so 10,000 idle connections cost their
// goroutines, sockets and 512 bytes each, not 128 KiB. (Frames larger
// than the read buffer are read past it, straight into their own.)
var (
	readBufs  = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 16<<10) }}
	writeBufs = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 64<<10) }}
	frameBufs = sync.Pool{New: func() any { return new([]byte) }}
)

// errIdle closes a connection idle for connections.max.idle.ms.
var errIdle = errors.New("idle for connections.max.idle.ms")

func (b *Broker) serveConn(nc net.Conn) {
	var sec *security.Session
	if b.secured {
		nc, sec = b.cfg.Security.Accept(nc)
	}
	ctx, cancel := context.WithCancel(b.ctx)
	cc := &clientConn{ctx: ctx, remote: nc.RemoteAddr().String(), sec: sec, zeroCopy: !b.cfg.NoSendfile && zeroCopyConn(nc)}
	queue := make(chan *pending, pendingDepth)
	var inflight atomic.Int32 // requests read and not yet answered
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		b.writeResponses(nc, cc, queue, cancel, &inflight)
	}()
	closing := false // the broker decided to close after answering
	defer func() {
		if !closing {
			// The client went away (or sent something that closes the
			// connection): what is parked for it (a Fetch long poll,
			// acks=all, a rebalance) ends now, not at its timeout.
			cancel()
		}
		close(queue)
		<-writerDone
		cancel()
		nc.Close()
	}()

	if sec != nil && !sec.Start(ctx, nc, b.log) {
		return
	}
	fr := &frameReader{nc: nc, idle: b.cfg.ConnectionsMaxIdle, busy: func() bool { return inflight.Load() > 0 }, cancel: cancel}
	defer fr.release()
	connBudget := newByteBudget(int64(b.cfg.MaxRequestBytes))
	push := func(p *pending) bool {
		inflight.Add(1)
		select {
		case queue <- p:
			return true
		default:
		}
		// A full queue: wait for the writer, watching for the client
		// going away meanwhile.
		err := fr.watch(func() error {
			select {
			case queue <- p:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		if err != nil {
			inflight.Add(-1)
			p.held.release()
			return false
		}
		return true
	}
	for {
		frame, held, err := fr.next(ctx, cc.sec.FrameLimit(b.cfg.MaxRequestBytes), connBudget, b.budget)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) && ctx.Err() == nil {
				b.log.Debug("closing connection", "remote", cc.remote, "err", err)
			}
			return
		}
		// A client owing a quota throttle is served nothing (and, while
		// this waits, nothing more is read) until it has passed.
		if !cc.muted.wait(ctx, b) {
			return
		}
		start := b.clock.Now()
		if cc.sec.RawTokens() {
			p := rawSASLToken(b, cc, frame, start)
			held.releasePeer()
			p.held = held
			if !push(&p) {
				return
			}
			if p.last {
				closing = true
				return
			}
			continue
		}
		hdr, req, err := wire.ParseRequest(frame, supportedVersions)
		if err != nil {
			held.release()
			b.log.Debug("closing connection on malformed request", "remote", cc.remote, "err", err)
			return
		}
		cc.clientID = hdr.ClientID
		p := &pending{corr: hdr.CorrelationID, key: hdr.Key, req: req, start: start, held: held, clientID: hdr.ClientID, user: quotaUser(cc)}
		b.metrics.Received(hdr.Key)
		switch {
		case req == nil && hdr.Key == 18:
			p.held.releasePeer()
			// KIP-511: answer an ApiVersions we cannot parse with v0,
			// UNSUPPORTED_VERSION and our ranges, so the client retries.
			resp := kmsg.NewPtrApiVersionsResponse()
			resp.ErrorCode = 35
			resp.ApiKeys = apiVersions()
			p.resp = resp
		case req == nil:
			p.held.releasePeer()
			p.raw = wire.AppendUnsupported(nil, hdr.CorrelationID)
			p.last = true
		default:
			answered := b.dispatch(cc, req, p)
			p.throttle = chargeRequest(b, p.user, p.clientID, req, len(frame), clock.Since(b.clock, start))
			p.held.releasePeer() // handled: what waits is the connection's share
			if !answered || hdr.Key == 0 {
				// Produce appended its batches (or refused them) and
				// keeps none of the frame while acks=all waits.
				p.held.release()
				putProduceFrame(req, frame)
			}
			if !answered {
				b.metrics.Responded(p.key, req, nil, clock.Since(b.clock, start))
				cc.muted.mute(b.clock.Now().Add(p.throttle))
				continue // acks=0 produce: no response
			}
		}
		if !push(p) {
			return
		}
		if p.last {
			closing = true
			return
		}
	}
}

// dispatch serves req through its route, filling p: the authentication
// gate (only public routes before SASL completes), the route's resolve
// step (ids to names), its ACL rule
// when ACLs are on, its handler, then the rewrite of broker addresses for
// the listener the client came in on. It returns false when the request
// gets no response.
func (b *Broker) dispatch(cc *clientConn, req kmsg.Request, p *pending) bool {
	r := routes[req.Key()]
	switch {
	case !r.servable():
		// Fail closed: a key without a handler or rule is not served
		// (parsing already refuses keys that are not advertised).
		p.raw, p.last = wire.AppendUnsupported(nil, p.corr), true
		return true
	case !r.public && !cc.sec.Authenticated():
		b.log.Debug("closing unauthenticated connection", "remote", cc.remote, "request", kmsg.NameForKey(req.Key()))
		closeSilently(p)
		return true
	}
	var resolved, fix func(kmsg.Response)
	if r.resolve != nil {
		resolved = r.resolve(b, req)
	}
	if b.authz != nil && !r.public {
		deny, f := r.authorize(access{b, cc}, req)
		if deny != nil {
			p.resp = deny
			amend(p, resolved)
			b.rewriteEndpoints(cc, p)
			return true
		}
		fix = f
	}
	if !r.serve(b, cc, req, p) {
		return false
	}
	amend(p, fix)
	amend(p, resolved)
	b.rewriteEndpoints(cc, p)
	return true
}

// amend applies fix to p's response, now or once the writer produced it.
func amend(p *pending, fix func(kmsg.Response)) {
	switch {
	case fix == nil:
	case p.resp != nil:
		fix(p.resp)
	case p.wait != nil:
		wait := p.wait
		p.wait = func() kmsg.Response {
			r := wait()
			if r != nil {
				fix(r)
			}
			return r
		}
	}
}

// frameReader reads a connection's request frames. Its read buffer comes
// from a pool while bytes are buffered, and each frame's bytes are taken
// from the connection's and the broker's budgets before they are read.
type frameReader struct {
	nc     net.Conn
	br     *bufio.Reader // nil while nothing is buffered
	small  [512]byte     // what an idle connection reads into
	idle   time.Duration // connections.max.idle.ms; 0: none
	busy   func() bool   // requests are being answered: not idle
	cancel func()        // the connection's: called when the client goes away
}

// next reads the next frame (at most limit bytes) with its reservation.
func (r *frameReader) next(ctx context.Context, limit int32, conn, peer *byteBudget) ([]byte, reservation, error) {
	var sz [4]byte
	if r.br != nil && r.br.Buffered() == 0 {
		r.release()
	}
	r.arm()
	if r.br == nil {
		// Idle: wait for the next bytes, at least a size prefix, with only
		// the connection's small buffer; then take a read buffer for them
		// and what follows.
		have := 0
		for have < len(sz) {
			n, err := r.nc.Read(r.small[have:])
			have += n
			switch {
			case err == nil:
			case have == 0 && errors.Is(err, os.ErrDeadlineExceeded) && r.busy():
				r.arm() // answering what it asked: not idle
			case have == 0 && errors.Is(err, os.ErrDeadlineExceeded):
				return nil, reservation{}, errIdle
			default:
				return nil, reservation{}, err
			}
		}
		r.br = readBufs.Get().(*bufio.Reader)
		r.br.Reset(io.MultiReader(bytes.NewReader(r.small[:have]), r.nc))
	}
	if _, err := io.ReadFull(r.br, sz[:]); err != nil {
		return nil, reservation{}, err
	}
	size, err := wire.CheckSize(sz, limit)
	if err != nil {
		return nil, reservation{}, err
	}
	// Back-pressure: the connection's share first (its pipelined requests
	// together hold at most max-request-bytes: it waits for its own
	// answers), then the broker's, step by step as the frame's buffer
	// grows with the bytes that arrive, so a size prefix alone holds at
	// most the first 64 KiB (and only for frameTimeout).
	held := reservation{conn: conn, peer: peer}
	n := int64(size)
	if !conn.try(n, true) {
		if err := r.watch(func() error { return conn.acquire(ctx, n, true) }); err != nil {
			return nil, reservation{}, err
		}
	}
	held.connN = n
	first := true
	grow := func(step int) error {
		d := int64(step)
		if !peer.try(d, false) {
			var err error
			if first {
				// Nothing of the frame is held yet: wait as long as it
				// takes, watching for the client going away.
				err = r.watch(func() error { return peer.acquire(ctx, d, false) })
			} else {
				// Part of the frame is held: waiting for more must not
				// hold it forever (the others may be waiting too).
				wctx, cancel := context.WithTimeout(ctx, frameTimeout)
				err = peer.acquire(wctx, d, false)
				cancel()
			}
			if err != nil {
				return fmt.Errorf("queued.max.request.bytes: %w", err)
			}
		}
		first = false
		held.peerN += d
		r.armFrame()
		return nil
	}
	var frame []byte
	if pooledSize(size) && r.isProduce() {
		frame, err = wire.ReadBodyInto(r.br, size, getFrame(size), grow) // framepool.go
	} else {
		frame, err = wire.ReadBody(r.br, size, grow)
	}
	if err != nil {
		held.release()
		return nil, reservation{}, err
	}
	return frame, held, nil
}

// isProduce reports whether the frame about to be read is a Produce
// request (key 0), from its first two bytes: their wait is bounded like
// the rest of the frame's.
func (r *frameReader) isProduce() bool {
	r.armFrame()
	key, err := r.br.Peek(2)
	return err == nil && key[0] == 0 && key[1] == 0
}

// frameTimeout bounds the wait for each step of a frame's body (its
// first 64 KiB, then each eightfold growth) once its size prefix arrived.
const frameTimeout = 30 * time.Second

// armFrame sets the read deadline of a frame's next bytes.
func (r *frameReader) armFrame() {
	_ = r.nc.SetReadDeadline(time.Now().Add(frameTimeout)) // socket deadlines are the kernel's
}

// arm sets the read deadline of the idle timeout (none without one).
func (r *frameReader) arm() {
	var at time.Time
	if r.idle > 0 {
		at = time.Now().Add(r.idle) // socket deadlines are the kernel's
	}
	_ = r.nc.SetReadDeadline(at)
}

// buf returns the read buffer, taking one from the pool.
func (r *frameReader) buf() *bufio.Reader {
	if r.br == nil {
		r.br = readBufs.Get().(*bufio.Reader)
		r.br.Reset(r.nc)
	}
	return r.br
}

// release returns the read buffer to the pool.
func (r *frameReader) release() {
	if r.br != nil {
		r.br.Reset(nil)
		readBufs.Put(r.br)
		r.br = nil
	}
}

// watch runs block, which waits for something other than the socket
// (room in the response queue, budget), while reading ahead from the
// socket: a client that goes away meanwhile is noticed at once (the
// connection is cancelled, which ends block and what the writer waits
// on) rather than when its parked requests time out.
func (r *frameReader) watch(block func() error) error {
	done := make(chan error, 1)
	br := r.buf()
	_ = r.nc.SetReadDeadline(time.Time{})
	go func() {
		_, err := br.Peek(1)
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			r.cancel()
		}
		done <- err
	}()
	err := block()
	_ = r.nc.SetReadDeadline(time.Unix(1, 0)) // interrupt the peek
	perr := <-done
	_ = r.nc.SetReadDeadline(time.Time{})
	if err == nil && perr != nil && !errors.Is(perr, os.ErrDeadlineExceeded) {
		err = perr
	}
	return err
}

// writeResponses encodes responses in request order. It batches writes
// while more responses are ready.
func (b *Broker) writeResponses(nc net.Conn, cc *clientConn, queue <-chan *pending, cancel context.CancelFunc, inflight *atomic.Int32) {
	var bw *bufio.Writer
	var bufp *[]byte
	idle := func() {
		if bw != nil {
			bw.Reset(nil)
			writeBufs.Put(bw)
			bw = nil
		}
		if bufp != nil {
			if cap(*bufp) > 4<<20 {
				*bufp = nil // do not pin a large fetch's buffer
			}
			frameBufs.Put(bufp)
			bufp = nil
		}
	}
	defer idle()
	failed := false
	for p := range queue {
		if failed {
			p.held.release()
			inflight.Add(-1)
			continue // drain so the reader never blocks
		}
		resp := p.resp
		if p.wait != nil {
			resp = p.wait()
		}
		var waited time.Time // when a Produce's records committed
		if p.key == 0 {
			waited = b.clock.Now()
		}
		throttle := max(p.throttle, chargeFetch(b, p.user, p.clientID, p.req, resp))
		if throttle > 0 && resp != nil && p.raw == nil && !setThrottle(resp, throttle) {
			// Before KIP-219 the broker held the response back.
			t := b.clock.NewTimer(throttle)
			select {
			case <-t.C():
			case <-cc.ctx.Done():
				t.Stop()
			}
		}
		if bw == nil {
			bw = writeBufs.Get().(*bufio.Writer)
			bw.Reset(nc)
			bufp = frameBufs.Get().(*[]byte)
		}
		buf := *bufp
		var err error
		fr, isFetch := resp.(*kmsg.FetchResponse)
		var held *fetchBufs
		var pieces []framePiece
		if isFetch && p.raw == nil {
			held = heldBy(fr)
			pieces, buf, isFetch = fetchFrame(buf, p.corr, fr, held)
			if !isFetch && held != nil && len(held.spans) > 0 {
				err = errors.New("fetch answer with record sets in files could not be framed") // never sends placeholders
			}
		}
		switch {
		case err != nil:
		case isFetch:
			// Record sets go from the buffers they were read into, or
			// from their files.
			if err = bw.Flush(); err == nil {
				err = writePieces(nc, pieces)
			}
		default:
			buf = buf[:0]
			if p.raw != nil {
				buf = append(buf, p.raw...)
			} else {
				buf = wire.AppendResponse(buf, p.corr, resp)
			}
			_, err = bw.Write(buf)
			if err == nil && (len(queue) == 0 || p.last) {
				err = bw.Flush()
			}
		}
		*bufp = buf[:0]
		p.held.release()
		if p.raw != nil {
			resp = nil
		}
		if throttle > 0 {
			cc.muted.mute(b.clock.Now().Add(throttle))
		}
		if p.key == 0 && resp != nil {
			b.metrics.ProduceResponded(clock.Since(b.clock, waited))
		}
		b.metrics.Responded(p.key, p.req, resp, clock.Since(b.clock, p.start))
		if fq, ok := p.req.(*kmsg.FetchRequest); ok && err == nil {
			held.countSpans(b.metrics, fq.ReplicaID >= 0)
		}
		answered(resp) // its pooled record buffers (fetchbufs.go)
		inflight.Add(-1)
		if err != nil || p.last {
			failed = true
			cancel()
			nc.Close()
		}
		if len(queue) == 0 {
			idle()
		}
	}
}

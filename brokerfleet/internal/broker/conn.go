package broker

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"time"

	"github.com/stratamq/strata/brokerfleet/internal/security"
	"github.com/stratamq/strata/brokerfleet/internal/wire"
	"github.com/stratamq/strata/pkg/clock"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// pendingDepth bounds the requests decoded ahead of their responses on one
// connection; a full queue stops the reader, pushing back on the client.
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
}

// clientConn is what handlers know about the connection.
type clientConn struct {
	ctx      context.Context // cancelled when the connection or broker closes
	clientID string
	remote   string
	sec      *security.Session // nil when security is off
	muted    muter             // reads wait out client quota throttles
}

func (b *Broker) serveConn(nc net.Conn) {
	var sec *security.Session
	if b.secured {
		nc, sec = b.cfg.Security.Accept(nc)
	}
	ctx, cancel := context.WithCancel(b.ctx)
	defer cancel()
	cc := &clientConn{ctx: ctx, remote: nc.RemoteAddr().String(), sec: sec}
	queue := make(chan pending, pendingDepth)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		b.writeResponses(nc, cc, queue, cancel)
	}()
	defer func() {
		close(queue)
		<-writerDone
		nc.Close()
	}()

	if sec != nil && !sec.Start(ctx, nc, b.log) {
		return
	}
	br := bufio.NewReaderSize(nc, 64<<10)
	for {
		frame, err := wire.ReadFrame(br, cc.sec.FrameLimit(b.cfg.MaxRequestBytes))
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
			select {
			case queue <- p:
			case <-ctx.Done():
				return
			}
			if p.last {
				return
			}
			continue
		}
		hdr, req, err := wire.ParseRequest(frame, supportedVersions)
		if err != nil {
			b.log.Debug("closing connection on malformed request", "remote", cc.remote, "err", err)
			return
		}
		cc.clientID = hdr.ClientID
		p := pending{corr: hdr.CorrelationID, key: hdr.Key, req: req, start: start, clientID: hdr.ClientID, user: quotaUser(cc)}
		b.metrics.Received(hdr.Key)
		switch {
		case req == nil && hdr.Key == 18:
			// KIP-511: answer an ApiVersions we cannot parse with v0,
			// UNSUPPORTED_VERSION and our ranges, so the client retries.
			resp := kmsg.NewPtrApiVersionsResponse()
			resp.ErrorCode = 35
			resp.ApiKeys = apiVersions()
			p.resp = resp
		case req == nil:
			p.raw = wire.AppendUnsupported(nil, hdr.CorrelationID)
			p.last = true
		default:
			served := b.dispatch(cc, req, &p)
			p.throttle = chargeRequest(b, p.user, p.clientID, req, len(frame), clock.Since(b.clock, start))
			if !served {
				b.metrics.Responded(p.key, req, nil, clock.Since(b.clock, start))
				cc.muted.mute(b.clock.Now().Add(p.throttle))
				continue // acks=0 produce: no response
			}
		}
		select {
		case queue <- p:
		case <-ctx.Done():
			return
		}
		if p.last {
			return
		}
	}
}

// dispatch serves req through its route, filling p: the authentication
// gate (only public routes before SASL completes), the route's ACL rule
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
	var fix func(kmsg.Response)
	if b.authz != nil && !r.public {
		deny, f := r.authorize(access{b, cc}, req)
		if deny != nil {
			p.resp = deny
			b.rewriteEndpoints(cc, p)
			return true
		}
		fix = f
	}
	if !r.serve(b, cc, req, p) {
		return false
	}
	amend(p, fix)
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

// writeResponses encodes responses in request order. It batches writes
// while more responses are ready.
func (b *Broker) writeResponses(nc net.Conn, cc *clientConn, queue <-chan pending, cancel context.CancelFunc) {
	bw := bufio.NewWriterSize(nc, 64<<10)
	var buf []byte
	failed := false
	for p := range queue {
		if failed {
			continue // drain so the reader never blocks
		}
		resp := p.resp
		if p.wait != nil {
			resp = p.wait()
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
		var err error
		fr, isFetch := resp.(*kmsg.FetchResponse)
		var pieces net.Buffers
		if isFetch && p.raw == nil {
			pieces, buf, isFetch = fetchFrame(buf, p.corr, fr)
		}
		if isFetch {
			// Record sets go from the buffers they were read into.
			if err = bw.Flush(); err == nil {
				_, err = pieces.WriteTo(nc)
			}
		} else {
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
		if p.raw != nil {
			resp = nil
		}
		if throttle > 0 {
			cc.muted.mute(b.clock.Now().Add(throttle))
		}
		b.metrics.Responded(p.key, p.req, resp, clock.Since(b.clock, p.start))
		if err != nil || p.last {
			failed = true
			cancel()
			nc.Close()
		}
		if cap(buf) > 4<<20 {
			buf = nil // do not pin a large fetch's buffer
		}
	}
}

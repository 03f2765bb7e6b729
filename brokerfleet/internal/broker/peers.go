package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/wire"
)

// peers sends requests to other brokers for the transaction machinery
// (WriteTxnMarkers to partition leaders and group coordinators,
// AddPartitionsToTxn verification to transaction coordinators), on the
// inter-broker listener with the followers' dialer (TLS and SASL when
// configured). A few idle connections per broker are kept; a request
// runs on a connection of its own, so requests to one broker run in
// parallel.
type peers struct {
	dial     wire.DialFunc
	clientID string

	mu     sync.Mutex
	idle   map[string][]*wire.Conn // by address
	closed bool
}

// maxIdlePeerConns is how many idle connections to one broker are kept.
const maxIdlePeerConns = 4

// peerTimeout bounds a request to another broker without a deadline.
const peerTimeout = 30 * time.Second

func newPeers(dial wire.DialFunc, self int32) *peers {
	return &peers{dial: dial, clientID: fmt.Sprintf("strata-broker-%d", self), idle: map[string][]*wire.Conn{}}
}

var errPeersClosed = errors.New("broker closing")

// do sends req to the broker at addr and returns its response. The
// request ends with ctx: its connection is closed.
func (p *peers) do(ctx context.Context, addr string, req kmsg.Request) (kmsg.Response, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errPeersClosed
	}
	var c *wire.Conn
	if n := len(p.idle[addr]); n > 0 {
		c = p.idle[addr][n-1]
		p.idle[addr] = p.idle[addr][:n-1]
	}
	p.mu.Unlock()
	if c == nil {
		var err error
		if c, err = wire.Dial(ctx, p.dial, addr, p.clientID, 64<<10); err != nil {
			return nil, fmt.Errorf("dial %s: %w", addr, err)
		}
	}
	timeout := peerTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	stop := context.AfterFunc(ctx, func() { c.Close() })
	resp, err := c.Do(req, timeout)
	if !stop() || err != nil {
		c.Close()
		if err == nil {
			err = ctx.Err()
		}
		return nil, fmt.Errorf("%s to %s: %w", kmsg.NameForKey(req.Key()), addr, err)
	}
	p.mu.Lock()
	if !p.closed && len(p.idle[addr]) < maxIdlePeerConns {
		p.idle[addr] = append(p.idle[addr], c)
		c = nil
	}
	p.mu.Unlock()
	if c != nil {
		c.Close()
	}
	return resp, nil
}

// close closes the idle connections; requests after it fail.
func (p *peers) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, cs := range p.idle {
		for _, c := range cs {
			c.Close()
		}
	}
	p.idle = nil
}

package broker

// What one client may hold of the broker: connections (max.connections,
// max.connections.per.ip), request bytes (queued.max.request.bytes, and
// max-request-bytes per connection), idle time (connections.max.idle.ms).
// Like Kafka, a listener at the broker-wide limit stops accepting until a
// connection closes (the inter-broker listener, when there are several,
// never waits, so replication is not locked out), and a connection over
// its address's limit is closed at once.

import (
	"context"
	"net"
	"sync"
	"time"
)

// connLimits counts connections, broker-wide and per client address.
type connLimits struct {
	max, perIP int // 0: unlimited

	mu    sync.Mutex // leaf; guards the fields below
	total int
	byIP  map[string]int
	freed chan struct{} // closed (and replaced) when a connection ends
}

func newConnLimits(max, perIP int) *connLimits {
	return &connLimits{max: max, perIP: perIP, byIP: map[string]int{}, freed: make(chan struct{})}
}

// admit counts an accepted connection from ip. Unless protected, it first
// waits while the broker is at its limit (ctx ending gives up). It reports
// false, counting nothing, when the connection must be closed: ip is at its
// own limit, or ctx ended.
func (l *connLimits) admit(ctx context.Context, ip string, protected bool) bool {
	l.mu.Lock()
	for !protected && l.max > 0 && l.total >= l.max {
		freed := l.freed
		l.mu.Unlock()
		select {
		case <-freed:
		case <-ctx.Done():
			return false
		}
		l.mu.Lock()
	}
	defer l.mu.Unlock()
	if l.perIP > 0 && l.byIP[ip] >= l.perIP {
		return false
	}
	l.total++
	l.byIP[ip]++
	return true
}

// release uncounts a connection admit counted.
func (l *connLimits) release(ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total--
	if l.byIP[ip]--; l.byIP[ip] <= 0 {
		delete(l.byIP, ip)
	}
	close(l.freed)
	l.freed = make(chan struct{})
}

// clientIP is the address connections are counted under.
func clientIP(nc net.Conn) string {
	if host, _, err := net.SplitHostPort(nc.RemoteAddr().String()); err == nil {
		return host
	}
	return nc.RemoteAddr().String()
}

// byteBudget bounds the request bytes held at once. As Kafka's memory pool
// does, it admits a request while anything is left (so one larger than
// the rest of the budget is not starved; the budget is exceeded by less
// than one request). A limit of 0 admits everything.
type byteBudget struct {
	limit int64

	mu    sync.Mutex // leaf; guards the fields below
	used  int64
	freed chan struct{}
}

func newByteBudget(limit int64) *byteBudget {
	return &byteBudget{limit: limit, freed: make(chan struct{})}
}

// try takes n bytes if they may be held now (strict: the budget is never
// exceeded, except by a request alone in it).
func (b *byteBudget) try(n int64, strict bool) bool {
	if b == nil || b.limit <= 0 {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used > 0 && (b.used >= b.limit || strict && b.used+n > b.limit) {
		return false
	}
	b.used += n
	return true
}

// acquire waits until try succeeds or ctx ends.
func (b *byteBudget) acquire(ctx context.Context, n int64, strict bool) error {
	if b == nil || b.limit <= 0 {
		return nil
	}
	for {
		b.mu.Lock()
		freed := b.freed
		b.mu.Unlock()
		if b.try(n, strict) {
			return nil
		}
		select {
		case <-freed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// release returns n bytes acquire took.
func (b *byteBudget) release(n int64) {
	if b == nil || b.limit <= 0 || n == 0 {
		return
	}
	b.mu.Lock()
	b.used -= n
	close(b.freed)
	b.freed = make(chan struct{})
	b.mu.Unlock()
}

// held is what the budget holds now (for tests and metrics).
func (b *byteBudget) held() int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// reservation is what one request holds of the byte budgets: of its
// connection's (its whole frame, until the writer is done with it, so a
// connection's queued and parked requests hold at most max-request-bytes)
// and of the broker's (what its frame buffer has grown to, until its
// handler's synchronous part ran, as Kafka's queued.max.request.bytes
// counts requests read and not yet handled).
type reservation struct {
	conn, peer   *byteBudget
	connN, peerN int64
}

// releasePeer returns the broker's share.
func (r *reservation) releasePeer() {
	if r != nil && r.peerN != 0 {
		r.peer.release(r.peerN)
		r.peerN = 0
	}
}

// release returns both shares.
func (r *reservation) release() {
	if r == nil {
		return
	}
	r.releasePeer()
	if r.connN != 0 {
		r.conn.release(r.connN)
		r.connN = 0
	}
}

// acceptBackoff is how long an accept loop waits after its n-th error in a
// row, as net/http's Server does: from 5 ms, doubling, at most 1 s.
func acceptBackoff(n int) time.Duration {
	return min(5*time.Millisecond<<min(n, 8), time.Second)
}

// maxConnections resolves Config.MaxConnections: 0 is three quarters of
// the open-file limit (the rest is for segment files, the metastore and
// the tier), -1 no cap.
func maxConnections(configured int) int {
	switch {
	case configured > 0:
		return configured
	case configured < 0:
		return 0
	}
	return fileLimit() * 3 / 4
}

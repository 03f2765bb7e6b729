//go:build chaos

package chaos

import (
	"io"
	"net"
	"sync"
	"time"
)

// Proxy forwards TCP connections from its own loopback address to a
// target and can cut the link. A cut link is a black hole, as a network
// partition is: connections stay open, bytes sent either way are dropped,
// and new connections are accepted but never reach the target; peers
// notice only through their own timeouts. Heal closes every connection
// opened or held during the cut (their streams lost bytes) and forwards
// again.
type Proxy struct {
	Name   string
	ln     net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	delay time.Duration
	conns map[*link]bool
	done  bool
}

// link is one proxied connection.
type link struct {
	client, server net.Conn // server is nil for a connection accepted while cut
	holed          bool     // bytes were dropped: close at Heal
}

// NewProxy listens on 127.0.0.1:0 (or addr) and forwards to target.
func NewProxy(name, addr, target string) (*Proxy, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	p := &Proxy{Name: name, ln: ln, target: target, conns: map[*link]bool{}}
	go p.accept()
	return p, nil
}

// Addr is the proxy's listening address, host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut makes the link a black hole until Heal.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for l := range p.conns {
		l.holed = true
	}
}

// Heal forwards again and closes the connections the cut damaged.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
	for l := range p.conns {
		if l.holed {
			l.close()
			delete(p.conns, l)
		}
	}
}

// IsCut reports whether the link is cut.
func (p *Proxy) IsCut() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cut
}

// Delay holds every chunk of bytes for d before forwarding it (0: off).
func (p *Proxy) Delay(d time.Duration) {
	p.mu.Lock()
	p.delay = d
	p.mu.Unlock()
}

// Reset closes every connection (as a broker restart does to its peers)
// without cutting the link.
func (p *Proxy) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for l := range p.conns {
		l.close()
		delete(p.conns, l)
	}
}

// Close stops listening and closes every connection.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.done = true
	for l := range p.conns {
		l.close()
	}
	clear(p.conns)
	p.mu.Unlock()
	return p.ln.Close()
}

func (l *link) close() {
	l.client.Close()
	if l.server != nil {
		l.server.Close()
	}
}

func (p *Proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.serve(c)
	}
}

func (p *Proxy) serve(c net.Conn) {
	l := &link{client: c}
	p.mu.Lock()
	if p.done {
		p.mu.Unlock()
		c.Close()
		return
	}
	p.conns[l] = true
	cut := p.cut
	if cut {
		l.holed = true
	}
	p.mu.Unlock()
	if cut {
		// Swallow what the client sends until Heal or Close closes it.
		io.Copy(io.Discard, c)
		p.forget(l)
		return
	}
	s, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	p.mu.Lock()
	if err != nil || !p.conns[l] {
		p.mu.Unlock()
		// Reset rather than close: a client should see what a dead host
		// gives it (a refused or reset connection), not a clean EOF,
		// which franz-go takes for a TLS mismatch and does not retry.
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		c.Close()
		if s != nil {
			s.Close()
		}
		p.forget(l)
		return
	}
	l.server = s
	if p.cut {
		l.holed = true
	}
	p.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.pipe(l, s, c) }()
	go func() { defer wg.Done(); p.pipe(l, c, s) }()
	wg.Wait()
	p.forget(l)
}

// pipe copies from src to dst, dropping bytes while the link is holed;
// when either side ends it closes both.
func (p *Proxy) pipe(l *link, dst, src net.Conn) {
	defer l.close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			holed, delay := l.holed, p.delay
			p.mu.Unlock()
			if delay > 0 && !holed {
				time.Sleep(delay)
				p.mu.Lock()
				holed = l.holed
				p.mu.Unlock()
			}
			if !holed {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *Proxy) forget(l *link) {
	p.mu.Lock()
	delete(p.conns, l)
	p.mu.Unlock()
}

package brokertest

import (
	"context"
	"errors"
	"net"
	"sync"
)

// Links dials connections between brokers and can cut them: a cut link
// closes its open connections and refuses new ones until restored.
type Links struct {
	mu    sync.Mutex
	cut   map[[2]string]bool
	conns map[[2]string][]net.Conn
}

// NewLinks returns links with nothing cut.
func NewLinks() *Links {
	return &Links{cut: map[[2]string]bool{}, conns: map[[2]string][]net.Conn{}}
}

var errCut = errors.New("link cut by the test")

// Dialer returns the dial function for the broker named from.
func (l *Links) Dialer(from string) func(ctx context.Context, addr string) (net.Conn, error) {
	return func(ctx context.Context, addr string) (net.Conn, error) {
		key := [2]string{from, addr}
		l.mu.Lock()
		cut := l.cut[key]
		l.mu.Unlock()
		if cut {
			return nil, errCut
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.cut[key] {
			c.Close()
			return nil, errCut
		}
		l.conns[key] = append(l.conns[key], c)
		return c, nil
	}
}

// Cut severs the link from the broker named from to addr.
func (l *Links) Cut(from, addr string) {
	key := [2]string{from, addr}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cut[key] = true
	for _, c := range l.conns[key] {
		c.Close()
	}
	l.conns[key] = nil
}

// Restore reopens the link.
func (l *Links) Restore(from, addr string) {
	l.mu.Lock()
	delete(l.cut, [2]string{from, addr})
	l.mu.Unlock()
}

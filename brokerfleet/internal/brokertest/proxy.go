package brokertest

import (
	"encoding/binary"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// DupProxy forwards Kafka connections to a broker and sends every Produce
// request twice. The client gets the broker's answer to the copy, not to
// the original, so it sees only what the broker says about a duplicate:
// with working deduplication, success and the original offsets.
type DupProxy struct {
	ln     net.Listener
	target string
	// Duplicated counts Produce requests sent twice.
	Duplicated atomic.Int64
}

// NewDupProxy listens on 127.0.0.1; call Forward before clients connect.
func NewDupProxy(t testing.TB) *DupProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy listen: %v", err)
	}
	p := &DupProxy{ln: ln}
	t.Cleanup(func() { ln.Close() })
	return p
}

// Addr is the address clients (and the broker's advertised address) use.
func (p *DupProxy) Addr() string { return p.ln.Addr().String() }

// Forward starts proxying to target.
func (p *DupProxy) Forward(target string) {
	p.target = target
	go func() {
		for {
			c, err := p.ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
}

func readRaw(r io.Reader) ([]byte, error) {
	var sz [4]byte
	if _, err := io.ReadFull(r, sz[:]); err != nil {
		return nil, err
	}
	buf := make([]byte, 4+binary.BigEndian.Uint32(sz[:]))
	copy(buf, sz[:])
	_, err := io.ReadFull(r, buf[4:])
	return buf, err
}

func (p *DupProxy) serve(client net.Conn) {
	defer client.Close()
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer server.Close()
	var mu sync.Mutex
	dropped := map[int32]bool{} // correlation id -> first answer already dropped
	go func() {
		defer server.Close()
		for {
			f, err := readRaw(client)
			if err != nil || len(f) < 12 {
				return
			}
			key := int16(binary.BigEndian.Uint16(f[4:]))
			corr := int32(binary.BigEndian.Uint32(f[8:]))
			if _, err := server.Write(f); err != nil {
				return
			}
			if key == 0 {
				mu.Lock()
				dropped[corr] = false
				mu.Unlock()
				p.Duplicated.Add(1)
				if _, err := server.Write(f); err != nil {
					return
				}
			}
		}
	}()
	for {
		f, err := readRaw(server)
		if err != nil || len(f) < 8 {
			return
		}
		corr := int32(binary.BigEndian.Uint32(f[4:]))
		mu.Lock()
		seenFirst, dup := dropped[corr]
		if dup && !seenFirst {
			dropped[corr] = true
			mu.Unlock()
			continue // the answer to the original
		}
		delete(dropped, corr)
		mu.Unlock()
		if _, err := client.Write(f); err != nil {
			return
		}
	}
}

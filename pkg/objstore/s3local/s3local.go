// Package s3local serves an S3 stand-in on 127.0.0.1 for `brokerfleet dev`
// and tests: gofakes3 over its in-memory backend (s3mem) or over one bbolt
// file (s3bolt) that survives restarts. Start runs it on a listener of its
// own; NewHandler gives the same stand-in as an http.Handler for a server
// that answers other APIs too (`go run ./localstack`). Clients must use
// path-style addressing and, since the server is plain HTTP, no TLS;
// s3store.Open with an Endpoint does both. Faults, in front of the
// server, fails or delays requests on demand and counts them by operation.
//
// What gofakes3 (v1.2.0) does and does not do, as relied on here:
// PutObject honours If-None-Match: * and If-Match atomically (412
// PreconditionFailed); GetObject honours Range but answers 416 to a range
// starting at or past the end (an empty object answers 416 to every
// range); ListObjectsV2 pages with max-keys; signatures are not checked;
// CompleteMultipartUpload ignores If-None-Match; it never answers 409
// ConditionalRequestConflict (Faults can).
package s3local

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3bolt"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	bolt "go.etcd.io/bbolt"
)

// Option configures Start.
type Option func(*config)

type config struct {
	addr    string
	wrap    func(http.Handler) http.Handler
	buckets []string
}

// WithAddr makes the server listen on addr, which must be a loopback
// address (default "127.0.0.1:0", a free port). A fixed port lets
// clients reconnect to a restarted server.
func WithAddr(addr string) Option { return func(c *config) { c.addr = addr } }

// WithWrap puts wrap (for instance Faults.Wrap) in front of gofakes3.
func WithWrap(wrap func(http.Handler) http.Handler) Option {
	return func(c *config) { c.wrap = wrap }
}

// WithBuckets creates the named buckets at start unless they exist.
func WithBuckets(names ...string) Option {
	return func(c *config) { c.buckets = append(c.buckets, names...) }
}

// Server is a running stand-in. Close it when done.
type Server struct {
	url    string
	srv    *http.Server
	h      *Handler
	served chan struct{}
}

// Start serves a stand-in: in memory when path is "", else in the bbolt
// file at path (created if missing; another process holding it makes
// Start fail after a second).
func Start(path string, opts ...Option) (*Server, error) {
	c := newConfig(opts)
	if err := checkLoopback(c.addr); err != nil {
		return nil, fmt.Errorf("s3local: %w", err)
	}
	h, err := newHandler(path, c)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		h.Close()
		return nil, fmt.Errorf("s3local: listen on %s: %w", c.addr, err)
	}
	s := &Server{h: h, served: make(chan struct{})}
	s.url = "http://" + ln.Addr().String()
	s.srv = &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(s.served)
		_ = s.srv.Serve(ln) // returns http.ErrServerClosed on Close
	}()
	return s, nil
}

func newConfig(opts []Option) config {
	c := config{addr: "127.0.0.1:0"}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// Handler is the stand-in without a listener of its own, for a server
// that answers S3 beside other APIs on one address (localstack). Close it
// when done.
type Handler struct {
	backend gofakes3.Backend
	db      *bolt.DB // nil with s3mem
	next    http.Handler

	mu     sync.RWMutex // held shared by every request, exclusively by Close
	closed bool
}

// NewHandler is Start without the listener: the same backends, buckets
// and wrap; WithAddr does not apply.
func NewHandler(path string, opts ...Option) (*Handler, error) {
	return newHandler(path, newConfig(opts))
}

func newHandler(path string, c config) (*Handler, error) {
	h := &Handler{}
	if path == "" {
		h.backend = s3mem.New()
	} else {
		db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
		if err != nil {
			return nil, fmt.Errorf("s3local: open %s: %w", path, err)
		}
		h.db, h.backend = db, s3bolt.New(db)
	}
	for _, b := range c.buckets {
		if err := h.CreateBucket(b); err != nil {
			h.closeBackend()
			return nil, err
		}
	}
	h.next = gofakes3.New(h.backend).Server()
	if c.wrap != nil {
		h.next = c.wrap(h.next)
	}
	return h, nil
}

// ServeHTTP answers an S3 request, or 503 once Close has begun.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.closed {
		http.Error(w, "s3local: closed", http.StatusServiceUnavailable)
		return
	}
	h.next.ServeHTTP(w, r)
}

// CreateBucket creates bucket name unless it exists.
func (h *Handler) CreateBucket(name string) error {
	if err := gofakes3.ValidateBucketName(name); err != nil {
		return fmt.Errorf("s3local: bucket %q: %w", name, err)
	}
	err := h.backend.CreateBucket(name)
	if err != nil && !gofakes3.HasErrorCode(err, gofakes3.ErrBucketAlreadyExists) {
		return fmt.Errorf("s3local: create bucket %s: %w", name, err)
	}
	return nil
}

// Close waits for requests in flight, makes later ones fail with 503 and
// closes the bbolt file. Later calls do nothing.
func (h *Handler) Close() error {
	_, err := h.close()
	return err
}

// close is Close that also reports whether this call closed h.
func (h *Handler) close() (bool, error) {
	h.mu.Lock() // waits for handlers still running
	defer h.mu.Unlock()
	if h.closed {
		return false, nil
	}
	h.closed = true
	return true, h.closeBackend()
}

func (h *Handler) isClosed() bool {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.closed
}

func (h *Handler) closeBackend() error {
	if h.db == nil {
		return nil
	}
	return h.db.Close()
}

func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q: %w", addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("address %q is not a loopback address", addr)
	}
	return nil
}

// URL returns the endpoint, "http://127.0.0.1:PORT".
func (s *Server) URL() string { return s.url }

// CreateBucket creates bucket name unless it exists.
func (s *Server) CreateBucket(name string) error { return s.h.CreateBucket(name) }

// Close stops the server, waits for requests in flight and closes the
// bbolt file. Later calls do nothing.
func (s *Server) Close() error {
	if s.h.isClosed() {
		return nil
	}
	err := s.srv.Close()
	<-s.served
	if closed, cerr := s.h.close(); closed {
		return errors.Join(err, cerr)
	}
	return nil
}

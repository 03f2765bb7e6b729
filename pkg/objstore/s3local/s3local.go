// Package s3local serves an S3 stand-in on 127.0.0.1 for `brokerfleet dev`
// and tests: gofakes3 over its in-memory backend (s3mem) or over one bbolt
// file (s3bolt) that survives restarts. Clients must use path-style
// addressing and, since the server is plain HTTP, no TLS; s3store.Open
// with an Endpoint does both. Faults, in front of the server, fails or
// delays requests on demand and counts them by operation.
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
	url     string
	srv     *http.Server
	backend gofakes3.Backend
	db      *bolt.DB // nil with s3mem
	served  chan struct{}

	mu     sync.RWMutex // held shared by every request, exclusively by Close
	closed bool
}

// Start serves a stand-in: in memory when path is "", else in the bbolt
// file at path (created if missing; another process holding it makes
// Start fail after a second).
func Start(path string, opts ...Option) (*Server, error) {
	c := config{addr: "127.0.0.1:0"}
	for _, o := range opts {
		o(&c)
	}
	if err := checkLoopback(c.addr); err != nil {
		return nil, fmt.Errorf("s3local: %w", err)
	}
	s := &Server{served: make(chan struct{})}
	if path == "" {
		s.backend = s3mem.New()
	} else {
		db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
		if err != nil {
			return nil, fmt.Errorf("s3local: open %s: %w", path, err)
		}
		s.db, s.backend = db, s3bolt.New(db)
	}
	for _, b := range c.buckets {
		if err := s.CreateBucket(b); err != nil {
			s.closeBackend()
			return nil, err
		}
	}
	var h http.Handler = gofakes3.New(s.backend).Server()
	if c.wrap != nil {
		h = c.wrap(h)
	}
	ln, err := net.Listen("tcp", c.addr)
	if err != nil {
		s.closeBackend()
		return nil, fmt.Errorf("s3local: listen on %s: %w", c.addr, err)
	}
	s.url = "http://" + ln.Addr().String()
	s.srv = &http.Server{Handler: s.guard(h), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(s.served)
		_ = s.srv.Serve(ln) // returns http.ErrServerClosed on Close
	}()
	return s, nil
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

// guard keeps requests from reaching the backend once Close has begun.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.RLock()
		defer s.mu.RUnlock()
		if s.closed {
			http.Error(w, "s3local: closed", http.StatusServiceUnavailable)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// URL returns the endpoint, "http://127.0.0.1:PORT".
func (s *Server) URL() string { return s.url }

// CreateBucket creates bucket name unless it exists.
func (s *Server) CreateBucket(name string) error {
	if err := gofakes3.ValidateBucketName(name); err != nil {
		return fmt.Errorf("s3local: bucket %q: %w", name, err)
	}
	err := s.backend.CreateBucket(name)
	if err != nil && !gofakes3.HasErrorCode(err, gofakes3.ErrBucketAlreadyExists) {
		return fmt.Errorf("s3local: create bucket %s: %w", name, err)
	}
	return nil
}

// Close stops the server, waits for requests in flight and closes the
// bbolt file. Later calls do nothing.
func (s *Server) Close() error {
	s.mu.RLock()
	closed := s.closed
	s.mu.RUnlock()
	if closed {
		return nil
	}
	err := s.srv.Close()
	<-s.served
	s.mu.Lock() // waits for handlers still running
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	return errors.Join(err, s.closeBackend())
}

func (s *Server) closeBackend() error {
	if s.db == nil {
		return nil
	}
	return s.db.Close()
}

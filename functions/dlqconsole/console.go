package dlqconsole

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
)

// DefaultGroup is the console's consumer group unless Options.Group is set.
const DefaultGroup = "strata-dlq-console"

// readTimeout bounds each Kafka step of a request (reads, produce, admin).
const readTimeout = 15 * time.Second

// Options configure the console.
type Options struct {
	// Seeds are the Kafka bootstrap brokers, host:port. Required.
	Seeds []string
	// RegistryURL is the schema registry used to decode values with a
	// Confluent header. Optional.
	RegistryURL string
	// Group is the console's consumer group, whose committed offsets say
	// which letters were replayed or purged. Default DefaultGroup.
	Group string
	// KgoOpts are added to every Kafka client (TLS, SASL, ...).
	KgoOpts []kgo.Opt
	// RegistryOpts are added to the schema registry client (its CA,
	// basic authentication).
	RegistryOpts []sr.ClientOpt
	// BasePath is the path the console is mounted under, such as
	// "/console"; "" serves it at the root.
	BasePath string
	// AdminUser and AdminPassword are the basic authentication the
	// console sends to the brokers' admin endpoints beside the registry
	// (partition sizes, the lag history), when the registry asks for it: the registry's
	// own user. AdminTLS is their TLS configuration (the registry's CA).
	AdminUser, AdminPassword string
	AdminTLS                 *tls.Config
}

func (o *Options) validate() error {
	if len(o.Seeds) == 0 {
		return errors.New("dlqconsole: no Kafka seed brokers")
	}
	for _, s := range o.Seeds {
		if _, _, err := net.SplitHostPort(s); err != nil {
			return fmt.Errorf("dlqconsole: seed %q is not host:port", s)
		}
	}
	if o.Group == "" {
		o.Group = DefaultGroup
	}
	o.BasePath = strings.TrimRight(o.BasePath, "/")
	if o.BasePath != "" && !strings.HasPrefix(o.BasePath, "/") {
		return fmt.Errorf("dlqconsole: base path %q does not start with /", o.BasePath)
	}
	return nil
}

// Console serves the pages and the API.
type Console struct {
	opts     Options
	group    string
	producer *kgo.Client // also the admin client's
	adm      *kadm.Client
	registry *sr.Client // nil without a registry
	// adminHTTP asks the brokers' admin endpoints (sizes, lag history).
	adminHTTP *http.Client
	mux       *http.ServeMux
	timeout   time.Duration // bounds each Kafka step of a request

	commitMu sync.Mutex // serializes this process's commits

	schemaMu sync.Mutex
	schemas  map[int]*decoder
}

// New returns the console's handler. It connects lazily: New succeeds while
// Kafka is down, and requests answer 503 until it is up.
func New(opts Options) (http.Handler, error) {
	c, err := newConsole(opts)
	if err != nil {
		return nil, err
	}
	return c, nil
}

func newConsole(opts Options) (*Console, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	c := &Console{opts: opts, group: opts.Group, schemas: map[int]*decoder{}, timeout: readTimeout}
	kopts := append([]kgo.Opt{
		kgo.SeedBrokers(opts.Seeds...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ClientID("strata-dlq-console"),
	}, opts.KgoOpts...)
	cl, err := kgo.NewClient(kopts...)
	if err != nil {
		return nil, fmt.Errorf("dlqconsole: kafka client: %w", err)
	}
	c.producer = cl
	c.adm = kadm.NewClient(cl)
	if opts.RegistryURL != "" {
		rc, err := sr.NewClient(append([]sr.ClientOpt{sr.URLs(opts.RegistryURL), sr.HTTPClient(&http.Client{Timeout: 10 * time.Second})}, opts.RegistryOpts...)...)
		if err != nil {
			cl.Close()
			return nil, fmt.Errorf("dlqconsole: schema registry client: %w", err)
		}
		c.registry = rc
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if opts.AdminTLS != nil {
		tr.TLSClientConfig = opts.AdminTLS.Clone()
	}
	c.adminHTTP = &http.Client{Timeout: 10 * time.Second, Transport: tr}
	c.routes()
	return c, nil
}

// Close closes the Kafka client of a console built by New, when h is one.
func Close(h http.Handler) {
	if c, ok := h.(*Console); ok {
		c.producer.Close()
	}
}

func (c *Console) routes() {
	m := http.NewServeMux()
	c.viewRoutes(m)
	m.HandleFunc("GET /dlq/{$}", c.pageIndex)
	m.HandleFunc("GET /dlq", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, c.opts.BasePath+"/dlq/", http.StatusMovedPermanently)
	})
	m.HandleFunc("GET /dlq/topics/{topic}", c.pageTopic)
	m.HandleFunc("GET /dlq/topics/{topic}/letters/{partition}/{offset}", c.pageLetter)
	m.HandleFunc("POST /dlq/topics/{topic}/action", c.pageAction)
	m.HandleFunc("GET /style.css", c.serveStyle)
	m.HandleFunc("/api/topics", methods("GET", c.apiTopics))
	m.HandleFunc("/api/topics/{topic}/letters", methods("GET", c.apiLetters))
	m.HandleFunc("/api/topics/{topic}/letters/{partition}/{offset}", methods("GET", c.apiLetter))
	m.HandleFunc("/api/topics/{topic}/replay", methods("POST", c.apiReplay))
	m.HandleFunc("/api/topics/{topic}/purge", methods("POST", c.apiPurge))
	m.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, errorf(404, "no API route %s", r.URL.Path))
	})
	c.mux = m
}

// ServeHTTP serves the console under its base path.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'none'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			writeError(w, errorf(http.StatusInternalServerError, "internal error: %v", v))
		}
	}()
	path := r.URL.EscapedPath() // so a %2F in a group's name stays in its segment
	if b := c.opts.BasePath; b != "" {
		if path == b {
			http.Redirect(w, r, b+"/", http.StatusMovedPermanently)
			return
		}
		rest, ok := strings.CutPrefix(path, b+"/")
		if !ok {
			writeError(w, errorf(404, "not found: %s", path))
			return
		}
		r2 := new(http.Request)
		*r2 = *r
		u := *r.URL
		u.RawPath = "/" + rest
		p, err := url.PathUnescape(u.RawPath)
		if err != nil {
			writeError(w, errorf(400, "malformed path %q", path))
			return
		}
		u.Path = p
		r2.URL = &u
		r = r2
	}
	c.mux.ServeHTTP(w, r)
}

// methods answers 405 as JSON for other methods than want.
func methods(want string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != want && !(want == "GET" && r.Method == "HEAD") {
			w.Header().Set("Allow", want)
			writeError(w, errorf(http.StatusMethodNotAllowed, "method %s not allowed; use %s", r.Method, want))
			return
		}
		h(w, r)
	}
}

// httpError is an error with the HTTP status it answers.
type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return e.msg }

func errorf(status int, format string, args ...any) error {
	return &httpError{status: status, msg: fmt.Sprintf(format, args...)}
}

// kafkaError maps a Kafka failure: 502 when a broker answered with an
// error, 503 when none answered.
func kafkaError(what string, err error) error {
	var he *httpError
	if errors.As(err, &he) {
		return err
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		switch ke {
		case kerr.TopicAuthorizationFailed, kerr.GroupAuthorizationFailed, kerr.ClusterAuthorizationFailed:
			// The console's own user may not: say so, not "bad gateway".
			return errorf(http.StatusForbidden, "kafka: %s: the console's user is not authorized: %v", what, err)
		}
		return errorf(http.StatusBadGateway, "kafka: %s: %v", what, err)
	}
	return errorf(http.StatusServiceUnavailable, "kafka: %s: %v", what, err)
}

func statusOf(err error) int {
	var he *httpError
	if errors.As(err, &he) {
		return he.status
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return http.StatusServiceUnavailable
	}
	return http.StatusBadGateway
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, err error) {
	writeJSON(w, statusOf(err), map[string]string{"error": err.Error()})
}

// Command localstack serves S3 and DynamoDB on one address, as
// LocalStack does on 127.0.0.1:4566, for machines without Docker:
//
//	go run ./localstack [-listen 127.0.0.1:4566] [-data DIR] [-bucket NAME ...] [-table NAME ...]
//
// A request whose X-Amz-Target header starts with "DynamoDB_20120810."
// goes to DynamoDB (minidyn, package dynamolocal: in memory, lost on
// exit); GET /_localstack/health answers LocalStack's health JSON; any
// other request goes to S3 (gofakes3, package s3local: in DIR/s3.db with
// -data, else in memory). Signatures are not checked; clients need
// path-style S3 addressing.
//
// -bucket and -table (repeatable) create buckets and tables at start;
// tables get the broker's key schema (dynamo.CreateTable). Once listening
// it prints one line to stdout,
//
//	localstack: serving S3 and DynamoDB on http://127.0.0.1:4566
//
// and serves until SIGINT or SIGTERM. It listens on loopback only unless
// -allow-remote is given. Exit status: 0 after a signal, 2 for bad flags,
// 1 for other failures.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/johannesboyne/gofakes3"

	"github.com/stratamq/strata/pkg/metastore/dynamo"
	"github.com/stratamq/strata/pkg/metastore/dynamo/dynamolocal"
	"github.com/stratamq/strata/pkg/objstore/s3local"
)

const usage = `usage: go run ./localstack [flags]

Serves S3 and DynamoDB on one address, like LocalStack's 127.0.0.1:4566,
without Docker. DynamoDB requests (X-Amz-Target: DynamoDB_20120810.*) go
to minidyn, in memory; everything else goes to S3 (gofakes3), kept in
DIR/s3.db with -data, else in memory.

flags:
`

// readyPrefix starts the line printed to stdout once the listener is up;
// the endpoint URL follows it.
const readyPrefix = "localstack: serving S3 and DynamoDB on "

// healthPath is LocalStack's health endpoint.
const healthPath = "/_localstack/health"

// config is what the flags say.
type config struct {
	listen      string
	data        string // directory of s3.db; empty: S3 in memory
	buckets     []string
	tables      []string
	allowRemote bool
}

// usageError is a bad command line: exit status 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run serves until ctx ends and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err == nil {
		err = serve(ctx, cfg, stdout, stderr)
	}
	var ue usageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "localstack: %v (run with -h for the flags)\n", err)
		return 2
	default:
		fmt.Fprintf(stderr, "localstack: %v\n", err)
		return 1
	}
}

// tableName is DynamoDB's rule for table names.
var tableName = regexp.MustCompile(`^[a-zA-Z0-9_.-]{3,255}$`)

func parseFlags(args []string, stderr io.Writer) (config, error) {
	cfg := config{listen: "127.0.0.1:4566"}
	fs := flag.NewFlagSet("localstack", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // run prints the error once, naming the flag
	fs.Usage = func() {}
	fs.StringVar(&cfg.listen, "listen", cfg.listen, "address to serve S3 and DynamoDB on (host:port; port 0 picks a free one)")
	fs.StringVar(&cfg.data, "data", "", "directory for S3's data (DIR/s3.db, kept across restarts); empty: memory. DynamoDB is always in memory")
	fs.Func("bucket", "create this S3 bucket at start unless it exists (repeatable)", func(s string) error {
		if err := gofakes3.ValidateBucketName(s); err != nil {
			return fmt.Errorf("%q is not a bucket name: %v", s, err)
		}
		cfg.buckets = append(cfg.buckets, s)
		return nil
	})
	fs.Func("table", "create this DynamoDB table at start, with the broker's key schema (pk S hash, sk S range, on-demand) (repeatable)", func(s string) error {
		if !tableName.MatchString(s) {
			return fmt.Errorf("%q is not a table name: want 3-255 of a-z A-Z 0-9 _ - .", s)
		}
		cfg.tables = append(cfg.tables, s)
		return nil
	})
	fs.BoolVar(&cfg.allowRemote, "allow-remote", false, "allow a -listen address that is not loopback (anyone who can reach it can read and write everything)")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			fs.SetOutput(stderr)
			fmt.Fprint(stderr, usage)
			fs.PrintDefaults()
			return cfg, err
		}
		return cfg, usageError{err} // the flag package names the flag
	}
	if fs.NArg() > 0 {
		return cfg, usageError{fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	if err := checkListen(cfg.listen, cfg.allowRemote); err != nil {
		return cfg, usageError{fmt.Errorf("invalid value %q for flag -listen: %v", cfg.listen, err)}
	}
	return cfg, nil
}

// checkListen accepts host:port, and unless remote is allowed only a
// loopback host.
func checkListen(addr string, allowRemote bool) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if port == "" {
		return errors.New("no port")
	}
	if allowRemote {
		return nil
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return errors.New("not a loopback address (pass -allow-remote to serve other hosts)")
	}
	return nil
}

// serve runs the stand-in until ctx ends.
func serve(ctx context.Context, cfg config, stdout, stderr io.Writer) error {
	s3path, s3where := "", "S3 in memory"
	if cfg.data != "" {
		if err := os.MkdirAll(cfg.data, 0o755); err != nil {
			return fmt.Errorf("flag -data: %w", err)
		}
		s3path = filepath.Join(cfg.data, "s3.db")
		s3where = "S3 in " + s3path
	}
	s3h, err := s3local.NewHandler(s3path, s3local.WithBuckets(cfg.buckets...))
	if err != nil {
		return err
	}
	defer s3h.Close() // after the server has stopped: see below
	ln, err := net.Listen("tcp", cfg.listen)
	if err != nil {
		return fmt.Errorf("listen on %s (flag -listen): %w", cfg.listen, err)
	}
	srv := &http.Server{Handler: newRouter(dynamolocal.NewHandler(), s3h), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	defer srv.Close()

	url := "http://" + ln.Addr().String()
	if err := createTables(ctx, localURL(ln.Addr()), cfg.tables); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "localstack: %s; DynamoDB in memory (lost on exit); buckets %s; tables %s\n",
		s3where, list(cfg.buckets), list(cfg.tables))
	fmt.Fprintf(stdout, "%s%s\n", readyPrefix, url)

	select {
	case <-ctx.Done():
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	}
	fmt.Fprintln(stderr, "localstack: shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shut down: %w", err)
	}
	if err := s3h.Close(); err != nil {
		return fmt.Errorf("close s3: %w", err)
	}
	return nil
}

// localURL is the URL this process reaches its own listener at: an
// unspecified host (0.0.0.0, ::) is reached through loopback.
func localURL(a net.Addr) string {
	tcp, ok := a.(*net.TCPAddr)
	if !ok || !tcp.IP.IsUnspecified() {
		return "http://" + a.String()
	}
	return fmt.Sprintf("http://127.0.0.1:%d", tcp.Port)
}

// createTables creates tables through the DynamoDB API at endpoint, as
// `brokerfleet serve -create-table` would.
func createTables(ctx context.Context, endpoint string, tables []string) error {
	if len(tables) == 0 {
		return nil
	}
	client, err := dynamo.NewClient(ctx, endpoint, "", 0)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for _, t := range tables {
		if err := dynamo.CreateTable(ctx, client, t); err != nil {
			return fmt.Errorf("flag -table: %w", err)
		}
	}
	return nil
}

func list(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// newRouter sends DynamoDB requests to dyn, answers the health check and
// sends everything else to s3. Requests for other JSON-protocol services
// (another X-Amz-Target) are refused rather than misread as S3.
func newRouter(dyn, s3 http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		target := r.Header.Get("X-Amz-Target")
		switch {
		case strings.HasPrefix(target, dynamolocal.TargetPrefix):
			dyn.ServeHTTP(w, r)
		case target != "":
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			w.WriteHeader(http.StatusBadRequest)
			json.NewEncoder(w).Encode(map[string]string{
				"__type":  "UnknownOperationException",
				"message": fmt.Sprintf("this stand-in serves S3 and DynamoDB only, not %q", target),
			})
		case r.URL.Path == healthPath:
			health(w, r)
		default:
			s3.ServeHTTP(w, r)
		}
	})
}

// health answers like LocalStack's /_localstack/health.
func health(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if r.Method == http.MethodHead {
		return
	}
	json.NewEncoder(w).Encode(map[string]any{
		"services": map[string]string{"dynamodb": "running", "s3": "running"},
		"edition":  "strata-go",
	})
}

// Package testlambda fakes the two AWS Lambda APIs the functions' tests
// need: the Invoke API a trigger or retry worker calls (Invoke, with
// scriptable behaviour that records every payload), and the Runtime API a
// built bootstrap binary polls (Runtime).
package testlambda

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
)

// Behaviour decides an invocation's outcome: n counts the function's
// invocations from 1; a non-nil error is returned as a function error
// (X-Amz-Function-Error: Unhandled).
type Behaviour func(n int, ev events.KafkaEvent) error

// Succeed always succeeds.
func Succeed(int, events.KafkaEvent) error { return nil }

// Fail always fails.
func Fail(int, events.KafkaEvent) error { return fmt.Errorf("always fails") }

// FailOn fails invocations with a record whose value contains s.
func FailOn(s string) Behaviour {
	return func(_ int, ev events.KafkaEvent) error {
		for _, v := range Values(ev) {
			if strings.Contains(v, s) {
				return fmt.Errorf("poisoned by %q", v)
			}
		}
		return nil
	}
}

// FailTimes fails the first k invocations, then succeeds.
func FailTimes(k int) Behaviour {
	return func(n int, _ events.KafkaEvent) error {
		if n <= k {
			return fmt.Errorf("failure %d of %d", n, k)
		}
		return nil
	}
}

// Values decodes the values of ev's records, ordered by topic-partition key
// then offset.
func Values(ev events.KafkaEvent) []string {
	var out []string
	for _, k := range sortedKeys(ev.Records) {
		for _, r := range ev.Records[k] {
			b, _ := base64.StdEncoding.DecodeString(r.Value)
			out = append(out, string(b))
		}
	}
	return out
}

func sortedKeys(m map[string][]events.KafkaRecord) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	for i := range ks {
		for j := i + 1; j < len(ks); j++ {
			if ks[j] < ks[i] {
				ks[i], ks[j] = ks[j], ks[i]
			}
		}
	}
	return ks
}

// Call is one recorded invocation.
type Call struct {
	Function string
	Payload  []byte
	Event    events.KafkaEvent
	Failed   bool
}

// Invoke is a fake Lambda Invoke endpoint on 127.0.0.1.
type Invoke struct {
	URL string

	mu     sync.Mutex
	behave Behaviour
	calls  []Call
}

// NewInvoke serves POST /2015-03-31/functions/{name}/invocations with b.
func NewInvoke(t testing.TB, b Behaviour) *Invoke {
	f := &Invoke{behave: b}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &httptest.Server{Listener: l, Config: &http.Server{Handler: http.HandlerFunc(f.serve)}}
	srv.Start()
	t.Cleanup(srv.Close)
	f.URL = srv.URL
	return f
}

// SetBehaviour replaces the behaviour for later invocations.
func (f *Invoke) SetBehaviour(b Behaviour) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.behave = b
}

// Calls returns the invocations so far.
func (f *Invoke) Calls() []Call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Call(nil), f.calls...)
}

// Processed returns the values of the records of successful invocations, in
// order.
func (f *Invoke) Processed() []string {
	var out []string
	for _, c := range f.Calls() {
		if !c.Failed {
			out = append(out, Values(c.Event)...)
		}
	}
	return out
}

func (f *Invoke) serve(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/2015-03-31/functions/")
	name, ok2 := strings.CutSuffix(rest, "/invocations")
	if r.Method != http.MethodPost || !ok || !ok2 {
		http.Error(w, `{"message":"not found"}`, http.StatusNotFound)
		return
	}
	if it := r.Header.Get("X-Amz-Invocation-Type"); it != "" && it != "RequestResponse" {
		http.Error(w, `{"message":"want RequestResponse"}`, http.StatusBadRequest)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var ev events.KafkaEvent
	if err := json.Unmarshal(body, &ev); err != nil {
		w.Header().Set("X-Amzn-Errortype", "InvalidRequestContentException")
		http.Error(w, `{"message":"bad payload"}`, http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	n := 1
	for _, c := range f.calls {
		if c.Function == name {
			n++
		}
	}
	err := f.behave(n, ev)
	f.calls = append(f.calls, Call{Function: name, Payload: body, Event: ev, Failed: err != nil})
	f.mu.Unlock()
	w.Header().Set("X-Amz-Executed-Version", "$LATEST")
	if err != nil {
		w.Header().Set("X-Amz-Function-Error", "Unhandled")
		b, _ := json.Marshal(map[string]string{"errorMessage": err.Error(), "errorType": "errorString"})
		w.Write(b)
		return
	}
	w.Write([]byte(`{"ok":true}`))
}

// Client is a Lambda client for endpoint with dummy credentials.
func Client(endpoint string) *lambda.Client {
	return lambda.New(lambda.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(endpoint),
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
	})
}

// Build builds pkg (an import path) as a bootstrap binary for this machine
// with -tags lambda.norpc.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "bootstrap")
	cmd := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", bin, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+runtime.GOOS, "GOARCH="+runtime.GOARCH)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// Result is what a function returned for one invocation.
type Result struct {
	Body  []byte
	Error bool // posted to /error
}

type invocation struct {
	id       string
	payload  []byte
	deadline time.Time
	result   chan Result
}

// Runtime is a fake Lambda Runtime API on 127.0.0.1 (Addr is host:port,
// the value of AWS_LAMBDA_RUNTIME_API).
type Runtime struct {
	Addr string

	next    chan *invocation
	done    chan struct{}
	mu      sync.Mutex
	pending map[string]*invocation
	seq     int
	initErr chan []byte
}

// NewRuntime starts the fake Runtime API.
func NewRuntime(t testing.TB) *Runtime {
	rt := &Runtime{next: make(chan *invocation), done: make(chan struct{}), pending: map[string]*invocation{}, initErr: make(chan []byte, 1)}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /2018-06-01/runtime/invocation/next", rt.serveNext)
	mux.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/response", rt.serveResult(false))
	mux.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/error", rt.serveResult(true))
	mux.HandleFunc("POST /2018-06-01/runtime/init/error", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		select {
		case rt.initErr <- b:
		default:
		}
		w.WriteHeader(http.StatusAccepted)
	})
	srv := &httptest.Server{Listener: l, Config: &http.Server{Handler: mux}}
	srv.Start()
	t.Cleanup(func() {
		close(rt.done)
		srv.CloseClientConnections()
		srv.Close()
	})
	rt.Addr = l.Addr().String()
	return rt
}

func (rt *Runtime) serveNext(w http.ResponseWriter, r *http.Request) {
	select {
	case inv := <-rt.next:
		w.Header().Set("Lambda-Runtime-Aws-Request-Id", inv.id)
		w.Header().Set("Lambda-Runtime-Deadline-Ms", strconv.FormatInt(inv.deadline.UnixMilli(), 10))
		w.Header().Set("Lambda-Runtime-Invoked-Function-Arn", "arn:aws:lambda:us-east-1:000000000000:function:test")
		w.Header().Set("Lambda-Runtime-Trace-Id", "Root=1-00000000-000000000000000000000000")
		w.Header().Set("Content-Type", "application/json")
		w.Write(inv.payload)
	case <-rt.done:
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
	case <-r.Context().Done():
	}
}

func (rt *Runtime) serveResult(isErr bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rt.mu.Lock()
		inv := rt.pending[r.PathValue("id")]
		delete(rt.pending, r.PathValue("id"))
		rt.mu.Unlock()
		if inv == nil {
			http.Error(w, `{"errorMessage":"unknown request id"}`, http.StatusBadRequest)
			return
		}
		inv.result <- Result{Body: b, Error: isErr}
		w.WriteHeader(http.StatusAccepted)
	}
}

// Invoke hands payload to the function with the given deadline and waits
// (up to the deadline plus wait) for its response or error.
func (rt *Runtime) Invoke(payload []byte, deadline time.Time, wait time.Duration) (Result, error) {
	rt.mu.Lock()
	rt.seq++
	inv := &invocation{id: fmt.Sprintf("req-%d", rt.seq), payload: payload, deadline: deadline, result: make(chan Result, 1)}
	rt.pending[inv.id] = inv
	rt.mu.Unlock()
	timeout := time.After(time.Until(deadline) + wait)
	select {
	case rt.next <- inv:
	case b := <-rt.initErr:
		return Result{}, fmt.Errorf("init error: %s", b)
	case <-timeout:
		return Result{}, fmt.Errorf("function did not ask for the invocation")
	}
	select {
	case res := <-inv.result:
		return res, nil
	case <-timeout:
		return Result{}, fmt.Errorf("no response by the deadline")
	}
}

// Start runs bin with AWS_LAMBDA_RUNTIME_API pointing at rt and env added;
// its output goes to the returned buffer.
func (rt *Runtime) Start(t testing.TB, bin string, env ...string) fmt.Stringer {
	t.Helper()
	out := &syncBuffer{}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), append([]string{"AWS_LAMBDA_RUNTIME_API=" + rt.Addr,
		"AWS_LAMBDA_FUNCTION_NAME=test", "AWS_LAMBDA_FUNCTION_VERSION=$LATEST", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE=128"}, env...)...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("%s output:\n%s", filepath.Base(bin), out.String())
		}
	})
	return out
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

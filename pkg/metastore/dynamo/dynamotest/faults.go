package dynamotest

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"
)

// Fault is what Faults does to a request it fails.
type Fault int

// Faults Faults can inject.
const (
	// Fault500 answers 500 InternalServerError without forwarding.
	Fault500 Fault = iota + 1
	// FaultThrottle answers 400 ThrottlingException without forwarding.
	FaultThrottle
	// FaultApplied500 forwards the request (it is applied) and then answers
	// 500: the answer is lost, as when a connection drops after the write.
	FaultApplied500
	// FaultTransactionConflict answers 400 TransactionCanceledException
	// with the reason TransactionConflict, without forwarding.
	FaultTransactionConflict
)

// Faults is an http.Handler middleware in front of a stand-in that fails
// or delays requests on demand. The zero value passes everything through;
// it is safe for concurrent use.
type Faults struct {
	mu       sync.Mutex
	op       string
	left     int
	kind     Fault
	delay    time.Duration
	injected int
}

// Fail makes the next n requests of operation op ("" for any) fail with
// kind, replacing any earlier Fail.
func (f *Faults) Fail(op string, n int, kind Fault) {
	f.mu.Lock()
	f.op, f.left, f.kind = op, n, kind
	f.mu.Unlock()
}

// Delay holds every request for d before handling it (0 turns it off).
// A request whose client gives up during the delay is dropped unanswered.
func (f *Faults) Delay(d time.Duration) {
	f.mu.Lock()
	f.delay = d
	f.mu.Unlock()
}

// Injected returns how many requests have been failed so far.
func (f *Faults) Injected() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.injected
}

// take decides the fate of one request of operation op.
func (f *Faults) take(op string) (Fault, time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.left > 0 && (f.op == "" || f.op == op) {
		f.left--
		f.injected++
		return f.kind, f.delay
	}
	return 0, f.delay
}

// Wrap returns next behind f.
func (f *Faults) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		kind, delay := f.take(Operation(r))
		if delay > 0 {
			// Read the body first: only then does the server watch the
			// connection and cancel r.Context() when the client goes.
			body, err := io.ReadAll(r.Body)
			if err != nil {
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			t := time.NewTimer(delay)
			select {
			case <-r.Context().Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		switch kind {
		case Fault500:
			writeError(w, http.StatusInternalServerError, "InternalServerError")
		case FaultThrottle:
			writeError(w, http.StatusBadRequest, "ThrottlingException")
		case FaultTransactionConflict:
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"__type":"com.amazonaws.dynamodb.v20120810#TransactionCanceledException",`+
				`"message":"Transaction cancelled (injected by dynamotest.Faults)","CancellationReasons":[{"Code":"TransactionConflict"}]}`)
		case FaultApplied500:
			next.ServeHTTP(httptest.NewRecorder(), r)
			writeError(w, http.StatusInternalServerError, "InternalServerError")
		default:
			next.ServeHTTP(w, r)
		}
	})
}

func writeError(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"__type":"com.amazonaws.dynamodb.v20120810#%s","message":"injected by dynamotest.Faults"}`, code)
}

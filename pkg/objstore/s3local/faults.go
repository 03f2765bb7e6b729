package s3local

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Fault is what Faults does to a request it fails.
type Fault int

// Faults Faults can inject.
const (
	// Fault500 answers 500 InternalError without forwarding.
	Fault500 Fault = iota + 1
	// Fault503 answers 503 SlowDown (S3's throttling) without forwarding.
	Fault503
	// FaultApplied500 forwards the request (it is applied) and then
	// answers 500 InternalError: the answer is lost, as when a connection
	// drops after the write.
	FaultApplied500
	// FaultConflict answers 409 ConditionalRequestConflict without
	// forwarding, as S3 does to a conditional write racing another.
	FaultConflict
)

func (k Fault) String() string {
	switch k {
	case Fault500:
		return "500 InternalError"
	case Fault503:
		return "503 SlowDown"
	case FaultApplied500:
		return "applied, then 500 InternalError"
	case FaultConflict:
		return "409 ConditionalRequestConflict"
	}
	return fmt.Sprintf("Fault(%d)", int(k))
}

// Faults is an http.Handler middleware in front of an S3 stand-in (put it
// there with WithWrap(f.Wrap)) that fails or delays requests on demand and
// counts requests by operation (see Operation), injected ones included.
// The zero value passes everything through; it is safe for concurrent
// use.
type Faults struct {
	mu sync.Mutex

	op       string // "" for any
	left     int
	kind     Fault
	fraction float64 // with fracOp and fracKind: fail this share of requests
	fracOp   string
	fracKind Fault
	conflict int // conditional PUTs left to answer 409
	delay    time.Duration

	injected int
	counts   map[string]int64
}

// Fail makes the next n requests of operation op ("" for any) fail with
// kind, replacing any earlier Fail.
func (f *Faults) Fail(op string, n int, kind Fault) {
	f.mu.Lock()
	f.op, f.left, f.kind = op, n, kind
	f.mu.Unlock()
}

// FailFraction makes each request of operation op ("" for any) fail with
// kind with probability p, until called again with p = 0. Fail's requests
// come first.
func (f *Faults) FailFraction(op string, p float64, kind Fault) {
	f.mu.Lock()
	f.fracOp, f.fraction, f.fracKind = op, p, kind
	f.mu.Unlock()
}

// ConflictConditionalPuts answers the next n PutObject requests that carry
// If-None-Match or If-Match with 409 ConditionalRequestConflict, without
// forwarding them. Fail and FailFraction come first.
func (f *Faults) ConflictConditionalPuts(n int) {
	f.mu.Lock()
	f.conflict = n
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

// Count returns the requests of operation op seen so far.
func (f *Faults) Count(op string) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts[op]
}

// Counts returns a copy of the request counts by operation.
func (f *Faults) Counts() map[string]int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.counts)
}

// ResetCounts zeroes the request counts and Injected.
func (f *Faults) ResetCounts() {
	f.mu.Lock()
	clear(f.counts)
	f.injected = 0
	f.mu.Unlock()
}

// take counts one request and decides its fate.
func (f *Faults) take(r *http.Request) (string, Fault, time.Duration) {
	op := Operation(r)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.counts == nil {
		f.counts = map[string]int64{}
	}
	f.counts[op]++
	var kind Fault
	switch {
	case f.left > 0 && (f.op == "" || f.op == op):
		f.left--
		kind = f.kind
	case f.fraction > 0 && (f.fracOp == "" || f.fracOp == op) && rand.Float64() < f.fraction:
		kind = f.fracKind
	case f.conflict > 0 && op == "PutObject" && (r.Header.Get("If-None-Match") != "" || r.Header.Get("If-Match") != ""):
		f.conflict--
		kind = FaultConflict
	}
	if kind != 0 {
		f.injected++
	}
	return op, kind, f.delay
}

// Wrap returns next behind f.
func (f *Faults) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, kind, delay := f.take(r)
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
			writeError(w, r, http.StatusInternalServerError, "InternalError", "We encountered an internal error. Please try again.")
		case Fault503:
			writeError(w, r, http.StatusServiceUnavailable, "SlowDown", "Please reduce your request rate.")
		case FaultConflict:
			writeError(w, r, http.StatusConflict, "ConditionalRequestConflict",
				"A conflicting conditional operation is currently in progress against this resource. Please try again.")
		case FaultApplied500:
			next.ServeHTTP(discard{h: http.Header{}}, r)
			writeError(w, r, http.StatusInternalServerError, "InternalError", "We encountered an internal error. Please try again.")
		default:
			next.ServeHTTP(w, r)
		}
	})
}

func writeError(w http.ResponseWriter, r *http.Request, status int, code, msg string) {
	// Drain what the client sent, so it reads the answer rather than a
	// reset connection.
	_, _ = io.Copy(io.Discard, r.Body)
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return
	}
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+
		`<Error><Code>%s</Code><Message>%s (injected by s3local.Faults)</Message><RequestId>s3local-fault</RequestId></Error>`, code, msg)
}

// Operation names the S3 operation of a path-style request: PutObject,
// CopyObject, GetObject, HeadObject, DeleteObject, DeleteObjects,
// ListObjectsV2, ListObjects, ListObjectVersions, CreateBucket,
// HeadBucket, DeleteBucket, ListBuckets, CreateMultipartUpload,
// UploadPart, CompleteMultipartUpload, AbortMultipartUpload,
// ListMultipartUploads, ListParts, or "METHOD?" when it is none of
// these.
func Operation(r *http.Request) string {
	path := strings.TrimPrefix(r.URL.Path, "/")
	bucket, object, _ := strings.Cut(path, "/")
	q := r.URL.Query()
	has := func(k string) bool { _, ok := q[k]; return ok }
	switch {
	case bucket == "":
		if r.Method == http.MethodGet {
			return "ListBuckets"
		}
	case has("uploadId"):
		switch r.Method {
		case http.MethodPut:
			return "UploadPart"
		case http.MethodPost:
			return "CompleteMultipartUpload"
		case http.MethodDelete:
			return "AbortMultipartUpload"
		case http.MethodGet:
			return "ListParts"
		}
	case has("uploads"):
		switch r.Method {
		case http.MethodPost:
			return "CreateMultipartUpload"
		case http.MethodGet:
			return "ListMultipartUploads"
		}
	case object != "":
		switch r.Method {
		case http.MethodPut:
			if r.Header.Get("X-Amz-Copy-Source") != "" {
				return "CopyObject"
			}
			return "PutObject"
		case http.MethodGet:
			return "GetObject"
		case http.MethodHead:
			return "HeadObject"
		case http.MethodDelete:
			return "DeleteObject"
		}
	default:
		switch r.Method {
		case http.MethodGet:
			switch {
			case has("versions"):
				return "ListObjectVersions"
			case q.Get("list-type") == "2":
				return "ListObjectsV2"
			}
			return "ListObjects"
		case http.MethodPut:
			return "CreateBucket"
		case http.MethodHead:
			return "HeadBucket"
		case http.MethodDelete:
			return "DeleteBucket"
		case http.MethodPost:
			if has("delete") {
				return "DeleteObjects"
			}
		}
	}
	return r.Method + "?"
}

// discard is a ResponseWriter that drops the answer (net/http/httptest's
// recorder would register a command-line flag in every binary).
type discard struct{ h http.Header }

func (d discard) Header() http.Header         { return d.h }
func (d discard) Write(b []byte) (int, error) { return len(b), nil }
func (d discard) WriteHeader(int)             {}

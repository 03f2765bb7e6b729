package s3local_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stratamq/strata/pkg/objstore/s3local"
)

func TestOperation(t *testing.T) {
	for _, tc := range []struct {
		method, target string
		header         string
		want           string
	}{
		{"GET", "/", "", "ListBuckets"},
		{"PUT", "/b", "", "CreateBucket"},
		{"HEAD", "/b", "", "HeadBucket"},
		{"DELETE", "/b", "", "DeleteBucket"},
		{"GET", "/b?list-type=2&prefix=x", "", "ListObjectsV2"},
		{"GET", "/b?prefix=x", "", "ListObjects"},
		{"GET", "/b?versions", "", "ListObjectVersions"},
		{"POST", "/b?delete", "", "DeleteObjects"},
		{"PUT", "/b/k/with/slashes", "", "PutObject"},
		{"PUT", "/b/k", "X-Amz-Copy-Source", "CopyObject"},
		{"GET", "/b/k", "", "GetObject"},
		{"HEAD", "/b/k", "", "HeadObject"},
		{"DELETE", "/b/k", "", "DeleteObject"},
		{"POST", "/b/k?uploads", "", "CreateMultipartUpload"},
		{"GET", "/b?uploads", "", "ListMultipartUploads"},
		{"PUT", "/b/k?partNumber=1&uploadId=u", "", "UploadPart"},
		{"POST", "/b/k?uploadId=u", "", "CompleteMultipartUpload"},
		{"DELETE", "/b/k?uploadId=u", "", "AbortMultipartUpload"},
		{"GET", "/b/k?uploadId=u", "", "ListParts"},
		{"POST", "/b", "", "POST?"},
		{"PATCH", "/b/k", "", "PATCH?"},
	} {
		r := httptest.NewRequest(tc.method, tc.target, nil)
		if tc.header != "" {
			r.Header.Set(tc.header, "src/key")
		}
		if got := s3local.Operation(r); got != tc.want {
			t.Errorf("%s %s: %s, want %s", tc.method, tc.target, got, tc.want)
		}
	}
}

func start(t *testing.T, path string, opts ...s3local.Option) *s3local.Server {
	t.Helper()
	s, err := s3local.Start(path, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func do(t *testing.T, method, url, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestStartServesBuckets(t *testing.T) {
	s := start(t, "", s3local.WithBuckets("one", "two", "one"))
	if !strings.HasPrefix(s.URL(), "http://127.0.0.1:") {
		t.Fatalf("url %s", s.URL())
	}
	if err := s.CreateBucket("two"); err != nil {
		t.Fatalf("second create: %v", err)
	}
	if err := s.CreateBucket("Not_Valid"); err == nil {
		t.Fatal("invalid bucket name accepted")
	}
	if code, body := do(t, "PUT", s.URL()+"/one/k", "v"); code != 200 {
		t.Fatalf("put: %d %s", code, body)
	}
	if code, body := do(t, "GET", s.URL()+"/one/k", ""); code != 200 || body != "v" {
		t.Fatalf("get: %d %s", code, body)
	}
	if code, _ := do(t, "GET", s.URL()+"/three/k", ""); code != 404 {
		t.Fatalf("get from a missing bucket: %d", code)
	}
	_, body := do(t, "GET", s.URL()+"/", "")
	if !strings.Contains(body, "<Name>one</Name>") || !strings.Contains(body, "<Name>two</Name>") {
		t.Fatalf("list buckets: %s", body)
	}
}

func TestLoopbackOnly(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:0", "example.com:0", "nonsense"} {
		if s, err := s3local.Start("", s3local.WithAddr(addr)); err == nil {
			s.Close()
			t.Errorf("%s accepted", addr)
		}
	}
}

func TestBoltPersistsAndLocks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s3.bolt")
	s, err := s3local.Start(path, s3local.WithBuckets("bkt"))
	if err != nil {
		t.Fatal(err)
	}
	if code, _ := do(t, "PUT", s.URL()+"/bkt/k", "kept"); code != 200 {
		t.Fatalf("put: %d", code)
	}
	if _, err := s3local.Start(path); err == nil {
		t.Fatal("a second server opened a file in use")
	}
	addr := strings.TrimPrefix(s.URL(), "http://")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	s = start(t, path, s3local.WithAddr(addr))
	if s.URL() != "http://"+addr {
		t.Fatalf("restarted at %s, want %s", s.URL(), addr)
	}
	if code, body := do(t, "GET", s.URL()+"/bkt/k", ""); code != 200 || body != "kept" {
		t.Fatalf("after restart: %d %s", code, body)
	}
}

func TestFaults(t *testing.T) {
	var f s3local.Faults
	s := start(t, "", s3local.WithBuckets("bkt"), s3local.WithWrap(f.Wrap))
	if code, _ := do(t, "PUT", s.URL()+"/bkt/k", "v"); code != 200 {
		t.Fatalf("zero Faults: %d", code)
	}
	f.Fail("GetObject", 2, s3local.Fault503)
	for range 2 {
		if code, body := do(t, "GET", s.URL()+"/bkt/k", ""); code != 503 || !strings.Contains(body, "<Code>SlowDown</Code>") {
			t.Fatalf("injected: %d %s", code, body)
		}
	}
	if code, _ := do(t, "GET", s.URL()+"/bkt/k", ""); code != 200 {
		t.Fatalf("after the faults: %d", code)
	}
	f.Fail("", 1, s3local.FaultApplied500)
	if code, _ := do(t, "PUT", s.URL()+"/bkt/k2", "applied"); code != 500 {
		t.Fatalf("applied 500: %d", code)
	}
	if code, body := do(t, "GET", s.URL()+"/bkt/k2", ""); code != 200 || body != "applied" {
		t.Fatalf("the lost write: %d %s", code, body)
	}
	f.ConflictConditionalPuts(1)
	req, _ := http.NewRequest("PUT", s.URL()+"/bkt/k3", strings.NewReader("c"))
	req.Header.Set("If-None-Match", "*")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 409 {
		t.Fatalf("conditional put: %d", resp.StatusCode)
	}
	if code, _ := do(t, "GET", s.URL()+"/bkt/k3", ""); code != 404 {
		t.Fatalf("a conflicted put landed: %d", code)
	}
	if got := f.Injected(); got != 4 {
		t.Fatalf("injected %d, want 4", got)
	}
	if c := f.Counts(); c["PutObject"] != 3 || c["GetObject"] != 5 {
		t.Fatalf("counts %v", c)
	}
	f.Delay(300 * time.Millisecond)
	start := time.Now()
	do(t, "GET", s.URL()+"/bkt/k", "")
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("delay not applied: %v", d)
	}
	f.Delay(0)
	f.ResetCounts()
	if len(f.Counts()) != 0 || f.Injected() != 0 {
		t.Fatalf("after reset: %v %d", f.Counts(), f.Injected())
	}
}

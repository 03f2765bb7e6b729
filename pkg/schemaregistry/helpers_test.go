package schemaregistry

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/stratamq/strata/pkg/metastore"
	"github.com/stratamq/strata/pkg/metastore/embedded"
)

// newMeta opens a metastore over a fresh embedded store.
func newMeta(t testing.TB) *metastore.Meta {
	t.Helper()
	s, err := embedded.Open(filepath.Join(t.TempDir(), "meta.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return metastore.New(s)
}

// serve starts a registry over meta on 127.0.0.1 and returns its URL.
func serve(t *testing.T, meta *metastore.Meta, opts Options) (*Registry, string) {
	t.Helper()
	r := New(meta, opts)
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return r, srv.URL
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// call sends a request with a raw body and content type ("" for none) and
// returns the status and body.
func call(t *testing.T, method, url, ctype, body string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = bytes.NewBufferString(body)
	}
	req, err := http.NewRequestWithContext(testCtx(t), method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Header.Get("Content-Type"); got != contentType {
		t.Errorf("%s %s: content type %q, want %q", method, url, got, contentType)
	}
	return resp.StatusCode, b
}

// errBody is Confluent's error body.
type errBody struct {
	Code    int    `json:"error_code"`
	Message string `json:"message"`
}

// wantError checks a call answers status with error code code and a
// message.
func wantError(t *testing.T, status int, body []byte, wantStatus, wantCode int) {
	t.Helper()
	var e errBody
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	if status != wantStatus || e.Code != wantCode || e.Message == "" {
		t.Fatalf("got %d %+v, want %d with error_code %d and a message", status, e, wantStatus, wantCode)
	}
}

// register registers a schema through the API and returns the response.
func register(t *testing.T, base, subject, typ, schema string) (int, []byte) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"schema": schema, "schemaType": typ})
	if err != nil {
		t.Fatal(err)
	}
	return call(t, "POST", base+"/subjects/"+subject+"/versions", contentType, string(body))
}

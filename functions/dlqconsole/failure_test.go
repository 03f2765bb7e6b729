package dlqconsole

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"
)

// TestKafkaDown: with no broker the API answers 503 (JSON) and the pages an
// error page, never 500.
func TestKafkaDown(t *testing.T) {
	c, err := newConsole(Options{Seeds: []string{freePort(t)}})
	require.NoError(t, err)
	defer c.producer.Close()
	c.timeout = 500 * time.Millisecond
	srv := httptest.NewServer(c)
	defer srv.Close()
	for _, tc := range []struct{ method, path, body string }{
		{"GET", "/api/topics", ""},
		{"GET", "/api/topics/orders.dlq/letters", ""},
		{"GET", "/api/topics/orders.dlq/letters/0/0", ""},
		{"POST", "/api/topics/orders.dlq/replay", `{"letters":[{"partition":0,"offset":0}]}`},
		{"POST", "/api/topics/orders.dlq/purge", `{"all":true}`},
		{"GET", "/", ""},
		{"GET", "/topics/orders.dlq", ""},
	} {
		req, _ := http.NewRequest(tc.method, srv.URL+tc.path, strings.NewReader(tc.body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		var e struct{ Error string }
		if strings.HasPrefix(tc.path, "/api/") {
			require.NoError(t, json.NewDecoder(resp.Body).Decode(&e))
			require.Contains(t, e.Error, "kafka")
		}
		resp.Body.Close()
		require.Contains(t, []int{502, 503}, resp.StatusCode, "%s %s: %s", tc.method, tc.path, e.Error)
	}
}

// TestRegistryDown: a value with a Confluent header is still shown (hex,
// with a note) when the registry does not answer.
func TestRegistryDown(t *testing.T) {
	cl := startCluster(t)
	s := seed(t, cl)
	h, err := New(Options{Seeds: []string{cl.bootstrap}, RegistryURL: "http://" + freePort(t)})
	require.NoError(t, err)
	defer Close(h)
	srv := httptest.NewServer(h)
	defer srv.Close()
	var l Letter
	api := apiClient{t, srv.URL} // at the root
	require.Equal(t, 200, api.do("GET", fmt.Sprintf("/api/topics/orders.dlq/letters/0/%d", s.avro.Offset), "", &l))
	require.Equal(t, "hex", l.Value.Encoding)
	require.Contains(t, l.Value.Note, "registry")
	require.True(t, strings.HasPrefix(l.Value.Data, fmt.Sprintf("00%08x", s.schemaID)), l.Value.Data)
}

func TestOptions(t *testing.T) {
	for _, o := range []Options{{}, {Seeds: []string{"nohost"}}, {Seeds: []string{"127.0.0.1:9092"}, BasePath: "console"}} {
		_, err := New(o)
		require.Error(t, err, "%+v", o)
	}
	h, err := New(Options{Seeds: []string{"127.0.0.1:9092"}, BasePath: "/console/"})
	require.NoError(t, err)
	defer Close(h)
	require.Equal(t, "/console", h.(*Console).opts.BasePath)
	require.Equal(t, DefaultGroup, h.(*Console).group)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/console", nil))
	require.Equal(t, http.StatusMovedPermanently, rec.Code)
	require.Equal(t, "/console/", rec.Header().Get("Location"))
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/console/style.css", nil))
	require.Equal(t, 200, rec.Code)
	require.Contains(t, rec.Header().Get("Content-Type"), "text/css")
}

func TestDoneMetadata(t *testing.T) {
	require.Empty(t, formatDone(nil))
	m := formatDone(map[int64]bool{9: true, 3: true, 5: true})
	require.Equal(t, metaPrefix+"3,5,9", m)
	require.Equal(t, []int64{3, 5, 9}, parseDone(m))
	require.Nil(t, parseDone("someone else's metadata"))
	require.Equal(t, []int64{1}, parseDone(metaPrefix+"x,1,"))
}

func TestShowPlain(t *testing.T) {
	for _, tc := range []struct {
		in       []byte
		enc, out string
	}{
		{nil, "null", ""},
		{[]byte{}, "text", ""},
		{[]byte("héllo\nworld\t!"), "text", "héllo\nworld\t!"},
		{[]byte("bell\a"), "hex", "62656c6c07"},
		{[]byte{0xff, 0xfe}, "hex", "fffe"},
		{[]byte{0, 0, 0, 0, 1, 2}, "hex", "000000000102"}, // a Confluent header, no registry
	} {
		c := &Console{}
		s := c.show(context.Background(), tc.in)
		require.Equal(t, tc.enc, s.Encoding, "%q", tc.in)
		require.Equal(t, tc.out, s.Data, "%q", tc.in)
	}
	s := Shown{Data: "ééé"}.truncate(3)
	require.Equal(t, "é", s.Data)
	require.True(t, s.Truncated)
}

func FuzzShowPlain(f *testing.F) {
	f.Add([]byte("text"))
	f.Add([]byte{0, 0, 0, 0, 1})
	f.Add([]byte{0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		s := plainShown(b)
		switch s.Encoding {
		case "text":
			require.Equal(t, string(b), s.Data)
		case "hex":
			require.Len(t, s.Data, 2*len(b))
		default:
			t.Fatalf("encoding %q", s.Encoding)
		}
		for n := 0; n < 8; n++ {
			_ = s.truncate(n)
		}
	})
}

func FuzzListQuery(f *testing.F) {
	f.Add("limit=5&after=0:3")
	f.Add("after=-1:99999999999999999999")
	f.Fuzz(func(t *testing.T, q string) {
		v, err := url.ParseQuery(q)
		if err != nil {
			return
		}
		limit, after, err := parseListQuery(v)
		if err != nil {
			require.Equal(t, 400, statusOf(err))
			return
		}
		require.True(t, limit >= 1 && limit <= maxLimit)
		if after != nil {
			require.True(t, after.Partition >= 0 && after.Offset >= 0)
		}
	})
}

// FuzzFunctionURL feeds arbitrary Function URL events through the adapter
// to a handler that needs no Kafka: no panic, and a 400 for bodies that are
// not base64.
func FuzzFunctionURL(f *testing.F) {
	f.Add("/a/b", "x=1", "body", false, "POST")
	f.Add("/", "", "%%%", true, "GET")
	f.Add("", "a=%zz", "", false, "")
	h := FunctionURLHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		w.Header().Set("Content-Type", "application/octet-stream")
		fmt.Fprintf(w, "%s %s\xff", r.Method, r.URL.Path)
	}))
	f.Fuzz(func(t *testing.T, path, query, body string, b64 bool, method string) {
		ev := events.LambdaFunctionURLRequest{RawPath: path, RawQueryString: query, Body: body, IsBase64Encoded: b64,
			Headers: map[string]string{"host": "h"}}
		ev.RequestContext.HTTP.Method = method
		res, err := h(context.Background(), ev)
		require.NoError(t, err)
		require.NotZero(t, res.StatusCode)
		if res.StatusCode == 200 {
			require.True(t, res.IsBase64Encoded, "binary bodies are base64")
		}
	})
}

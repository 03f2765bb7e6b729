package dlqconsole

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratamq/strata/pkg/retry"
)

type apiClient struct {
	t    *testing.T
	base string
}

func (a apiClient) do(method, path, body string, into any) int {
	a.t.Helper()
	req, err := http.NewRequest(method, a.base+path, strings.NewReader(body))
	require.NoError(a.t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(a.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(a.t, err)
	require.NotEqual(a.t, 500, resp.StatusCode, "never 500: %s %s: %s", method, path, b)
	require.Equal(a.t, "nosniff", resp.Header.Get("X-Content-Type-Options"))
	if strings.HasPrefix(path, "/console/api/") {
		require.Contains(a.t, resp.Header.Get("Content-Type"), "application/json", "%s %s", method, path)
		if resp.StatusCode >= 400 {
			var e struct{ Error string }
			require.NoError(a.t, json.Unmarshal(b, &e), "error body %s", b)
			require.NotEmpty(a.t, e.Error)
		}
	}
	if into != nil {
		require.NoError(a.t, json.Unmarshal(b, into), "%s", b)
	}
	return resp.StatusCode
}

func TestAPI(t *testing.T) {
	srv, c, s := newTestConsole(t)
	api := apiClient{t, srv.URL + "/console"}

	// Topics: only .dlq topics, with their counts.
	var topics struct{ Topics []TopicSummary }
	require.Equal(t, 200, api.do("GET", "/api/topics", "", &topics))
	require.Len(t, topics.Topics, 1)
	require.Equal(t, "orders.dlq", topics.Topics[0].Topic)
	require.Equal(t, "orders", topics.Topics[0].OriginTopic)
	require.EqualValues(t, 4, topics.Topics[0].Letters)

	// List, in partition then offset order.
	var page LetterPage
	require.Equal(t, 200, api.do("GET", "/api/topics/orders.dlq/letters", "", &page))
	require.Len(t, page.Letters, 4)
	require.Empty(t, page.Next)
	l0 := page.Letters[0]
	require.Equal(t, s.avro.Offset, l0.Offset)
	require.Equal(t, "orders", l0.OriginTopic)
	require.EqualValues(t, 1, l0.OriginPartition)
	require.EqualValues(t, 10, l0.OriginOffset)
	require.Equal(t, 3, l0.Attempts)
	require.Equal(t, "price missing", l0.LastError)
	require.Equal(t, "json", l0.Value.Encoding)
	require.Equal(t, "text", l0.Key.Encoding)

	// Pagination.
	var p1, p2 LetterPage
	require.Equal(t, 200, api.do("GET", "/api/topics/orders.dlq/letters?limit=3", "", &p1))
	require.Len(t, p1.Letters, 3)
	require.Equal(t, fmt.Sprintf("%d:%d", s.script.Partition, s.script.Offset), p1.Next)
	require.Equal(t, 200, api.do("GET", "/api/topics/orders.dlq/letters?limit=3&after="+p1.Next, "", &p2))
	require.Len(t, p2.Letters, 1)
	require.Equal(t, s.replayed.Offset, p2.Letters[0].Offset)
	require.EqualValues(t, 1, p2.Letters[0].Partition)

	// Show: Avro decoded to JSON through the registry.
	var l Letter
	require.Equal(t, 200, api.do("GET", fmt.Sprintf("/api/topics/orders.dlq/letters/0/%d", s.avro.Offset), "", &l))
	require.Equal(t, "json", l.Value.Encoding)
	require.Equal(t, s.schemaID, l.Value.SchemaID)
	require.Equal(t, "AVRO", l.Value.SchemaType)
	require.JSONEq(t, `{"id":42,"item":"<b>book</b>"}`, l.Value.Data)
	require.Len(t, l.History, 3)
	require.Equal(t, "first price missing", l.History[0].Error)
	var keys []string
	for _, h := range l.Headers {
		keys = append(keys, h.Key)
	}
	require.Contains(t, keys, "trace-id")
	require.Contains(t, keys, retry.HeaderOriginTopic)

	// Binary: hex.
	require.Equal(t, 200, api.do("GET", fmt.Sprintf("/api/topics/orders.dlq/letters/0/%d", s.binary.Offset), "", &l))
	require.Equal(t, "hex", l.Value.Encoding)
	require.Equal(t, "ff000102", l.Value.Data)
	require.Equal(t, "hex", l.Key.Encoding)

	// Script: text in JSON; the page renders it escaped.
	require.Equal(t, 200, api.do("GET", fmt.Sprintf("/api/topics/orders.dlq/letters/1/%d", s.script.Offset), "", &l))
	require.Equal(t, "text", l.Value.Encoding)
	require.Equal(t, "<script>alert(1)</script>", l.Value.Data)

	resp, err := http.Get(srv.URL + fmt.Sprintf("/console/dlq/topics/orders.dlq/letters/1/%d", s.script.Offset))
	require.NoError(t, err)
	html, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	require.NotContains(t, string(html), "<script>alert(1)</script>")
	require.Contains(t, string(html), "&lt;script&gt;alert(1)&lt;/script&gt;")
	require.NotContains(t, string(html), "<img src=x")
	require.Contains(t, resp.Header.Get("Content-Security-Policy"), "default-src 'self'")
	resp, err = http.Get(srv.URL + "/console/dlq/topics/orders.dlq")
	require.NoError(t, err)
	html, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
	require.NotContains(t, string(html), "<script>")
	require.Contains(t, string(html), "&lt;script&gt;")
	require.Contains(t, string(html), "&lt;b&gt;book&lt;/b&gt;", "the decoded Avro value is escaped too")

	// Replay: back to orders at the origin partition, with replay headers.
	var rep struct{ Replayed []ReplayResult }
	body := fmt.Sprintf(`{"letters":[{"partition":0,"offset":%d}]}`, s.avro.Offset)
	require.Equal(t, 200, api.do("POST", "/api/topics/orders.dlq/replay", body, &rep))
	require.Len(t, rep.Replayed, 1)
	require.EqualValues(t, 1, rep.Replayed[0].OriginPartition)
	require.Equal(t, 1, rep.Replayed[0].Replays)
	recs := consumeOrigin(t, c, 1)
	require.Len(t, recs, 1)
	require.EqualValues(t, 1, recs[0].Partition)
	require.Equal(t, "order-42", string(recs[0].Key))
	require.Equal(t, rep.Replayed[0].ReplayedOffset, recs[0].Offset)
	n, _ := header(recs[0], retry.HeaderReplays)
	require.Equal(t, "1", n)
	_, ok := header(recs[0], retry.HeaderReplayedAt)
	require.True(t, ok)
	tid, _ := header(recs[0], "trace-id")
	require.Equal(t, "abc", tid)
	st, _, err := retry.Parse(recs[0].Headers)
	require.NoError(t, err)
	require.Equal(t, 1, st.Replays)

	// The replayed letter is gone from the list.
	require.Equal(t, 200, api.do("GET", "/api/topics/orders.dlq/letters", "", &page))
	require.Len(t, page.Letters, 3)
	for _, l := range page.Letters {
		require.False(t, l.Partition == 0 && l.Offset == s.avro.Offset)
	}

	// Replaying again is refused; forced it goes.
	require.Equal(t, 409, api.do("POST", "/api/topics/orders.dlq/replay", body, nil))
	require.Equal(t, 409, api.do("POST", "/api/topics/orders.dlq/replay",
		fmt.Sprintf(`{"letters":[{"partition":1,"offset":%d}]}`, s.replayed.Offset), nil), "a letter with strata.dlq.replays >= 1")
	forced := fmt.Sprintf(`{"letters":[{"partition":0,"offset":%d}],"force":true}`, s.avro.Offset)
	require.Equal(t, 200, api.do("POST", "/api/topics/orders.dlq/replay", forced, &rep))
	require.Equal(t, 1, rep.Replayed[0].Replays)
	recs = consumeOrigin(t, c, 2)
	require.Len(t, recs, 2)

	// Purge the binary letter (up to it in partition 0): gone.
	require.Equal(t, 200, api.do("POST", "/api/topics/orders.dlq/purge",
		fmt.Sprintf(`{"upTo":[{"partition":0,"offset":%d}]}`, s.binary.Offset), nil))
	require.Equal(t, 200, api.do("GET", "/api/topics/orders.dlq/letters", "", &page))
	require.Len(t, page.Letters, 2)
	for _, l := range page.Letters {
		require.EqualValues(t, 1, l.Partition)
	}
	// Purge exactly one letter of partition 1, then all.
	require.Equal(t, 200, api.do("POST", "/api/topics/orders.dlq/purge",
		fmt.Sprintf(`{"letters":[{"partition":1,"offset":%d}]}`, s.replayed.Offset), nil))
	require.Equal(t, 200, api.do("GET", "/api/topics/orders.dlq/letters", "", &page))
	require.Len(t, page.Letters, 1)
	require.Equal(t, s.script.Offset, page.Letters[0].Offset)
	require.Equal(t, 200, api.do("GET", "/api/topics", "", &topics))
	require.EqualValues(t, 1, topics.Topics[0].Letters)
	require.Equal(t, 200, api.do("POST", "/api/topics/orders.dlq/purge", `{"all":true}`, nil))
	require.Equal(t, 200, api.do("GET", "/api/topics/orders.dlq/letters", "", &page))
	require.Empty(t, page.Letters)
	// A purged letter can still be shown, marked handled.
	require.Equal(t, 200, api.do("GET", fmt.Sprintf("/api/topics/orders.dlq/letters/1/%d", s.script.Offset), "", &l))
	require.True(t, l.Handled)
}

func TestAPIBadRequests(t *testing.T) {
	srv, _, s := newTestConsole(t)
	api := apiClient{t, srv.URL + "/console"}
	for _, tc := range []struct {
		method, path, body string
		want               int
	}{
		{"GET", "/api/topics/nope.dlq/letters", "", 404},
		{"GET", "/api/topics/orders/letters", "", 404},
		{"GET", "/api/topics/payments/letters/0/0", "", 404},
		{"GET", "/api/topics/.dlq/letters", "", 404},
		{"GET", "/api/topics/orders.dlq/letters/0/999", "", 404},
		{"GET", "/api/topics/orders.dlq/letters/7/0", "", 404},
		{"GET", "/api/topics/orders.dlq/letters/x/0", "", 400},
		{"GET", "/api/topics/orders.dlq/letters/0/-1", "", 400},
		{"GET", "/api/topics/orders.dlq/letters/0/99999999999999999999", "", 400},
		{"GET", "/api/topics/orders.dlq/letters?limit=0", "", 400},
		{"GET", "/api/topics/orders.dlq/letters?limit=abc", "", 400},
		{"GET", "/api/topics/orders.dlq/letters?after=3", "", 400},
		{"GET", "/api/topics/orders.dlq/letters?after=a:b", "", 400},
		{"GET", "/api/nothing", "", 404},
		{"DELETE", "/api/topics", "", 405},
		{"GET", "/api/topics/orders.dlq/replay", "", 405},
		{"POST", "/api/topics/orders.dlq/replay", `{"letters":[`, 400},
		{"POST", "/api/topics/orders.dlq/replay", `[]`, 400},
		{"POST", "/api/topics/orders.dlq/replay", `{"letters":[]}`, 400},
		{"POST", "/api/topics/orders.dlq/replay", `{"letters":[{"partition":"0","offset":0}]}`, 400},
		{"POST", "/api/topics/orders.dlq/replay", `{"letters":[{"partition":-1,"offset":0}]}`, 400},
		{"POST", "/api/topics/orders.dlq/replay", `{"letters":[{"partition":0,"offset":1.5}]}`, 400},
		{"POST", "/api/topics/orders.dlq/replay", `{"lettres":[]}`, 400},
		{"POST", "/api/topics/orders.dlq/replay", `{"letters":[{"partition":0,"offset":999}]}`, 404},
		{"POST", "/api/topics/orders.dlq/replay", `{"letters":[{"partition":9,"offset":0}]}`, 404},
		{"POST", "/api/topics/orders/replay", `{"letters":[{"partition":0,"offset":0}]}`, 404},
		{"POST", "/api/topics/nope.dlq/purge", `{"all":true}`, 404},
		{"POST", "/api/topics/orders.dlq/purge", `{}`, 400},
		{"POST", "/api/topics/orders.dlq/purge", `{"upTo":[{"partition":5,"offset":0}]}`, 404},
		{"POST", "/api/topics/orders.dlq/purge", `{"all":"yes"}`, 400},
		{"POST", "/api/topics/orders.dlq/purge", `nonsense`, 400},
	} {
		t.Run(tc.method+" "+tc.path+" "+tc.body, func(t *testing.T) {
			api.t = t
			require.Equal(t, tc.want, api.do(tc.method, tc.path, tc.body, nil))
		})
	}

	// Posts without a JSON content type, or from another origin, are refused.
	req, _ := http.NewRequest("POST", srv.URL+"/console/api/topics/orders.dlq/purge", strings.NewReader(`{"all":true}`))
	req.Header.Set("Content-Type", "text/plain")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnsupportedMediaType, resp.StatusCode)
	req, _ = http.NewRequest("POST", srv.URL+"/console/api/topics/orders.dlq/purge", strings.NewReader(`{"all":true}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", "https://evil.example")
	resp, err = http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	// A form post without the token is refused.
	resp, err = http.PostForm(srv.URL+"/console/dlq/topics/orders.dlq/action", map[string][]string{"op": {"purge-all"}})
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusForbidden, resp.StatusCode)
	// Nothing was purged by the refused requests.
	var page LetterPage
	require.Equal(t, 200, api.do("GET", "/api/topics/orders.dlq/letters", "", &page))
	require.Len(t, page.Letters, 4)

	// Every page renders; a form purges with the page's token.
	for _, ref := range []LetterRef{s.avro, s.binary, s.script, s.replayed} {
		html := getPage(t, fmt.Sprintf("%s/console/dlq/topics/orders.dlq/letters/%d/%d", srv.URL, ref.Partition, ref.Offset), 200)
		require.Contains(t, html, "Failure history")
		require.Contains(t, html, "orders-handler")
	}
	require.Contains(t, getPage(t, fmt.Sprintf("%s/console/dlq/topics/orders.dlq/letters/1/%d", srv.URL, s.replayed.Offset), 200), "(last 2026-11-30 11:00:00.000Z)")
	require.Contains(t, getPage(t, srv.URL+"/console/dlq/", 200), `href="/console/dlq/topics/orders.dlq"`)
	resp, err = http.Get(srv.URL + "/console/dlq/topics/orders.dlq")
	require.NoError(t, err)
	html, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var tok string
	for _, ck := range resp.Cookies() {
		if ck.Name == csrfCookie {
			tok = ck.Value
		}
	}
	require.Contains(t, string(html), `value="`+tok+`"`)
	post := func(form url.Values) *http.Response {
		req, _ := http.NewRequest("POST", srv.URL+"/console/dlq/topics/orders.dlq/action", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.AddCookie(&http.Cookie{Name: csrfCookie, Value: tok})
		resp, err := http.DefaultTransport.RoundTrip(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp
	}
	resp = post(url.Values{"csrf": {tok}, "op": {"purge"}, "letter": {fmt.Sprintf("%d:%d", s.binary.Partition, s.binary.Offset)}})
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, 200, api.do("GET", "/api/topics/orders.dlq/letters", "", &page))
	require.Len(t, page.Letters, 3)
	require.Equal(t, 400, post(url.Values{"csrf": {tok}, "op": {"explode"}}).StatusCode)
	require.Equal(t, 400, post(url.Values{"csrf": {tok}, "op": {"replay"}}).StatusCode)
	require.Equal(t, 400, post(url.Values{"csrf": {tok}, "op": {"replay"}, "letter": {"x:1"}}).StatusCode)
	require.Equal(t, 409, post(url.Values{"csrf": {tok}, "op": {"replay"}, "letter": {fmt.Sprintf("1:%d", s.replayed.Offset)}}).StatusCode)
	require.Equal(t, 403, post(url.Values{"csrf": {"0123456789abcdef0123456789abcdef"}, "op": {"purge-all"}}).StatusCode)
	require.Equal(t, http.StatusSeeOther, post(url.Values{"csrf": {tok}, "op": {"purge-all"}}).StatusCode)
	require.Contains(t, getPage(t, srv.URL+"/console/dlq/topics/orders.dlq", 200), "No dead letters left")

	// HTML pages answer unknown topics with 404 too.
	for _, p := range []string{"/console/dlq/topics/nope.dlq", "/console/dlq/topics/orders", "/console/dlq/topics/orders.dlq/letters/0/999", "/console/dlq/topics/orders.dlq/letters/x/1", "/elsewhere"} {
		resp, err := http.Get(srv.URL + p)
		require.NoError(t, err)
		resp.Body.Close()
		require.Contains(t, []int{400, 404}, resp.StatusCode, p)
	}
}

func getPage(t *testing.T, u string, want int) string {
	t.Helper()
	resp, err := http.Get(u)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, want, resp.StatusCode, "%s: %s", u, b)
	require.Contains(t, resp.Header.Get("Content-Type"), "text/html")
	return string(b)
}

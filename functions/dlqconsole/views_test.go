package dlqconsole

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratamq/strata/functions/internal/testbroker"
)

// viewEnv is a dev cluster (a real broker and schema registry) seeded for
// the console's pages: the dead letters of seed, topic shop (2
// partitions) whose partition 0 holds an Avro order, a value with a
// script tag and three more records, and group billing, which committed
// offset 2 of shop/0 and left (lag 3), with lag history of at least two
// samples at its coordinator.
type viewEnv struct {
	srv      *httptest.Server
	c        cluster
	dlq      seeded
	avroAt   int64 // offset of the Avro order in shop/0
	scriptAt int64 // offset of the <script> value in shop/0
}

func newViewEnv(t *testing.T) viewEnv {
	t.Helper()
	tc := testbroker.StartClusterArgs(t, true, "-group-stats-interval", "200ms", "-tier=true", "-tier-interval", "200ms")
	c := cluster{bootstrap: tc.Bootstrap, registry: tc.Registry}
	env := viewEnv{c: c, dlq: seed(t, c)}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	resp, err := adm.CreateTopic(ctx, 2, 1, map[string]*string{"retention.ms": kadm.StringPtr("86400000")}, "shop")
	require.NoError(t, err)
	require.NoError(t, resp.Err)
	// big rolls a segment every KiB, which the leader uploads to S3.
	resp, err = adm.CreateTopic(ctx, 1, 1, map[string]*string{"segment.bytes": kadm.StringPtr("1024")}, "big")
	require.NoError(t, err)
	require.NoError(t, resp.Err)
	for i := range 20 {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "big", Value: []byte(strings.Repeat(fmt.Sprint(i%10), 300))}).FirstErr())
	}
	body, err := avro.Marshal(avro.MustParse(orderSchema), order{ID: 7, Item: "teapot"})
	require.NoError(t, err)
	avroValue := append(binary.BigEndian.AppendUint32([]byte{0}, uint32(env.dlq.schemaID)), body...)
	values := [][]byte{avroValue, []byte("<script>alert('shop')</script>"), []byte("three"), []byte("four"), []byte("five")}
	for i, v := range values {
		r := &kgo.Record{Topic: "shop", Partition: 0, Key: []byte(fmt.Sprint("k", i)), Value: v,
			Headers: []kgo.RecordHeader{{Key: "source", Value: []byte("<i>test</i>")}}}
		require.NoError(t, cl.ProduceSync(ctx, r).FirstErr())
		switch i {
		case 0:
			env.avroAt = r.Offset
		case 1:
			env.scriptAt = r.Offset
		}
	}
	// billing commits offset 2 of shop/0 and leaves.
	g, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap), kgo.ConsumerGroup("billing"), kgo.ConsumeTopics("shop"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	require.NoError(t, err)
	var got []*kgo.Record
	for len(got) < 2 {
		fs := g.PollRecords(ctx, 2-len(got))
		require.NoError(t, ctx.Err(), "billing read %d of 2 records", len(got))
		got = append(got, fs.Records()...)
	}
	require.NoError(t, g.CommitRecords(ctx, got...))
	g.Close()

	// A group whose name needs escaping in a path, committed without members.
	var os kadm.Offsets
	os.Add(kadm.Offset{Topic: "shop", Partition: 0, At: 1, LeaderEpoch: -1})
	cr, err := adm.CommitOffsets(ctx, "team/a b", os)
	require.NoError(t, err)
	require.NoError(t, cr.Error())

	h, err := New(Options{Seeds: []string{c.bootstrap}, RegistryURL: c.registry, BasePath: "/console"})
	require.NoError(t, err)
	t.Cleanup(func() { Close(h) })
	env.srv = httptest.NewServer(h)
	t.Cleanup(env.srv.Close)

	// Wait for two samples of the lag history, taken every 200 ms.
	require.Eventually(t, func() bool {
		resp, err := http.Get(c.registry + "/strata/v1/groups/billing/lag")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var h lagHistory
		if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&h) != nil {
			return false
		}
		for _, p := range h.Partitions {
			if p.Topic == "shop" && p.Partition == 0 && len(p.Samples) >= 2 && p.Samples[len(p.Samples)-1].Committed == 2 {
				return true
			}
		}
		return false
	}, 30*time.Second, 100*time.Millisecond, "two lag samples of billing")
	return env
}

// get fetches a console page, returning its status and body.
func (e viewEnv) get(t *testing.T, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(e.srv.URL + "/console" + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Contains(t, resp.Header.Get("Content-Security-Policy"), "script-src 'none'", path)
	return resp.StatusCode, string(b)
}

// TestPages renders every page over the real cluster and checks its
// content, then sends every page bad input.
func TestPages(t *testing.T) {
	e := newViewEnv(t)
	page := func(path string, want ...string) string {
		t.Helper()
		code, html := e.get(t, path)
		require.Equal(t, 200, code, "%s:\n%s", path, html)
		for _, w := range want {
			require.Contains(t, html, w, path)
		}
		require.NotContains(t, html, "<script>", "%s: no script element, and values are escaped", path)
		return html
	}
	page("/", "Cluster strata-dev", `id="broker-0"`, "controller", "ok (")
	page("/topics", `href="/console/topics/shop"`, "orders.dlq", "payments")
	html := page("/topics/shop", `id="partition-0"`, `id="partition-1"`, "retention.ms", "86400000", "DYNAMIC_TOPIC_CONFIG")
	require.Regexp(t, `id="partition-0"><td class="num">0</td><td class="num">0</td>`, html, "partition 0 led by broker 0")
	require.Regexp(t, `On disk \(all replicas\): <strong>\d+(\.\d)? (B|KiB)</strong>`, html)
	require.Regexp(t, `<td class="num">\d+(\.\d)? (B|KiB) \(1 replica\(s\): `, html)
	require.Eventually(t, func() bool {
		_, html := e.get(t, "/topics/big")
		return regexp.MustCompile(`in S3: <strong>\d+(\.\d)? (B|KiB)</strong>`).MatchString(html) && strings.Contains(html, "segment(s)")
	}, 30*time.Second, 200*time.Millisecond, "big's closed segments in S3")

	html = page(fmt.Sprintf("/topics/shop/messages?partition=0&offset=%d&limit=5", e.avroAt),
		"schema 1 AVRO", `&#34;item&#34;: &#34;teapot&#34;`, "&lt;script&gt;alert(&#39;shop&#39;)&lt;/script&gt;", "&lt;i&gt;test&lt;/i&gt;")
	require.Contains(t, html, fmt.Sprintf(`id="msg-0-%d"`, e.avroAt+4))
	// The newest page by default; from a time; an empty partition.
	page("/topics/shop/messages?limit=2", `id="msg-0-3"`, `id="msg-0-4"`, `id="older"`)
	page("/topics/shop/messages?partition=0&offset=3&time=2000-01-01T00:00:00Z&limit=1", `id="msg-0-0"`, `id="newer"`)
	page(fmt.Sprintf("/topics/shop/messages?partition=0&time=%d", time.Now().Add(time.Hour).UnixMilli()), "no records at or after")
	page("/topics/shop/messages?partition=1", "no records at or after")

	html = page("/groups", `href="/console/groups/billing"`, "Empty")
	require.Regexp(t, `billing</a></td><td>Empty</td>.*<td class="num">3</td>`, html)
	html = page("/groups", `href="/console/groups/team%2Fa%20b"`)
	page("/groups/team%2Fa%20b", "<h1>team/a b</h1>", `id="lag-shop-0"`)
	html = page("/groups/billing", `id="total-lag">3<`, `id="lag-shop-0"`, "<svg", `<polyline class="series"`, "sample(s) per partition")
	require.NotContains(t, html, "NaN")

	page("/schemas", `href="/console/schemas/orders-value"`, "AVRO")
	page("/schemas/orders-value", `id="version-1"`, "&#34;name&#34;: &#34;Order&#34;")
	page("/dlq/", `href="/console/dlq/topics/orders.dlq"`)

	// Bad input: a 4xx with a message naming what is wrong, never a panic.
	for _, tc := range []struct {
		path string
		code int
		msg  string
	}{
		{"/topics/nope", 404, "unknown topic &#34;nope&#34;"},
		{"/topics/nope/messages", 404, "unknown topic"},
		{"/topics/shop/messages?offset=x", 400, "invalid offset"},
		{"/topics/shop/messages?offset=-1", 400, "invalid offset"},
		{"/topics/shop/messages?offset=99999999999999999999", 400, "invalid offset"},
		{"/topics/shop/messages?partition=abc", 400, "invalid partition"},
		{"/topics/shop/messages?partition=-1", 400, "invalid partition"},
		{"/topics/shop/messages?partition=9", 404, "no partition 9"},
		{"/topics/shop/messages?limit=0", 400, "invalid limit"},
		{"/topics/shop/messages?limit=101", 400, "invalid limit"},
		{"/topics/shop/messages?time=yesterday", 400, "invalid time"},
		{"/topics/shop/messages?time=-5", 400, "invalid time"},
		{"/topics/" + strings.Repeat("x", 300), 400, "invalid topic name"},
		{"/groups/nope", 404, "unknown consumer group"},
		{"/schemas/nope-value", 404, "nope-value"},
		{"/nowhere", 404, "no page /nowhere"},
		{"/dlq/topics/nope.dlq", 404, "nope.dlq"},
	} {
		code, html := e.get(t, tc.path)
		require.Equal(t, tc.code, code, "%s:\n%s", tc.path, html)
		require.Contains(t, html, tc.msg, tc.path)
		require.Contains(t, html, `id="error"`, tc.path)
	}
	// Asking for an unknown topic did not create it.
	require.NotContains(t, page("/topics"), `href="/console/topics/nope"`)
}

// TestAdminGet: the console asks a broker's admin endpoint at the given
// host on the registry's port and scheme, with the registry's user, and
// turns a refusal or a malformed answer into an error, never a panic.
func TestAdminGet(t *testing.T) {
	var gotPath, gotUser string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, ok := r.BasicAuth()
		gotPath, gotUser = r.URL.EscapedPath(), user
		switch {
		case !ok || pass != "pw":
			w.WriteHeader(401)
			_, _ = w.Write([]byte(`{"error_code":40101,"message":"Unauthorized"}`))
		case strings.Contains(r.URL.Path, "bad"):
			_, _ = w.Write([]byte(`{"partitions":`))
		default:
			_, _ = w.Write([]byte(`{"partitions":[{"topic":"t","partition":1,"samples":[{"atMs":5,"committed":1,"end":4}]}]}`))
		}
	}))
	defer srv.Close()
	_, port, _ := strings.Cut(strings.TrimPrefix(srv.URL, "http://"), ":")
	h, err := New(Options{Seeds: []string{"127.0.0.1:1"}, RegistryURL: "http://registry.invalid:" + port, AdminUser: "console", AdminPassword: "pw"})
	require.NoError(t, err)
	defer Close(h)
	c := h.(*Console)
	ctx := context.Background()
	hist, err := c.fetchLagHistory(ctx, "g/1 x", "127.0.0.1")
	require.NoError(t, err, "the coordinator's host, the registry's port")
	require.Equal(t, "/strata/v1/groups/g%2F1%20x/lag", gotPath)
	require.Equal(t, "console", gotUser)
	require.Len(t, hist.Partitions, 1)
	require.EqualValues(t, 3, sampleLag(hist.Partitions[0].Samples[0].Committed, hist.Partitions[0].Samples[0].End))
	_, err = c.fetchLagHistory(ctx, "bad", "127.0.0.1")
	require.ErrorContains(t, err, "malformed")
	c.opts.AdminPassword = "wrong"
	_, err = c.fetchLagHistory(ctx, "g", "127.0.0.1")
	require.ErrorContains(t, err, "answered 401: Unauthorized")
	_, err = c.fetchLagHistory(ctx, "g", "registry.invalid")
	require.Error(t, err)
	require.EqualValues(t, -1, sampleLag(3, -1))
	require.EqualValues(t, 9, sampleLag(-1, 9))
	require.EqualValues(t, 0, sampleLag(10, 9))
}

// TestConsumerProtocolGroup: a group of the consumer protocol (KIP-848),
// which DescribeGroups does not describe, is shown with its state,
// assignor, members, assignments and lag, from ConsumerGroupDescribe.
func TestConsumerProtocolGroup(t *testing.T) {
	e := newViewEnv(t)
	g, err := kgo.NewClient(kgo.SeedBrokers(e.c.bootstrap), kgo.ConsumerGroup("next"), kgo.ConsumeTopics("shop"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.ServerSideBalancer(), kgo.Balancers(kgo.RangeBalancer()),
		kgo.DisableAutoCommit())
	require.NoError(t, err)
	defer g.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []*kgo.Record
	for len(got) < 2 {
		fs := g.PollRecords(ctx, 2-len(got))
		require.NoError(t, ctx.Err())
		got = append(got, fs.Records()...)
	}
	require.NoError(t, g.CommitRecords(ctx, got...))
	require.Eventually(t, func() bool {
		_, html := e.get(t, "/groups")
		return regexp.MustCompile(`next</a></td><td>Stable</td><td>consumer \(KIP-848\) / range</td><td class="num">1</td>`).MatchString(html)
	}, 15*time.Second, 100*time.Millisecond, "next is listed as a stable consumer-protocol group with one member")
	code, html := e.get(t, "/groups/next")
	require.Equal(t, 200, code, html)
	for _, w := range []string{"consumer (KIP-848)", "<td>shop: 0, 1</td>", `id="total-lag">3<`, `id="lag-shop-0"><td><a href="/console/topics/shop">shop</a></td><td class="num">0</td><td class="num">2</td><td class="num">5</td><td class="num">3</td>`} {
		require.Contains(t, html, w)
	}
}

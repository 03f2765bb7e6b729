package schemaregistry

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/stratamq/strata/pkg/metastore"
)

// grant is an ALLOW entry of testACLs.
type grant struct {
	op   kmsg.ACLOperation
	rt   kmsg.ACLResourceType
	name string
}

// testACLs is an Authorizer with Kafka's implications (DESCRIBE by READ,
// WRITE, DELETE and ALTER; ALL implies everything), literal names only;
// the broker's real ACLs are tested in brokerfleet.
type testACLs map[string][]grant

func (a testACLs) Allowed(principal, _ string, op kmsg.ACLOperation, rt kmsg.ACLResourceType, name string) bool {
	for _, g := range a[principal] {
		if g.rt != rt || g.name != name {
			continue
		}
		switch {
		case g.op == op, g.op == kmsg.ACLOperationAll:
			return true
		case op == kmsg.ACLOperationDescribe && slices.Contains([]kmsg.ACLOperation{kmsg.ACLOperationRead,
			kmsg.ACLOperationWrite, kmsg.ACLOperationDelete, kmsg.ACLOperationAlter}, g.op):
			return true
		}
	}
	return false
}

// anyPassword authenticates every user whose password is "pw".
type anyPassword struct{}

func (anyPassword) Authenticate(_ context.Context, user, password string) error {
	if password != "pw" {
		return fmt.Errorf("user %q: %w", user, ErrBadCredentials)
	}
	return nil
}

func topicGrant(op kmsg.ACLOperation, topic string) grant {
	return grant{op, kmsg.ACLResourceTypeTopic, topic}
}

func clusterGrant(op kmsg.ACLOperation) grant {
	return grant{op, kmsg.ACLResourceTypeCluster, ClusterName}
}

// protected serves r behind sec and returns the URL.
func protected(t *testing.T, r *Registry, sec Security) string {
	t.Helper()
	srv := httptest.NewServer(Protect(r, sec))
	t.Cleanup(srv.Close)
	return srv.URL
}

// callAs sends a request with basic credentials (none when user is "")
// and returns the status, the body and the response headers.
func callAs(t *testing.T, user, pass, method, url, body string) (int, []byte, http.Header) {
	t.Helper()
	req, err := http.NewRequestWithContext(testCtx(t), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if user != "" {
		req.SetBasicAuth(user, pass)
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
	return resp.StatusCode, b, resp.Header
}

func schemaBody(schema string) string {
	b, _ := json.Marshal(map[string]string{"schema": schema})
	return string(b)
}

func TestProtectAuthenticates(t *testing.T) {
	meta := newMeta(t)
	ctx := testCtx(t)
	for _, mech := range []string{metastore.ScramSHA512, metastore.ScramSHA256} {
		user := map[string]string{metastore.ScramSHA512: "alice", metastore.ScramSHA256: "carol"}[mech]
		c, err := metastore.NewScramCredential(user, mech, "secret", metastore.MinScramIterations)
		if err != nil {
			t.Fatal(err)
		}
		if err := meta.PutScramCredential(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	r := New(meta, Options{})
	url := protected(t, r, Security{Authenticator: NewScramAuthenticator(meta, ScramOptions{})})

	status, body, h := callAs(t, "", "", "GET", url+"/subjects", "")
	wantError(t, status, body, http.StatusUnauthorized, 40101)
	if got := h.Get("WWW-Authenticate"); !strings.HasPrefix(got, `Basic realm="Strata Schema Registry"`) {
		t.Errorf("WWW-Authenticate %q", got)
	}
	if ct := h.Get("Content-Type"); ct != contentType {
		t.Errorf("content type %q", ct)
	}
	for _, up := range [][2]string{{"alice", "wrong"}, {"nobody", "secret"}, {"alice", ""}} {
		status, body, _ = callAs(t, up[0], up[1], "GET", url+"/subjects", "")
		wantError(t, status, body, http.StatusUnauthorized, 40101)
	}
	// Not basic authentication at all.
	req, _ := http.NewRequestWithContext(ctx, "GET", url+"/subjects", nil)
	req.Header.Set("Authorization", "Bearer abc")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a bearer token: %d", resp.StatusCode)
	}
	for _, user := range []string{"alice", "carol"} {
		if status, body, _ := callAs(t, user, "secret", "GET", url+"/subjects", ""); status != 200 {
			t.Errorf("%s: %d %s", user, status, body)
		}
	}

	// What Confluent clients send with basic.auth.credentials.source=USER_INFO.
	cl, err := sr.NewClient(sr.URLs(url), sr.BasicAuth("alice", "secret"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := cl.CreateSchema(ctx, "orders-value", sr.Schema{Schema: orderV1})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := cl.SchemaByID(ctx, s.ID); err != nil || got.Schema != orderV1 {
		t.Fatalf("schema by id %+v %v", got, err)
	}
	anon, _ := sr.NewClient(sr.URLs(url))
	_, err = anon.SchemaByID(ctx, s.ID)
	wantCode(t, err, http.StatusUnauthorized, 40101)
	bad, _ := sr.NewClient(sr.URLs(url), sr.BasicAuth("alice", "nope"))
	_, err = bad.Subjects(ctx)
	wantCode(t, err, http.StatusUnauthorized, 40101)
}

// TestProtectAuthorizes runs every route as a principal without ACLs
// (403 with 40301, unless the route is open to every authenticated
// principal) and as one holding exactly the ACL the table names (not 403).
func TestProtectAuthorizes(t *testing.T) {
	meta := newMeta(t)
	r, open := serve(t, meta, Options{})
	id := registerID(t, open, "orders-value", orderV1)
	sharedID := registerID(t, open, "com.acme.Shared", `{"type":"fixed","name":"Hash","namespace":"acme","size":16}`)
	acls := testACLs{}
	url := protected(t, r, Security{Authenticator: anyPassword{}, Authorizer: acls})
	describe, write, alter, read := kmsg.ACLOperationDescribe, kmsg.ACLOperationWrite, kmsg.ACLOperationAlter, kmsg.ACLOperationRead
	lookup := schemaBody(orderV1)
	for i, tc := range []struct {
		method, path, body string
		need               *grant // nil: open to every authenticated principal
		want               int    // the status with the grant
	}{
		{"GET", "/", "", nil, 200},
		{"GET", "/schemas/types", "", nil, 200},
		{"GET", "/contexts", "", nil, 200},
		{"GET", "/config", "", nil, 200},
		{"GET", "/mode", "", nil, 200},
		{"GET", "/subjects", "", nil, 200},
		{"GET", "/schemas", "", nil, 200},
		{"GET", "/subjects/orders-value/versions", "", &grant{describe, kmsg.ACLResourceTypeTopic, "orders"}, 200},
		{"GET", "/subjects/orders-value/versions/1", "", ptr(topicGrant(read, "orders")), 200},
		{"GET", "/subjects/orders-value/versions/latest/schema", "", ptr(topicGrant(write, "orders")), 200},
		{"GET", "/subjects/orders-value/versions/1/referencedby", "", ptr(topicGrant(describe, "orders")), 200},
		{"POST", "/subjects/orders-value", lookup, ptr(topicGrant(write, "orders")), 200},
		{"POST", "/subjects/orders-value/versions", lookup, ptr(topicGrant(write, "orders")), 200},
		{"POST", "/compatibility/subjects/orders-value/versions/latest", lookup, ptr(topicGrant(describe, "orders")), 200},
		{"GET", "/config/orders-value", "", ptr(topicGrant(describe, "orders")), 404},
		{"PUT", "/config/orders-value", `{"compatibility":"FULL"}`, ptr(topicGrant(alter, "orders")), 200},
		{"DELETE", "/config/orders-value", "", ptr(topicGrant(alter, "orders")), 200},
		{"GET", "/mode/orders-value", "", ptr(topicGrant(describe, "orders")), 404},
		{"PUT", "/mode/orders-value", `{"mode":"READWRITE"}`, ptr(topicGrant(alter, "orders")), 200},
		{"DELETE", "/mode/orders-value", "", ptr(topicGrant(alter, "orders")), 200},
		{"PUT", "/config", `{"compatibility":"BACKWARD"}`, ptr(clusterGrant(alter)), 200},
		{"DELETE", "/config", "", ptr(clusterGrant(alter)), 200},
		{"PUT", "/mode", `{"mode":"READWRITE"}`, ptr(clusterGrant(alter)), 200},
		{"DELETE", "/mode", "", ptr(clusterGrant(alter)), 200},
		{"GET", fmt.Sprintf("/schemas/ids/%d", id), "", ptr(topicGrant(read, "orders")), 200},
		{"GET", fmt.Sprintf("/schemas/ids/%d/schema", id), "", ptr(clusterGrant(describe)), 200},
		{"GET", fmt.Sprintf("/schemas/ids/%d/versions", id), "", ptr(topicGrant(describe, "orders")), 200},
		{"GET", fmt.Sprintf("/schemas/ids/%d/subjects", id), "", ptr(topicGrant(describe, "orders")), 200},
		{"GET", "/schemas/ids/9999", "", ptr(clusterGrant(describe)), 404},
		{"GET", "/subjects/orders-key/versions", "", ptr(topicGrant(describe, "orders")), 404},
		// Subjects named after no topic: the cluster.
		{"GET", "/subjects/com.acme.Shared/versions", "", ptr(clusterGrant(describe)), 200},
		{"GET", fmt.Sprintf("/schemas/ids/%d", sharedID), "", ptr(clusterGrant(describe)), 200},
		{"POST", "/subjects/com.acme.Other/versions", schemaBody(`"string"`), ptr(clusterGrant(alter)), 200},
		{"PUT", "/config/com.acme.Shared", `{"compatibility":"NONE"}`, ptr(clusterGrant(alter)), 200},
		// Deletions last: they change what the cases above read.
		{"DELETE", "/subjects/orders-value/versions/2", "", ptr(topicGrant(alter, "orders")), 404},
		{"DELETE", "/subjects/com.acme.Other", "", ptr(clusterGrant(alter)), 200},
	} {
		t.Run(fmt.Sprintf("%s %s", tc.method, tc.path), func(t *testing.T) {
			status, body, _ := callAs(t, "nobody", "pw", tc.method, url+tc.path, tc.body)
			if tc.need == nil {
				if status != tc.want {
					t.Fatalf("without ACLs: %d %s, want %d", status, body, tc.want)
				}
				return
			}
			wantError(t, status, body, http.StatusForbidden, 40301)
			if !strings.Contains(string(body), "User:nobody") {
				t.Errorf("the denial names the principal: %s", body)
			}
			user := fmt.Sprintf("case%d", i)
			acls["User:"+user] = []grant{*tc.need}
			if status, body, _ := callAs(t, user, "pw", tc.method, url+tc.path, tc.body); status != tc.want {
				t.Fatalf("with %+v: %d %s, want %d", *tc.need, status, body, tc.want)
			}
		})
	}

	// A write on the cluster is not enough to change a subject named after
	// no topic: that needs ALTER; and the topic's ACL guards -key too.
	acls["User:w"] = []grant{clusterGrant(write), topicGrant(describe, "payments")}
	status, body, _ := callAs(t, "w", "pw", "POST", url+"/subjects/com.acme.More/versions", schemaBody(`"int"`))
	wantError(t, status, body, http.StatusForbidden, 40301)
	status, body, _ = callAs(t, "w", "pw", "GET", url+"/subjects/orders-value/versions", "")
	wantError(t, status, body, http.StatusForbidden, 40301)
}

func ptr[T any](v T) *T { return &v }

// registerID registers a schema through an unprotected URL and returns
// its id.
func registerID(t *testing.T, base, subject, schema string) int {
	t.Helper()
	status, body := call(t, "POST", base+"/subjects/"+subject+"/versions", contentType, schemaBody(schema))
	if status != 200 {
		t.Fatalf("register %s: %d %s", subject, status, body)
	}
	var out struct{ ID int }
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatal(err)
	}
	return out.ID
}

// TestProtectFiltersLists: lists hold only the subjects the principal may
// describe; ids used by a subject it may describe can be read, others
// (and unknown ones) not; a registration may reference only subjects it
// may read.
func TestProtectFiltersLists(t *testing.T) {
	meta := newMeta(t)
	r, open := serve(t, meta, Options{})
	shared := registerID(t, open, "orders-value", orderV1)
	if got := registerID(t, open, "payments-value", orderV1); got != shared {
		t.Fatalf("one schema, two ids: %d %d", shared, got)
	}
	other := registerID(t, open, "payments-key", `"string"`)
	registerID(t, open, "com.acme.Shared", `{"type":"fixed","name":"Hash","namespace":"acme","size":16}`)
	acls := testACLs{"User:alice": {topicGrant(kmsg.ACLOperationWrite, "orders")}}
	url := protected(t, r, Security{Authenticator: anyPassword{}, Authorizer: acls})
	get := func(path string, into any) {
		t.Helper()
		status, body, _ := callAs(t, "alice", "pw", "GET", url+path, "")
		if status != 200 {
			t.Fatalf("%s: %d %s", path, status, body)
		}
		if err := json.Unmarshal(body, into); err != nil {
			t.Fatal(err)
		}
	}
	var subjects []string
	get("/subjects", &subjects)
	if !slices.Equal(subjects, []string{"orders-value"}) {
		t.Errorf("subjects %v", subjects)
	}
	var entities []struct{ Subject string }
	get("/schemas", &entities)
	if len(entities) != 1 || entities[0].Subject != "orders-value" {
		t.Errorf("schemas %+v", entities)
	}
	get(fmt.Sprintf("/schemas/ids/%d/subjects", shared), &subjects)
	if !slices.Equal(subjects, []string{"orders-value"}) {
		t.Errorf("subjects of id %d: %v", shared, subjects)
	}
	var versions []subjectVersion
	get(fmt.Sprintf("/schemas/ids/%d/versions", shared), &versions)
	if len(versions) != 1 || versions[0].Subject != "orders-value" {
		t.Errorf("versions of id %d: %+v", shared, versions)
	}
	for _, path := range []string{fmt.Sprintf("/schemas/ids/%d", other), "/schemas/ids/9999"} {
		status, body, _ := callAs(t, "alice", "pw", "GET", url+path, "")
		wantError(t, status, body, http.StatusForbidden, 40301)
	}

	// References: only to subjects it may read.
	withRef := func(subject string) string {
		b, _ := json.Marshal(map[string]any{"schema": `{"type":"record","name":"R","namespace":"acme","fields":[{"name":"h","type":"acme.Hash"}]}`,
			"references": []Reference{{Name: "acme.Hash", Subject: subject, Version: 1}}})
		return string(b)
	}
	status, body, _ := callAs(t, "alice", "pw", "POST", url+"/subjects/orders-value/versions?normalize=false", withRef("com.acme.Shared"))
	wantError(t, status, body, http.StatusForbidden, 40301)
	acls["User:alice"] = append(acls["User:alice"], clusterGrant(kmsg.ACLOperationDescribe))
	// Readable now; the schema itself is then checked (it is not
	// BACKWARD compatible with orderV1: 409).
	if status, body, _ = callAs(t, "alice", "pw", "POST", url+"/subjects/orders-value/versions", withRef("com.acme.Shared")); status == http.StatusForbidden {
		t.Fatalf("with DESCRIBE on the cluster: %d %s", status, body)
	}
}

// TestProtectAnonymousWithACLs: without an Authenticator every request is
// User:ANONYMOUS, which ACLs may allow (as on a broker's PLAINTEXT
// listener); credentials sent anyway change nothing.
func TestProtectAnonymousWithACLs(t *testing.T) {
	r, open := serve(t, newMeta(t), Options{})
	registerID(t, open, "orders-value", orderV1)
	acls := testACLs{}
	url := protected(t, r, Security{Authorizer: acls})
	status, body, _ := callAs(t, "", "", "GET", url+"/subjects/orders-value/versions", "")
	wantError(t, status, body, http.StatusForbidden, 40301)
	acls[AnonymousPrincipal] = []grant{topicGrant(kmsg.ACLOperationRead, "orders")}
	if status, body, _ := callAs(t, "admin", "whatever", "GET", url+"/subjects/orders-value/versions", ""); status != 200 {
		t.Fatalf("anonymous with READ: %d %s", status, body)
	}
}

// countingCreds counts credential lookups.
type countingCreds struct {
	*metastore.Meta
	n int
}

func (c *countingCreds) ScramCredential(ctx context.Context, user, mech string) (metastore.ScramCredential, error) {
	c.n++
	return c.Meta.ScramCredential(ctx, user, mech)
}

func TestScramAuthenticatorCache(t *testing.T) {
	meta := newMeta(t)
	ctx := testCtx(t)
	cred, err := metastore.NewScramCredential("alice", metastore.ScramSHA512, "secret", metastore.MinScramIterations)
	if err != nil {
		t.Fatal(err)
	}
	if err := meta.PutScramCredential(ctx, cred); err != nil {
		t.Fatal(err)
	}
	now := testNow()
	creds := &countingCreds{Meta: meta}
	a := NewScramAuthenticator(creds, ScramOptions{CacheTTL: 10 * time.Second, CacheSize: 2, Now: now.get})
	must := func(user, pass string, ok bool) {
		t.Helper()
		err := a.Authenticate(ctx, user, pass)
		if ok != (err == nil) {
			t.Fatalf("%s/%s: %v", user, pass, err)
		}
	}
	must("alice", "secret", true)
	must("alice", "secret", true)
	if creds.n != 1 {
		t.Errorf("%d lookups for two checks within the TTL, want 1", creds.n)
	}
	must("alice", "wrong", false)
	must("alice", "wrong", false)
	if creds.n != 5 { // each failure asks for both mechanisms
		t.Errorf("failures are not remembered: %d lookups, want 5", creds.n)
	}
	// A deleted user keeps working until the TTL ends, then not.
	if err := meta.DeleteScramCredential(ctx, "alice", metastore.ScramSHA512); err != nil {
		t.Fatal(err)
	}
	must("alice", "secret", true)
	now.add(11 * time.Second)
	must("alice", "secret", false)
	// Bounded: never more than CacheSize entries.
	for i := range 5 {
		u := fmt.Sprintf("u%d", i)
		c, _ := metastore.NewScramCredential(u, metastore.ScramSHA256, "pw", metastore.MinScramIterations)
		if err := meta.PutScramCredential(ctx, c); err != nil {
			t.Fatal(err)
		}
		must(u, "pw", true)
	}
	a.mu.Lock()
	n := len(a.ok)
	a.mu.Unlock()
	if n > 2 {
		t.Errorf("%d cached checks, bound 2", n)
	}
}

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func testNow() *clock { return &clock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)} }

func (c *clock) get() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

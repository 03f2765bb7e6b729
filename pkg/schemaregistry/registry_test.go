package schemaregistry

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
)

func TestOptionsValidate(t *testing.T) {
	for _, bad := range []Options{{DefaultCompatibility: "SIDEWAYS"}, {MaxSchemaBytes: -1}, {MaxSchemaBytes: 1 << 30}} {
		if bad.Validate() == nil {
			t.Errorf("%+v validated", bad)
		}
	}
	if err := (Options{DefaultCompatibility: "full_transitive"}).Validate(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("New accepted invalid options")
		}
	}()
	New(newMeta(t), Options{DefaultCompatibility: "SIDEWAYS"})
}

// The level in force decides: v3 passes BACKWARD (checked against v2) and
// fails BACKWARD_TRANSITIVE (also checked against v1).
func TestTransitiveLevelOverHTTP(t *testing.T) {
	meta := newMeta(t)
	_, url := serve(t, meta, Options{DefaultCompatibility: "BACKWARD_TRANSITIVE"})
	cl := newClient(t, url)
	ctx := testCtx(t)
	if g := cl.Compatibility(ctx); g[0].Level != sr.CompatBackwardTransitive {
		t.Fatalf("default level from options: %+v", g[0])
	}
	v1, v2, v3 := rec(fID), rec(fID+","+fNoteDef), rec(fID+","+fNote)
	for _, s := range []string{v1, v2} {
		if _, err := cl.CreateSchema(ctx, "t", sr.Schema{Schema: s}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := cl.CreateSchema(ctx, "t", sr.Schema{Schema: v3})
	wantCode(t, err, http.StatusConflict, 409)
	res, err := cl.CheckCompatibility(ctx, "t", -2, sr.Schema{Schema: v3}) // all versions, as registration
	if err != nil || res.Is {
		t.Fatalf("check against the subject: %+v %v", res, err)
	}
	res, err = cl.CheckCompatibility(ctx, "t", 2, sr.Schema{Schema: v3}) // one version
	if err != nil || !res.Is {
		t.Fatalf("check against version 2: %+v %v", res, err)
	}
	if r := cl.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatBackward}, "t"); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	if s, err := cl.CreateSchema(ctx, "t", sr.Schema{Schema: v3}); err != nil || s.Version != 3 {
		t.Fatalf("v3 at BACKWARD: %+v %v", s, err)
	}
	// Soft-deleted versions are not checked against: at FORWARD, dropping
	// note fails against v3 (its note has no default), not against v2.
	if r := cl.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatForward}, "t"); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	if res, err := cl.CheckCompatibility(ctx, "t", -1, sr.Schema{Schema: v1}); err != nil || res.Is {
		t.Fatalf("dropping note against v3: %+v %v", res, err)
	}
	if err := cl.DeleteSchema(ctx, "t", 3, sr.SoftDelete); err != nil {
		t.Fatal(err)
	}
	if s, err := cl.CreateSchema(ctx, "t", sr.Schema{Schema: rec(fID + "," + fAmtDef)}); err != nil || s.Version != 4 {
		t.Fatalf("after deleting v3: %+v %v", s, err)
	}
}

// References: a schema naming types of another subject's version, the
// reverse index, and deletions refused while referenced.
func TestReferencesOverHTTP(t *testing.T) {
	_, url := serve(t, newMeta(t), Options{})
	cl := newClient(t, url)
	ctx := testCtx(t)
	addr := `{"type":"record","name":"Addr","namespace":"shop","fields":[{"name":"city","type":"string"}]}`
	user := `{"type":"record","name":"User","namespace":"shop","fields":[{"name":"addr","type":"shop.Addr"}]}`
	a, err := cl.CreateSchema(ctx, "addr", sr.Schema{Schema: addr})
	if err != nil {
		t.Fatal(err)
	}
	_, err = cl.CreateSchema(ctx, "user", sr.Schema{Schema: user})
	wantCode(t, err, http.StatusUnprocessableEntity, 42201) // the name is unknown without the reference
	refs := []sr.SchemaReference{{Name: "shop.Addr", Subject: "addr", Version: 1}}
	u, err := cl.CreateSchema(ctx, "user", sr.Schema{Schema: user, References: refs})
	if err != nil || len(u.References) != 1 || u.References[0] != refs[0] {
		t.Fatalf("with a reference: %+v %v", u, err)
	}
	byID, err := cl.SchemaByID(ctx, u.ID)
	if err != nil || len(byID.References) != 1 {
		t.Fatalf("references by id: %+v %v", byID, err)
	}
	// The same text without references is another schema.
	found, err := cl.LookupSchema(ctx, "user", sr.Schema{Schema: user, References: refs})
	if err != nil || found.ID != u.ID {
		t.Fatalf("lookup with references: %+v %v", found, err)
	}
	referrers, err := cl.SchemaReferences(ctx, "addr", 1)
	if err != nil || len(referrers) != 1 || referrers[0].ID != u.ID {
		t.Fatalf("referenced by: %+v %v", referrers, err)
	}
	st, body := call(t, "DELETE", url+"/subjects/addr/versions/1", "", "")
	wantError(t, st, body, http.StatusUnprocessableEntity, 42206)
	_, err = cl.DeleteSubject(ctx, "addr", sr.SoftDelete)
	wantCode(t, err, http.StatusUnprocessableEntity, 42206)
	// The referrer's evolution is checked with the reference resolved:
	// adding a required field to User fails BACKWARD.
	user2 := `{"type":"record","name":"User","namespace":"shop","fields":[{"name":"addr","type":"shop.Addr"},{"name":"age","type":"int"}]}`
	_, err = cl.CreateSchema(ctx, "user", sr.Schema{Schema: user2, References: refs})
	wantCode(t, err, http.StatusConflict, 409)
	// Once the referrer is gone, the referenced version can go.
	if _, err := cl.DeleteSubject(ctx, "user", sr.SoftDelete); err != nil {
		t.Fatal(err)
	}
	if err := cl.DeleteSchema(ctx, "addr", 1, sr.SoftDelete); err != nil {
		t.Fatalf("delete after the referrer went: %v", err)
	}
	// Permanently, the soft-deleted referrer still holds it.
	err = cl.DeleteSchema(ctx, "addr", 1, sr.HardDelete)
	wantCode(t, err, http.StatusUnprocessableEntity, 42206)
	_ = a
}

// Identity: AVRO schemas are compared after Java-style re-serialization,
// so whitespace and key order never matter (as in Confluent, where Java
// rewrites Avro schemas); JSON schemas keep their key order unless
// normalize=true.
func TestSchemaIdentity(t *testing.T) {
	_, url := serve(t, newMeta(t), Options{})
	cl := newClient(t, url)
	ctx := testCtx(t)
	a1 := `{"type":"record","name":"R","fields":[{"name":"n","type":{"type":"int"}},` +
		`{"name":"a","type":{"type":"record","name":"In","fields":[{"name":"type","type":"string"}]},"default":{"type":"x"}}]}`
	a2 := `{"fields":[{"type":"int","name":"n"},{"default":{"type":"x"},` +
		`"type":{"fields":[{"type":"string","name":"type"}],"name":"In","type":"record"},"name":"a"}],"name":"R", "type":"record"}`
	first, err := cl.CreateSchema(ctx, "avro", sr.Schema{Schema: a1})
	if err != nil {
		t.Fatal(err)
	}
	// Keys in Java's order, {"type": T} as T, defaults left alone.
	const want = `{"type":"record","name":"R","fields":[{"name":"n","type":"int"},` +
		`{"name":"a","type":{"type":"record","name":"In","fields":[{"name":"type","type":"string"}]},"default":{"type":"x"}}]}`
	if first.Schema.Schema != want {
		t.Fatalf("stored as %s, want %s", first.Schema.Schema, want)
	}
	if id, err := cl.RegisterSchema(ctx, "avro", sr.Schema{Schema: a2}, -1, -1); err != nil || id != first.ID {
		t.Fatalf("avro with other key order: %d %v, want %d", id, err, first.ID)
	}
	j1 := `{"type":"object","properties":{"a":{"type":"string"}}}`
	j2 := `{"properties":{"a":{"type":"string"}},"type":"object"}`
	jfirst, err := cl.CreateSchema(ctx, "json", sr.Schema{Schema: j1, Type: sr.TypeJSON})
	if err != nil {
		t.Fatal(err)
	}
	id, err := cl.RegisterSchema(sr.WithParams(ctx, sr.Normalize), "json", sr.Schema{Schema: j2, Type: sr.TypeJSON}, -1, -1)
	if err != nil || id != jfirst.ID {
		t.Fatalf("normalized json re-registration: %d %v, want %d", id, err, jfirst.ID)
	}
	found, err := cl.LookupSchema(sr.WithParams(ctx, sr.Normalize), "json", sr.Schema{Schema: j2, Type: sr.TypeJSON})
	if err != nil || found.ID != jfirst.ID {
		t.Fatalf("normalized lookup: %+v %v", found, err)
	}
	id, err = cl.RegisterSchema(ctx, "json", sr.Schema{Schema: j2, Type: sr.TypeJSON}, -1, -1)
	if err != nil || id == jfirst.ID {
		t.Fatalf("json key order without normalize: %d %v, want a new id", id, err)
	}
	if vs, _ := cl.SubjectVersions(ctx, "json"); len(vs) != 2 {
		t.Fatalf("json versions %v", vs)
	}
}

// Two registries over one metastore agree on ids and versions, including
// when they register concurrently.
func TestTwoRegistriesShareIDs(t *testing.T) {
	meta := newMeta(t)
	r1, url1 := serve(t, meta, Options{})
	_, url2 := serve(t, meta, Options{})
	c1, c2 := newClient(t, url1), newClient(t, url2)
	ctx := testCtx(t)
	a, err := c1.CreateSchema(ctx, "a-value", sr.Schema{Schema: orderV1})
	if err != nil {
		t.Fatal(err)
	}
	b, err := c2.CreateSchema(ctx, "b-value", sr.Schema{Schema: orderV1})
	if err != nil || b.ID != a.ID {
		t.Fatalf("same schema through the other registry: %+v %v, want id %d", b, err, a.ID)
	}
	again, err := c2.CreateSchema(ctx, "a-value", sr.Schema{Schema: orderV1})
	if err != nil || again.ID != a.ID || again.Version != 1 {
		t.Fatalf("same subject through the other registry: %+v %v", again, err)
	}
	if r := c1.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatNone}, "c-value"); r[0].Err != nil {
		t.Fatal(r[0].Err)
	}
	if r := c2.Compatibility(ctx, "c-value"); r[0].Err != nil || r[0].Level != sr.CompatNone {
		t.Fatalf("level set through the other registry: %+v", r[0])
	}
	has, err := r1.SubjectHasID(ctx, "b-value", a.ID)
	if err != nil || !has {
		t.Fatalf("registry 1 sees registry 2's registration: %v %v", has, err)
	}

	// Concurrent registrations of distinct schemas in one subject, half
	// through each registry, and of one schema in many subjects.
	const n = 12
	var wg sync.WaitGroup
	versions := make([]int, n)
	sameIDs := make([]int, n)
	errs := make([]error, 2*n)
	for i := range n {
		cl := c1
		if i%2 == 1 {
			cl = c2
		}
		wg.Add(2)
		go func() {
			defer wg.Done()
			s, err := cl.CreateSchema(ctx, "c-value", sr.Schema{Schema: fmt.Sprintf(`{"type":"fixed","name":"F","size":%d}`, i+1)})
			versions[i], errs[i] = s.Version, err
		}()
		go func() {
			defer wg.Done()
			id, err := cl.RegisterSchema(ctx, fmt.Sprintf("s%d", i), sr.Schema{Schema: `{"type":"fixed","name":"Same","size":8}`}, -1, -1)
			sameIDs[i], errs[n+i] = id, err
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	seen := make(map[int]bool)
	for i, v := range versions {
		if v < 1 || v > n || seen[v] {
			t.Fatalf("versions %v: %d repeats or is out of range", versions, v)
		}
		seen[v] = true
		if sameIDs[i] != sameIDs[0] {
			t.Fatalf("one schema got ids %v", sameIDs)
		}
	}
}

// The Go API brokers use for validation.
func TestBrokerHelpers(t *testing.T) {
	meta := newMeta(t)
	r, url := serve(t, meta, Options{IDCacheTTL: time.Hour})
	other, url2 := serve(t, meta, Options{IDCacheTTL: time.Hour})
	cl, cl2 := newClient(t, url), newClient(t, url2)
	ctx := testCtx(t)
	s, err := cl.CreateSchema(ctx, "orders-value", sr.Schema{Schema: orderV1})
	if err != nil {
		t.Fatal(err)
	}
	got, err := r.SchemaByID(ctx, s.ID)
	if err != nil || got.ID != s.ID || got.Type != "AVRO" || got.Schema != orderV1 {
		t.Fatalf("SchemaByID: %+v %v", got, err)
	}
	if _, err := r.SchemaByID(ctx, 999); !errors.Is(err, ErrSchemaNotFound) {
		t.Fatalf("SchemaByID of an unknown id: %v", err)
	}
	for _, c := range []struct {
		subject string
		id      int
		want    bool
	}{{"orders-value", s.ID, true}, {"orders-value", 999, false}, {"payments-value", s.ID, false}} {
		if has, err := r.SubjectHasID(ctx, c.subject, c.id); err != nil || has != c.want {
			t.Fatalf("SubjectHasID(%q, %d) = %v %v, want %v", c.subject, c.id, has, err, c.want)
		}
	}
	// A registration through another registry is seen at once, although
	// the first one has cached the subject (and just missed on it).
	s2, err := cl2.CreateSchema(ctx, "orders-value", sr.Schema{Schema: orderV2})
	if err != nil {
		t.Fatal(err)
	}
	if has, err := r.SubjectHasID(ctx, "orders-value", s2.ID); err != nil || !has {
		t.Fatalf("a new registration elsewhere: %v %v", has, err)
	}
	// A soft delete through this registry is seen at once; through another
	// one, within the TTL (an hour here: still cached).
	if err := cl.DeleteSchema(ctx, "orders-value", 1, sr.SoftDelete); err != nil {
		t.Fatal(err)
	}
	if has, _ := r.SubjectHasID(ctx, "orders-value", s.ID); has {
		t.Fatal("a version soft-deleted here still counts")
	}
	if has, _ := other.SubjectHasID(ctx, "orders-value", s2.ID); !has {
		t.Fatal("other registry lost a live id")
	}
	if err := cl.DeleteSchema(ctx, "orders-value", 2, sr.SoftDelete); err != nil {
		t.Fatal(err)
	}
	if has, _ := other.SubjectHasID(ctx, "orders-value", s2.ID); !has {
		t.Fatal("the other registry should answer from its cache within the TTL")
	}
	uncached := New(meta, Options{IDCacheTTL: -1})
	if has, _ := uncached.SubjectHasID(ctx, "orders-value", s2.ID); has {
		t.Fatal("without a cache, a soft-deleted version still counts")
	}
}

// The list endpoints and raw schema answers.
func TestListings(t *testing.T) {
	_, base := serve(t, newMeta(t), Options{})
	for _, s := range []string{"a-value", "b-value", "b-key"} {
		if st, b := register(t, base, s, "JSON", `{"type":"object"}`); st != 200 {
			t.Fatalf("%d %s", st, b)
		}
	}
	st, b := call(t, "GET", base+"/subjects?subjectPrefix=b-", "", "")
	if st != 200 || string(b) != `["b-key","b-value"]`+"\n" {
		t.Fatalf("subjects by prefix: %d %s", st, b)
	}
	st, b = call(t, "GET", base+"/subjects/a-value/versions/latest/schema", "", "")
	if st != 200 || string(b) != `{"type":"object"}` {
		t.Fatalf("raw schema: %d %s", st, b)
	}
	st, b = call(t, "GET", base+"/subjects/a-value/versions/1", "", "")
	var e schemaEntity
	if err := json.Unmarshal(b, &e); st != 200 || err != nil || e.SchemaType != "JSON" || e.Subject != "a-value" || e.Version != 1 || e.ID != 1 {
		t.Fatalf("version: %d %s", st, b)
	}
	st, b = call(t, "GET", base+"/schemas?latestOnly=true&subjectPrefix=b-", "", "")
	var all []schemaEntity
	if err := json.Unmarshal(b, &all); st != 200 || err != nil || len(all) != 2 {
		t.Fatalf("schemas: %d %s", st, b)
	}
	st, b = call(t, "GET", base+"/", "", "")
	if st != 200 || strings.TrimSpace(string(b)) != "{}" {
		t.Fatalf("root: %d %s", st, b)
	}
}

// Subject names may hold characters that need escaping in paths.
func TestEscapedSubjects(t *testing.T) {
	_, url := serve(t, newMeta(t), Options{})
	cl := newClient(t, url)
	ctx := testCtx(t)
	for _, subject := range []string{"team/orders-value", "a b%c", "ünï?x#y"} {
		s, err := cl.CreateSchema(ctx, subject, sr.Schema{Schema: `"string"`})
		if err != nil || s.Subject != subject {
			t.Fatalf("%q: %+v %v", subject, s, err)
		}
		if got, err := cl.SchemaByVersion(ctx, subject, 1); err != nil || got.Subject != subject {
			t.Fatalf("%q by version: %+v %v", subject, got, err)
		}
		if r := cl.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatFull}, subject); r[0].Err != nil {
			t.Fatalf("%q level: %v", subject, r[0].Err)
		}
	}
	subs, err := cl.Subjects(ctx)
	if err != nil || len(subs) != 3 {
		t.Fatalf("subjects %q %v", subs, err)
	}
}

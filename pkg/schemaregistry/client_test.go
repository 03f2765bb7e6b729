package schemaregistry

import (
	"errors"
	"net/http"
	"slices"
	"testing"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
)

// The franz-go schema registry client against a registry: the calls a
// producer and an operator make, end to end over HTTP.

const (
	orderV1 = `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"string"},{"name":"amount","type":"int"}]}`
	// v2 adds a field with a default and widens amount: BACKWARD compatible.
	orderV2 = `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"string"},{"name":"amount","type":"long"},{"name":"note","type":"string","default":""}]}`
	// v3 adds a field without a default: not BACKWARD compatible.
	orderV3 = `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"string"},{"name":"amount","type":"long"},{"name":"note","type":"string","default":""},{"name":"customer","type":"string"}]}`
)

func newClient(t *testing.T, url string) *sr.Client {
	t.Helper()
	cl, err := sr.NewClient(sr.URLs(url))
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// wantCode checks err is the registry's answer with status and code.
func wantCode(t *testing.T, err error, status, code int) {
	t.Helper()
	var re *sr.ResponseError
	if !errors.As(err, &re) || re.StatusCode != status || re.ErrorCode != code {
		t.Fatalf("got %v, want HTTP %d with error code %d", err, status, code)
	}
}

func TestClientRegisterEvolveLookupDelete(t *testing.T) {
	_, url := serve(t, newMeta(t), Options{})
	cl := newClient(t, url)
	ctx := testCtx(t)

	types, err := cl.SupportedTypes(ctx)
	if err != nil || !slices.Equal(types, []sr.SchemaType{sr.TypeAvro, sr.TypeProtobuf, sr.TypeJSON}) {
		t.Fatalf("types %v, %v", types, err)
	}

	// Register, then register the same schema again (other whitespace).
	s1, err := cl.CreateSchema(ctx, "orders-value", sr.Schema{Schema: orderV1})
	if err != nil {
		t.Fatal(err)
	}
	if s1.ID <= 0 || s1.Version != 1 || s1.Subject != "orders-value" {
		t.Fatalf("first registration %+v", s1)
	}
	again, err := cl.RegisterSchema(ctx, "orders-value", sr.Schema{Schema: " " + orderV1 + "\n"}, -1, -1)
	if err != nil || again != s1.ID {
		t.Fatalf("re-registering got id %d (%v), want %d", again, err, s1.ID)
	}
	if vs, err := cl.SubjectVersions(ctx, "orders-value"); err != nil || !slices.Equal(vs, []int{1}) {
		t.Fatalf("versions after re-registering %v %v", vs, err)
	}

	// Fetch by id.
	byID, err := cl.SchemaByID(ctx, s1.ID)
	if err != nil || byID.Schema != orderV1 || byID.Type != sr.TypeAvro {
		t.Fatalf("schema by id: %+v %v", byID, err)
	}
	text, err := cl.SchemaTextByID(ctx, s1.ID)
	if err != nil || text != orderV1 {
		t.Fatalf("schema text by id: %q %v", text, err)
	}
	_, err = cl.SchemaByID(ctx, 999)
	wantCode(t, err, http.StatusNotFound, 40403)
	var re *sr.ResponseError
	if !errors.As(err, &re) || re.SchemaError() != sr.ErrSchemaNotFound {
		t.Fatalf("unknown id maps to %v", err)
	}

	// Evolve compatibly, then fail to evolve incompatibly: 409.
	s2, err := cl.CreateSchema(ctx, "orders-value", sr.Schema{Schema: orderV2})
	if err != nil || s2.Version != 2 || s2.ID == s1.ID {
		t.Fatalf("compatible evolution: %+v %v", s2, err)
	}
	_, err = cl.CreateSchema(ctx, "orders-value", sr.Schema{Schema: orderV3})
	wantCode(t, err, http.StatusConflict, 409)
	if !errors.As(err, &re) || re.SchemaError() != sr.ErrIncompatibleSchema || re.Message == "" {
		t.Fatalf("incompatible evolution surfaced as %v", err)
	}
	res, err := cl.CheckCompatibility(sr.WithParams(ctx, sr.Verbose), "orders-value", -1, sr.Schema{Schema: orderV3})
	if err != nil || res.Is || len(res.Messages) == 0 {
		t.Fatalf("compatibility check of v3: %+v %v", res, err)
	}
	res, err = cl.CheckCompatibility(ctx, "orders-value", 1, sr.Schema{Schema: orderV2})
	if err != nil || !res.Is {
		t.Fatalf("compatibility check of v2 against v1: %+v %v", res, err)
	}

	// Latest, by version, lookup.
	latest, err := cl.SchemaByVersion(ctx, "orders-value", -1)
	if err != nil || latest.Version != 2 || latest.ID != s2.ID || latest.Schema.Schema != orderV2 {
		t.Fatalf("latest %+v %v", latest, err)
	}
	found, err := cl.LookupSchema(ctx, "orders-value", sr.Schema{Schema: orderV1})
	if err != nil || found.Version != 1 || found.ID != s1.ID {
		t.Fatalf("lookup %+v %v", found, err)
	}
	_, err = cl.LookupSchema(ctx, "orders-value", sr.Schema{Schema: orderV3})
	wantCode(t, err, http.StatusNotFound, 40403)
	_, err = cl.LookupSchema(ctx, "nope", sr.Schema{Schema: orderV1})
	wantCode(t, err, http.StatusNotFound, 40401)

	// The same schema under another subject keeps its id.
	other, err := cl.CreateSchema(ctx, "audit-value", sr.Schema{Schema: orderV1})
	if err != nil || other.ID != s1.ID || other.Version != 1 {
		t.Fatalf("same schema, other subject: %+v %v", other, err)
	}
	subjects, err := cl.SubjectsByID(ctx, s1.ID)
	if err != nil || !slices.Equal(subjects, []string{"audit-value", "orders-value"}) {
		t.Fatalf("subjects of id %d: %v %v", s1.ID, subjects, err)
	}
	usages, err := cl.SchemaVersionsByID(ctx, s1.ID)
	if err != nil || len(usages) != 2 {
		t.Fatalf("versions of id %d: %v %v", s1.ID, usages, err)
	}
	all, err := cl.Subjects(ctx)
	if err != nil || !slices.Equal(all, []string{"audit-value", "orders-value"}) {
		t.Fatalf("subjects %v %v", all, err)
	}

	// Delete: a version soft then permanently; the subject soft then
	// permanently.
	err = cl.DeleteSchema(ctx, "orders-value", 1, sr.HardDelete)
	wantCode(t, err, http.StatusNotFound, 40407)
	if err := cl.DeleteSchema(ctx, "orders-value", 1, sr.SoftDelete); err != nil {
		t.Fatal(err)
	}
	err = cl.DeleteSchema(ctx, "orders-value", 1, sr.SoftDelete)
	wantCode(t, err, http.StatusNotFound, 40406)
	if vs, _ := cl.SubjectVersions(ctx, "orders-value"); !slices.Equal(vs, []int{2}) {
		t.Fatalf("versions after soft delete: %v", vs)
	}
	if vs, _ := cl.SubjectVersions(sr.WithParams(ctx, sr.ShowDeleted), "orders-value"); !slices.Equal(vs, []int{1, 2}) {
		t.Fatalf("versions with deleted: %v", vs)
	}
	if err := cl.DeleteSchema(ctx, "orders-value", 1, sr.HardDelete); err != nil {
		t.Fatal(err)
	}
	if vs, _ := cl.SubjectVersions(sr.WithParams(ctx, sr.ShowDeleted), "orders-value"); !slices.Equal(vs, []int{2}) {
		t.Fatalf("versions after permanent delete: %v", vs)
	}
	_, err = cl.DeleteSubject(ctx, "orders-value", sr.HardDelete)
	wantCode(t, err, http.StatusNotFound, 40405)
	deleted, err := cl.DeleteSubject(ctx, "orders-value", sr.SoftDelete)
	if err != nil || !slices.Equal(deleted, []int{2}) {
		t.Fatalf("soft delete subject: %v %v", deleted, err)
	}
	_, err = cl.DeleteSubject(ctx, "orders-value", sr.SoftDelete)
	wantCode(t, err, http.StatusNotFound, 40404)
	_, err = cl.SchemaByVersion(ctx, "orders-value", 2)
	wantCode(t, err, http.StatusNotFound, 40401)
	if subs, _ := cl.Subjects(sr.WithParams(ctx, sr.ShowDeleted)); !slices.Equal(subs, []string{"audit-value", "orders-value"}) {
		t.Fatalf("subjects with deleted: %v", subs)
	}
	deleted, err = cl.DeleteSubject(ctx, "orders-value", sr.HardDelete)
	if err != nil || !slices.Equal(deleted, []int{2}) {
		t.Fatalf("permanent delete subject: %v %v", deleted, err)
	}
	_, err = cl.DeleteSubject(ctx, "orders-value", sr.HardDelete)
	wantCode(t, err, http.StatusNotFound, 40401)
	// Ids stay resolvable for old records.
	if _, err := cl.SchemaByID(ctx, s2.ID); err != nil {
		t.Fatalf("id of a deleted subject: %v", err)
	}
	// A fresh start numbers from 1 again, with the same id.
	again2, err := cl.CreateSchema(ctx, "orders-value", sr.Schema{Schema: orderV2})
	if err != nil || again2.Version != 1 || again2.ID != s2.ID {
		t.Fatalf("re-created subject: %+v %v", again2, err)
	}
}

func TestClientConfigAndMode(t *testing.T) {
	_, url := serve(t, newMeta(t), Options{})
	cl := newClient(t, url)
	ctx := testCtx(t)

	global := cl.Compatibility(ctx)
	if global[0].Err != nil || global[0].Level != sr.CompatBackward {
		t.Fatalf("default global level %+v", global[0])
	}
	// A subject without its own level: 40408, or the global one on request.
	sub := cl.Compatibility(ctx, "orders-value")
	wantCode(t, sub[0].Err, http.StatusNotFound, 40408)
	sub = cl.Compatibility(sr.WithParams(ctx, sr.DefaultToGlobal), "orders-value")
	if sub[0].Err != nil || sub[0].Level != sr.CompatBackward {
		t.Fatalf("subject level defaulting to global %+v", sub[0])
	}
	set := cl.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatNone}, "orders-value")
	if set[0].Err != nil || set[0].Level != sr.CompatNone {
		t.Fatalf("set subject level %+v", set[0])
	}
	if sub = cl.Compatibility(ctx, "orders-value"); sub[0].Err != nil || sub[0].Level != sr.CompatNone {
		t.Fatalf("subject level %+v", sub[0])
	}
	// NONE lets an incompatible schema in.
	if _, err := cl.CreateSchema(ctx, "orders-value", sr.Schema{Schema: orderV1}); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.CreateSchema(ctx, "orders-value", sr.Schema{Schema: `{"type":"string"}`}); err != nil {
		t.Fatalf("incompatible schema at NONE: %v", err)
	}
	reset := cl.ResetCompatibility(ctx, "orders-value")
	if reset[0].Err != nil {
		t.Fatal(reset[0].Err)
	}
	reset = cl.ResetCompatibility(ctx, "orders-value")
	wantCode(t, reset[0].Err, http.StatusNotFound, 40401)
	set = cl.SetCompatibility(ctx, sr.SetCompatibility{Level: sr.CompatFullTransitive})
	if set[0].Err != nil || set[0].Level != sr.CompatFullTransitive {
		t.Fatalf("set global level %+v", set[0])
	}
	if global = cl.Compatibility(ctx); global[0].Level != sr.CompatFullTransitive {
		t.Fatalf("global level %+v", global[0])
	}

	// Modes: READONLY refuses registration with 42205; IMPORT needs force
	// while subjects exist.
	modes := cl.Mode(ctx)
	if modes[0].Err != nil || modes[0].Mode != sr.ModeReadWrite {
		t.Fatalf("default mode %+v", modes[0])
	}
	modes = cl.SetMode(ctx, sr.ModeReadOnly, "orders-value")
	if modes[0].Err != nil || modes[0].Mode != sr.ModeReadOnly {
		t.Fatalf("set mode %+v", modes[0])
	}
	_, err := cl.CreateSchema(ctx, "orders-value", sr.Schema{Schema: `{"type":"int"}`})
	wantCode(t, err, http.StatusUnprocessableEntity, 42205)
	err = cl.DeleteSchema(ctx, "orders-value", 1, sr.SoftDelete)
	wantCode(t, err, http.StatusUnprocessableEntity, 42205)
	if _, err := cl.CreateSchema(ctx, "other-value", sr.Schema{Schema: `{"type":"int"}`}); err != nil {
		t.Fatalf("a subject without the mode: %v", err)
	}
	modes = cl.ResetMode(ctx, "orders-value")
	if modes[0].Err != nil || modes[0].Mode != sr.ModeReadOnly {
		t.Fatalf("reset mode %+v", modes[0])
	}
	modes = cl.Mode(ctx, "orders-value")
	wantCode(t, modes[0].Err, http.StatusNotFound, 40409)
	modes = cl.SetMode(ctx, sr.ModeImport)
	wantCode(t, modes[0].Err, http.StatusUnprocessableEntity, 42205)
	modes = cl.SetMode(sr.WithParams(ctx, sr.Force), sr.ModeImport)
	if modes[0].Err != nil || modes[0].Mode != sr.ModeImport {
		t.Fatalf("forced import mode %+v", modes[0])
	}
	// IMPORT: registration needs an id (and keeps it); without one it is refused.
	_, err = cl.RegisterSchema(ctx, "imported", sr.Schema{Schema: `{"type":"bytes"}`}, -1, -1)
	wantCode(t, err, http.StatusUnprocessableEntity, 42205)
	id, err := cl.RegisterSchema(ctx, "imported", sr.Schema{Schema: `{"type":"bytes"}`}, 777, 3)
	if err != nil || id != 777 {
		t.Fatalf("import: id %d %v", id, err)
	}
	if s, err := cl.SchemaByVersion(ctx, "imported", 3); err != nil || s.ID != 777 {
		t.Fatalf("imported version %+v %v", s, err)
	}
	_, err = cl.RegisterSchema(ctx, "imported2", sr.Schema{Schema: `{"type":"float"}`}, 777, 1)
	wantCode(t, err, http.StatusUnprocessableEntity, 42207)
	if modes = cl.SetMode(ctx, sr.ModeReadWrite); modes[0].Err != nil {
		t.Fatal(modes[0].Err)
	}
	s, err := cl.CreateSchema(ctx, "after-import", sr.Schema{Schema: `{"type":"double"}`})
	if err != nil || s.ID <= 777 {
		t.Fatalf("an id allocated after importing 777: %+v %v", s, err)
	}
}

// A value round-trips through sr.Serde with the Confluent header (magic
// byte 0, then the big-endian schema id) using the registered schema.
func TestClientSerdeRoundTrip(t *testing.T) {
	_, url := serve(t, newMeta(t), Options{})
	cl := newClient(t, url)
	ctx := testCtx(t)
	ss, err := cl.CreateSchema(ctx, "orders-value", sr.Schema{Schema: orderV2})
	if err != nil {
		t.Fatal(err)
	}
	// The consumer side: fetch the schema by id, as a deserializer would.
	fetched, err := cl.SchemaByID(ctx, ss.ID)
	if err != nil {
		t.Fatal(err)
	}
	schema, err := avro.ParseWithCache(fetched.Schema, "", &avro.SchemaCache{})
	if err != nil {
		t.Fatal(err)
	}
	type order struct {
		ID     string `avro:"id"`
		Amount int64  `avro:"amount"`
		Note   string `avro:"note"`
	}
	var serde sr.Serde
	serde.Register(ss.ID, order{},
		sr.EncodeFn(func(v any) ([]byte, error) { return avro.Marshal(schema, v) }),
		sr.DecodeFn(func(b []byte, v any) error { return avro.Unmarshal(schema, b, v) }),
	)
	in := order{ID: "o-1", Amount: 1 << 40, Note: "gift"}
	b, err := serde.Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 5 || b[0] != 0 || int(b[1])<<24|int(b[2])<<16|int(b[3])<<8|int(b[4]) != ss.ID {
		t.Fatalf("header % x, want magic 0 and id %d", b[:min(5, len(b))], ss.ID)
	}
	id, _, err := serde.DecodeID(b)
	if err != nil || id != ss.ID {
		t.Fatalf("decoded id %d %v", id, err)
	}
	var out order
	if err := serde.Decode(b, &out); err != nil || out != in {
		t.Fatalf("round trip: %+v %v, want %+v", out, err, in)
	}
}

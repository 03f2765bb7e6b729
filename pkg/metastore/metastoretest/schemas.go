package metastoretest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stratamq/strata/pkg/metastore"
)

func testSchemas(t *testing.T, s metastore.Store, _ Options) {
	m := metastore.New(s)
	c := ctx(t)
	const avro = `{"type":"record","name":"Order","fields":[{"name":"id","type":"string"}]}`
	// Concurrent registrations of one schema share one id.
	ids := make([]int64, 8)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			id, err := m.SchemaID(c, "AVRO", avro)
			if err != nil {
				t.Error(err)
			}
			ids[i] = id
		}(i)
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] || id <= 0 {
			t.Fatalf("one schema got ids %v", ids)
		}
	}
	other, err := m.SchemaID(c, "JSON", avro)
	if err != nil || other == ids[0] {
		t.Fatalf("a different type got id %d (%v), the same as %d", other, err, ids[0])
	}
	sch, err := m.SchemaByID(c, ids[0])
	if err != nil || sch.Text != avro || sch.Type != "AVRO" || sch.ID != ids[0] {
		t.Fatalf("schema by id: %+v %v", sch, err)
	}
	_, err = m.SchemaByID(c, 999999)
	WantErr(t, err, metastore.ErrNotFound)

	// Subject versions: appended under compare-and-set on the latest.
	v1, err := m.AddSubjectVersion(c, "orders-value", 0, ids[0])
	if err != nil || v1 != 1 {
		t.Fatalf("first version %d: %v", v1, err)
	}
	_, err = m.AddSubjectVersion(c, "orders-value", 0, other)
	WantErr(t, err, metastore.ErrConditionFailed)
	v2, err := m.AddSubjectVersion(c, "orders-value", v1, other)
	if err != nil || v2 != 2 {
		t.Fatalf("second version %d: %v", v2, err)
	}
	if err := m.MarkVersionDeleted(c, "orders-value", 1); err != nil {
		t.Fatal(err)
	}
	vs, err := m.SubjectVersions(c, "orders-value")
	if err != nil || len(vs) != 2 || !vs[0].Deleted || vs[1].Deleted || vs[1].ID != other || vs[1].Version != 2 {
		t.Fatalf("versions: %+v %v", vs, err)
	}

	// Compatibility levels, global and per subject.
	if _, ok, err := m.Compatibility(c, ""); ok || err != nil {
		t.Fatalf("a global level before any was set (%v)", err)
	}
	if err := m.SetCompatibility(c, "", "BACKWARD"); err != nil {
		t.Fatal(err)
	}
	if err := m.SetCompatibility(c, "orders-value", "FULL_TRANSITIVE"); err != nil {
		t.Fatal(err)
	}
	if lvl, ok, _ := m.Compatibility(c, ""); !ok || lvl != "BACKWARD" {
		t.Fatalf("global level %q", lvl)
	}
	if lvl, ok, _ := m.Compatibility(c, "orders-value"); !ok || lvl != "FULL_TRANSITIVE" {
		t.Fatalf("subject level %q", lvl)
	}
	if err := m.SetCompatibility(c, "orders-value", ""); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := m.Compatibility(c, "orders-value"); ok {
		t.Fatal("a removed subject level is still set")
	}

	// Modes, global and per subject, like levels.
	if _, ok, err := m.SchemaMode(c, ""); ok || err != nil {
		t.Fatalf("a global mode before any was set (%v)", err)
	}
	if err := m.SetSchemaMode(c, "orders-value", "READONLY"); err != nil {
		t.Fatal(err)
	}
	if mode, ok, _ := m.SchemaMode(c, "orders-value"); !ok || mode != "READONLY" {
		t.Fatalf("subject mode %q", mode)
	}
	if _, ok, _ := m.SchemaMode(c, ""); ok {
		t.Fatal("a subject mode set the global one")
	}
	if err := m.SetSchemaMode(c, "orders-value", ""); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := m.SchemaMode(c, "orders-value"); ok {
		t.Fatal("a removed subject mode is still set")
	}
	testSchemaIndexes(t, m, ids[0], other)
}

// testSchemaIndexes covers lookups without allocation, references, the
// subject and use indexes, permanent deletion and imported ids; it runs
// after testSchemas registered "orders-value" versions 1 (deleted, id a)
// and 2 (id b).
func testSchemaIndexes(t *testing.T, m *metastore.Meta, a, b int64) {
	c := ctx(t)
	const base = `{"type":"record","name":"Base","fields":[]}`
	if _, err := m.LookupSchemaID(c, "AVRO", base); !errors.Is(err, metastore.ErrNotFound) {
		t.Fatalf("lookup of an unknown schema: %v", err)
	}
	if id, err := m.LookupSchemaID(c, "JSON", `{"type":"record","name":"Order","fields":[{"name":"id","type":"string"}]}`); err != nil || id != b {
		t.Fatalf("lookup of a known schema: %d %v, want %d", id, err, b)
	}
	baseID := Must[int64](t)(m.SchemaID(c, "AVRO", base))
	Must[int64](t)(m.AddSubjectVersion(c, "base", 0, baseID))

	// References are part of a schema's identity, and indexed.
	ref := metastore.SchemaRef{Name: "Base", Subject: "base", Version: 1}
	const user = `{"type":"record","name":"User","fields":[{"name":"b","type":"Base"}]}`
	withRef := Must[int64](t)(m.SchemaID(c, "AVRO", user, ref))
	if again := Must[int64](t)(m.SchemaID(c, "AVRO", user, ref)); again != withRef {
		t.Fatalf("same schema and references: ids %d and %d", withRef, again)
	}
	other := ref
	other.Name = "other.Base"
	if id := Must[int64](t)(m.SchemaID(c, "AVRO", user, other)); id == withRef {
		t.Fatal("other references got the same id")
	}
	if id := Must[int64](t)(m.SchemaID(c, "AVRO", user)); id == withRef {
		t.Fatal("no references got the same id")
	}
	if sch := Must[metastore.Schema](t)(m.SchemaByID(c, withRef)); len(sch.References) != 1 || sch.References[0] != ref {
		t.Fatalf("references read back as %+v", sch.References)
	}
	by := Must[[]int64](t)(m.ReferencedBy(c, "base", 1))
	if len(by) != 2 || by[0] != withRef {
		t.Fatalf("referenced by %v, want %d and the other-references id", by, withRef)
	}
	if by := Must[[]int64](t)(m.ReferencedBy(c, "base", 2)); len(by) != 0 {
		t.Fatalf("an unreferenced version is referenced by %v", by)
	}

	// Indexes: subjects and the versions that use an id.
	Must[int64](t)(m.AddSubjectVersion(c, "users", 0, withRef))
	Must[int64](t)(m.AddSubjectVersion(c, "users-copy", 0, withRef))
	if subs := Must[[]string](t)(m.Subjects(c)); fmt.Sprint(subs) != "[base orders-value users users-copy]" {
		t.Fatalf("subjects %v", subs)
	}
	uses := Must[[]metastore.SubjectVersion](t)(m.SchemaUses(c, withRef))
	if len(uses) != 2 || uses[0].Subject != "users" || uses[1].Subject != "users-copy" || uses[0].Version != 1 {
		t.Fatalf("uses of %d: %+v", withRef, uses)
	}
	uses = Must[[]metastore.SubjectVersion](t)(m.SchemaUses(c, a))
	if len(uses) != 1 || uses[0].Subject != "orders-value" || !uses[0].Deleted {
		t.Fatalf("uses of %d: %+v", a, uses)
	}

	// Permanent deletion needs a soft delete first; the schema stays.
	WantErr(t, m.DeleteSubjectVersion(c, "orders-value", 2), metastore.ErrConditionFailed)
	WantErr(t, m.DeleteSubjectVersion(c, "orders-value", 9), metastore.ErrNotFound)
	if err := m.DeleteSubjectVersion(c, "orders-value", 1); err != nil {
		t.Fatal(err)
	}
	if vs := Must[[]metastore.SubjectVersion](t)(m.SubjectVersions(c, "orders-value")); len(vs) != 1 || vs[0].Version != 2 {
		t.Fatalf("versions after a permanent delete: %+v", vs)
	}
	if uses := Must[[]metastore.SubjectVersion](t)(m.SchemaUses(c, a)); len(uses) != 0 {
		t.Fatalf("a permanently deleted version is still a use: %+v", uses)
	}
	Must[metastore.Schema](t)(m.SchemaByID(c, a))

	// Imported ids: idempotent, conflicts refused, the counter moves past.
	if err := m.ImportSchema(c, 500, "JSON", `{"type":"string"}`); err != nil {
		t.Fatal(err)
	}
	if err := m.ImportSchema(c, 500, "JSON", `{"type":"string"}`); err != nil {
		t.Fatalf("importing the same schema again: %v", err)
	}
	WantErr(t, m.ImportSchema(c, 500, "JSON", `{"type":"number"}`), metastore.ErrConditionFailed)
	if id := Must[int64](t)(m.LookupSchemaID(c, "JSON", `{"type":"string"}`)); id != 500 {
		t.Fatalf("imported schema looked up as %d", id)
	}
	if id := Must[int64](t)(m.SchemaID(c, "JSON", `{"type":"boolean"}`)); id <= 500 {
		t.Fatalf("an id allocated after an import of 500: %d", id)
	}
}

package metastore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Schema-registry records. A schema's id is global and shared by every
// subject that registers the same type, text and references (Confluent
// semantics); a subject's versions count from 1. Ids are never reused and
// a schema record is never deleted, so an id read from a record always
// resolves.
//
// Besides the records themselves, three indexes are written before the
// record they point at and never pruned; readers verify what they find
// against the records (a writer can fail between index and record, and a
// version can be deleted permanently):
//   - schemas/subjects: every subject that was ever given a version;
//   - schemas/uses: <id>/<subject> for every subject that was ever given a
//     version with that id;
//   - schemas/refby/<subject>: <version>/<id> for every schema that
//     references that subject version.
const (
	pkSchemaIDs      = "schemas/ids"      // sk zero-padded id: the schema
	pkSchemaHashes   = "schemas/hashes"   // sk sha256(type, text, references): its id
	pkSubjectPfx     = "schemas/subject/" // + subject; sk zero-padded version
	pkSchemaConfig   = "schemas/config"   // sk subject, or globalSubject
	pkSchemaMode     = "schemas/mode"     // sk subject, or globalSubject
	pkSchemaSubjects = "schemas/subjects" // sk subject: the subject index
	pkSchemaUses     = "schemas/uses"     // sk zero-padded id "/" subject
	pkSchemaRefByPfx = "schemas/refby/"   // + referenced subject; sk zero-padded version "/" zero-padded id
	skSchemaIDs      = "schema-ids"       // counter
	globalSubject    = "\x01global"       // sorts before any subject name
)

// SchemaRef is a schema reference: the schema refers to Name (an Avro type
// name, a JSON Schema $ref or a Protobuf import), defined by version
// Version of Subject.
type SchemaRef struct {
	Name    string `json:"name"`
	Subject string `json:"subject"`
	Version int64  `json:"version"`
}

// Schema is a registered schema.
type Schema struct {
	ID         int64       `json:"id"`
	Type       string      `json:"type"` // AVRO, JSON or PROTOBUF
	Text       string      `json:"schema"`
	References []SchemaRef `json:"references,omitempty"`
}

// SubjectVersion is one version of a subject.
type SubjectVersion struct {
	Subject string `json:"-"`
	Version int64  `json:"-"`
	ID      int64  `json:"id"`
	Deleted bool   `json:"deleted,omitempty"`
}

func schemaIDKey(id int64) Key { return Key{PK: pkSchemaIDs, SK: fmt.Sprintf("%012d", id)} }

func versionKey(subject string, v int64) Key {
	return Key{PK: pkSubjectPfx + subject, SK: fmt.Sprintf("%08d", v)}
}

func usesKey(id int64, subject string) Key {
	return Key{PK: pkSchemaUses, SK: fmt.Sprintf("%012d/%s", id, subject)}
}

func refByKey(r SchemaRef, id int64) Key {
	return Key{PK: pkSchemaRefByPfx + r.Subject, SK: fmt.Sprintf("%08d/%012d", r.Version, id)}
}

// schemaHash identifies a schema's content. Without references it is the
// hash of type and text alone, as before references existed.
func schemaHash(typ, text string, refs []SchemaRef) string {
	var b bytes.Buffer
	b.WriteString(typ)
	b.WriteByte(0)
	b.WriteString(text)
	for _, r := range refs {
		fmt.Fprintf(&b, "\x00%s\x00%s\x00%d", r.Name, r.Subject, r.Version)
	}
	h := sha256.Sum256(b.Bytes())
	return hex.EncodeToString(h[:])
}

func sameRefs(a, b []SchemaRef) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// SchemaID returns the id of a schema, registering the schema (not yet any
// subject version) if it is new. Concurrent callers with the same schema
// get the same id.
func (m *Meta) SchemaID(ctx context.Context, typ, text string, refs ...SchemaRef) (int64, error) {
	hk := Key{PK: pkSchemaHashes, SK: schemaHash(typ, text, refs)}
	for {
		id, err := m.lookupSchemaID(ctx, hk)
		if err == nil {
			return id, nil
		}
		if !errors.Is(err, ErrNotFound) {
			return 0, err
		}
		id, err = m.s.Add(ctx, Key{PK: pkCounters, SK: skSchemaIDs}, 1)
		if err != nil {
			return 0, fmt.Errorf("metastore: allocate schema id: %w", err)
		}
		// The schema and its reference index first, then the hash that
		// points at it: a reader that finds the hash always finds the schema.
		_, err = m.s.Put(ctx, Item{Key: schemaIDKey(id), Value: encodeJSON(Schema{ID: id, Type: typ, Text: text, References: refs})}, IfAbsent())
		if errors.Is(err, ErrConditionFailed) {
			continue // an import took this id: allocate another
		}
		if err != nil {
			return 0, fmt.Errorf("metastore: store schema %d: %w", id, err)
		}
		if err := m.indexRefs(ctx, id, refs); err != nil {
			return 0, err
		}
		_, err = m.s.Put(ctx, Item{Key: hk, Value: []byte(strconv.FormatInt(id, 10))}, IfAbsent())
		if errors.Is(err, ErrConditionFailed) {
			continue // another caller registered it first: use its id (ours is left unused)
		}
		if err != nil {
			return 0, fmt.Errorf("metastore: index schema %d: %w", id, err)
		}
		return id, nil
	}
}

// LookupSchemaID returns the id of a schema registered before, or
// ErrNotFound; unlike SchemaID it never allocates one.
func (m *Meta) LookupSchemaID(ctx context.Context, typ, text string, refs ...SchemaRef) (int64, error) {
	return m.lookupSchemaID(ctx, Key{PK: pkSchemaHashes, SK: schemaHash(typ, text, refs)})
}

func (m *Meta) lookupSchemaID(ctx context.Context, hk Key) (int64, error) {
	it, err := m.s.Get(ctx, hk)
	if err != nil {
		return 0, fmt.Errorf("metastore: schema id: %w", err)
	}
	id, err := strconv.ParseInt(string(it.Value), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("metastore: schema hash %s: %w", hk.SK, err)
	}
	return id, nil
}

// ImportSchema stores a schema under a given id (the schema registry's
// IMPORT mode, which copies ids from another registry). Importing the same
// schema again is a no-op; an id that holds another schema gives
// ErrConditionFailed. Ids allocated by SchemaID afterwards are larger.
func (m *Meta) ImportSchema(ctx context.Context, id int64, typ, text string, refs ...SchemaRef) error {
	if id <= 0 {
		return fmt.Errorf("metastore: import schema id %d: ids are positive", id)
	}
	want := Schema{ID: id, Type: typ, Text: text, References: refs}
	_, err := m.s.Put(ctx, Item{Key: schemaIDKey(id), Value: encodeJSON(want)}, IfAbsent())
	if errors.Is(err, ErrConditionFailed) {
		got, err := m.SchemaByID(ctx, id)
		if err != nil {
			return err
		}
		if got.Type != typ || got.Text != text || !sameRefs(got.References, refs) {
			return fmt.Errorf("metastore: import schema %d: the id holds another schema: %w", id, ErrConditionFailed)
		}
	} else if err != nil {
		return fmt.Errorf("metastore: import schema %d: %w", id, err)
	}
	if err := m.indexRefs(ctx, id, refs); err != nil {
		return err
	}
	// The first id given to a content keeps its hash entry.
	hk := Key{PK: pkSchemaHashes, SK: schemaHash(typ, text, refs)}
	if _, err := m.s.Put(ctx, Item{Key: hk, Value: []byte(strconv.FormatInt(id, 10))}, IfAbsent()); err != nil && !errors.Is(err, ErrConditionFailed) {
		return fmt.Errorf("metastore: index schema %d: %w", id, err)
	}
	// Move the counter past the imported id (it only grows; racing
	// importers may make it skip ids, never reuse one).
	ck := Key{PK: pkCounters, SK: skSchemaIDs}
	cur, err := m.s.Add(ctx, ck, 0)
	if err != nil {
		return fmt.Errorf("metastore: read schema id counter: %w", err)
	}
	if cur < id {
		if _, err := m.s.Add(ctx, ck, id-cur); err != nil {
			return fmt.Errorf("metastore: advance schema id counter: %w", err)
		}
	}
	return nil
}

func (m *Meta) indexRefs(ctx context.Context, id int64, refs []SchemaRef) error {
	for _, r := range refs {
		if _, err := m.s.Put(ctx, Item{Key: refByKey(r, id)}, Always); err != nil {
			return fmt.Errorf("metastore: index reference of schema %d to %q version %d: %w", id, r.Subject, r.Version, err)
		}
	}
	return nil
}

// SchemaByID returns a schema, or ErrNotFound.
func (m *Meta) SchemaByID(ctx context.Context, id int64) (Schema, error) {
	it, err := m.s.Get(ctx, schemaIDKey(id))
	if err != nil {
		return Schema{}, fmt.Errorf("metastore: schema %d: %w", id, err)
	}
	var s Schema
	return s, decodeJSON(it, &s)
}

// SubjectVersions lists a subject's versions, oldest first, deleted ones
// included (flagged). Permanently deleted versions are gone.
func (m *Meta) SubjectVersions(ctx context.Context, subject string) ([]SubjectVersion, error) {
	items, err := m.s.Query(ctx, pkSubjectPfx+subject, "")
	if err != nil {
		return nil, fmt.Errorf("metastore: versions of %q: %w", subject, err)
	}
	out := make([]SubjectVersion, 0, len(items))
	for _, it := range items {
		var v SubjectVersion
		if err := decodeJSON(it, &v); err != nil {
			return nil, err
		}
		n, err := strconv.ParseInt(it.SK, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("metastore: version key %s: %w", it.Key, err)
		}
		v.Subject, v.Version = subject, n
		out = append(out, v)
	}
	return out, nil
}

// AddSubjectVersion appends schema id as version after (the subject's
// latest version as the caller read it, 0 for none). Two writers that read
// the same latest version cannot both append: the loser gets
// ErrConditionFailed and re-reads (and re-checks compatibility).
func (m *Meta) AddSubjectVersion(ctx context.Context, subject string, after, id int64) (int64, error) {
	v := after + 1
	// The indexes first, so that every version is reachable from them.
	if _, err := m.s.Put(ctx, Item{Key: Key{PK: pkSchemaSubjects, SK: subject}}, Always); err != nil {
		return 0, fmt.Errorf("metastore: index subject %q: %w", subject, err)
	}
	if _, err := m.s.Put(ctx, Item{Key: usesKey(id, subject)}, Always); err != nil {
		return 0, fmt.Errorf("metastore: index schema %d under %q: %w", id, subject, err)
	}
	if _, err := m.s.Put(ctx, Item{Key: versionKey(subject, v), Value: encodeJSON(SubjectVersion{ID: id})}, IfAbsent()); err != nil {
		return 0, fmt.Errorf("metastore: add version %d of %q: %w", v, subject, err)
	}
	return v, nil
}

// MarkVersionDeleted soft-deletes a subject version (it keeps its number).
func (m *Meta) MarkVersionDeleted(ctx context.Context, subject string, v int64) error {
	k := versionKey(subject, v)
	it, err := m.s.Get(ctx, k)
	if err != nil {
		return fmt.Errorf("metastore: delete version %d of %q: %w", v, subject, err)
	}
	var sv SubjectVersion
	if err := decodeJSON(it, &sv); err != nil {
		return err
	}
	sv.Deleted = true
	if _, err := m.s.Put(ctx, Item{Key: k, Value: encodeJSON(sv)}, IfVersion(it.Version)); err != nil {
		return fmt.Errorf("metastore: delete version %d of %q: %w", v, subject, err)
	}
	return nil
}

// DeleteSubjectVersion permanently removes a soft-deleted subject version
// (its schema record stays). It gives ErrNotFound for an absent version and
// ErrConditionFailed for one that is not soft-deleted.
func (m *Meta) DeleteSubjectVersion(ctx context.Context, subject string, v int64) error {
	k := versionKey(subject, v)
	it, err := m.s.Get(ctx, k)
	if err != nil {
		return fmt.Errorf("metastore: permanently delete version %d of %q: %w", v, subject, err)
	}
	var sv SubjectVersion
	if err := decodeJSON(it, &sv); err != nil {
		return err
	}
	if !sv.Deleted {
		return fmt.Errorf("metastore: permanently delete version %d of %q: not soft-deleted: %w", v, subject, ErrConditionFailed)
	}
	if err := m.s.Delete(ctx, k, IfVersion(it.Version)); err != nil {
		return fmt.Errorf("metastore: permanently delete version %d of %q: %w", v, subject, err)
	}
	return nil
}

// Subjects lists, in order, every subject that was ever given a version;
// some may have none left (check SubjectVersions).
func (m *Meta) Subjects(ctx context.Context) ([]string, error) {
	items, err := m.s.Query(ctx, pkSchemaSubjects, "")
	if err != nil {
		return nil, fmt.Errorf("metastore: list subjects: %w", err)
	}
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = it.SK
	}
	return out, nil
}

// SchemaUses lists the subject versions (soft-deleted ones included,
// flagged) whose schema is id, by subject and then version.
func (m *Meta) SchemaUses(ctx context.Context, id int64) ([]SubjectVersion, error) {
	pfx := fmt.Sprintf("%012d/", id)
	items, err := m.s.Query(ctx, pkSchemaUses, pfx)
	if err != nil {
		return nil, fmt.Errorf("metastore: uses of schema %d: %w", id, err)
	}
	var out []SubjectVersion
	for _, it := range items {
		vs, err := m.SubjectVersions(ctx, strings.TrimPrefix(it.SK, pfx))
		if err != nil {
			return nil, err
		}
		for _, v := range vs {
			if v.ID == id {
				out = append(out, v)
			}
		}
	}
	return out, nil
}

// ReferencedBy returns the ids of the schemas that reference version v of
// subject, in order. Some may be used by no subject version (check
// SchemaUses).
func (m *Meta) ReferencedBy(ctx context.Context, subject string, v int64) ([]int64, error) {
	pfx := fmt.Sprintf("%08d/", v)
	items, err := m.s.Query(ctx, pkSchemaRefByPfx+subject, pfx)
	if err != nil {
		return nil, fmt.Errorf("metastore: references to version %d of %q: %w", v, subject, err)
	}
	out := make([]int64, 0, len(items))
	for _, it := range items {
		id, err := strconv.ParseInt(strings.TrimPrefix(it.SK, pfx), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("metastore: reference key %s: %w", it.Key, err)
		}
		out = append(out, id)
	}
	return out, nil
}

// Compatibility returns the compatibility level of a subject ("" subject:
// the global level); ok is false when none is set.
func (m *Meta) Compatibility(ctx context.Context, subject string) (level string, ok bool, err error) {
	return m.schemaSetting(ctx, pkSchemaConfig, subject)
}

// SetCompatibility sets (or with level "" removes) a subject's
// compatibility level; subject "" is the global level.
func (m *Meta) SetCompatibility(ctx context.Context, subject, level string) error {
	return m.setSchemaSetting(ctx, pkSchemaConfig, subject, level)
}

// SchemaMode returns the registry mode of a subject ("" subject: the
// global mode); ok is false when none is set.
func (m *Meta) SchemaMode(ctx context.Context, subject string) (mode string, ok bool, err error) {
	return m.schemaSetting(ctx, pkSchemaMode, subject)
}

// SetSchemaMode sets (or with mode "" removes) a subject's registry mode;
// subject "" is the global mode.
func (m *Meta) SetSchemaMode(ctx context.Context, subject, mode string) error {
	return m.setSchemaSetting(ctx, pkSchemaMode, subject, mode)
}

func (m *Meta) schemaSetting(ctx context.Context, pk, subject string) (string, bool, error) {
	if subject == "" {
		subject = globalSubject
	}
	it, err := m.s.Get(ctx, Key{PK: pk, SK: subject})
	if errors.Is(err, ErrNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("metastore: %s of %q: %w", pk, subject, err)
	}
	return string(it.Value), true, nil
}

func (m *Meta) setSchemaSetting(ctx context.Context, pk, subject, value string) error {
	if subject == "" {
		subject = globalSubject
	}
	k := Key{PK: pk, SK: subject}
	var err error
	if value == "" {
		err = m.s.Delete(ctx, k, Always)
	} else {
		_, err = m.s.Put(ctx, Item{Key: k, Value: []byte(value)}, Always)
	}
	if err != nil {
		return fmt.Errorf("metastore: set %s of %q: %w", pk, subject, err)
	}
	return nil
}

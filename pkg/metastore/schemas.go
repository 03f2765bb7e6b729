package metastore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
)

// Schema-registry records. A schema's id is global and shared by every
// subject that registers the same text and type (Confluent semantics); a
// subject's versions count from 1.
const (
	pkSchemaIDs    = "schemas/ids"      // sk zero-padded id: the schema
	pkSchemaHashes = "schemas/hashes"   // sk sha256(type, text): its id
	pkSubjectPfx   = "schemas/subject/" // + subject; sk zero-padded version
	pkSchemaConfig = "schemas/config"   // sk subject, or globalSubject
	skSchemaIDs    = "schema-ids"       // counter
	globalSubject  = "\x01global"       // sorts before any subject name
)

// Schema is a registered schema.
type Schema struct {
	ID   int64  `json:"id"`
	Type string `json:"type"` // AVRO, JSON or PROTOBUF
	Text string `json:"schema"`
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

func schemaHash(typ, text string) string {
	h := sha256.Sum256([]byte(typ + "\x00" + text))
	return hex.EncodeToString(h[:])
}

// SchemaID returns the id of a schema, registering the schema (not yet any
// subject version) if it is new. Concurrent callers with the same schema
// get the same id.
func (m *Meta) SchemaID(ctx context.Context, typ, text string) (int64, error) {
	hk := Key{PK: pkSchemaHashes, SK: schemaHash(typ, text)}
	for {
		it, err := m.s.Get(ctx, hk)
		if err == nil {
			return strconv.ParseInt(string(it.Value), 10, 64)
		}
		if !errors.Is(err, ErrNotFound) {
			return 0, fmt.Errorf("metastore: schema id: %w", err)
		}
		id, err := m.s.Add(ctx, Key{PK: pkCounters, SK: skSchemaIDs}, 1)
		if err != nil {
			return 0, fmt.Errorf("metastore: allocate schema id: %w", err)
		}
		// The schema first, then the hash that points at it: a reader that
		// finds the hash always finds the schema.
		if _, err := m.s.Put(ctx, Item{Key: schemaIDKey(id), Value: encodeJSON(Schema{ID: id, Type: typ, Text: text})}, IfAbsent()); err != nil {
			return 0, fmt.Errorf("metastore: store schema %d: %w", id, err)
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
// included (flagged).
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

// Compatibility returns the compatibility level of a subject ("" subject:
// the global level); ok is false when none is set.
func (m *Meta) Compatibility(ctx context.Context, subject string) (level string, ok bool, err error) {
	if subject == "" {
		subject = globalSubject
	}
	it, err := m.s.Get(ctx, Key{PK: pkSchemaConfig, SK: subject})
	if errors.Is(err, ErrNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("metastore: compatibility of %q: %w", subject, err)
	}
	return string(it.Value), true, nil
}

// SetCompatibility sets (or with level "" removes) a subject's
// compatibility level; subject "" is the global level.
func (m *Meta) SetCompatibility(ctx context.Context, subject, level string) error {
	if subject == "" {
		subject = globalSubject
	}
	k := Key{PK: pkSchemaConfig, SK: subject}
	var err error
	if level == "" {
		err = m.s.Delete(ctx, k, Always)
	} else {
		_, err = m.s.Put(ctx, Item{Key: k, Value: []byte(level)}, Always)
	}
	if err != nil {
		return fmt.Errorf("metastore: set compatibility of %q: %w", subject, err)
	}
	return nil
}

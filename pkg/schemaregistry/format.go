package schemaregistry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/pkg/metastore"
)

// Schema types, as the API names them.
const (
	typeAvro     = "AVRO"
	typeJSON     = "JSON"
	typeProtobuf = "PROTOBUF"
)

// schemaTypes is what GET /schemas/types answers.
var schemaTypes = []string{typeJSON, typeProtobuf, typeAvro}

// A format parses and compares the schemas of one type.
type format interface {
	// parse parses text; deps are the schemas it references, directly or
	// not, each after the ones it references itself.
	parse(text string, deps []dep) (parsed, error)
	// canonical returns the text that is stored and compared to decide
	// whether two schemas are the same; normalize asks for the normalized
	// form (the API's ?normalize=true).
	canonical(text string, normalize bool) (string, error)
}

// dep is a referenced schema, by the name the referencing schema uses.
type dep struct {
	name, typ, text string
}

// parsed is a parsed schema.
type parsed interface {
	// canRead returns why a reader using this schema could not read data
	// written with w (of the same format), or nothing if it can.
	canRead(w parsed) []string
}

var formats = map[string]format{
	typeAvro:     avroFormat{},
	typeJSON:     jsonFormat{},
	typeProtobuf: protoFormat{},
}

// schemaType validates and normalizes a request's schemaType ("" is AVRO).
func schemaType(t string) (string, format, error) {
	if t == "" {
		t = typeAvro
	}
	t = strings.ToUpper(t)
	f, ok := formats[t]
	if !ok {
		return "", nil, errInvalidSchema("Invalid schema type %q: valid types are AVRO, JSON and PROTOBUF", t)
	}
	return t, f, nil
}

// canonicalJSON is the canonical text of AVRO and JSON schemas: the JSON
// without insignificant whitespace, or, normalized, also with the keys of
// every object sorted (neither format gives object key order a meaning).
func canonicalJSON(text string, normalize bool) (string, error) {
	var b bytes.Buffer
	if !normalize {
		if err := json.Compact(&b, []byte(text)); err != nil {
			return "", fmt.Errorf("not valid JSON: %w", err)
		}
		return b.String(), nil
	}
	d := json.NewDecoder(strings.NewReader(text))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return "", fmt.Errorf("not valid JSON: %w", err)
	}
	if d.More() {
		return "", errors.New("not valid JSON: data after the top-level value")
	}
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// resolveRefs checks a request's references and returns them as stored
// (a version of -1, "latest", replaced by the live latest version) with the
// schemas they bring in, transitively, each after its own dependencies.
func (r *Registry) resolveRefs(ctx context.Context, refs []Reference) ([]metastore.SchemaRef, []dep, error) {
	if len(refs) == 0 {
		return nil, nil, nil
	}
	out := make([]metastore.SchemaRef, 0, len(refs))
	for _, ref := range refs {
		if ref.Name == "" || ref.Subject == "" {
			return nil, nil, errInvalidSchema("Invalid reference %+v: name and subject are required", ref)
		}
		// Only subjects the caller may read can be referenced (and so
		// probed through registration errors).
		if err := callerOf(ctx).checkSubject(kmsg.ACLOperationDescribe, ref.Subject); err != nil {
			return nil, nil, err
		}
		v := int64(ref.Version)
		if v == -1 {
			vs, err := r.liveVersions(ctx, ref.Subject)
			if err != nil {
				return nil, nil, err
			}
			if len(vs) == 0 {
				return nil, nil, errInvalidSchema("Invalid reference %q: subject %q has no versions", ref.Name, ref.Subject)
			}
			v = vs[len(vs)-1].Version
		} else if v < 1 {
			return nil, nil, errInvalidSchema("Invalid reference %q: version %d", ref.Name, ref.Version)
		}
		out = append(out, metastore.SchemaRef{Name: ref.Name, Subject: ref.Subject, Version: v})
	}
	deps, err := r.loadDeps(ctx, out)
	if err != nil {
		return nil, nil, err
	}
	return out, deps, nil
}

// loadDeps loads the schemas refs name, transitively, dependencies first.
func (r *Registry) loadDeps(ctx context.Context, refs []metastore.SchemaRef) ([]dep, error) {
	var deps []dep
	seen := make(map[metastore.SchemaRef]bool)
	var visit func(refs []metastore.SchemaRef, depth int) error
	visit = func(refs []metastore.SchemaRef, depth int) error {
		if depth > maxRefDepth {
			return errInvalidSchema("References nested deeper than %d", maxRefDepth)
		}
		for _, ref := range refs {
			if seen[ref] {
				continue
			}
			seen[ref] = true
			sch, err := r.versionSchema(ctx, ref.Subject, ref.Version)
			if err != nil {
				return err
			}
			if err := visit(sch.References, depth+1); err != nil {
				return err
			}
			deps = append(deps, dep{name: ref.Name, typ: sch.Type, text: sch.Text})
		}
		return nil
	}
	return deps, visit(refs, 0)
}

// maxRefDepth bounds chains of references.
const maxRefDepth = 32

// versionSchema returns the schema of a subject version (soft-deleted
// versions included), for resolving references.
func (r *Registry) versionSchema(ctx context.Context, subject string, v int64) (metastore.Schema, error) {
	vs, err := r.meta.SubjectVersions(ctx, subject)
	if err != nil {
		return metastore.Schema{}, storeError("read references", err)
	}
	for _, sv := range vs {
		if sv.Version == v {
			return r.schema(ctx, sv.ID)
		}
	}
	return metastore.Schema{}, errInvalidSchema("Invalid reference: subject %q has no version %d", subject, v)
}

// parseStored parses a stored schema (cached by id: a schema never changes).
func (r *Registry) parseStored(ctx context.Context, sch metastore.Schema) (parsed, error) {
	if p, ok := r.parsedCache.get(sch.ID); ok {
		return p, nil
	}
	f, ok := formats[sch.Type]
	if !ok {
		return nil, fmt.Errorf("schema %d has unknown type %q", sch.ID, sch.Type)
	}
	deps, err := r.loadDeps(ctx, sch.References)
	if err != nil {
		return nil, err
	}
	p, err := f.parse(sch.Text, deps)
	if err != nil {
		return nil, fmt.Errorf("parse schema %d: %w", sch.ID, err)
	}
	r.parsedCache.put(sch.ID, p)
	return p, nil
}

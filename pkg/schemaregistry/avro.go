package schemaregistry

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/hamba/avro/v2"
)

// avroFormat is AVRO. Compatibility is the Avro specification's schema
// resolution, as Confluent checks it (Apache Avro's SchemaCompatibility):
// a reader can read a writer's data when, recursively, record fields match
// by name or reader alias and reader fields missing from the writer have
// defaults, primitives are equal or promotable (int to long, float and
// double; long to float and double; float to double; string and bytes
// either way), named types (record, enum, fixed) match by unqualified name
// or reader alias, the reader's enum has every writer symbol (or a
// default), fixed sizes are equal, array items and map values are
// compatible, every branch of a writer union is readable, and a non-union
// writer matches some branch of a reader union.
//
// hamba/avro's SchemaCompatibility.Compatible implements exactly those
// rules, and is used; but it caches results by the schemas' Parsing
// Canonical Form fingerprints, which leave out defaults, aliases and enum
// defaults, so an instance reused across checks answers for the wrong
// schema (a reader with a default and one without have one fingerprint).
// Within one check, equal fingerprints mean equal definitions (a schema
// defines each name once), so each check gets a fresh instance.
type avroFormat struct{}

type avroSchema struct{ s avro.Schema }

// canonical is the schema's JSON with insignificant whitespace removed,
// the keys of every object in the order Avro's Java implementation writes
// them (type, name, namespace, doc, fields, ...; others sorted after), and
// {"type": T} alone written as T: so, as in Confluent, where Java
// re-serializes Avro schemas, neither whitespace nor key order makes a
// schema new. normalize changes nothing more.
func (avroFormat) canonical(text string, _ bool) (string, error) {
	d := json.NewDecoder(strings.NewReader(text))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return "", fmt.Errorf("not valid JSON: %w", err)
	}
	if d.More() {
		return "", errors.New("not valid JSON: data after the top-level value")
	}
	var b bytes.Buffer
	if err := writeAvroSchema(&b, v); err != nil {
		return "", err
	}
	return b.String(), nil
}

// avroKeyOrder and avroFieldKeyOrder are the orders in which Java's
// Schema.toString writes the keys of schemas and of record fields; other
// keys follow, sorted.
var (
	avroKeyOrder = map[string]int{
		"type": 1, "name": 2, "namespace": 3, "doc": 4, "fields": 5, "symbols": 6, "items": 7,
		"values": 8, "size": 9, "default": 10, "aliases": 11, "logicalType": 12, "precision": 13, "scale": 14,
	}
	avroFieldKeyOrder = map[string]int{"name": 1, "type": 2, "doc": 3, "default": 4, "order": 5, "aliases": 6}
)

// writeAvroSchema writes v, in a schema position, canonically.
func writeAvroSchema(b *bytes.Buffer, v any) error {
	switch v := v.(type) {
	case []any: // a union
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeAvroSchema(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
		return nil
	case map[string]any:
		if t, ok := v["type"].(string); ok && len(v) == 1 {
			return writeJSONValue(b, t)
		}
		return writeAvroObject(b, v, false)
	}
	return writeJSONValue(b, v)
}

// writeAvroObject writes a schema object, or a record field, with its keys
// ordered; only the values of keys that hold schemas are canonicalized
// further (defaults, docs and other properties are data).
func writeAvroObject(b *bytes.Buffer, m map[string]any, isField bool) error {
	order := avroKeyOrder
	schemaKey := func(k string) bool { return k == "type" || k == "items" || k == "values" }
	if isField {
		order = avroFieldKeyOrder
		schemaKey = func(k string) bool { return k == "type" }
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(x, y string) int {
		ox, oy := order[x], order[y]
		switch {
		case ox != 0 && oy != 0:
			return ox - oy
		case ox != 0:
			return -1
		case oy != 0:
			return 1
		}
		return strings.Compare(x, y)
	})
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		if err := writeJSONValue(b, k); err != nil {
			return err
		}
		b.WriteByte(':')
		var err error
		fields, isList := m[k].([]any)
		switch {
		case schemaKey(k):
			err = writeAvroSchema(b, m[k])
		case k == "fields" && isList && !isField:
			b.WriteByte('[')
			for j, f := range fields {
				if j > 0 {
					b.WriteByte(',')
				}
				if fm, ok := f.(map[string]any); ok {
					err = writeAvroObject(b, fm, true)
				} else {
					err = writeJSONValue(b, f)
				}
				if err != nil {
					return err
				}
			}
			b.WriteByte(']')
		default:
			err = writeJSONValue(b, m[k]) // data: docs, defaults, symbols, properties
		}
		if err != nil {
			return err
		}
	}
	b.WriteByte('}')
	return nil
}

// writeJSONValue writes a JSON value compactly (object keys sorted).
func writeJSONValue(b *bytes.Buffer, v any) error {
	e := json.NewEncoder(b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return err
	}
	b.Truncate(b.Len() - 1) // the encoder's newline
	return nil
}

// parse parses text with its references' named types defined first. Each
// parse uses its own cache of names: hamba/avro's default cache is
// process-wide and would resolve names a schema never defined.
func (avroFormat) parse(text string, deps []dep) (parsed, error) {
	cache := &avro.SchemaCache{}
	for _, d := range deps {
		if d.typ != typeAvro {
			return nil, fmt.Errorf("reference %q is a %s schema, not AVRO", d.name, d.typ)
		}
		if _, err := avro.ParseWithCache(d.text, "", cache); err != nil {
			return nil, fmt.Errorf("reference %q: %w", d.name, err)
		}
	}
	s, err := avro.ParseWithCache(text, "", cache)
	if err != nil {
		return nil, err
	}
	return avroSchema{s}, nil
}

func (a avroSchema) canRead(w parsed) []string {
	ws, ok := w.(avroSchema)
	if !ok {
		return []string{"Incompatible because of different schema type"}
	}
	if err := avro.NewSchemaCompatibility().Compatible(a.s, ws.s); err != nil {
		return []string{err.Error()}
	}
	return nil
}

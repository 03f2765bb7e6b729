package schemaregistry

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// jsonFormat is JSON Schema (draft-07 unless the schema's $schema names
// draft 4, 6, 2019-09 or 2020-12, as in Confluent). Schemas are compiled,
// which validates them against their metaschema and resolves every $ref;
// references are other registered JSON schemas, found under their name
// resolved against the schema's $id (or a base of our own). Nothing is
// loaded from the network or the filesystem.
type jsonFormat struct{}

type jsonSchema struct{ s *jsonschema.Schema }

// jsonBase is where schemas without an absolute $id live, so that
// relative reference names resolve.
const jsonBase = "https://schemaregistry.invalid/schemas/"

func (jsonFormat) canonical(text string, normalize bool) (string, error) {
	return canonicalJSON(text, normalize)
}

func (jsonFormat) parse(text string, deps []dep) (parsed, error) {
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft7)
	c.UseLoader(jsonschema.SchemeURLLoader{}) // no remote or file loads
	c.UseRegexpEngine(lenientRegexp)
	root := jsonBase + "root.json"
	base := root
	if m, ok := doc.(map[string]any); ok {
		if id, ok := m["$id"].(string); ok && id != "" {
			if u, err := url.Parse(root); err == nil {
				if ref, err := url.Parse(id); err == nil {
					base = u.ResolveReference(ref).String()
				}
			}
		}
	}
	for _, d := range deps {
		if d.typ != typeJSON {
			return nil, fmt.Errorf("reference %q is a %s schema, not JSON", d.name, d.typ)
		}
		ddoc, err := jsonschema.UnmarshalJSON(strings.NewReader(d.text))
		if err != nil {
			return nil, fmt.Errorf("reference %q: %w", d.name, err)
		}
		loc, err := resolveName(base, d.name)
		if err != nil {
			return nil, fmt.Errorf("reference %q: %w", d.name, err)
		}
		var exists *jsonschema.ResourceExistsError
		if err := c.AddResource(loc, ddoc); err != nil && !errors.As(err, &exists) {
			return nil, fmt.Errorf("reference %q: %w", d.name, err)
		}
	}
	if err := c.AddResource(root, doc); err != nil {
		return nil, err
	}
	s, err := c.Compile(root)
	if err != nil {
		return nil, err
	}
	return jsonSchema{s}, nil
}

func resolveName(base, name string) (string, error) {
	b, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	n, err := url.Parse(name)
	if err != nil {
		return "", err
	}
	u := b.ResolveReference(n)
	u.Fragment = ""
	return u.String(), nil
}

// lenientRegexp compiles patterns with Go's regexp (RE2). JSON Schema
// patterns are ECMA 262 regular expressions, some of which RE2 refuses
// (lookarounds, backreferences); such a pattern is kept as an opaque
// pattern that matches nothing, rather than rejecting the schema as
// Confluent would not. Compatibility compares patterns by text, and the
// registry never validates data.
func lenientRegexp(s string) (jsonschema.Regexp, error) {
	if re, err := regexp.Compile(s); err == nil {
		return re, nil
	}
	return opaquePattern(s), nil
}

type opaquePattern string

func (p opaquePattern) String() string          { return string(p) }
func (p opaquePattern) MatchString(string) bool { return false }

func (j jsonSchema) canRead(w parsed) []string {
	ws, ok := w.(jsonSchema)
	if !ok {
		return []string{"Incompatible because of different schema type"}
	}
	return jsonIncompatibilities(ws.s, j.s)
}

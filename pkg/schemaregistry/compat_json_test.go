package schemaregistry

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// JSON Schema cases follow Confluent's JSON Schema compatibility rules
// (https://docs.confluent.io/platform/current/schema-registry/fundamentals/serdes-develop/serdes-json.html#json-schema-compatibility-rules)
// and their explanation by content model
// (https://yokota.blog/2021/03/29/understanding-json-schema-compatibility/):
// for BACKWARD, optional properties may be added to a closed content model
// and removed from an open one; for FORWARD, the reverse.

func obj(props, extra string) string {
	s := `{"type":"object","properties":{` + props + `}`
	if extra != "" {
		s += "," + extra
	}
	return s + "}"
}

const (
	pA      = `"a":{"type":"string"}`
	pB      = `"b":{"type":"string"}`
	pBInt   = `"b":{"type":"integer"}`
	pBDef   = `"b":{"type":"string","default":"x"}`
	closed  = `"additionalProperties":false`
	strOpen = `"additionalProperties":{"type":"string"}`
	reqB    = `"required":["b"]`
)

func TestJSONCompatibility(t *testing.T) {
	all := func(b, f bool) map[string]bool {
		return map[string]bool{B: b, BT: b, F: f, FT: f, FU: b && f, FUT: b && f, N: true}
	}
	runCompatCases(t, jsonFormat{}, []compatCase{
		// Content models.
		{"open: add optional property", []string{obj(pA, "")}, obj(pA+","+pB, ""), all(false, true)},
		{"open: remove property", []string{obj(pA+","+pB, "")}, obj(pA, ""), all(true, false)},
		{"open: add property with empty schema", []string{obj(pA, "")}, obj(pA+`,"b":{}`, ""), all(true, true)},
		{"closed: add optional property", []string{obj(pA, closed)}, obj(pA+","+pB, closed), all(true, false)},
		{"closed: remove property", []string{obj(pA+","+pB, closed)}, obj(pA, closed), all(false, true)},
		{"partially open: add covered property", []string{obj(pA, strOpen)}, obj(pA+","+pB, strOpen), all(true, true)},
		{"partially open: add uncovered property", []string{obj(pA, strOpen)}, obj(pA+","+pBInt, strOpen), all(false, false)},
		{"pattern properties cover a removal", []string{obj(pA+","+pB, `"patternProperties":{"^b":{"type":"string"}},"additionalProperties":false`)},
			obj(pA, `"patternProperties":{"^b":{"type":"string"}},"additionalProperties":false`), all(true, true)},
		{"open additional properties", []string{obj(pA, closed)}, obj(pA, ""), all(true, false)},
		// Required.
		{"required added without default", []string{obj(pA+","+pB, closed)}, obj(pA+","+pB, closed+","+reqB), all(false, true)},
		{"required added with default", []string{obj(pA+","+pB, closed)}, obj(pA+","+pBDef, closed+","+reqB), all(true, true)},
		{"required property added to closed model", []string{obj(pA, closed)}, obj(pA+","+pB, closed+","+reqB), all(false, false)},
		{"required property with default added to closed model", []string{obj(pA, closed)}, obj(pA+","+pBDef, closed+","+reqB), all(true, false)},
		// Types.
		{"string to integer", []string{obj(pB, "")}, obj(pBInt, ""), all(false, false)},
		{"integer to number", []string{`{"type":"integer"}`}, `{"type":"number"}`, all(true, false)},
		{"string to nullable string", []string{`{"type":"string"}`}, `{"type":["string","null"]}`, all(true, false)},
		{"oneOf gains a branch", []string{`{"oneOf":[{"type":"string"},{"type":"integer"}]}`},
			`{"oneOf":[{"type":"string"},{"type":"integer"},{"type":"boolean"}]}`, all(true, false)},
		{"anything to a string", []string{`{}`}, `{"type":"string"}`, all(false, true)},
		// Enums.
		{"enum extended", []string{`{"type":"string","enum":["a","b"]}`}, `{"type":"string","enum":["a","b","c"]}`, all(true, false)},
		{"enum narrowed", []string{`{"enum":["a","b","c"]}`}, `{"enum":["a","b"]}`, all(false, true)},
		{"enum changed", []string{`{"enum":["a","b"]}`}, `{"enum":["a","c"]}`, all(false, false)},
		{"const changed", []string{`{"const":"a"}`}, `{"const":"b"}`, all(false, false)},
		// Bounds.
		{"maxLength increased", []string{`{"type":"string","maxLength":5}`}, `{"type":"string","maxLength":10}`, all(true, false)},
		{"minLength added", []string{`{"type":"string"}`}, `{"type":"string","minLength":1}`, all(false, true)},
		{"pattern removed", []string{`{"type":"string","pattern":"^a"}`}, `{"type":"string"}`, all(true, false)},
		{"pattern changed", []string{`{"type":"string","pattern":"^a"}`}, `{"type":"string","pattern":"^b"}`, all(false, false)},
		{"maximum removed", []string{`{"type":"number","maximum":10}`}, `{"type":"number"}`, all(true, false)},
		{"minimum increased", []string{`{"type":"number","minimum":0}`}, `{"type":"number","minimum":1}`, all(false, true)},
		{"multipleOf reduced", []string{`{"type":"number","multipleOf":4}`}, `{"type":"number","multipleOf":2}`, all(true, false)},
		{"maxItems increased", []string{`{"type":"array","items":{"type":"string"},"maxItems":2}`}, `{"type":"array","items":{"type":"string"},"maxItems":3}`, all(true, false)},
		{"array items changed", []string{`{"type":"array","items":{"type":"string"}}`}, `{"type":"array","items":{"type":"integer"}}`, all(false, false)},
		{"uniqueItems added", []string{`{"type":"array"}`}, `{"type":"array","uniqueItems":true}`, all(false, true)},
		{"maxProperties decreased", []string{`{"type":"object","maxProperties":5}`}, `{"type":"object","maxProperties":4}`, all(false, true)},
		// Nested and referenced schemas.
		{"nested property narrowed", []string{obj(`"o":`+obj(pA, ""), "")}, obj(`"o":`+obj(`"a":{"type":"string","maxLength":3}`, ""), ""), all(false, true)},
		{"definitions through $ref", []string{`{"definitions":{"s":{"type":"string"}},"type":"object","properties":{"a":{"$ref":"#/definitions/s"}}}`},
			`{"definitions":{"s":{"type":"integer"}},"type":"object","properties":{"a":{"$ref":"#/definitions/s"}}}`, all(false, false)},
		{"recursive schema unchanged", []string{`{"type":"object","properties":{"next":{"$ref":"#"}}}`}, `{"type":"object","properties":{"next":{"$ref":"#"}}}`, all(true, true)},
		// Transitive levels: v3 is compatible with v2 but not with v1.
		{"required property loses its default (backward)",
			[]string{obj(pA, closed), obj(pA+","+pBDef, closed+","+reqB)}, obj(pA+","+pB, closed+","+reqB),
			map[string]bool{B: true, BT: false}},
		{"property removed after gaining a default (forward)",
			[]string{obj(pA+","+pB, closed+","+reqB), obj(pA+","+pBDef, closed+","+reqB)}, obj(pA, closed),
			map[string]bool{F: true, FT: false}},
	})
}

func TestJSONParse(t *testing.T) {
	f := jsonFormat{}
	for _, bad := range []string{
		`{"type":5}`,
		`{"type":"strin"}`,
		`{"properties":{"a":{"$ref":"#/definitions/missing"}}}`,
		`{"$ref":"https://example.com/remote.json"}`, // nothing is fetched
		`{"minLength":-1}`,
	} {
		if _, err := f.parse(bad, nil); err == nil {
			t.Errorf("parsed invalid %s", bad)
		}
	}
	// A reference is found under its name, relative to the schema.
	addr := dep{name: "address.json", typ: typeJSON, text: `{"type":"object","properties":{"city":{"type":"string"}}}`}
	user := `{"type":"object","properties":{"addr":{"$ref":"address.json"}}}`
	if _, err := f.parse(user, nil); err == nil {
		t.Fatal("parsed a schema whose reference is missing")
	}
	p, err := f.parse(user, []dep{addr})
	if err != nil {
		t.Fatalf("with its reference: %v", err)
	}
	// The referenced schema takes part in compatibility.
	addr2 := addr
	addr2.text = `{"type":"object","properties":{"city":{"type":"integer"}}}`
	p2, err := f.parse(user, []dep{addr2})
	if err != nil {
		t.Fatal(err)
	}
	if msgs := p2.canRead(p); len(msgs) == 0 || !strings.Contains(msgs[0], "TYPE_CHANGED") {
		t.Fatalf("a changed referenced schema: %v", msgs)
	}
	// ECMA patterns Go cannot compile are kept, not refused.
	if _, err := f.parse(`{"type":"string","pattern":"^(?!x)"}`, nil); err != nil {
		t.Fatalf("lookahead pattern: %v", err)
	}
}

// Comparisons stay cheap on schemas that reuse definitions many times,
// and are bounded on adversarial ones.
func TestJSONCompareCost(t *testing.T) {
	// Each level refers to the one below four times: a tree of 4^12
	// paths over 13 definitions.
	defs := []string{`"d0":{"type":"string"}`}
	for i := 1; i <= 12; i++ {
		ref := fmt.Sprintf(`{"$ref":"#/definitions/d%d"}`, i-1)
		defs = append(defs, fmt.Sprintf(`"d%d":{"anyOf":[%s,%s,%s,%s]}`, i, ref, ref, ref, ref))
	}
	s := `{"definitions":{` + strings.Join(defs, ",") + `},"$ref":"#/definitions/d12"}`
	f := jsonFormat{}
	p, err := f.parse(s, nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if msgs := p.canRead(p); len(msgs) > 0 {
		t.Fatalf("itself: %v", msgs)
	}
	t.Logf("shared definitions: %v", time.Since(start))
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("comparison took %v", d)
	}
	// A wide, deep tree without shared definitions hits the step bound
	// instead of running on.
	var b strings.Builder
	var build func(depth int)
	build = func(depth int) {
		if depth == 0 {
			b.WriteString(`{"type":"string"}`)
			return
		}
		b.WriteString(`{"anyOf":[`)
		for i := range 8 {
			if i > 0 {
				b.WriteByte(',')
			}
			build(depth - 1)
		}
		b.WriteString(`]}`)
	}
	build(4)
	p, err = f.parse(b.String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	msgs := p.canRead(p)
	t.Logf("bounded: %v", time.Since(start))
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("bounded comparison took %v", d)
	}
	if len(msgs) == 0 || !strings.Contains(msgs[0], "TOO_COMPLEX") {
		t.Fatalf("a 8^4 comparison: %v", msgs)
	}
}

package schemaregistry

import (
	"testing"

	"github.com/hamba/avro/v2"
)

// Avro cases follow Confluent's "Schema Evolution and Compatibility" page
// (https://docs.confluent.io/platform/current/schema-registry/fundamentals/schema-evolution.html:
// BACKWARD allows deleting fields and adding optional ones, FORWARD adding
// fields and deleting optional ones, FULL only optional ones, the
// TRANSITIVE forms checking every earlier version) and the Avro
// specification's schema resolution rules
// (https://avro.apache.org/docs/1.11.1/specification/#schema-resolution).

func rec(fields string) string {
	return `{"type":"record","name":"Order","namespace":"shop","fields":[` + fields + `]}`
}

const (
	fID       = `{"name":"id","type":"string"}`
	fNote     = `{"name":"note","type":"string"}`
	fNoteDef  = `{"name":"note","type":"string","default":""}`
	fAmtInt   = `{"name":"amount","type":"int"}`
	fAmtLong  = `{"name":"amount","type":"long"}`
	fAmtStr   = `{"name":"amount","type":"string"}`
	fAmtDef   = `{"name":"amount","type":"int","default":0}`
	fAmtStrD  = `{"name":"amount","type":"string","default":""}`
	colorsAB  = `{"name":"color","type":{"type":"enum","name":"Color","symbols":["A","B"]}}`
	colorsABC = `{"name":"color","type":{"type":"enum","name":"Color","symbols":["A","B","C"]}}`
	colorsABd = `{"name":"color","type":{"type":"enum","name":"Color","symbols":["A","B"],"default":"A"}}`
)

func TestAvroCompatibility(t *testing.T) {
	all := func(b, f bool) map[string]bool {
		return map[string]bool{B: b, BT: b, F: f, FT: f, FU: b && f, FUT: b && f, N: true}
	}
	runCompatCases(t, avroFormat{}, []compatCase{
		{"add field with default", []string{rec(fID)}, rec(fID + "," + fNoteDef), all(true, true)},
		{"add field without default", []string{rec(fID)}, rec(fID + "," + fNote), all(false, true)},
		{"delete field with default", []string{rec(fID + "," + fNoteDef)}, rec(fID), all(true, true)},
		{"delete field without default", []string{rec(fID + "," + fNote)}, rec(fID), all(true, false)},
		{"promote int to long", []string{rec(fAmtInt)}, rec(fAmtLong), all(true, false)},
		{"promote int to double", []string{`"int"`}, `"double"`, all(true, false)},
		{"promote long to float", []string{`"long"`}, `"float"`, all(true, false)},
		{"promote float to double", []string{`"float"`}, `"double"`, all(true, false)},
		{"string and bytes", []string{`"string"`}, `"bytes"`, all(true, true)},
		{"change int to string", []string{rec(fAmtInt)}, rec(fAmtStr), all(false, false)},
		{"add enum symbol", []string{rec(colorsAB)}, rec(colorsABC), all(true, false)},
		{"remove enum symbol", []string{rec(colorsABC)}, rec(colorsAB), all(false, true)},
		{"remove enum symbol, reader default", []string{rec(colorsABC)}, rec(colorsABd), all(true, true)},
		{"widen to a union", []string{rec(fID)}, rec(`{"name":"id","type":["null","string"]}`), all(true, false)},
		{"union gains a branch", []string{`["null","string"]`}, `["null","string","int"]`, all(true, false)},
		{"nested record gains a required field", []string{
			rec(`{"name":"addr","type":{"type":"record","name":"Addr","fields":[{"name":"city","type":"string"}]}}`),
		}, rec(`{"name":"addr","type":{"type":"record","name":"Addr","fields":[{"name":"city","type":"string"},{"name":"zip","type":"string"}]}}`), all(false, true)},
		{"array items promoted", []string{`{"type":"array","items":"int"}`}, `{"type":"array","items":"long"}`, all(true, false)},
		{"map values changed", []string{`{"type":"map","values":"int"}`}, `{"type":"map","values":"boolean"}`, all(false, false)},
		{"fixed size changed", []string{`{"type":"fixed","name":"H","size":16}`}, `{"type":"fixed","name":"H","size":32}`, all(false, false)},
		{"record renamed without alias", []string{rec(fID)}, `{"type":"record","name":"Purchase","namespace":"shop","fields":[` + fID + `]}`, all(false, false)},
		{"record renamed with alias", []string{rec(fID)}, `{"type":"record","name":"Purchase","namespace":"shop","aliases":["shop.Order"],"fields":[` + fID + `]}`, all(true, false)},
		{"field renamed with alias", []string{rec(fAmtInt)}, rec(`{"name":"total","type":"int","aliases":["amount"]}`), all(true, false)},
		// Transitive levels: v3 is compatible with v2 but not with v1.
		{"required field after an optional one (backward)",
			[]string{rec(fID), rec(fID + "," + fNoteDef)}, rec(fID + "," + fNote),
			map[string]bool{B: true, BT: false, N: true}},
		{"optional field removed after being made optional (forward)",
			[]string{rec(fID + "," + fNote), rec(fID + "," + fNoteDef)}, rec(fID),
			map[string]bool{F: true, FT: false}},
		{"field retyped after an optional removal (full)",
			[]string{rec(fID + "," + fAmtDef), rec(fID)}, rec(fID + "," + fAmtStrD),
			map[string]bool{FU: true, FUT: false, B: true, BT: false}},
	})
}

// hamba/avro's SchemaCompatibility caches by Parsing Canonical Form, which
// drops defaults: one instance reused across checks gives a stale answer.
// This pins the reason every check uses a fresh instance; if it starts
// failing, hamba fixed its cache.
func TestAvroSharedCompatibilityCacheIsWrong(t *testing.T) {
	parse := func(s string) avro.Schema {
		sch, err := avro.ParseWithCache(s, "", &avro.SchemaCache{})
		if err != nil {
			t.Fatal(err)
		}
		return sch
	}
	w := parse(rec(fID))
	withDefault, without := parse(rec(fID+","+fNoteDef)), parse(rec(fID+","+fNote))
	shared := avro.NewSchemaCompatibility()
	if err := shared.Compatible(withDefault, w); err != nil {
		t.Fatal(err)
	}
	if err := shared.Compatible(without, w); err != nil {
		t.Skipf("hamba/avro no longer answers from a stale cache entry: %v", err)
	}
	// Ours answers right.
	if msgs := (avroSchema{without}).canRead(avroSchema{w}); len(msgs) == 0 {
		t.Fatal("a reader field without default passed")
	}
}

func TestAvroParse(t *testing.T) {
	f := avroFormat{}
	for _, bad := range []string{
		`{"type":"record","name":"R"}`,                                                    // no fields
		`{"type":"record","name":"R","fields":[{"name":"a","type":"Undefined"}]}`,         // unknown name
		`{"type":"enum","name":"E","symbols":["A","A"]}`,                                  // duplicate symbol
		`{"type":"record","name":"R","fields":[{"name":"a","type":"int","default":"x"}]}`, // bad default
		`{"type":"nope"}`,
	} {
		if _, err := f.parse(bad, nil); err == nil {
			t.Errorf("parsed invalid %s", bad)
		}
	}
	// References bring named types in; without them the name is unknown.
	addr := dep{name: "shop.Addr", typ: typeAvro, text: `{"type":"record","name":"Addr","namespace":"shop","fields":[{"name":"city","type":"string"}]}`}
	user := `{"type":"record","name":"User","namespace":"shop","fields":[{"name":"addr","type":"shop.Addr"}]}`
	if _, err := f.parse(user, nil); err == nil {
		t.Fatal("parsed a schema naming an undefined type")
	}
	if _, err := f.parse(user, []dep{addr}); err != nil {
		t.Fatalf("with its reference: %v", err)
	}
}

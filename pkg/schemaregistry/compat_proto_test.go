package schemaregistry

import (
	"testing"
)

// Protobuf cases follow Confluent's Protobuf compatibility rules
// (https://docs.confluent.io/platform/current/schema-registry/fundamentals/serdes-develop/serdes-protobuf.html#protobuf-compatibility-rules)
// and the Protobuf guide they build on
// (https://protobuf.dev/programming-guides/proto3/#updating): fields are
// identified by number; adding and removing fields is compatible, changing
// a field's type is only within wire-compatible groups.

func proto3(body string) string {
	return "syntax = \"proto3\";\npackage shop;\n" + body
}

func proto2(body string) string {
	return "syntax = \"proto2\";\npackage shop;\n" + body
}

func TestProtobufCompatibility(t *testing.T) {
	all := func(b, f bool) map[string]bool {
		return map[string]bool{B: b, BT: b, F: f, FT: f, FU: b && f, FUT: b && f, N: true}
	}
	base := proto3(`message Order { string id = 1; int32 qty = 2; }`)
	runCompatCases(t, protoFormat{}, []compatCase{
		{"add field", []string{base}, proto3(`message Order { string id = 1; int32 qty = 2; string note = 3; }`), all(true, true)},
		{"remove field", []string{base}, proto3(`message Order { string id = 1; reserved 2; }`), all(true, true)},
		{"rename field", []string{base}, proto3(`message Order { string id = 1; int32 quantity = 2; }`), all(true, true)},
		// Renumbering is a removal plus an addition: compatible when the new
		// number is unused, not when it takes another field's number.
		{"renumber field to a new number", []string{base}, proto3(`message Order { string id = 1; int32 qty = 3; }`), all(true, true)},
		{"swap field numbers", []string{base}, proto3(`message Order { string id = 2; int32 qty = 1; }`), all(false, false)},
		{"int32 to int64", []string{base}, proto3(`message Order { string id = 1; int64 qty = 2; }`), all(true, true)},
		{"int32 to bool", []string{base}, proto3(`message Order { string id = 1; bool qty = 2; }`), all(true, true)},
		{"int32 to sint32", []string{base}, proto3(`message Order { string id = 1; sint32 qty = 2; }`), all(false, false)},
		{"int32 to string", []string{base}, proto3(`message Order { string id = 1; string qty = 2; }`), all(false, false)},
		{"string to bytes", []string{base}, proto3(`message Order { bytes id = 1; int32 qty = 2; }`), all(true, true)},
		{"fixed32 to sfixed32", []string{proto3(`message M { fixed32 a = 1; }`)}, proto3(`message M { sfixed32 a = 1; }`), all(true, true)},
		{"fixed32 to fixed64", []string{proto3(`message M { fixed32 a = 1; }`)}, proto3(`message M { fixed64 a = 1; }`), all(false, false)},
		{"enum to int32", []string{proto3(`enum S { A = 0; } message M { S s = 1; }`)}, proto3(`enum S { A = 0; } message M { int32 s = 1; }`), all(true, true)},
		{"scalar to message", []string{proto3(`message M { string a = 1; }`)}, proto3(`message N { string x = 1; } message M { N a = 1; }`), all(false, false)},
		{"enum value added", []string{proto3(`enum S { A = 0; } message M { S s = 1; }`)}, proto3(`enum S { A = 0; B = 1; } message M { S s = 1; }`), all(true, true)},
		{"message added", []string{base}, proto3(`message Order { string id = 1; int32 qty = 2; } message Refund { string id = 1; }`), all(true, false)}, // FORWARD: a removal the other way
		{"message removed", []string{proto3(`message Order { string id = 1; } message Refund { string id = 1; }`)}, proto3(`message Order { string id = 1; }`), all(false, true)},
		{"package changed", []string{base}, "syntax = \"proto3\";\npackage store;\nmessage Order { string id = 1; int32 qty = 2; }", all(false, false)},
		{"nested message field retyped", []string{proto3(`message Order { message Line { int32 n = 1; } Line line = 1; }`)},
			proto3(`message Order { message Line { string n = 1; } Line line = 1; }`), all(false, false)},
		{"field message type renamed", []string{proto3(`message A { int32 n = 1; } message Order { A line = 1; }`)},
			proto3(`message A { int32 n = 1; } message B { int32 n = 1; } message Order { B line = 1; }`), all(false, false)},
		{"map value retyped", []string{proto3(`message M { map<string, int32> m = 1; }`)}, proto3(`message M { map<string, string> m = 1; }`), all(false, false)},
		{"map value widened", []string{proto3(`message M { map<string, int32> m = 1; }`)}, proto3(`message M { map<string, int64> m = 1; }`), all(true, true)},
		// Labels (proto2).
		{"required field added", []string{proto2(`message M { optional string a = 1; }`)}, proto2(`message M { optional string a = 1; required int32 b = 2; }`), all(false, false)},
		{"required field removed", []string{proto2(`message M { optional string a = 1; required int32 b = 2; }`)}, proto2(`message M { optional string a = 1; }`), all(false, false)},
		{"optional number to repeated", []string{proto2(`message M { optional int32 a = 1; }`)}, proto2(`message M { repeated int32 a = 1; }`), all(false, false)},
		{"optional string to repeated", []string{proto2(`message M { optional string a = 1; }`)}, proto2(`message M { repeated string a = 1; }`), all(true, true)},
		// Oneofs.
		{"field moved into a new oneof", []string{proto3(`message M { string a = 1; int32 b = 2; }`)}, proto3(`message M { oneof o { string a = 1; } int32 b = 2; }`), all(true, true)},
		{"two fields moved into a oneof", []string{proto3(`message M { string a = 1; int32 b = 2; }`)}, proto3(`message M { oneof o { string a = 1; int32 b = 2; } }`), all(false, true)},
		{"field moved into an existing oneof", []string{proto3(`message M { oneof o { string a = 1; } int32 b = 2; }`)}, proto3(`message M { oneof o { string a = 1; int32 b = 2; } }`), all(false, true)},
		{"oneof member removed", []string{proto3(`message M { oneof o { string a = 1; int32 b = 2; } }`)}, proto3(`message M { oneof o { string a = 1; } }`), all(false, true)},
		{"whole oneof removed", []string{proto3(`message M { string x = 3; oneof o { string a = 1; int32 b = 2; } }`)}, proto3(`message M { string x = 3; }`), all(true, true)},
		{"oneof member added", []string{proto3(`message M { oneof o { string a = 1; } }`)}, proto3(`message M { oneof o { string a = 1; int32 b = 2; } }`), all(true, false)},
		{"proto3 optional is not a oneof", []string{proto3(`message M { optional string a = 1; optional int32 b = 2; }`)}, proto3(`message M { optional string a = 1; }`), all(true, true)},
		// Transitive levels: v3 is compatible with v2 but not with v1.
		{"number reused with another type", []string{proto3(`message M { int32 a = 1; string b = 2; }`), proto3(`message M { string b = 2; }`)},
			proto3(`message M { string b = 2; string c = 1; }`), map[string]bool{B: true, BT: false, F: true, FT: false, FU: true, FUT: false}},
	})
}

func TestProtobufParse(t *testing.T) {
	f := protoFormat{}
	for _, bad := range []string{
		`syntax = "proto3"; message M { string a = 1; int32 b = 1; }`, // duplicate number
		`syntax = "proto3"; message M { Missing a = 1; }`,             // unknown type
		`syntax = "proto3"; message M { string a = 1 }`,               // syntax error
		`syntax = "proto3"; import "other.proto"; message M { string a = 1; }`,
	} {
		if _, err := f.parse(bad, nil); err == nil {
			t.Errorf("parsed invalid %s", bad)
		}
	}
	// References are imports; the well-known types need none.
	other := dep{name: "other.proto", typ: typeProtobuf, text: proto3(`message Addr { string city = 1; }`)}
	if _, err := f.parse(proto3(`import "other.proto"; message M { Addr a = 1; }`), []dep{other}); err != nil {
		t.Fatalf("with its reference: %v", err)
	}
	if _, err := f.parse(proto3(`import "google/protobuf/timestamp.proto"; message M { google.protobuf.Timestamp at = 1; }`), nil); err != nil {
		t.Fatalf("well-known import: %v", err)
	}
}

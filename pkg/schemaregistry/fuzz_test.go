package schemaregistry

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// FuzzParse: parsing never panics, and a schema that parses can read its
// own data.
func FuzzParse(f *testing.F) {
	for _, s := range []struct {
		typ  uint8
		text string
	}{
		{0, orderV2}, {0, `["null","string"]`}, {0, `{"type":"enum","name":"E","symbols":["A"],"default":"A"}`},
		{1, obj(pA+","+pB, closed+","+reqB)}, {1, `{"oneOf":[{"type":"string"},{"not":{"type":"integer"}}]}`},
		{1, `{"type":"array","items":[{"type":"string"}],"additionalItems":false}`},
		{2, proto3(`message M { oneof o { string a = 1; } map<string, int32> m = 2; }`)},
	} {
		f.Add(s.typ, s.text)
	}
	types := []string{typeAvro, typeJSON, typeProtobuf}
	f.Fuzz(func(t *testing.T, typ uint8, text string) {
		fm := formats[types[int(typ)%len(types)]]
		c, err := fm.canonical(text, typ&4 != 0)
		if err != nil {
			return
		}
		p, err := fm.parse(c, nil)
		if err != nil {
			return
		}
		if msgs := p.canRead(p); len(msgs) > 0 {
			t.Fatalf("%s cannot read its own data: %v", c, msgs)
		}
	})
}

// FuzzRegisterBody: no request body makes the registry answer 5xx.
func FuzzRegisterBody(f *testing.F) {
	for _, b := range []string{
		`{"schema":"\"string\""}`, `{"schema":` + "`", `{"schema":5}`, `[]`, `null`, ``,
		`{"schemaType":"JSON","schema":"{\"type\":\"object\"}"}`,
		`{"schemaType":"PROTOBUF","schema":"syntax = \"proto3\"; message M {}"}`,
		`{"schema":"\"string\"","references":[{"name":"x","subject":"s","version":-1}]}`,
		`{"schema":"\"string\"","id":5,"version":2}`,
	} {
		f.Add(b)
	}
	r := New(newMeta(f), Options{})
	f.Fuzz(func(t *testing.T, body string) {
		for _, path := range []string{"/subjects/s/versions", "/subjects/s", "/compatibility/subjects/s/versions/latest"} {
			req := httptest.NewRequest("POST", path, strings.NewReader(body))
			w := httptest.NewRecorder()
			r.ServeHTTP(w, req)
			if w.Code >= http.StatusInternalServerError {
				t.Fatalf("POST %s %q: %d %s", path, body, w.Code, w.Body)
			}
		}
	})
}

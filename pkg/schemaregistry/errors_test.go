package schemaregistry

import (
	"net/http"
	"strings"
	"testing"
)

// Client mistakes get Confluent's status and error code with a message,
// never a 500.
func TestErrors(t *testing.T) {
	_, base := serve(t, newMeta(t), Options{MaxSchemaBytes: 4 << 10})
	if st, b := register(t, base, "s", "AVRO", `"string"`); st != http.StatusOK {
		t.Fatalf("setup: %d %s", st, b)
	}
	ct := contentType
	cases := []struct {
		name, method, path, ctype, body string
		status, code                    int
	}{
		{"invalid avro", "POST", "/subjects/x/versions", ct, `{"schema":"{\"type\":\"record\",\"name\":\"R\"}"}`, 422, 42201},
		{"avro not json", "POST", "/subjects/x/versions", ct, `{"schema":"{not json"}`, 422, 42201},
		{"invalid json schema", "POST", "/subjects/x/versions", ct, `{"schemaType":"JSON","schema":"{\"type\":5}"}`, 422, 42201},
		{"invalid protobuf", "POST", "/subjects/x/versions", ct, `{"schemaType":"PROTOBUF","schema":"message {"}`, 422, 42201},
		{"unknown schema type", "POST", "/subjects/x/versions", ct, `{"schemaType":"XML","schema":"<a/>"}`, 422, 42201},
		{"empty schema", "POST", "/subjects/x/versions", ct, `{"schema":""}`, 422, 42201},
		{"missing reference", "POST", "/subjects/x/versions", ct, `{"schema":"\"string\"","references":[{"name":"a","subject":"nope","version":1}]}`, 422, 42201},
		{"schema too large", "POST", "/subjects/x/versions", ct, `{"schema":"\"` + strings.Repeat(" ", 5<<10) + `string\""}`, 422, 42209},
		{"invalid subject", "POST", "/subjects/a%01b/versions", ct, `{"schema":"\"string\""}`, 422, 42208},
		{"malformed json body", "POST", "/subjects/x/versions", ct, `{"schema":`, 400, 400},
		{"malformed json syntax", "POST", "/subjects/x/versions", ct, `{schema: 1}`, 400, 400},
		{"body of the wrong shape", "POST", "/subjects/x/versions", ct, `{"schema":5}`, 422, 422},
		{"body not an object", "POST", "/subjects/x/versions", ct, `[1,2]`, 422, 422},
		{"empty body", "POST", "/subjects/x/versions", ct, ``, 422, 422},
		{"unsupported content type", "POST", "/subjects/x/versions", "text/plain", `{"schema":"\"string\""}`, 415, 415},
		{"unknown subject versions", "GET", "/subjects/nope/versions", "", "", 404, 40401},
		{"unknown subject version", "GET", "/subjects/nope/versions/1", "", "", 404, 40401},
		{"unknown subject latest", "GET", "/subjects/nope/versions/latest", "", "", 404, 40401},
		{"unknown version", "GET", "/subjects/s/versions/7", "", "", 404, 40402},
		{"invalid version", "GET", "/subjects/s/versions/abc", "", "", 422, 42202},
		{"version zero", "GET", "/subjects/s/versions/0", "", "", 422, 42202},
		{"unknown id", "GET", "/schemas/ids/4242", "", "", 404, 40403},
		{"unknown id text", "GET", "/schemas/ids/4242/schema", "", "", 404, 40403},
		{"unknown id versions", "GET", "/schemas/ids/4242/versions", "", "", 404, 40403},
		{"malformed id", "GET", "/schemas/ids/abc", "", "", 404, 40403},
		{"lookup in unknown subject", "POST", "/subjects/nope", ct, `{"schema":"\"string\""}`, 404, 40401},
		{"lookup unknown schema", "POST", "/subjects/s", ct, `{"schema":"\"int\""}`, 404, 40403},
		{"lookup invalid schema", "POST", "/subjects/s", ct, `{"schema":"{\"type\":\"nope\"}"}`, 422, 42201},
		{"delete unknown subject", "DELETE", "/subjects/nope", "", "", 404, 40401},
		{"delete unknown version", "DELETE", "/subjects/s/versions/9", "", "", 404, 40402},
		{"invalid compatibility level", "PUT", "/config", ct, `{"compatibility":"SIDEWAYS"}`, 422, 42203},
		{"missing compatibility level", "PUT", "/config/s", ct, `{}`, 422, 42203},
		{"subject without level", "GET", "/config/s", "", "", 404, 40408},
		{"delete unset subject level", "DELETE", "/config/s", "", "", 404, 40401},
		{"invalid mode", "PUT", "/mode", ct, `{"mode":"SIDEWAYS"}`, 422, 42204},
		{"subject without mode", "GET", "/mode/s", "", "", 404, 40409},
		{"compatibility against unknown version", "POST", "/compatibility/subjects/s/versions/5", ct, `{"schema":"\"string\""}`, 404, 40402},
		{"compatibility of invalid schema", "POST", "/compatibility/subjects/s/versions/latest", ct, `{"schema":"{"}`, 422, 42201},
		{"compatibility with invalid version", "POST", "/compatibility/subjects/s/versions/x", ct, `{"schema":"\"string\""}`, 422, 42202},
		{"unknown path", "GET", "/nope", "", "", 404, 404},
		{"wrong method", "PATCH", "/subjects", "", "", 405, 405},
		{"wrong method on a subject", "PUT", "/subjects/s/versions", ct, `{}`, 405, 405},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, b := call(t, c.method, base+c.path, c.ctype, c.body)
			wantError(t, st, b, c.status, c.code)
		})
	}
}

// Every accepted content type, and none, registers.
func TestContentTypes(t *testing.T) {
	_, base := serve(t, newMeta(t), Options{})
	for i, ct := range []string{"", "application/json", "application/vnd.schemaregistry.v1+json", "application/vnd.schemaregistry+json", "application/json; charset=utf-8"} {
		st, b := call(t, "POST", base+"/subjects/s"+string(rune('a'+i))+"/versions", ct, `{"schema":"\"string\""}`)
		if st != http.StatusOK || !strings.Contains(string(b), `"id":1`) {
			t.Errorf("content type %q: %d %s", ct, st, b)
		}
	}
}

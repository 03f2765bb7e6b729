package schemaregistry

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/stratamq/strata/pkg/metastore"
)

// contentType is what every answer is sent as.
const contentType = "application/vnd.schemaregistry.v1+json"

// ServeHTTP serves the Confluent Schema Registry REST API.
func (r *Registry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mux.ServeHTTP(w, req)
}

// handlerFunc is a handler that returns its error instead of writing it.
type handlerFunc func(http.ResponseWriter, *http.Request) error

func (h handlerFunc) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if err := h(w, req); err != nil {
		writeError(w, err)
	}
}

func (r *Registry) routes() *http.ServeMux {
	mux := http.NewServeMux()
	type route struct {
		path    string
		methods map[string]handlerFunc
	}
	routes := []route{
		{"/{$}", map[string]handlerFunc{"GET": r.handleRoot}},
		{"/subjects", map[string]handlerFunc{"GET": r.handleListSubjects}},
		{"/subjects/{subject}", map[string]handlerFunc{"POST": r.handleLookup, "DELETE": r.handleDeleteSubject}},
		{"/subjects/{subject}/versions", map[string]handlerFunc{"GET": r.handleListVersions, "POST": r.handleRegister}},
		{"/subjects/{subject}/versions/{version}", map[string]handlerFunc{"GET": r.handleGetVersion, "DELETE": r.handleDeleteVersion}},
		{"/subjects/{subject}/versions/{version}/schema", map[string]handlerFunc{"GET": r.handleGetVersionSchema}},
		{"/subjects/{subject}/versions/{version}/referencedby", map[string]handlerFunc{"GET": r.handleReferencedBy}},
		{"/schemas", map[string]handlerFunc{"GET": r.handleListSchemas}},
		{"/schemas/types", map[string]handlerFunc{"GET": r.handleTypes}},
		{"/schemas/ids/{id}", map[string]handlerFunc{"GET": r.handleSchemaByID}},
		{"/schemas/ids/{id}/schema", map[string]handlerFunc{"GET": r.handleSchemaTextByID}},
		{"/schemas/ids/{id}/versions", map[string]handlerFunc{"GET": r.handleSchemaVersions}},
		{"/schemas/ids/{id}/subjects", map[string]handlerFunc{"GET": r.handleSchemaSubjects}},
		{"/config", map[string]handlerFunc{"GET": r.handleGetConfig, "PUT": r.handlePutConfig, "DELETE": r.handleDeleteConfig}},
		{"/config/{subject}", map[string]handlerFunc{"GET": r.handleGetConfig, "PUT": r.handlePutConfig, "DELETE": r.handleDeleteConfig}},
		{"/mode", map[string]handlerFunc{"GET": r.handleGetMode, "PUT": r.handlePutMode, "DELETE": r.handleDeleteMode}},
		{"/mode/{subject}", map[string]handlerFunc{"GET": r.handleGetMode, "PUT": r.handlePutMode, "DELETE": r.handleDeleteMode}},
		{"/compatibility/subjects/{subject}/versions", map[string]handlerFunc{"POST": r.handleCompatibility}},
		{"/compatibility/subjects/{subject}/versions/{version}", map[string]handlerFunc{"POST": r.handleCompatibility}},
		{"/contexts", map[string]handlerFunc{"GET": r.handleContexts}},
	}
	for _, rt := range routes {
		allowed := make([]string, 0, len(rt.methods))
		for m, h := range rt.methods {
			mux.Handle(m+" "+rt.path, h)
			allowed = append(allowed, m)
		}
		allow := strings.Join(allowed, ", ")
		// Any other method on a known path: 405 in Confluent's body.
		mux.Handle(rt.path, handlerFunc(func(w http.ResponseWriter, _ *http.Request) error {
			w.Header().Set("Allow", allow)
			return newError(http.StatusMethodNotAllowed, codeMethodNotAllowed, "HTTP 405 Method Not Allowed")
		}))
	}
	mux.Handle("/", handlerFunc(func(http.ResponseWriter, *http.Request) error {
		return newError(http.StatusNotFound, codeNotFound, "HTTP 404 Not Found")
	}))
	return mux
}

func (r *Registry) handleRoot(w http.ResponseWriter, _ *http.Request) error {
	return writeJSON(w, http.StatusOK, struct{}{})
}

// handleContexts serves GET /contexts: only the default context exists.
func (r *Registry) handleContexts(w http.ResponseWriter, _ *http.Request) error {
	return writeJSON(w, http.StatusOK, []string{"."})
}

func writeJSON(w http.ResponseWriter, status int, v any) error {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return newError(http.StatusInternalServerError, codeStoreError, "encode response: %v", err)
	}
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(status)
	w.Write(b.Bytes()) // an error means the client went away: nothing to tell it
	return nil
}

func writeError(w http.ResponseWriter, err error) {
	var ae *apiError
	if !errors.As(err, &ae) {
		ae = storeError("request", err)
	}
	body := struct {
		Code    int    `json:"error_code"`
		Message string `json:"message"`
	}{ae.code, ae.msg}
	_ = writeJSON(w, ae.status, body) // cannot fail: the body always encodes
}

// maxBodyBytes bounds request bodies: a schema of the largest size the
// metastore holds, JSON-escaped, and room for the rest.
const maxBodyBytes = 2*metastore.MaxItemBytes + 64<<10

// decodeBody decodes a JSON request body into v. Confluent's content types
// are accepted, and so are a missing one and application/json; malformed
// JSON is 400, a body of the wrong shape 422.
func decodeBody(req *http.Request, v any) error {
	if ct := req.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		switch {
		case err != nil:
			return newError(http.StatusUnsupportedMediaType, codeUnsupportedMediaType, "HTTP 415 Unsupported Media Type: %q", ct)
		case mt == "application/vnd.schemaregistry.v1+json", mt == "application/vnd.schemaregistry+json",
			mt == "application/json", mt == "application/octet-stream":
		default:
			return newError(http.StatusUnsupportedMediaType, codeUnsupportedMediaType, "HTTP 415 Unsupported Media Type: %q", ct)
		}
	}
	const limit = maxBodyBytes
	b, err := io.ReadAll(io.LimitReader(req.Body, limit+1))
	if err != nil {
		return newError(http.StatusBadRequest, codeBadRequest, "read request body: %v", err)
	}
	if int64(len(b)) > limit {
		return newError(statusUnprocessable, codeSchemaTooLarge, "Request body exceeds %d bytes", limit)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return newError(statusUnprocessable, codeUnprocessableEntity, "Request body is empty")
	}
	if err := json.Unmarshal(b, v); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) || errors.Is(err, io.ErrUnexpectedEOF) {
			return newError(http.StatusBadRequest, codeBadRequest, "Malformed JSON body: %v", err)
		}
		return newError(statusUnprocessable, codeUnprocessableEntity, "Unrecognized request body: %v", err)
	}
	return nil
}

func boolParam(q url.Values, name string) bool {
	b, _ := strconv.ParseBool(q.Get(name))
	return b
}

// parseVersion parses a version path element: 1 to 2^31-1, or "latest"
// (also -1), as Confluent's VersionId does; anything else is 42202.
func parseVersion(s string) (v int64, latest bool, err error) {
	if s == "latest" {
		return 0, true, nil
	}
	n, perr := strconv.ParseInt(s, 10, 32)
	switch {
	case perr == nil && n == -1:
		return 0, true, nil
	case perr != nil || n < 1:
		return 0, false, errInvalidVersion(s)
	}
	return n, false, nil
}

// parseID parses a schema id path element; a malformed one names no
// schema: 404 with 40403.
func parseID(s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil || n < 1 {
		return 0, newError(http.StatusNotFound, codeSchemaNotFound, "Schema %s not found", s)
	}
	return n, nil
}

package schemaregistry

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

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

// rule decides whether the caller of a request that came through an
// authorizing Protect may make it; nil means yes. Lists are filtered by
// their handlers (callerOf), beyond their rule.
type rule func(r *Registry, c *caller, req *http.Request) error

// endpoint is one method of a route: its handler and its rule. A route
// without a rule is not served (routes panics).
type endpoint struct {
	h     handlerFunc
	allow rule
}

// anyone admits every caller (who authenticated, when Protect asks for it).
func anyone(*Registry, *caller, *http.Request) error { return nil }

// onSubject needs op on the resource guarding the subject in the path.
func onSubject(op kmsg.ACLOperation) rule {
	return func(_ *Registry, c *caller, req *http.Request) error {
		return c.checkSubject(op, req.PathValue("subject"))
	}
}

// onCluster needs op on the cluster.
func onCluster(op kmsg.ACLOperation) rule {
	return func(_ *Registry, c *caller, _ *http.Request) error {
		return c.check(op, kmsg.ACLResourceTypeCluster, ClusterName, "")
	}
}

// onSchemaID needs to be allowed to read the schema id in the path.
func onSchemaID(r *Registry, c *caller, req *http.Request) error {
	id, err := parseID(req.PathValue("id"))
	if err != nil {
		return err
	}
	return r.checkSchemaID(req.Context(), c, id)
}

const (
	opDescribe = kmsg.ACLOperationDescribe
	opWrite    = kmsg.ACLOperationWrite
	opAlter    = kmsg.ACLOperationAlter
)

// routes is the API and who may use each endpoint when authorization is
// on (auth.go maps subjects to topics or the cluster).
func (r *Registry) routes() *http.ServeMux {
	mux := http.NewServeMux()
	type route struct {
		path    string
		methods map[string]endpoint
	}
	routes := []route{
		{"/{$}", map[string]endpoint{"GET": {r.handleRoot, anyone}}},
		{"/subjects", map[string]endpoint{"GET": {r.handleListSubjects, anyone}}}, // filtered: subjects it may describe
		{"/subjects/{subject}", map[string]endpoint{"POST": {r.handleLookup, onSubject(opDescribe)}, "DELETE": {r.handleDeleteSubject, onSubject(opAlter)}}},
		{"/subjects/{subject}/versions", map[string]endpoint{"GET": {r.handleListVersions, onSubject(opDescribe)}, "POST": {r.handleRegister, onSubject(opWrite)}}},
		{"/subjects/{subject}/versions/{version}", map[string]endpoint{"GET": {r.handleGetVersion, onSubject(opDescribe)}, "DELETE": {r.handleDeleteVersion, onSubject(opAlter)}}},
		{"/subjects/{subject}/versions/{version}/schema", map[string]endpoint{"GET": {r.handleGetVersionSchema, onSubject(opDescribe)}}},
		{"/subjects/{subject}/versions/{version}/referencedby", map[string]endpoint{"GET": {r.handleReferencedBy, onSubject(opDescribe)}}},
		{"/schemas", map[string]endpoint{"GET": {r.handleListSchemas, anyone}}}, // filtered by subject
		{"/schemas/types", map[string]endpoint{"GET": {r.handleTypes, anyone}}},
		{"/schemas/ids/{id}", map[string]endpoint{"GET": {r.handleSchemaByID, onSchemaID}}},
		{"/schemas/ids/{id}/schema", map[string]endpoint{"GET": {r.handleSchemaTextByID, onSchemaID}}},
		{"/schemas/ids/{id}/versions", map[string]endpoint{"GET": {r.handleSchemaVersions, onSchemaID}}}, // filtered by subject
		{"/schemas/ids/{id}/subjects", map[string]endpoint{"GET": {r.handleSchemaSubjects, onSchemaID}}}, // filtered by subject
		{"/config", map[string]endpoint{"GET": {r.handleGetConfig, anyone}, "PUT": {r.handlePutConfig, onCluster(opAlter)}, "DELETE": {r.handleDeleteConfig, onCluster(opAlter)}}},
		{"/config/{subject}", map[string]endpoint{"GET": {r.handleGetConfig, onSubject(opDescribe)}, "PUT": {r.handlePutConfig, onSubject(opAlter)}, "DELETE": {r.handleDeleteConfig, onSubject(opAlter)}}},
		{"/mode", map[string]endpoint{"GET": {r.handleGetMode, anyone}, "PUT": {r.handlePutMode, onCluster(opAlter)}, "DELETE": {r.handleDeleteMode, onCluster(opAlter)}}},
		{"/mode/{subject}", map[string]endpoint{"GET": {r.handleGetMode, onSubject(opDescribe)}, "PUT": {r.handlePutMode, onSubject(opAlter)}, "DELETE": {r.handleDeleteMode, onSubject(opAlter)}}},
		// A compatibility test changes nothing: reading is enough.
		{"/compatibility/subjects/{subject}/versions", map[string]endpoint{"POST": {r.handleCompatibility, onSubject(opDescribe)}}},
		{"/compatibility/subjects/{subject}/versions/{version}", map[string]endpoint{"POST": {r.handleCompatibility, onSubject(opDescribe)}}},
		{"/contexts", map[string]endpoint{"GET": {r.handleContexts, anyone}}},
	}
	for _, rt := range routes {
		allowed := make([]string, 0, len(rt.methods))
		for m, ep := range rt.methods {
			if ep.h == nil || ep.allow == nil {
				panic(fmt.Sprintf("schemaregistry: %s %s has no handler or no authorization rule", m, rt.path))
			}
			mux.Handle(m+" "+rt.path, r.authorized(ep))
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

// authorized runs ep's rule, when the request came through an
// authorizing Protect, before its handler.
func (r *Registry) authorized(ep endpoint) handlerFunc {
	return func(w http.ResponseWriter, req *http.Request) error {
		if c := callerOf(req.Context()); c != nil {
			if err := ep.allow(r, c, req); err != nil {
				return err
			}
		}
		return ep.h(w, req)
	}
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

package schemaregistry

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/stratamq/strata/pkg/metastore"
)

// registerRequest is the body of POST /subjects/{s}/versions, POST
// /subjects/{s} and POST /compatibility/...: Confluent's
// RegisterSchemaRequest. Metadata, rule sets and tags are not supported and
// are ignored.
type registerRequest struct {
	Schema     string      `json:"schema"`
	SchemaType string      `json:"schemaType"`
	References []Reference `json:"references"`
	ID         int         `json:"id"`      // only in IMPORT mode
	Version    int         `json:"version"` // only in IMPORT mode, or the next version
}

// maxRegisterAttempts bounds how often a registration re-reads a subject
// after losing the race for its next version to another writer.
const maxRegisterAttempts = 16

// prepare validates, canonicalizes and parses a request's schema, with its
// references resolved.
func (r *Registry) prepare(ctx context.Context, req registerRequest, normalize bool) (candidate, error) {
	typ, f, err := schemaType(req.SchemaType)
	if err != nil {
		return candidate{}, err
	}
	if strings.TrimSpace(req.Schema) == "" {
		return candidate{}, errInvalidSchema("Empty schema")
	}
	if len(req.Schema) > r.maxBytes {
		return candidate{}, newError(statusUnprocessable, codeSchemaTooLarge, "Schema of %d bytes exceeds the limit of %d bytes", len(req.Schema), r.maxBytes)
	}
	refs, deps, err := r.resolveRefs(ctx, req.References)
	if err != nil {
		return candidate{}, err
	}
	text, err := f.canonical(req.Schema, normalize)
	if err != nil {
		return candidate{}, errInvalidSchema("Invalid schema of type %s, details: %v", typ, err)
	}
	p, err := f.parse(text, deps)
	if err != nil {
		return candidate{}, errInvalidSchema("Invalid schema of type %s, details: %v", typ, err)
	}
	return candidate{typ: typ, text: text, refs: refs, p: p}, nil
}

// findExisting returns the newest of versions (oldest first) that holds
// c's schema: the same id, or with normalize the same normalized text.
func (r *Registry) findExisting(ctx context.Context, c candidate, versions []metastore.SubjectVersion, normalize bool) (metastore.SubjectVersion, bool, error) {
	id, err := r.meta.LookupSchemaID(ctx, c.typ, c.text, c.refs...)
	if err != nil && !errors.Is(err, metastore.ErrNotFound) {
		return metastore.SubjectVersion{}, false, storeError("look up schema", err)
	}
	if err == nil {
		for i := len(versions) - 1; i >= 0; i-- {
			if versions[i].ID == id {
				return versions[i], true, nil
			}
		}
	}
	if !normalize {
		return metastore.SubjectVersion{}, false, nil
	}
	for i := len(versions) - 1; i >= 0; i-- {
		sch, err := r.schema(ctx, versions[i].ID)
		if err != nil {
			return metastore.SubjectVersion{}, false, err
		}
		if sch.Type != c.typ || !sameRefs(sch.References, c.refs) {
			continue
		}
		if n, err := formats[sch.Type].canonical(sch.Text, true); err == nil && n == c.text {
			return versions[i], true, nil
		}
	}
	return metastore.SubjectVersion{}, false, nil
}

func sameRefs(a, b []metastore.SchemaRef) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// register registers req's schema under subject, or finds it there, and
// returns the version holding it.
func (r *Registry) register(ctx context.Context, subject string, req registerRequest, normalize bool) (metastore.SubjectVersion, candidate, error) {
	var none metastore.SubjectVersion
	if err := checkSubject(subject); err != nil {
		return none, candidate{}, err
	}
	mode, err := r.modeOf(ctx, subject)
	if err != nil {
		return none, candidate{}, err
	}
	importing := req.ID > 0
	switch {
	case readOnly(mode):
		return none, candidate{}, errNotPermitted("Subject %s is in read-only mode", subject)
	case importing && mode != modeImport:
		return none, candidate{}, errNotPermitted("Subject %s is not in import mode", subject)
	case !importing && mode != modeReadWrite:
		return none, candidate{}, errNotPermitted("Subject %s is not in read-write mode", subject)
	case req.Version < 0:
		return none, candidate{}, errInvalidVersion(strconv.Itoa(req.Version))
	}
	c, err := r.prepare(ctx, req, normalize)
	if err != nil {
		return none, c, err
	}
	l, err := r.levelOf(ctx, subject)
	if err != nil {
		return none, c, err
	}
	for range maxRegisterAttempts {
		vs, err := r.versions(ctx, subject)
		if err != nil {
			return none, c, err
		}
		liveVs := live(vs)
		if req.Version == 0 && !importing {
			sv, ok, err := r.findExisting(ctx, c, liveVs, normalize)
			if err != nil || ok {
				return sv, c, err
			}
		}
		if !importing {
			msgs, err := r.incompatibilities(ctx, c, liveVs, l)
			if err != nil {
				return none, c, err
			}
			if len(msgs) > 0 {
				return none, c, newError(http.StatusConflict, codeIncompatibleSchema, incompatibleSchemaFormat, subject, msgs)
			}
		}
		var id int64
		if importing {
			id = int64(req.ID)
			err = r.meta.ImportSchema(ctx, id, c.typ, c.text, c.refs...)
			if errors.Is(err, metastore.ErrConditionFailed) {
				return none, c, newError(statusUnprocessable, codeIDDoesNotMatch, "Schema id %d is already used by another schema", id)
			}
		} else {
			id, err = r.meta.SchemaID(ctx, c.typ, c.text, c.refs...)
		}
		if err != nil {
			return none, c, storeError("register schema", err)
		}
		var last int64
		if len(vs) > 0 {
			last = vs[len(vs)-1].Version
		}
		after := last
		if req.Version > 0 {
			if importing {
				after = int64(req.Version) - 1
			} else if int64(req.Version) != last+1 {
				return none, c, errInvalidSchema("Version is not one more than previous version")
			}
		}
		v, err := r.meta.AddSubjectVersion(ctx, subject, after, id)
		if errors.Is(err, metastore.ErrConditionFailed) {
			if importing {
				for _, sv := range vs {
					if sv.Version == after+1 && sv.ID == id {
						return sv, c, nil
					}
				}
				if !containsVersion(vs, after+1) {
					continue // written meanwhile: read it
				}
				return none, c, errNotPermitted("Version %d of subject %s already exists with another schema", after+1, subject)
			}
			continue // another writer took the version: re-read and re-check
		}
		if err != nil {
			return none, c, storeError("register schema", err)
		}
		r.subjectIDs.forget(subject)
		r.dropDeletedCopies(ctx, subject, vs, id, v)
		return metastore.SubjectVersion{Subject: subject, Version: v, ID: id}, c, nil
	}
	return none, c, newError(http.StatusInternalServerError, codeStoreError, "Register schema: subject %s kept changing; try again", subject)
}

func containsVersion(vs []metastore.SubjectVersion, v int64) bool {
	for _, sv := range vs {
		if sv.Version == v {
			return true
		}
	}
	return false
}

// dropDeletedCopies permanently deletes the soft-deleted versions of
// subject older than v that hold the schema just registered again as v,
// unless something references them, as Confluent does. Best effort: a
// failure leaves a soft-deleted duplicate, which is harmless.
func (r *Registry) dropDeletedCopies(ctx context.Context, subject string, vs []metastore.SubjectVersion, id, v int64) {
	for _, sv := range vs {
		if !sv.Deleted || sv.ID != id || sv.Version >= v {
			continue
		}
		if refs, err := r.referencingIDs(ctx, subject, sv.Version, true); err != nil || len(refs) > 0 {
			continue
		}
		_ = r.meta.DeleteSubjectVersion(ctx, subject, sv.Version)
	}
}

// handleRegister serves POST /subjects/{subject}/versions.
func (r *Registry) handleRegister(w http.ResponseWriter, req *http.Request) error {
	var body registerRequest
	if err := decodeBody(req, &body); err != nil {
		return err
	}
	subject := req.PathValue("subject")
	sv, c, err := r.register(req.Context(), subject, body, boolParam(req.URL.Query(), "normalize"))
	if err != nil {
		return err
	}
	resp := struct {
		ID         int64       `json:"id"`
		Version    int64       `json:"version"`
		SchemaType string      `json:"schemaType,omitempty"`
		References []Reference `json:"references,omitempty"`
		Schema     string      `json:"schema"`
	}{sv.ID, sv.Version, apiType(c.typ), apiRefs(c.refs), c.text}
	if sch, err := r.schema(req.Context(), sv.ID); err == nil {
		resp.Schema, resp.References = sch.Text, apiRefs(sch.References) // as stored (an identical schema found)
	}
	return writeJSON(w, http.StatusOK, resp)
}

// handleLookup serves POST /subjects/{subject}: the version of subject
// that holds the schema in the body (soft-deleted ones with ?deleted=true).
func (r *Registry) handleLookup(w http.ResponseWriter, req *http.Request) error {
	ctx := req.Context()
	subject := req.PathValue("subject")
	q := req.URL.Query()
	var body registerRequest
	if err := decodeBody(req, &body); err != nil {
		return err
	}
	normalize := boolParam(q, "normalize")
	c, err := r.prepare(ctx, body, normalize)
	if err != nil {
		return err
	}
	vs, err := r.versions(ctx, subject)
	if err != nil {
		return err
	}
	if !boolParam(q, "deleted") {
		vs = live(vs)
	}
	sv, ok, err := r.findExisting(ctx, c, vs, normalize)
	if err != nil {
		return err
	}
	if !ok {
		if len(vs) == 0 {
			return errSubjectNotFound(subject)
		}
		return errSchemaNotFound()
	}
	sch, err := r.schema(ctx, sv.ID)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, entity(subject, sv, sch))
}

// schemaEntity is Confluent's Schema: a subject version and its schema.
type schemaEntity struct {
	Subject    string      `json:"subject"`
	Version    int64       `json:"version"`
	ID         int64       `json:"id"`
	SchemaType string      `json:"schemaType,omitempty"`
	References []Reference `json:"references,omitempty"`
	Schema     string      `json:"schema"`
}

func entity(subject string, sv metastore.SubjectVersion, sch metastore.Schema) schemaEntity {
	return schemaEntity{
		Subject:    subject,
		Version:    sv.Version,
		ID:         sv.ID,
		SchemaType: apiType(sch.Type),
		References: apiRefs(sch.References),
		Schema:     sch.Text,
	}
}

// apiType is a schema type as answers carry it: AVRO is left out, as
// Confluent does.
func apiType(t string) string {
	if t == typeAvro {
		return ""
	}
	return t
}

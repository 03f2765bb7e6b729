package schemaregistry

import (
	"context"
	"net/http"
	"strings"

	"github.com/stratamq/strata/pkg/metastore"
)

// handleSchemaByID serves GET /schemas/ids/{id}. Confluent uses ?subject
// only to pick a schema context; with the default context alone it changes
// nothing, and is accepted and ignored.
func (r *Registry) handleSchemaByID(w http.ResponseWriter, req *http.Request) error {
	id, err := parseID(req.PathValue("id"))
	if err != nil {
		return err
	}
	sch, err := r.schema(req.Context(), id)
	if err != nil {
		return err
	}
	resp := struct {
		SchemaType string      `json:"schemaType,omitempty"`
		References []Reference `json:"references,omitempty"`
		Schema     string      `json:"schema"`
	}{SchemaType: apiType(sch.Type), References: apiRefs(sch.References), Schema: sch.Text}
	return writeJSON(w, http.StatusOK, resp)
}

// handleSchemaTextByID serves GET /schemas/ids/{id}/schema: the text alone.
func (r *Registry) handleSchemaTextByID(w http.ResponseWriter, req *http.Request) error {
	id, err := parseID(req.PathValue("id"))
	if err != nil {
		return err
	}
	sch, err := r.schema(req.Context(), id)
	if err != nil {
		return err
	}
	return writeRaw(w, sch.Text)
}

// subjectVersion is an element of GET /schemas/ids/{id}/versions.
type subjectVersion struct {
	Subject string `json:"subject"`
	Version int64  `json:"version"`
}

// idUses returns the subject versions that use schema id (soft-deleted
// ones with deleted), optionally of one subject, of the subjects the
// caller may describe; 40403 for an unknown id.
func (r *Registry) idUses(ctx context.Context, idStr, subject string, deleted bool) ([]metastore.SubjectVersion, error) {
	id, err := parseID(idStr)
	if err != nil {
		return nil, err
	}
	if _, err := r.schema(ctx, id); err != nil {
		return nil, err
	}
	uses, err := r.meta.SchemaUses(ctx, id)
	if err != nil {
		return nil, storeError("read schema uses", err)
	}
	c := callerOf(ctx)
	out := uses[:0]
	for _, u := range uses {
		if (deleted || !u.Deleted) && (subject == "" || u.Subject == subject) && c.mayDescribe(u.Subject) {
			out = append(out, u)
		}
	}
	return out, nil
}

// handleSchemaVersions serves GET /schemas/ids/{id}/versions.
func (r *Registry) handleSchemaVersions(w http.ResponseWriter, req *http.Request) error {
	q := req.URL.Query()
	uses, err := r.idUses(req.Context(), req.PathValue("id"), q.Get("subject"), boolParam(q, "deleted"))
	if err != nil {
		return err
	}
	out := make([]subjectVersion, len(uses))
	for i, u := range uses {
		out[i] = subjectVersion{u.Subject, u.Version}
	}
	return writeJSON(w, http.StatusOK, out)
}

// handleSchemaSubjects serves GET /schemas/ids/{id}/subjects.
func (r *Registry) handleSchemaSubjects(w http.ResponseWriter, req *http.Request) error {
	q := req.URL.Query()
	uses, err := r.idUses(req.Context(), req.PathValue("id"), q.Get("subject"), boolParam(q, "deleted"))
	if err != nil {
		return err
	}
	out := []string{}
	for _, u := range uses {
		if len(out) == 0 || out[len(out)-1] != u.Subject {
			out = append(out, u.Subject)
		}
	}
	return writeJSON(w, http.StatusOK, out)
}

// handleTypes serves GET /schemas/types.
func (r *Registry) handleTypes(w http.ResponseWriter, _ *http.Request) error {
	return writeJSON(w, http.StatusOK, schemaTypes)
}

// handleListSchemas serves GET /schemas: every live subject version
// (?deleted=true adds soft-deleted ones), ?subjectPrefix filters,
// ?latestOnly=true keeps each subject's newest; only subjects the caller
// may describe are listed.
func (r *Registry) handleListSchemas(w http.ResponseWriter, req *http.Request) error {
	ctx := req.Context()
	q := req.URL.Query()
	deleted, latestOnly, prefix := boolParam(q, "deleted"), boolParam(q, "latestOnly"), q.Get("subjectPrefix")
	subjects, err := r.meta.Subjects(ctx)
	if err != nil {
		return storeError("list subjects", err)
	}
	c := callerOf(ctx)
	out := []schemaEntity{}
	for _, s := range subjects {
		if !strings.HasPrefix(s, prefix) || !c.mayDescribe(s) {
			continue
		}
		vs, err := r.versions(ctx, s)
		if err != nil {
			return err
		}
		if !deleted {
			vs = live(vs)
		}
		if latestOnly && len(vs) > 0 {
			vs = vs[len(vs)-1:]
		}
		for _, sv := range vs {
			sch, err := r.schema(ctx, sv.ID)
			if err != nil {
				return err
			}
			out = append(out, entity(s, sv, sch))
		}
	}
	return writeJSON(w, http.StatusOK, out)
}

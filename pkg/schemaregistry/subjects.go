package schemaregistry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/stratamq/strata/pkg/metastore"
)

// handleListSubjects serves GET /subjects: subjects with a live version;
// with ?deleted=true also those whose versions are all soft-deleted, with
// ?deletedOnly=true only those; ?subjectPrefix filters, and so does
// authorization (only subjects the caller may describe).
func (r *Registry) handleListSubjects(w http.ResponseWriter, req *http.Request) error {
	ctx := req.Context()
	q := req.URL.Query()
	deleted, deletedOnly := boolParam(q, "deleted"), boolParam(q, "deletedOnly")
	prefix := q.Get("subjectPrefix")
	if prefix == ":*:" { // Confluent's "any context" wildcard, its default
		prefix = ""
	}
	subjects, err := r.meta.Subjects(ctx)
	if err != nil {
		return storeError("list subjects", err)
	}
	c := callerOf(ctx)
	out := []string{}
	for _, s := range subjects {
		if !strings.HasPrefix(s, prefix) || !c.mayDescribe(s) {
			continue
		}
		vs, err := r.versions(ctx, s)
		if err != nil {
			return err
		}
		nLive := len(live(vs))
		switch {
		case deletedOnly:
			if len(vs) > 0 && nLive == 0 {
				out = append(out, s)
			}
		case deleted:
			if len(vs) > 0 {
				out = append(out, s)
			}
		case nLive > 0:
			out = append(out, s)
		}
	}
	return writeJSON(w, http.StatusOK, out)
}

// handleListVersions serves GET /subjects/{subject}/versions (live
// versions; ?deleted=true adds soft-deleted ones, ?deletedOnly=true lists
// only those, ?deletedAsNegative=true lists those as negative numbers).
func (r *Registry) handleListVersions(w http.ResponseWriter, req *http.Request) error {
	subject := req.PathValue("subject")
	q := req.URL.Query()
	deleted, deletedOnly, negative := boolParam(q, "deleted"), boolParam(q, "deletedOnly"), boolParam(q, "deletedAsNegative")
	vs, err := r.versions(req.Context(), subject)
	if err != nil {
		return err
	}
	if !hasVersions(vs, deleted || deletedOnly) {
		return errSubjectNotFound(subject)
	}
	out := []int64{}
	for _, v := range vs {
		switch {
		case negative && v.Deleted:
			out = append(out, -v.Version)
		case negative, deleted && !deletedOnly:
			out = append(out, v.Version)
		case deletedOnly:
			if v.Deleted {
				out = append(out, v.Version)
			}
		case !v.Deleted:
			out = append(out, v.Version)
		}
	}
	return writeJSON(w, http.StatusOK, out)
}

// hasVersions reports whether a subject exists: has live versions, or any
// with includeDeleted.
func hasVersions(vs []metastore.SubjectVersion, includeDeleted bool) bool {
	if includeDeleted {
		return len(vs) > 0
	}
	return len(live(vs)) > 0
}

// findVersion resolves a version path element of subject: a number (a
// soft-deleted version only if includeDeleted) or "latest" (the newest
// live version).
func (r *Registry) findVersion(ctx context.Context, subject, vstr string, includeDeleted bool) (metastore.SubjectVersion, error) {
	v, latest, err := parseVersion(vstr)
	if err != nil {
		return metastore.SubjectVersion{}, err
	}
	vs, err := r.versions(ctx, subject)
	if err != nil {
		return metastore.SubjectVersion{}, err
	}
	if latest {
		if lv := live(vs); len(lv) > 0 {
			return lv[len(lv)-1], nil
		}
		v = -1
	} else {
		for _, sv := range vs {
			if sv.Version == v && (!sv.Deleted || includeDeleted) {
				return sv, nil
			}
		}
	}
	if !hasVersions(vs, includeDeleted) {
		return metastore.SubjectVersion{}, errSubjectNotFound(subject)
	}
	return metastore.SubjectVersion{}, errVersionNotFound(v)
}

// handleGetVersion serves GET /subjects/{subject}/versions/{version}.
func (r *Registry) handleGetVersion(w http.ResponseWriter, req *http.Request) error {
	ctx := req.Context()
	subject := req.PathValue("subject")
	sv, err := r.findVersion(ctx, subject, req.PathValue("version"), boolParam(req.URL.Query(), "deleted"))
	if err != nil {
		return err
	}
	sch, err := r.schema(ctx, sv.ID)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, entity(subject, sv, sch))
}

// handleGetVersionSchema serves GET /subjects/{subject}/versions/{version}/schema:
// the schema text alone.
func (r *Registry) handleGetVersionSchema(w http.ResponseWriter, req *http.Request) error {
	ctx := req.Context()
	sv, err := r.findVersion(ctx, req.PathValue("subject"), req.PathValue("version"), boolParam(req.URL.Query(), "deleted"))
	if err != nil {
		return err
	}
	sch, err := r.schema(ctx, sv.ID)
	if err != nil {
		return err
	}
	return writeRaw(w, sch.Text)
}

// writeRaw answers with a schema's text as the body.
func writeRaw(w http.ResponseWriter, text string) error {
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(http.StatusOK)
	w.Write([]byte(text)) // an error means the client went away
	return nil
}

// referrers returns the subject versions whose schemas reference version v
// of subject: live ones, and soft-deleted ones too with includeDeleted.
func (r *Registry) referrers(ctx context.Context, subject string, v int64, includeDeleted bool) ([]metastore.SubjectVersion, error) {
	ids, err := r.meta.ReferencedBy(ctx, subject, v)
	if err != nil {
		return nil, storeError("read references", err)
	}
	var out []metastore.SubjectVersion
	for _, id := range ids {
		uses, err := r.meta.SchemaUses(ctx, id)
		if err != nil {
			return nil, storeError("read references", err)
		}
		for _, u := range uses {
			if includeDeleted || !u.Deleted {
				out = append(out, u)
			}
		}
	}
	return out, nil
}

// referencingIDs returns the ids of the schemas that reference version v
// of subject and are used by some version (live, or any with
// includeDeleted).
func (r *Registry) referencingIDs(ctx context.Context, subject string, v int64, includeDeleted bool) ([]int64, error) {
	refs, err := r.referrers(ctx, subject, v, includeDeleted)
	if err != nil {
		return nil, err
	}
	out := []int64{}
	seen := make(map[int64]bool)
	for _, u := range refs {
		if !seen[u.ID] {
			seen[u.ID] = true
			out = append(out, u.ID)
		}
	}
	return out, nil
}

// handleReferencedBy serves GET /subjects/{subject}/versions/{version}/referencedby:
// the ids of the schemas that reference that version.
func (r *Registry) handleReferencedBy(w http.ResponseWriter, req *http.Request) error {
	ctx := req.Context()
	subject := req.PathValue("subject")
	deleted := boolParam(req.URL.Query(), "deleted")
	sv, err := r.findVersion(ctx, subject, req.PathValue("version"), true)
	if err != nil {
		return err
	}
	ids, err := r.referencingIDs(ctx, subject, sv.Version, deleted)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, ids)
}

// handleDeleteVersion serves DELETE /subjects/{subject}/versions/{version}:
// a soft delete, or with ?permanent=true the removal of a soft-deleted
// version. Versions that other schemas reference stay (42206).
func (r *Registry) handleDeleteVersion(w http.ResponseWriter, req *http.Request) error {
	ctx := req.Context()
	subject := req.PathValue("subject")
	permanent := boolParam(req.URL.Query(), "permanent")
	vstr := req.PathValue("version")
	if _, latest, err := parseVersion(vstr); err != nil {
		return err
	} else if !latest && !permanent {
		if sv, err := r.findVersion(ctx, subject, vstr, true); err == nil && sv.Deleted {
			return newError(http.StatusNotFound, codeVersionSoftDeleted, versionSoftDeletedFormat, subject, sv.Version)
		}
	}
	sv, err := r.findVersion(ctx, subject, vstr, true)
	if err != nil {
		return err
	}
	if err := r.checkWritable(ctx, subject); err != nil {
		return err
	}
	refs, err := r.referencingIDs(ctx, subject, sv.Version, permanent)
	if err != nil {
		return err
	}
	if len(refs) > 0 {
		return newError(statusUnprocessable, codeReferenceExists, referenceExistsMessageFormat, subject, sv.Version)
	}
	if permanent && !sv.Deleted {
		return newError(http.StatusNotFound, codeVersionNotSoftDeleted, versionNotSoftDeletedFormat, subject, sv.Version)
	}
	if err := r.deleteVersion(ctx, subject, sv.Version, permanent); err != nil {
		return err
	}
	if permanent {
		if err := r.dropSettingsIfEmpty(ctx, subject); err != nil {
			return err
		}
	}
	return writeJSON(w, http.StatusOK, sv.Version)
}

func (r *Registry) deleteVersion(ctx context.Context, subject string, v int64, permanent bool) error {
	defer r.subjectIDs.forget(subject)
	var err error
	if permanent {
		err = r.meta.DeleteSubjectVersion(ctx, subject, v)
	} else {
		err = r.meta.MarkVersionDeleted(ctx, subject, v)
	}
	switch {
	case errors.Is(err, metastore.ErrNotFound):
		return errVersionNotFound(v)
	case errors.Is(err, metastore.ErrConditionFailed):
		return newError(http.StatusConflict, codeStoreError, "Version %d of subject %s changed meanwhile; try again", v, subject)
	case err != nil:
		return storeError(fmt.Sprintf("delete version %d", v), err)
	}
	return nil
}

// dropSettingsIfEmpty removes a subject's level and mode once its last
// version is permanently deleted, as Confluent does.
func (r *Registry) dropSettingsIfEmpty(ctx context.Context, subject string) error {
	vs, err := r.versions(ctx, subject)
	if err != nil || len(vs) > 0 {
		return err
	}
	if err := r.meta.SetCompatibility(ctx, subject, ""); err != nil {
		return storeError("delete subject compatibility level", err)
	}
	if err := r.meta.SetSchemaMode(ctx, subject, ""); err != nil {
		return storeError("delete subject mode", err)
	}
	return nil
}

// handleDeleteSubject serves DELETE /subjects/{subject}: soft-deletes its
// live versions, or with ?permanent=true removes all its versions (which
// must all be soft-deleted first); it answers the versions deleted.
func (r *Registry) handleDeleteSubject(w http.ResponseWriter, req *http.Request) error {
	ctx := req.Context()
	subject := req.PathValue("subject")
	permanent := boolParam(req.URL.Query(), "permanent")
	vs, err := r.versions(ctx, subject)
	if err != nil {
		return err
	}
	if len(vs) == 0 {
		return errSubjectNotFound(subject)
	}
	if !permanent && len(live(vs)) == 0 {
		return newError(http.StatusNotFound, codeSubjectSoftDeleted, subjectSoftDeletedFormat, subject)
	}
	if err := r.checkWritable(ctx, subject); err != nil {
		return err
	}
	targets := vs
	if !permanent {
		targets = live(vs)
	}
	deleted := []int64{}
	for _, sv := range targets {
		refs, err := r.referrers(ctx, subject, sv.Version, permanent)
		if err != nil {
			return err
		}
		for _, ref := range refs {
			if ref.Subject != subject {
				return newError(statusUnprocessable, codeReferenceExists, referenceExistsMessageFormat, subject, sv.Version)
			}
		}
		if permanent && !sv.Deleted {
			return newError(http.StatusNotFound, codeSubjectNotSoftDeleted, subjectNotSoftDeletedFormat, subject)
		}
		deleted = append(deleted, sv.Version)
	}
	// Newest first, so references within the subject never dangle.
	for i := len(deleted) - 1; i >= 0; i-- {
		if err := r.deleteVersion(ctx, subject, deleted[i], permanent); err != nil {
			return err
		}
	}
	if permanent {
		if err := r.dropSettingsIfEmpty(ctx, subject); err != nil {
			return err
		}
	}
	return writeJSON(w, http.StatusOK, deleted)
}

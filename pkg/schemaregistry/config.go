package schemaregistry

import (
	"context"
	"net/http"
	"strings"
)

// configRequest is the body of PUT /config[/{subject}]: Confluent's
// ConfigUpdateRequest, of which only the level is supported.
type configRequest struct {
	Compatibility *string `json:"compatibility"`
}

// handleGetConfig serves GET /config (the global level, the default if
// none is set) and GET /config/{subject} (40408 if the subject has no level
// of its own, unless ?defaultToGlobal=true).
func (r *Registry) handleGetConfig(w http.ResponseWriter, req *http.Request) error {
	ctx := req.Context()
	subject := req.PathValue("subject")
	if subject != "" && !boolParam(req.URL.Query(), "defaultToGlobal") {
		s, ok, err := r.meta.Compatibility(ctx, subject)
		if err != nil {
			return storeError("read compatibility level", err)
		}
		if !ok {
			return newError(http.StatusNotFound, codeSubjectConfigNotSet, subjectConfigNotSetFormat, subject)
		}
		return writeJSON(w, http.StatusOK, configResponse{s})
	}
	l, err := r.levelOf(ctx, subject)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, configResponse{l.String()})
}

type configResponse struct {
	Level string `json:"compatibilityLevel"`
}

// handlePutConfig serves PUT /config and PUT /config/{subject}; like
// Confluent it echoes the request ({"compatibility": level}).
func (r *Registry) handlePutConfig(w http.ResponseWriter, req *http.Request) error {
	subject := req.PathValue("subject")
	if subject != "" {
		if err := checkSubject(subject); err != nil {
			return err
		}
	}
	var body configRequest
	if err := decodeBody(req, &body); err != nil {
		return err
	}
	if body.Compatibility == nil {
		return newError(statusUnprocessable, codeInvalidCompatibility, "%s (the body has no \"compatibility\")", invalidCompatibilityMessage)
	}
	l, ok := parseLevel(*body.Compatibility)
	if !ok {
		return newError(statusUnprocessable, codeInvalidCompatibility, invalidCompatibilityMessage)
	}
	if err := r.meta.SetCompatibility(req.Context(), subject, l.String()); err != nil {
		return storeError("set compatibility level", err)
	}
	return writeJSON(w, http.StatusOK, struct {
		Compatibility string `json:"compatibility"`
	}{l.String()})
}

// handleDeleteConfig serves DELETE /config (resets the global level and
// answers the one it replaced) and DELETE /config/{subject} (answers the
// level removed, 40401 if there was none).
func (r *Registry) handleDeleteConfig(w http.ResponseWriter, req *http.Request) error {
	ctx := req.Context()
	subject := req.PathValue("subject")
	old, err := r.levelOf(ctx, "")
	if err != nil {
		return err
	}
	if subject != "" {
		s, ok, err := r.meta.Compatibility(ctx, subject)
		if err != nil {
			return storeError("read compatibility level", err)
		}
		if !ok {
			return errSubjectNotFound(subject)
		}
		old, _ = parseLevel(s)
	}
	if err := r.meta.SetCompatibility(ctx, subject, ""); err != nil {
		return storeError("delete compatibility level", err)
	}
	return writeJSON(w, http.StatusOK, configResponse{old.String()})
}

// modeBody is the body of PUT /mode[/{subject}] and of the mode answers.
type modeBody struct {
	Mode string `json:"mode"`
}

// handleGetMode serves GET /mode (READWRITE unless set) and GET
// /mode/{subject} (40409 if the subject has no mode of its own, unless
// ?defaultToGlobal=true).
func (r *Registry) handleGetMode(w http.ResponseWriter, req *http.Request) error {
	ctx := req.Context()
	subject := req.PathValue("subject")
	if subject != "" && !boolParam(req.URL.Query(), "defaultToGlobal") {
		m, ok, err := r.meta.SchemaMode(ctx, subject)
		if err != nil {
			return storeError("read mode", err)
		}
		if !ok {
			return newError(http.StatusNotFound, codeSubjectModeNotSet, subjectModeNotSetFormat, subject)
		}
		return writeJSON(w, http.StatusOK, modeBody{m})
	}
	m, err := r.modeOf(ctx, subject)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, modeBody{m})
}

// handlePutMode serves PUT /mode and PUT /mode/{subject}. Entering IMPORT
// while the scope has live versions needs ?force=true (42205 otherwise).
func (r *Registry) handlePutMode(w http.ResponseWriter, req *http.Request) error {
	ctx := req.Context()
	subject := req.PathValue("subject")
	if subject != "" {
		if err := checkSubject(subject); err != nil {
			return err
		}
	}
	var body modeBody
	if err := decodeBody(req, &body); err != nil {
		return err
	}
	mode := strings.ToUpper(body.Mode)
	if !validMode(mode) {
		return newError(statusUnprocessable, codeInvalidMode, invalidModeMessage)
	}
	if mode == modeImport && !boolParam(req.URL.Query(), "force") {
		cur, err := r.modeOf(ctx, subject)
		if err != nil {
			return err
		}
		if cur != modeImport {
			busy, err := r.hasLiveVersions(ctx, subject)
			if err != nil {
				return err
			}
			if busy {
				return errNotPermitted("Cannot import since found existing subjects")
			}
		}
	}
	if err := r.meta.SetSchemaMode(ctx, subject, mode); err != nil {
		return storeError("set mode", err)
	}
	return writeJSON(w, http.StatusOK, modeBody{mode})
}

// hasLiveVersions reports whether subject ("" for any) has a live version.
func (r *Registry) hasLiveVersions(ctx context.Context, subject string) (bool, error) {
	subjects := []string{subject}
	if subject == "" {
		var err error
		if subjects, err = r.meta.Subjects(ctx); err != nil {
			return false, storeError("list subjects", err)
		}
	}
	for _, s := range subjects {
		vs, err := r.liveVersions(ctx, s)
		if err != nil {
			return false, err
		}
		if len(vs) > 0 {
			return true, nil
		}
	}
	return false, nil
}

// handleDeleteMode serves DELETE /mode (resets the global mode) and
// DELETE /mode/{subject} (40401 if the subject had no mode); both answer
// the mode removed.
func (r *Registry) handleDeleteMode(w http.ResponseWriter, req *http.Request) error {
	ctx := req.Context()
	subject := req.PathValue("subject")
	m, ok, err := r.meta.SchemaMode(ctx, subject)
	if err != nil {
		return storeError("read mode", err)
	}
	if !ok {
		if subject != "" {
			return errSubjectNotFound(subject)
		}
		m = modeReadWrite
	}
	if err := r.meta.SetSchemaMode(ctx, subject, ""); err != nil {
		return storeError("delete mode", err)
	}
	return writeJSON(w, http.StatusOK, modeBody{m})
}

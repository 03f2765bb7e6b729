package schemaregistry

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/stratamq/strata/pkg/metastore"
)

// ErrSchemaNotFound is returned by SchemaByID when no schema has the id.
var ErrSchemaNotFound = errors.New("schemaregistry: schema not found")

// Confluent's error codes (io.confluent.kafka.schemaregistry.rest.exceptions.Errors).
const (
	codeSubjectNotFound          = 40401
	codeVersionNotFound          = 40402
	codeSchemaNotFound           = 40403
	codeSubjectSoftDeleted       = 40404
	codeSubjectNotSoftDeleted    = 40405
	codeVersionSoftDeleted       = 40406
	codeVersionNotSoftDeleted    = 40407
	codeSubjectConfigNotSet      = 40408
	codeSubjectModeNotSet        = 40409
	codeIncompatibleSchema       = 409 // Confluent 8.2+ answers 40901; clients (franz-go sr) expect 409
	codeInvalidSchema            = 42201
	codeInvalidVersion           = 42202
	codeInvalidCompatibility     = 42203
	codeInvalidMode              = 42204
	codeOperationNotPermitted    = 42205
	codeReferenceExists          = 42206
	codeIDDoesNotMatch           = 42207
	codeInvalidSubject           = 42208
	codeSchemaTooLarge           = 42209
	codeStoreError               = 50001
	codeOperationTimeout         = 50002
	codeUnprocessableEntity      = 422
	codeBadRequest               = 400
	codeNotFound                 = 404
	codeMethodNotAllowed         = 405
	codeUnsupportedMediaType     = 415
	statusUnprocessable          = http.StatusUnprocessableEntity
	invalidVersionMessageFormat  = "The specified version '%s' is not a valid version id. Allowed values are between [1, 2^31-1] and the string \"latest\""
	invalidCompatibilityMessage  = "Invalid compatibility level. Valid values are none, backward, forward, full, backward_transitive, forward_transitive, and full_transitive"
	invalidModeMessage           = "Invalid mode. Valid values are READWRITE, READONLY, READONLY_OVERRIDE and IMPORT."
	subjectSoftDeletedFormat     = "Subject '%s' was soft deleted. Set permanent=true to delete permanently"
	subjectNotSoftDeletedFormat  = "Subject '%s' was not deleted first before being permanently deleted"
	versionSoftDeletedFormat     = "Subject '%s' Version %d was soft deleted. Set permanent=true to delete permanently"
	versionNotSoftDeletedFormat  = "Subject '%s' Version %d was not deleted first before being permanently deleted"
	subjectConfigNotSetFormat    = "Subject '%s' does not have subject-level compatibility configured"
	subjectModeNotSetFormat      = "Subject '%s' does not have subject-level mode configured"
	incompatibleSchemaFormat     = "Schema being registered is incompatible with an earlier schema for subject \"%s\", details: %v"
	referenceExistsMessageFormat = "One or more references exist to the schema {subject=%s,version=%d}."
)

// apiError is an error with the HTTP status and Confluent error code it is
// answered with: {"error_code": code, "message": msg}.
type apiError struct {
	status int
	code   int
	msg    string
	cause  error // the store error behind a 5xx, if any
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %d: %s", e.status, e.code, e.msg) }

func (e *apiError) Unwrap() error { return e.cause }

func newError(status, code int, format string, args ...any) *apiError {
	return &apiError{status: status, code: code, msg: fmt.Sprintf(format, args...)}
}

func errSubjectNotFound(subject string) *apiError {
	return newError(http.StatusNotFound, codeSubjectNotFound, "Subject '%s' not found.", subject)
}

func errVersionNotFound(v int64) *apiError {
	return newError(http.StatusNotFound, codeVersionNotFound, "Version %d not found.", v)
}

func errSchemaNotFound() *apiError {
	return newError(http.StatusNotFound, codeSchemaNotFound, "Schema not found")
}

func errSchemaIDNotFound(id int64) *apiError {
	return newError(http.StatusNotFound, codeSchemaNotFound, "Schema %d not found", id)
}

func errInvalidSchema(format string, args ...any) *apiError {
	return newError(statusUnprocessable, codeInvalidSchema, format, args...)
}

func errInvalidVersion(v string) *apiError {
	return newError(statusUnprocessable, codeInvalidVersion, invalidVersionMessageFormat, v)
}

func errNotPermitted(format string, args ...any) *apiError {
	return newError(statusUnprocessable, codeOperationNotPermitted, format, args...)
}

// storeError turns a metastore failure into Confluent's 500s: 50002 when
// the store or the request ran out of time, 50001 otherwise. Values too
// large for the store are the client's: 42209.
func storeError(op string, err error) *apiError {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.Is(err, metastore.ErrTooLarge):
		ae = newError(statusUnprocessable, codeSchemaTooLarge, "%s: schema too large: %v", op, err)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		ae = newError(http.StatusInternalServerError, codeOperationTimeout, "%s: operation timed out: %v", op, err)
	default:
		ae = newError(http.StatusInternalServerError, codeStoreError, "%s: error in the backend datastore: %v", op, err)
	}
	ae.cause = err
	return ae
}

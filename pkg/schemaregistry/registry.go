package schemaregistry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/stratamq/strata/pkg/metastore"
)

// Options configure a Registry. The zero value is valid.
type Options struct {
	// DefaultCompatibility is the compatibility level used when neither the
	// subject nor the registry has one set ("" means BACKWARD, Confluent's
	// default).
	DefaultCompatibility string
	// MaxSchemaBytes bounds the text of one schema (0 means 256 KiB; at
	// most metastore.MaxItemBytes). Larger schemas get 422 with 42209.
	MaxSchemaBytes int
	// IDCacheTTL is how long SubjectHasID trusts an id it found under a
	// subject (0 means 10 s; negative disables the cache). Ids it did not
	// find are looked up again, so new registrations are seen at once;
	// soft deletions made through another Registry are seen within the TTL.
	IDCacheTTL time.Duration
}

// Defaults of Options.
const (
	DefaultMaxSchemaBytes = 256 << 10
	DefaultIDCacheTTL     = 10 * time.Second
)

// Validate reports whether o is usable.
func (o Options) Validate() error {
	if o.DefaultCompatibility != "" {
		if _, ok := parseLevel(o.DefaultCompatibility); !ok {
			return fmt.Errorf("schemaregistry: default compatibility %q: want one of %s", o.DefaultCompatibility, strings.Join(levelNames, ", "))
		}
	}
	if o.MaxSchemaBytes < 0 || o.MaxSchemaBytes > metastore.MaxItemBytes {
		return fmt.Errorf("schemaregistry: max schema bytes %d: want 0 to %d", o.MaxSchemaBytes, metastore.MaxItemBytes)
	}
	return nil
}

// Registry is a Confluent-compatible schema registry over the metastore.
// It serves the REST API at the root path (ServeHTTP). It is safe for
// concurrent use, and any number of Registries may share one metastore.
type Registry struct {
	meta        *metastore.Meta
	level       level // default compatibility level
	maxBytes    int
	mux         *http.ServeMux
	schemaCache *boundedCache[metastore.Schema]
	parsedCache *boundedCache[parsed]
	subjectIDs  *subjectIDs
}

// New returns a registry over meta. It panics if opts fails Validate, as
// for any programming error; call Validate first on options from flags.
func New(meta *metastore.Meta, opts Options) *Registry {
	if err := opts.Validate(); err != nil {
		panic(err)
	}
	r := &Registry{
		meta:        meta,
		level:       levelBackward,
		maxBytes:    opts.MaxSchemaBytes,
		schemaCache: newBoundedCache[metastore.Schema](maxCachedSchemas),
		parsedCache: newBoundedCache[parsed](maxCachedSchemas),
	}
	if opts.DefaultCompatibility != "" {
		r.level, _ = parseLevel(opts.DefaultCompatibility)
	}
	if r.maxBytes == 0 {
		r.maxBytes = DefaultMaxSchemaBytes
	}
	ttl := opts.IDCacheTTL
	if ttl == 0 {
		ttl = DefaultIDCacheTTL
	}
	r.subjectIDs = newSubjectIDs(ttl)
	r.mux = r.routes()
	return r
}

// Schema is a registered schema.
type Schema struct {
	ID         int
	Type       string // AVRO, JSON or PROTOBUF
	Schema     string // the schema's canonical text
	References []Reference
}

// Reference is a schema reference: Name (an Avro type name, a JSON Schema
// $ref, a Protobuf import) is defined by version Version of Subject.
type Reference struct {
	Name    string `json:"name"`
	Subject string `json:"subject"`
	Version int    `json:"version"`
}

// SchemaByID returns the schema with the given id, or an error wrapping
// ErrSchemaNotFound.
func (r *Registry) SchemaByID(ctx context.Context, id int) (Schema, error) {
	sch, err := r.schema(ctx, int64(id))
	var ae *apiError
	if errors.As(err, &ae) && ae.code == codeSchemaNotFound {
		return Schema{}, fmt.Errorf("schemaregistry: schema %d: %w", id, ErrSchemaNotFound)
	}
	if err != nil {
		return Schema{}, fmt.Errorf("schemaregistry: schema %d: %w", id, err)
	}
	return Schema{ID: int(sch.ID), Type: sch.Type, Schema: sch.Text, References: apiRefs(sch.References)}, nil
}

// SubjectHasID reports whether a live (not soft-deleted) version of
// subject has schema id: what broker-side validation asks of a record's
// schema id and its topic's "<topic>-value" subject. Answers are cached as
// Options.IDCacheTTL describes.
func (r *Registry) SubjectHasID(ctx context.Context, subject string, id int) (bool, error) {
	if has, known := r.subjectIDs.lookup(subject, int64(id)); known {
		return has, nil
	}
	vs, err := r.liveVersions(ctx, subject)
	if err != nil {
		return false, fmt.Errorf("schemaregistry: versions of %q: %w", subject, err)
	}
	ids := make(map[int64]bool, len(vs))
	for _, v := range vs {
		ids[v.ID] = true
	}
	r.subjectIDs.store(subject, ids)
	return ids[int64(id)], nil
}

// schema reads a schema by id (cached: a schema never changes).
func (r *Registry) schema(ctx context.Context, id int64) (metastore.Schema, error) {
	if sch, ok := r.schemaCache.get(id); ok {
		return sch, nil
	}
	sch, err := r.meta.SchemaByID(ctx, id)
	if errors.Is(err, metastore.ErrNotFound) {
		return metastore.Schema{}, errSchemaIDNotFound(id)
	}
	if err != nil {
		return metastore.Schema{}, storeError("read schema", err)
	}
	r.schemaCache.put(id, sch)
	return sch, nil
}

// versions returns a subject's versions, oldest first, soft-deleted ones
// included.
func (r *Registry) versions(ctx context.Context, subject string) ([]metastore.SubjectVersion, error) {
	vs, err := r.meta.SubjectVersions(ctx, subject)
	if err != nil {
		return nil, storeError("read versions", err)
	}
	return vs, nil
}

// liveVersions returns a subject's versions that are not soft-deleted.
func (r *Registry) liveVersions(ctx context.Context, subject string) ([]metastore.SubjectVersion, error) {
	vs, err := r.versions(ctx, subject)
	if err != nil {
		return nil, err
	}
	return live(vs), nil
}

func live(vs []metastore.SubjectVersion) []metastore.SubjectVersion {
	out := vs[:0:0]
	for _, v := range vs {
		if !v.Deleted {
			out = append(out, v)
		}
	}
	return out
}

// levelOf returns the compatibility level in force for subject ("" for
// the global one).
func (r *Registry) levelOf(ctx context.Context, subject string) (level, error) {
	if subject != "" {
		s, ok, err := r.meta.Compatibility(ctx, subject)
		if err != nil {
			return 0, storeError("read compatibility level", err)
		}
		if ok {
			if l, valid := parseLevel(s); valid {
				return l, nil
			}
		}
	}
	s, ok, err := r.meta.Compatibility(ctx, "")
	if err != nil {
		return 0, storeError("read compatibility level", err)
	}
	if l, valid := parseLevel(s); ok && valid {
		return l, nil
	}
	return r.level, nil
}

// Registry modes (Confluent's; FORWARD mode, for Confluent's own
// replication, is not supported).
const (
	modeReadWrite        = "READWRITE"
	modeReadOnly         = "READONLY"
	modeReadOnlyOverride = "READONLY_OVERRIDE"
	modeImport           = "IMPORT"
)

func validMode(m string) bool {
	switch m {
	case modeReadWrite, modeReadOnly, modeReadOnlyOverride, modeImport:
		return true
	}
	return false
}

// modeOf returns the mode in force for subject ("" for the global one).
func (r *Registry) modeOf(ctx context.Context, subject string) (string, error) {
	if subject != "" {
		m, ok, err := r.meta.SchemaMode(ctx, subject)
		if err != nil {
			return "", storeError("read mode", err)
		}
		if ok {
			return m, nil
		}
	}
	m, ok, err := r.meta.SchemaMode(ctx, "")
	if err != nil {
		return "", storeError("read mode", err)
	}
	if ok {
		return m, nil
	}
	return modeReadWrite, nil
}

func readOnly(mode string) bool { return mode == modeReadOnly || mode == modeReadOnlyOverride }

// checkWritable refuses changes to subject in a read-only mode (42205).
func (r *Registry) checkWritable(ctx context.Context, subject string) error {
	m, err := r.modeOf(ctx, subject)
	if err != nil {
		return err
	}
	if readOnly(m) {
		return errNotPermitted("Subject %s is in read-only mode", subject)
	}
	return nil
}

// maxSubjectBytes keeps metastore keys ("schemas/subject/" + subject)
// within their limit.
const maxSubjectBytes = 900

// checkSubject validates a subject name (42208): Confluent refuses empty
// names and control characters; the metastore bounds the length.
func checkSubject(subject string) error {
	bad := subject == "" || len(subject) > maxSubjectBytes || !utf8.ValidString(subject) ||
		strings.IndexFunc(subject, unicode.IsControl) >= 0
	if bad {
		return newError(statusUnprocessable, codeInvalidSubject, "The specified subject '%s' is not a valid.", subject)
	}
	return nil
}

func apiRefs(refs []metastore.SchemaRef) []Reference {
	if len(refs) == 0 {
		return nil
	}
	out := make([]Reference, len(refs))
	for i, r := range refs {
		out[i] = Reference{Name: r.Name, Subject: r.Subject, Version: int(r.Version)}
	}
	return out
}

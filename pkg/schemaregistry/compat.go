package schemaregistry

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/stratamq/strata/pkg/metastore"
)

// level is a compatibility level.
type level int

const (
	levelNone level = iota + 1
	levelBackward
	levelBackwardTransitive
	levelForward
	levelForwardTransitive
	levelFull
	levelFullTransitive
)

var levelNames = []string{"NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE"}

func (l level) String() string { return levelNames[l-1] }

// parseLevel parses a level name, in any case, as Confluent does.
func parseLevel(s string) (level, bool) {
	for i, n := range levelNames {
		if strings.EqualFold(s, n) {
			return level(i + 1), true
		}
	}
	return 0, false
}

func (l level) transitive() bool {
	return l == levelBackwardTransitive || l == levelForwardTransitive || l == levelFullTransitive
}

// backward: the new schema must read data written with the old ones.
func (l level) backward() bool {
	return l == levelBackward || l == levelBackwardTransitive || l == levelFull || l == levelFullTransitive
}

// forward: the old schemas must read data written with the new one.
func (l level) forward() bool {
	return l == levelForward || l == levelForwardTransitive || l == levelFull || l == levelFullTransitive
}

// candidate is a schema being registered or checked.
type candidate struct {
	typ  string
	text string // canonical
	refs []metastore.SchemaRef
	p    parsed
}

// incompatibilities returns why c cannot follow the versions against
// (oldest first, live ones only) at level l, or nothing if it can.
func (r *Registry) incompatibilities(ctx context.Context, c candidate, against []metastore.SubjectVersion, l level) ([]string, error) {
	if l == levelNone || len(against) == 0 {
		return nil, nil
	}
	if !l.transitive() {
		against = against[len(against)-1:]
	}
	prev := make([]versioned, len(against))
	for i, v := range against {
		sch, err := r.schema(ctx, v.ID)
		if err != nil {
			return nil, err
		}
		p, err := r.parseStored(ctx, sch)
		if err != nil {
			return nil, storeError(fmt.Sprintf("parse version %d", v.Version), err)
		}
		prev[i] = versioned{v.Version, p}
	}
	return checkLevel(l, c.p, prev), nil
}

// versioned is a parsed version of a subject.
type versioned struct {
	version int64
	p       parsed
}

// checkLevel returns why next cannot follow prev (oldest first) at level
// l, or nothing if it can: a BACKWARD level needs next to read the data
// of the versions checked, a FORWARD level needs them to read next's data,
// FULL both; like Confluent, a non-transitive level checks only the newest
// version, a transitive one all of them.
func checkLevel(l level, next parsed, prev []versioned) []string {
	if l == levelNone || len(prev) == 0 {
		return nil
	}
	if !l.transitive() {
		prev = prev[len(prev)-1:]
	}
	var msgs []string
	for i := len(prev) - 1; i >= 0; i-- { // newest first
		v := prev[i]
		if l.backward() {
			for _, m := range next.canRead(v.p) {
				msgs = append(msgs, fmt.Sprintf("%s (the new schema reading data written with version %d)", m, v.version))
			}
		}
		if l.forward() {
			for _, m := range v.p.canRead(next) {
				msgs = append(msgs, fmt.Sprintf("%s (version %d reading data written with the new schema)", m, v.version))
			}
		}
	}
	if len(msgs) > 0 {
		msgs = append(msgs, fmt.Sprintf("{compatibility: '%s'}", l))
	}
	return msgs
}

// compatibilityResponse is the body of the /compatibility answers.
type compatibilityResponse struct {
	IsCompatible bool     `json:"is_compatible"`
	Messages     []string `json:"messages,omitempty"`
}

func compatResponse(msgs []string, verbose bool) any {
	if verbose {
		// Verbose answers always carry the list, empty when compatible.
		return struct {
			IsCompatible bool     `json:"is_compatible"`
			Messages     []string `json:"messages"`
		}{len(msgs) == 0, append([]string{}, msgs...)}
	}
	return compatibilityResponse{IsCompatible: len(msgs) == 0}
}

// handleCompatibility serves POST /compatibility/subjects/{subject}/versions/{version}
// (against one version; "latest" of a subject without versions is compatible)
// and POST /compatibility/subjects/{subject}/versions (against the versions
// the subject's level names, as registration would).
func (r *Registry) handleCompatibility(w http.ResponseWriter, req *http.Request) error {
	ctx := req.Context()
	subject := req.PathValue("subject")
	q := req.URL.Query()
	verbose := boolParam(q, "verbose")
	var body registerRequest
	if err := decodeBody(req, &body); err != nil {
		return err
	}
	vs, err := r.liveVersions(ctx, subject)
	if err != nil {
		return err
	}
	against := vs
	if vstr := req.PathValue("version"); vstr != "" {
		v, latest, err := parseVersion(vstr)
		if err != nil {
			return err
		}
		against = nil
		if latest {
			if len(vs) > 0 {
				against = vs[len(vs)-1:]
			}
		} else {
			for _, sv := range vs {
				if sv.Version == v {
					against = []metastore.SubjectVersion{sv}
				}
			}
			if against == nil {
				return errVersionNotFound(v)
			}
		}
	}
	c, err := r.prepare(ctx, body, boolParam(q, "normalize"))
	if err != nil {
		var ae *apiError
		if errors.As(err, &ae) && verbose && ae.code == codeInvalidSchema {
			return writeJSON(w, http.StatusOK, compatResponse([]string{ae.msg}, true))
		}
		return err
	}
	l, err := r.levelOf(ctx, subject)
	if err != nil {
		return err
	}
	msgs, err := r.incompatibilities(ctx, c, against, l)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, compatResponse(msgs, verbose))
}

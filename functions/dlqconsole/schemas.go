package dlqconsole

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"

	"github.com/twmb/franz-go/pkg/sr"
)

// The schema pages: subjects with their latest version, and one subject's
// versions, each schema shown (JSON pretty-printed), through the registry's
// Confluent API.

// maxVersionsShown bounds the versions a subject page shows in full.
const maxVersionsShown = 50

// SubjectRow is one subject in the list.
type SubjectRow struct {
	Subject       string
	Latest, ID    int
	Type          string
	Compatibility string
}

// SchemasPage is the subject list.
type SchemasPage struct {
	Subjects  []SubjectRow
	Truncated int
	NoReg     bool // the console has no registry
}

// VersionRow is one version of a subject.
type VersionRow struct {
	Version, ID int
	Type        string
	Schema      string
	References  []string
}

// SubjectPage is one subject.
type SubjectPage struct {
	Subject       string
	Compatibility string
	Versions      []VersionRow // newest first
	Truncated     int
}

func (c *Console) registryError(what string, err error) error {
	var re *sr.ResponseError
	if errors.As(err, &re) {
		switch re.StatusCode {
		case http.StatusNotFound:
			return errorf(http.StatusNotFound, "%s: %s", what, re.Message)
		case http.StatusUnauthorized, http.StatusForbidden:
			return errorf(http.StatusBadGateway, "%s: the registry refused the console: %s", what, re.Message)
		}
		return errorf(http.StatusBadGateway, "%s: schema registry: %s", what, re.Message)
	}
	return errorf(http.StatusServiceUnavailable, "%s: schema registry unavailable: %v", what, err)
}

func (c *Console) schemasPage(ctx context.Context) (SchemasPage, error) {
	if c.registry == nil {
		return SchemasPage{NoReg: true}, nil
	}
	subjects, err := c.registry.Subjects(ctx)
	if err != nil {
		return SchemasPage{}, c.registryError("list subjects", err)
	}
	slices.Sort(subjects)
	var p SchemasPage
	if len(subjects) > maxListed {
		p.Truncated = len(subjects) - maxListed
		subjects = subjects[:maxListed]
	}
	compat := map[string]string{}
	if len(subjects) > 0 {
		for _, r := range c.registry.Compatibility(ctx, subjects...) {
			if r.Err == nil {
				compat[r.Subject] = r.Level.String()
			}
		}
	}
	for _, s := range subjects {
		row := SubjectRow{Subject: s, Compatibility: compat[s]}
		if ss, err := c.registry.SchemaByVersion(ctx, s, -1); err == nil {
			row.Latest, row.ID, row.Type = ss.Version, ss.ID, ss.Type.String()
		}
		p.Subjects = append(p.Subjects, row)
	}
	return p, nil
}

func (c *Console) subjectPage(ctx context.Context, subject string) (SubjectPage, error) {
	if c.registry == nil {
		return SubjectPage{}, errorf(http.StatusNotFound, "the console has no schema registry (STRATA_REGISTRY_URL)")
	}
	if subject == "" || len(subject) > 1024 {
		return SubjectPage{}, errorf(http.StatusBadRequest, "invalid subject %q", subject)
	}
	versions, err := c.registry.SubjectVersions(ctx, subject)
	if err != nil {
		return SubjectPage{}, c.registryError("subject "+strconv.Quote(subject), err)
	}
	p := SubjectPage{Subject: subject}
	for _, r := range c.registry.Compatibility(ctx, subject) {
		if r.Err == nil {
			p.Compatibility = r.Level.String()
		}
	}
	slices.Sort(versions)
	slices.Reverse(versions)
	if len(versions) > maxVersionsShown {
		p.Truncated = len(versions) - maxVersionsShown
		versions = versions[:maxVersionsShown]
	}
	for _, v := range versions {
		ss, err := c.registry.SchemaByVersion(ctx, subject, v)
		if err != nil {
			return p, c.registryError("subject "+strconv.Quote(subject), err)
		}
		row := VersionRow{Version: ss.Version, ID: ss.ID, Type: ss.Type.String(), Schema: ss.Schema.Schema}
		var buf bytes.Buffer
		if json.Indent(&buf, []byte(ss.Schema.Schema), "", "  ") == nil {
			row.Schema = buf.String()
		}
		for _, r := range ss.References {
			row.References = append(row.References, r.Name+" → "+r.Subject+" v"+strconv.Itoa(r.Version))
		}
		p.Versions = append(p.Versions, row)
	}
	return p, nil
}

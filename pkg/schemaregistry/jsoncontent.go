package schemaregistry

import (
	"fmt"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// JSON Schema compatibility of objects and arrays: their content models
// (see jsoncompat.go for the rules).

// objectModel is an object schema's content model.
type objectModel struct {
	s          *jsonschema.Schema
	permits    bool               // additionalProperties is not false
	additional *jsonschema.Schema // additionalProperties' schema, if one
}

func modelOf(s *jsonschema.Schema) objectModel {
	m := objectModel{s: s, permits: true}
	switch ap := s.AdditionalProperties.(type) {
	case bool:
		m.permits = ap
	case *jsonschema.Schema:
		m.additional = ap
	}
	return m
}

// open: additionalProperties absent or true, no patternProperties, and
// unevaluatedProperties absent or true.
func (m objectModel) open() bool {
	if !m.permits || m.additional != nil || len(m.s.PatternProperties) > 0 {
		return false
	}
	u := m.s.UnevaluatedProperties
	return u == nil || (u.Bool != nil && *u.Bool)
}

// covering returns the schema a partially open model gives an undeclared
// property, if any.
func (m objectModel) covering(prop string) *jsonschema.Schema {
	pats := make([]jsonschema.Regexp, 0, len(m.s.PatternProperties))
	for p := range m.s.PatternProperties {
		pats = append(pats, p)
	}
	slices.SortFunc(pats, func(a, b jsonschema.Regexp) int { return strings.Compare(a.String(), b.String()) })
	for _, p := range pats {
		if p.MatchString(prop) {
			return m.s.PatternProperties[p]
		}
	}
	if m.additional != nil {
		return m.additional
	}
	if m.permits && m.s.AdditionalProperties == nil {
		if u := m.s.UnevaluatedProperties; u != nil && u.Bool == nil {
			return u
		}
	}
	return nil
}

func hasDefault(s *jsonschema.Schema) bool {
	return s.Default != nil || deref(s).Default != nil
}

func (c *jctx) compareObject(o, u *jsonschema.Schema) {
	// Required.
	c.enter("required")
	for _, p := range sortedKeys(o.Properties) {
		us, ok := u.Properties[p]
		if !ok {
			continue
		}
		or, ur := slices.Contains(o.Required, p), slices.Contains(u.Required, p)
		switch {
		case or && !ur:
			c.addAt(p, "REQUIRED_ATTRIBUTE_REMOVED")
		case !or && ur && hasDefault(us):
			c.addAt(p, "REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED")
		case !or && ur:
			c.addAt(p, "REQUIRED_ATTRIBUTE_ADDED")
		}
	}
	c.leave()

	// Properties.
	om, um := modelOf(o), modelOf(u)
	c.enter("properties")
	props := sortedKeys(o.Properties)
	for _, p := range sortedKeys(u.Properties) {
		if _, ok := o.Properties[p]; !ok {
			props = append(props, p)
		}
	}
	for _, p := range props {
		os, us := o.Properties[p], u.Properties[p]
		c.enter(p)
		switch {
		case us == nil: // removed
			switch cov := um.covering(p); {
			case um.open():
				c.add("PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL")
			case cov != nil:
				s := c.trialSchemas(os, cov)
				c.merge(s)
				if s.compatible() {
					c.add("PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
				} else {
					c.add("PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
				}
			case c.view(os).kind == jkFalse:
				c.add("PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL")
			default:
				c.add("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL")
			}
		case os == nil: // added
			required := slices.Contains(u.Required, p)
			if om.open() {
				switch {
				case c.view(us).kind == jkEmpty:
					c.add("PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL")
				case required && hasDefault(us):
					c.add("REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_OPEN_CONTENT_MODEL")
				case required:
					c.add("REQUIRED_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL")
				default:
					c.add("OPTIONAL_PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL")
				}
				break
			}
			if cov := om.covering(p); cov != nil {
				s := c.trialSchemas(cov, us)
				c.merge(s)
				if s.compatible() {
					c.add("PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
				} else {
					c.add("PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
				}
			}
			switch {
			case required && hasDefault(us):
				c.add("REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL")
			case required:
				c.add("REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL")
			default:
				c.add("OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL")
			}
		default:
			c.compareSchemas(os, us)
		}
		c.leave()
	}
	c.leave()

	// Dependencies.
	c.enter("dependencies")
	oArr, oSch := dependenciesOf(o)
	uArr, uSch := dependenciesOf(u)
	for _, p := range unionKeys(oArr, uArr) {
		ov, inO := oArr[p]
		uv, inU := uArr[p]
		switch {
		case !inU:
			c.addAt(p, "DEPENDENCY_ARRAY_REMOVED")
		case !inO:
			c.addAt(p, "DEPENDENCY_ARRAY_ADDED")
		default:
			os, us := stringSet(ov), stringSet(uv)
			switch {
			case len(os) == len(us) && contains(os, us):
			case contains(us, os):
				c.addAt(p, "DEPENDENCY_ARRAY_EXTENDED")
			case contains(os, us):
				c.addAt(p, "DEPENDENCY_ARRAY_NARROWED")
			default:
				c.addAt(p, "DEPENDENCY_ARRAY_CHANGED")
			}
		}
	}
	for _, p := range unionKeys(oSch, uSch) {
		os, us := oSch[p], uSch[p]
		switch {
		case us == nil:
			c.addAt(p, "DEPENDENCY_SCHEMA_REMOVED")
		case os == nil:
			c.addAt(p, "DEPENDENCY_SCHEMA_ADDED")
		default:
			c.enter(p)
			c.compareSchemas(os, us)
			c.leave()
		}
	}
	c.leave()

	// additionalProperties.
	c.enter("additionalProperties")
	switch {
	case om.permits != um.permits && um.permits:
		c.add("ADDITIONAL_PROPERTIES_ADDED")
	case om.permits != um.permits:
		c.add("ADDITIONAL_PROPERTIES_REMOVED")
	case om.additional == nil && um.additional != nil:
		c.add("ADDITIONAL_PROPERTIES_NARROWED")
	case om.additional != nil && um.additional == nil:
		c.add("ADDITIONAL_PROPERTIES_EXTENDED")
	default:
		c.compareSchemas(om.additional, um.additional)
	}
	c.leave()

	c.bound("maxProperties", "MAX_PROPERTIES", ratOf(o.MaxProperties), ratOf(u.MaxProperties))
	c.bound("minProperties", "MIN_PROPERTIES", ratOf(o.MinProperties), ratOf(u.MinProperties))
}

func dependenciesOf(s *jsonschema.Schema) (map[string][]string, map[string]*jsonschema.Schema) {
	arr := make(map[string][]string)
	sch := make(map[string]*jsonschema.Schema)
	for k, v := range s.Dependencies {
		switch v := v.(type) {
		case []string:
			arr[k] = v
		case *jsonschema.Schema:
			sch[k] = v
		}
	}
	for k, v := range s.DependentRequired {
		arr[k] = v
	}
	for k, v := range s.DependentSchemas {
		sch[k] = v
	}
	return arr, sch
}

func stringSet(vs []string) map[string]bool {
	m := make(map[string]bool, len(vs))
	for _, v := range vs {
		m[v] = true
	}
	return m
}

func unionKeys[V any](a, b map[string]V) []string {
	keys := sortedKeys(a)
	for _, k := range sortedKeys(b) {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	return keys
}

// arrayModel is an array schema seen as Confluent's loader sees it,
// whatever the draft: one schema for all items, or a tuple followed by
// additional items.
type arrayModel struct {
	all        *jsonschema.Schema
	tuple      []*jsonschema.Schema
	permits    bool
	additional *jsonschema.Schema
}

func arrayModelOf(s *jsonschema.Schema) arrayModel {
	m := arrayModel{permits: true}
	switch it := s.Items.(type) {
	case *jsonschema.Schema:
		m.all = it
	case []*jsonschema.Schema:
		m.tuple = it
	}
	switch ai := s.AdditionalItems.(type) {
	case bool:
		m.permits = ai
	case *jsonschema.Schema:
		m.additional = ai
	}
	if len(s.PrefixItems) > 0 {
		m.tuple = s.PrefixItems
		if it := s.Items2020; it != nil {
			if it.Bool != nil {
				m.permits = *it.Bool
			} else {
				m.additional = it
			}
		}
	} else if s.Items2020 != nil {
		m.all = s.Items2020
	}
	return m
}

func (m arrayModel) open() bool { return m.permits && m.additional == nil }

func (c *jctx) compareArray(o, u *jsonschema.Schema) {
	om, um := arrayModelOf(o), arrayModelOf(u)
	c.enter("items")
	c.compareSchemas(om.all, um.all)
	c.leave()
	n := min(len(om.tuple), len(um.tuple))
	for i := 0; i < n; i++ {
		c.enter(fmt.Sprintf("items/%d", i))
		c.compareSchemas(om.tuple[i], um.tuple[i])
		c.leave()
	}
	for i := n; i < len(om.tuple); i++ { // removed items
		c.enter(fmt.Sprintf("items/%d", i))
		switch {
		case um.open():
			c.add("ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL")
		case um.additional != nil:
			s := c.trialSchemas(om.tuple[i], um.additional)
			c.merge(s)
			if s.compatible() {
				c.add("ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
			} else {
				c.add("ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
			}
		case c.view(om.tuple[i]).kind == jkFalse:
			c.add("ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL")
		default:
			c.add("ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL")
		}
		c.leave()
	}
	for i := n; i < len(um.tuple); i++ { // added items
		c.enter(fmt.Sprintf("items/%d", i))
		switch {
		case om.open() && c.view(um.tuple[i]).kind == jkEmpty:
			c.add("ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL")
		case om.open():
			c.add("ITEM_ADDED_TO_OPEN_CONTENT_MODEL")
		case om.additional != nil:
			s := c.trialSchemas(om.additional, um.tuple[i])
			c.merge(s)
			if s.compatible() {
				c.add("ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
			} else {
				c.add("ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL")
			}
		default:
			c.add("ITEM_ADDED_TO_CLOSED_CONTENT_MODEL")
		}
		c.leave()
	}
	c.enter("additionalItems")
	switch {
	case om.permits != um.permits && om.permits:
		c.add("ADDITIONAL_ITEMS_REMOVED")
	case om.permits != um.permits:
		c.add("ADDITIONAL_ITEMS_ADDED")
	case om.additional == nil && um.additional != nil:
		c.add("ADDITIONAL_ITEMS_NARROWED")
	case om.additional != nil && um.additional == nil:
		c.add("ADDITIONAL_ITEMS_EXTENDED")
	default:
		c.compareSchemas(om.additional, um.additional)
	}
	c.leave()
	c.bound("maxItems", "MAX_ITEMS", ratOf(o.MaxItems), ratOf(u.MaxItems))
	c.bound("minItems", "MIN_ITEMS", ratOf(o.MinItems), ratOf(u.MinItems))
	if o.UniqueItems != u.UniqueItems {
		if o.UniqueItems {
			c.addAt("uniqueItems", "UNIQUE_ITEMS_REMOVED")
		} else {
			c.addAt("uniqueItems", "UNIQUE_ITEMS_ADDED")
		}
	}
}

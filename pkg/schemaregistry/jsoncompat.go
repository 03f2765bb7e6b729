package schemaregistry

import (
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// JSON Schema compatibility follows Confluent's JsonSchema diff
// (json-schema-provider .../json/diff, with its default STRICT policy),
// documented at
// https://docs.confluent.io/platform/current/schema-registry/fundamentals/serdes-develop/serdes-json.html#json-schema-compatibility-rules
// and explained in https://yokota.blog/2021/03/29/understanding-json-schema-compatibility/.
// The schema whose documents are read is the original, the reading one
// the update; every difference found has a kind, and the update can read
// the original's documents when all kinds are in jsonCompatible.
//
// Covered, with Confluent's outcome:
//   - types: a different type is incompatible (any type to true/{} or from
//     false is fine); integer to number is compatible, number to integer
//     not; adding a branch to a union (type list, anyOf, oneOf) is
//     compatible, removing one not; allOf may lose members;
//   - objects, by content model: the original is open when
//     additionalProperties is absent or true (and there are no
//     patternProperties), closed when false, partially open when a schema.
//     Removing a property is compatible from an open update, or when the
//     update's additionalProperties/patternProperties schema covers it,
//     or when it was false; adding one is compatible to a closed or
//     covering original, and to an open original only with the schema
//     true/{} (so optional properties can be added to closed models and
//     removed from open ones, not the reverse); making a property required
//     is compatible only with a default, dropping required is compatible;
//     opening additionalProperties is compatible, closing it not;
//     dependencies may be narrowed or removed;
//   - bounds: maxLength, maxItems, maxProperties, maximum and
//     exclusiveMaximum may grow or go, their minimum counterparts may
//     shrink or go, pattern may go, multipleOf may be divided or go;
//     adding or tightening any of them is incompatible; uniqueItems may
//     go, not come;
//   - enums may gain values, not lose or change them; const may not change;
//   - arrays: items compared recursively, tuple items by position against
//     the other side's content model;
//   - not: compared reversed.
//
// Not covered: if/then/else, propertyNames, contains, unevaluated* (other
// than unevaluatedProperties: true counting as open), $ref siblings
// (ignored, draft-07 style), dynamic references; these never make a change
// incompatible. Cycles through $ref are assumed compatible where they
// close.
var jsonCompatible = setOf(
	"SCHEMA_REMOVED",
	"TYPE_EXTENDED",
	"MAX_LENGTH_INCREASED",
	"MAX_LENGTH_REMOVED",
	"MIN_LENGTH_DECREASED",
	"MIN_LENGTH_REMOVED",
	"PATTERN_REMOVED",
	"MAXIMUM_INCREASED",
	"MAXIMUM_REMOVED",
	"MINIMUM_DECREASED",
	"MINIMUM_REMOVED",
	"EXCLUSIVE_MAXIMUM_INCREASED",
	"EXCLUSIVE_MAXIMUM_REMOVED",
	"EXCLUSIVE_MINIMUM_DECREASED",
	"EXCLUSIVE_MINIMUM_REMOVED",
	"MULTIPLE_OF_REDUCED",
	"MULTIPLE_OF_REMOVED",
	"REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED",
	"REQUIRED_ATTRIBUTE_REMOVED",
	"DEPENDENCY_ARRAY_NARROWED",
	"DEPENDENCY_ARRAY_REMOVED",
	"DEPENDENCY_SCHEMA_REMOVED",
	"MAX_PROPERTIES_INCREASED",
	"MAX_PROPERTIES_REMOVED",
	"MIN_PROPERTIES_DECREASED",
	"MIN_PROPERTIES_REMOVED",
	"ADDITIONAL_PROPERTIES_ADDED",
	"ADDITIONAL_PROPERTIES_EXTENDED",
	"PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL",
	"REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL",
	"OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL",
	"PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL",
	"PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL",
	"PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
	"PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
	"MAX_ITEMS_INCREASED",
	"MAX_ITEMS_REMOVED",
	"MIN_ITEMS_DECREASED",
	"MIN_ITEMS_REMOVED",
	"UNIQUE_ITEMS_REMOVED",
	"ADDITIONAL_ITEMS_ADDED",
	"ADDITIONAL_ITEMS_EXTENDED",
	"ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL",
	"ITEM_ADDED_TO_CLOSED_CONTENT_MODEL",
	"ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL",
	"ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL",
	"ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
	"ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
	"ENUM_ARRAY_EXTENDED",
	"COMBINED_TYPE_EXTENDED",
	"PRODUCT_TYPE_NARROWED",
	"SUM_TYPE_EXTENDED",
	"NOT_TYPE_NARROWED",
)

func setOf(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// jsonIncompatibilities returns the incompatible differences between
// original (the data's schema) and update (the reader's).
func jsonIncompatibilities(original, update *jsonschema.Schema) []string {
	c := &jctx{jshared: &jshared{
		views:  make(map[*jsonschema.Schema]*jnode),
		active: make(map[[2]*jnode]bool),
		memo:   make(map[[2]*jnode][]jdiff),
	}}
	c.compareSchemas(original, update)
	if c.tooBig {
		return []string{fmt.Sprintf("COMPATIBILITY_CHECK_TOO_COMPLEX: the schemas need more than %d comparisons", maxJSONCompareSteps)}
	}
	var out []string
	for _, d := range c.diffs {
		if !jsonCompatible[d.kind] {
			out = append(out, fmt.Sprintf("%s at #%s", d.kind, d.path))
		}
	}
	return out
}

// jkind is the kind of a schema node, as Confluent's loader (everit)
// models schemas.
type jkind int

const (
	jkEmpty jkind = iota // true, {}: anything
	jkFalse              // false: nothing
	jkObject
	jkArray
	jkString
	jkNumber
	jkBoolean
	jkNull
	jkEnum
	jkConst
	jkCombined // allOf, anyOf, oneOf, a type list, or several of the above in one schema
	jkNot
)

// jnode is a schema seen as one kind. A schema with several facets (a type
// and an enum, say) is an allOf of one node per facet.
type jnode struct {
	kind    jkind
	s       *jsonschema.Schema // the constraints
	integer bool               // jkNumber: type integer
	crit    string             // jkCombined: allOf, anyOf or oneOf
	subs    []*jnode           // jkCombined
}

type jdiff struct{ kind, path string }

// jctx collects the differences found at a place in the schemas.
type jctx struct {
	diffs     []jdiff
	path      []string
	truncated bool // a cycle was assumed compatible: results are not memoized
	*jshared
}

// jshared is what the contexts of one comparison share.
type jshared struct {
	views  map[*jsonschema.Schema]*jnode
	active map[[2]*jnode]bool    // pairs being compared: a cycle closes as compatible
	memo   map[[2]*jnode][]jdiff // pairs compared, with paths relative to the pair
	steps  int                   // pairs compared, bounded by maxJSONCompareSteps
	tooBig bool                  // the bound was hit
}

// maxJSONCompareSteps bounds the work of one comparison (pairs of schema
// nodes compared): beyond it the schemas are reported incompatible rather
// than tying up the registry.
const maxJSONCompareSteps = 50_000

func (c *jctx) add(kind string) {
	c.diffs = append(c.diffs, jdiff{kind, strings.Join(c.path, "")})
}

func (c *jctx) addAt(elem, kind string) {
	c.enter(elem)
	c.add(kind)
	c.leave()
}

func (c *jctx) enter(elem string) { c.path = append(c.path, "/"+elem) }
func (c *jctx) leave()            { c.path = c.path[:len(c.path)-1] }

// sub returns a context for a trial comparison at the same place.
func (c *jctx) sub() *jctx {
	return &jctx{path: slices.Clone(c.path), jshared: c.jshared}
}

func (c *jctx) compatible() bool {
	for _, d := range c.diffs {
		if !jsonCompatible[d.kind] {
			return false
		}
	}
	return true
}

func (c *jctx) merge(s *jctx) {
	c.diffs = append(c.diffs, s.diffs...)
	c.truncated = c.truncated || s.truncated
}

// deref follows $ref (its siblings ignored, as draft-07 does).
func deref(s *jsonschema.Schema) *jsonschema.Schema {
	for i := 0; s != nil && s.Ref != nil && i < 64; i++ {
		s = s.Ref
	}
	return s
}

func (c *jctx) view(s *jsonschema.Schema) *jnode {
	s = deref(s)
	if n, ok := c.views[s]; ok {
		return n
	}
	n := &jnode{s: s}
	c.views[s] = n // before the facets: a cycle through $ref finds it
	if s.Bool != nil {
		n.kind = jkEmpty
		if !*s.Bool {
			n.kind = jkFalse
		}
		return n
	}
	var facets []*jnode
	if s.Types != nil && !s.Types.IsEmpty() {
		var typed []*jnode
		for _, t := range s.Types.ToStrings() {
			typed = append(typed, typedNode(s, t))
		}
		if len(typed) == 1 {
			facets = append(facets, typed[0])
		} else {
			facets = append(facets, &jnode{kind: jkCombined, s: s, crit: "anyOf", subs: typed})
		}
	} else {
		// Without a type, the keywords present imply the constraints.
		if s.Properties != nil || s.Required != nil || s.AdditionalProperties != nil || s.PatternProperties != nil ||
			s.MinProperties != nil || s.MaxProperties != nil || s.Dependencies != nil || s.DependentRequired != nil ||
			s.DependentSchemas != nil {
			facets = append(facets, typedNode(s, "object"))
		}
		if s.Items != nil || s.AdditionalItems != nil || s.PrefixItems != nil || s.Items2020 != nil ||
			s.MinItems != nil || s.MaxItems != nil || s.UniqueItems {
			facets = append(facets, typedNode(s, "array"))
		}
		if s.MinLength != nil || s.MaxLength != nil || s.Pattern != nil {
			facets = append(facets, typedNode(s, "string"))
		}
		if s.Minimum != nil || s.Maximum != nil || s.ExclusiveMinimum != nil || s.ExclusiveMaximum != nil || s.MultipleOf != nil {
			facets = append(facets, typedNode(s, "number"))
		}
	}
	if s.Enum != nil {
		facets = append(facets, &jnode{kind: jkEnum, s: s})
	}
	if s.Const != nil {
		facets = append(facets, &jnode{kind: jkConst, s: s})
	}
	for _, cb := range []struct {
		crit string
		subs []*jsonschema.Schema
	}{{"allOf", s.AllOf}, {"anyOf", s.AnyOf}, {"oneOf", s.OneOf}} {
		if len(cb.subs) == 0 {
			continue
		}
		cn := &jnode{kind: jkCombined, s: s, crit: cb.crit}
		for _, sub := range cb.subs {
			cn.subs = append(cn.subs, c.view(sub))
		}
		facets = append(facets, cn)
	}
	if s.Not != nil {
		facets = append(facets, &jnode{kind: jkNot, s: s})
	}
	switch len(facets) {
	case 0:
		n.kind = jkEmpty
	case 1:
		*n = *facets[0]
	default:
		n.kind, n.crit, n.subs = jkCombined, "allOf", facets
	}
	return n
}

func typedNode(s *jsonschema.Schema, t string) *jnode {
	switch t {
	case "object":
		return &jnode{kind: jkObject, s: s}
	case "array":
		return &jnode{kind: jkArray, s: s}
	case "string":
		return &jnode{kind: jkString, s: s}
	case "integer":
		return &jnode{kind: jkNumber, s: s, integer: true}
	case "number":
		return &jnode{kind: jkNumber, s: s}
	case "boolean":
		return &jnode{kind: jkBoolean, s: s}
	}
	return &jnode{kind: jkNull, s: s}
}

func (c *jctx) compareSchemas(o, u *jsonschema.Schema) {
	switch {
	case o == nil && u == nil:
	case o == nil:
		c.add("SCHEMA_ADDED")
	case u == nil:
		c.add("SCHEMA_REMOVED")
	default:
		c.compare(c.view(o), c.view(u))
	}
}

// compare compares two nodes, each pair once: results are memoized (with
// paths relative to the pair), which keeps unions of unions polynomial,
// except those that relied on a cycle being compatible.
func (c *jctx) compare(o, u *jnode) {
	key := [2]*jnode{o, u}
	diffs, ok := c.memo[key]
	if !ok {
		if c.active[key] {
			c.truncated = true
			return
		}
		if c.steps++; c.steps > maxJSONCompareSteps {
			c.tooBig = true
			return
		}
		c.active[key] = true
		s := &jctx{jshared: c.jshared}
		s.compareNodes(o, u)
		delete(c.active, key)
		if !s.truncated {
			c.memo[key] = s.diffs
		}
		c.truncated = c.truncated || s.truncated
		diffs = s.diffs
	}
	prefix := strings.Join(c.path, "")
	for _, d := range diffs {
		c.diffs = append(c.diffs, jdiff{d.kind, prefix + d.path})
	}
}

func (c *jctx) compareNodes(o, u *jnode) {
	// A single schema against a union: it suffices to match a branch.
	if o.kind != jkCombined && u.kind == jkCombined {
		if len(u.subs) == 1 {
			if s := c.trial(o, u.subs[0]); s.compatible() {
				c.merge(s)
				return
			}
		} else if u.crit != "allOf" {
			for _, b := range u.subs {
				if s := c.trial(o, b); s.compatible() {
					c.merge(s)
					c.add("SUM_TYPE_EXTENDED")
					return
				}
			}
		}
	} else if o.kind == jkCombined && u.kind != jkCombined {
		if len(o.subs) == 1 {
			if s := c.trial(o.subs[0], u); s.compatible() {
				c.merge(s)
				return
			}
		} else if o.crit == "allOf" {
			for _, b := range o.subs {
				if s := c.trial(b, u); s.compatible() {
					c.merge(s)
					c.add("PRODUCT_TYPE_NARROWED")
					return
				}
			}
		}
	}
	if o.kind != u.kind {
		if o.kind == jkFalse || u.kind == jkEmpty {
			return
		}
		c.add("TYPE_CHANGED")
		return
	}
	switch o.kind {
	case jkString:
		c.compareString(o.s, u.s)
	case jkNumber:
		c.compareNumber(o, u)
	case jkEnum:
		c.compareEnum(o.s, u.s)
	case jkConst:
		if jsonText(*o.s.Const) != jsonText(*u.s.Const) {
			c.addAt("const", "ENUM_ARRAY_CHANGED")
		}
	case jkCombined:
		c.compareCombined(o, u)
	case jkNot:
		c.enter("not")
		if s := c.trialSchemas(u.s.Not, o.s.Not); s.compatible() { // reversed
			c.add("NOT_TYPE_NARROWED")
		} else {
			c.add("NOT_TYPE_EXTENDED")
		}
		c.leave()
	case jkObject:
		c.compareObject(o.s, u.s)
	case jkArray:
		c.compareArray(o.s, u.s)
	}
}

// trial compares at the current place without recording: the caller
// merges the result if it wants it. A truncation taints the caller either
// way.
func (c *jctx) trial(o, u *jnode) *jctx {
	s := c.sub()
	s.compare(o, u)
	c.truncated = c.truncated || s.truncated
	return s
}

func (c *jctx) trialSchemas(o, u *jsonschema.Schema) *jctx {
	s := c.sub()
	s.compareSchemas(o, u)
	c.truncated = c.truncated || s.truncated
	return s
}

// bound compares an optional bound (keyword name, difference prefix
// kind): it is added, removed, increased or decreased.
func (c *jctx) bound(name, kind string, o, u *big.Rat) {
	switch {
	case o == nil && u == nil:
	case o == nil:
		c.addAt(name, kind+"_ADDED")
	case u == nil:
		c.addAt(name, kind+"_REMOVED")
	case o.Cmp(u) < 0:
		c.addAt(name, kind+"_INCREASED")
	case o.Cmp(u) > 0:
		c.addAt(name, kind+"_DECREASED")
	}
}

func ratOf(n *int) *big.Rat {
	if n == nil {
		return nil
	}
	return new(big.Rat).SetInt64(int64(*n))
}

func (c *jctx) compareString(o, u *jsonschema.Schema) {
	c.bound("maxLength", "MAX_LENGTH", ratOf(o.MaxLength), ratOf(u.MaxLength))
	c.bound("minLength", "MIN_LENGTH", ratOf(o.MinLength), ratOf(u.MinLength))
	switch {
	case o.Pattern == nil && u.Pattern != nil:
		c.addAt("pattern", "PATTERN_ADDED")
	case o.Pattern != nil && u.Pattern == nil:
		c.addAt("pattern", "PATTERN_REMOVED")
	case o.Pattern != nil && o.Pattern.String() != u.Pattern.String():
		c.addAt("pattern", "PATTERN_CHANGED")
	}
}

func (c *jctx) compareNumber(o, u *jnode) {
	c.bound("maximum", "MAXIMUM", o.s.Maximum, u.s.Maximum)
	c.bound("minimum", "MINIMUM", o.s.Minimum, u.s.Minimum)
	c.bound("exclusiveMaximum", "EXCLUSIVE_MAXIMUM", o.s.ExclusiveMaximum, u.s.ExclusiveMaximum)
	c.bound("exclusiveMinimum", "EXCLUSIVE_MINIMUM", o.s.ExclusiveMinimum, u.s.ExclusiveMinimum)
	om, um := o.s.MultipleOf, u.s.MultipleOf
	switch {
	case om == nil && um == nil:
	case om == nil:
		c.addAt("multipleOf", "MULTIPLE_OF_ADDED")
	case um == nil:
		c.addAt("multipleOf", "MULTIPLE_OF_REMOVED")
	case om.Cmp(um) == 0:
	case divides(om, um):
		c.addAt("multipleOf", "MULTIPLE_OF_EXPANDED")
	case divides(um, om):
		c.addAt("multipleOf", "MULTIPLE_OF_REDUCED")
	default:
		c.addAt("multipleOf", "MULTIPLE_OF_CHANGED")
	}
	if o.integer != u.integer {
		if o.integer {
			c.add("TYPE_EXTENDED")
		} else {
			c.add("TYPE_NARROWED")
		}
	}
}

// divides reports whether b is a whole multiple of a.
func divides(a, b *big.Rat) bool {
	if a.Sign() == 0 {
		return false
	}
	return new(big.Rat).Quo(b, a).IsInt()
}

// jsonText is a JSON value's text with object keys sorted, for comparing
// values.
func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func valueSet(vs []any) map[string]bool {
	m := make(map[string]bool, len(vs))
	for _, v := range vs {
		m[jsonText(v)] = true
	}
	return m
}

func contains(a, b map[string]bool) bool {
	for k := range b {
		if !a[k] {
			return false
		}
	}
	return true
}

func (c *jctx) compareEnum(o, u *jsonschema.Schema) {
	ov, uv := valueSet(o.Enum.Values), valueSet(u.Enum.Values)
	switch {
	case len(ov) == len(uv) && contains(ov, uv):
	case contains(uv, ov):
		c.addAt("enum", "ENUM_ARRAY_EXTENDED")
	case contains(ov, uv):
		c.addAt("enum", "ENUM_ARRAY_NARROWED")
	default:
		c.addAt("enum", "ENUM_ARRAY_CHANGED")
	}
}

func (c *jctx) compareCombined(o, u *jnode) {
	single := func(n *jnode) bool { return len(n.subs) == 1 }
	if o.crit != u.crit {
		if u.crit == "anyOf" || (single(o) && single(u)) || (single(o) && u.crit == "oneOf") ||
			(single(u) && o.crit == "allOf") {
			c.add("COMBINED_TYPE_EXTENDED")
		} else {
			c.add("COMBINED_TYPE_CHANGED")
			return
		}
	}
	switch {
	case len(o.subs) < len(u.subs) && u.crit == "allOf":
		c.add("PRODUCT_TYPE_EXTENDED")
	case len(o.subs) < len(u.subs):
		c.add("SUM_TYPE_EXTENDED")
	case len(o.subs) > len(u.subs) && o.crit != "allOf":
		c.add("SUM_TYPE_NARROWED")
	case len(o.subs) > len(u.subs):
		c.add("PRODUCT_TYPE_NARROWED")
	}
	// Pair branches by a maximum matching of compatible pairs; every
	// branch of the smaller side must be matched.
	trials := make([][]*jctx, len(o.subs))
	for i, ob := range o.subs {
		trials[i] = make([]*jctx, len(u.subs))
		c.enter(fmt.Sprintf("%s/%d", o.crit, i))
		for j, ub := range u.subs {
			if s := c.trial(ob, ub); s.compatible() {
				trials[i][j] = s
			}
		}
		c.leave()
	}
	match := maxMatching(len(o.subs), len(u.subs), func(i, j int) bool { return trials[i][j] != nil })
	n := 0
	for i, j := range match {
		if j >= 0 {
			c.merge(trials[i][j])
			n++
		}
	}
	if n < min(len(o.subs), len(u.subs)) {
		c.add("COMBINED_TYPE_SUBSCHEMAS_CHANGED")
	}
}

// maxMatching returns, for each left vertex, its partner in a maximum
// bipartite matching (or -1), by augmenting paths.
func maxMatching(nl, nr int, edge func(i, j int) bool) []int {
	left := make([]int, nl)
	right := make([]int, nr)
	for i := range left {
		left[i] = -1
	}
	for j := range right {
		right[j] = -1
	}
	var try func(i int, seen []bool) bool
	try = func(i int, seen []bool) bool {
		for j := 0; j < nr; j++ {
			if !edge(i, j) || seen[j] {
				continue
			}
			seen[j] = true
			if right[j] < 0 || try(right[j], seen) {
				left[i], right[j] = j, i
				return true
			}
		}
		return false
	}
	for i := 0; i < nl; i++ {
		try(i, make([]bool, nr))
	}
	return left
}

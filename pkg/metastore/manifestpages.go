package metastore

// How a manifest is laid out in items.
//
// Head, sort key "<partition>" (where single-item manifests always lived):
//
//	{"leaderEpoch":E, "start":S, "segments":[ref, ...]}                       no pages
//	{"leaderEpoch":E, "start":S, "segments":{"pages":[{"id":I,"n":N}, ...],
//	                                         "skip":K, "tail":[ref, ...]}}   paged
//
// Page, sort key "<partition>/<id>": a JSON array of refs. The manifest is
// the pages' refs in list order, less the first K of the first page (expired:
// expiry drops whole pages, and skips into the first), followed by the tail.
//
// The paged head keeps the field name "segments" with an object for a
// value on purpose: a broker of an earlier version fails to decode it (and
// so never writes the partition) instead of reading a partial manifest and
// writing it back. A manifest without pages keeps the old shape, which both
// versions read.
//
// A page id is "<target>-<nonce>": target is the head version the write
// that adds it produces (the version read plus one), nonce is random, so
// two writers never collide and a page is never overwritten. A page no head
// references is garbage once the head's version has reached its target
// (the write that would have referenced it can no longer succeed); readers
// list such pages and the next write deletes them.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
)

// Paging bounds. The tail is sealed into pages when it passes tailRefs or
// tailBytes; a page grows (by being rewritten under a new id, with the tail
// appended) up to pageBytes. The head's page list costs about 50 bytes a
// page, so a head stays under MaxItemBytes up to about ten million refs.
const (
	manifestTailRefs  = 64
	manifestTailBytes = 32 << 10
	manifestPageBytes = 256 << 10
)

// errPageMissing is returned when a head names a page the read did not
// find: a concurrent write replaced it (read again) or it was lost.
var errPageMissing = errors.New("manifest page missing")

// manifestLayout is how one version of a manifest is stored. It is never
// modified once built, and shares its refs with the layouts before and
// after it, never with a caller's Segments.
type manifestLayout struct {
	version int64
	epoch   int32
	pages   []manifestPage
	skip    int          // refs at the start of pages[0] that are not part of the manifest
	tail    []SegmentRef // refs after the last page, held in the head
	orphans []string     // page ids found unreferenced that no write can reference any more
}

type manifestPage struct {
	id    string
	refs  []SegmentRef
	bytes int // its encoded size
}

type manifestHead struct {
	LeaderEpoch int32           `json:"leaderEpoch"`
	StartOffset int64           `json:"start,omitempty"`
	Segments    json.RawMessage `json:"segments"`
}

type pagedSegments struct {
	Pages []pageEntry  `json:"pages"`
	Skip  int          `json:"skip,omitempty"`
	Tail  []SegmentRef `json:"tail"`
}

// pagedSegmentsOut is pagedSegments with the tail encoded already.
type pagedSegmentsOut struct {
	Pages []pageEntry     `json:"pages"`
	Skip  int             `json:"skip,omitempty"`
	Tail  json.RawMessage `json:"tail"`
}

type pageEntry struct {
	ID string `json:"id"`
	N  int    `json:"n"`
}

// freshPage is a page a write adds, with its encoded value.
type freshPage struct {
	page  manifestPage
	value []byte
}

// manifestPlan is the layout a write produces from the stored one.
type manifestPlan struct {
	pages   []manifestPage // the new head's pages, in order
	fresh   []freshPage    // those among them to write first
	skip    int
	tail    []SegmentRef
	tailRaw []byte   // tail encoded as a JSON array
	dropped []string // ids of stored pages the new head no longer references
}

// planManifest lays segs out reusing lay's pages: those that segs still
// holds whole, in order, after the refs dropped from the front (at most
// the first may be entered part-way, by skipping), are kept; the rest of
// segs becomes the tail, or is sealed into pages when the tail grows past
// its bounds, merged into the last kept page while that stays under
// manifestPageBytes. target is the head version the write will produce.
func planManifest(lay *manifestLayout, segs []SegmentRef, target int64) manifestPlan {
	from, to, skip, used := keptPages(lay, segs)
	var plan manifestPlan
	plan.pages = slices.Clone(lay.pages[from:to])
	for i, pg := range lay.pages {
		if i < from || i >= to {
			plan.dropped = append(plan.dropped, pg.id)
		}
	}
	plan.skip = skip
	rest := segs[used:]
	restRaw := []byte("[]")
	if len(rest) > 0 {
		restRaw = encodeJSON(rest)
	}
	restBytes := len(restRaw)
	if len(rest) <= manifestTailRefs && restBytes <= manifestTailBytes {
		plan.tailRaw = restRaw
		if len(rest) > 0 {
			plan.tail = slices.Clone(rest)
		}
		if len(plan.pages) == 0 {
			plan.pages = nil // as a read builds it
		}
		return plan
	}
	plan.tailRaw = []byte("[]")
	seal := rest
	if n := len(plan.pages); n > 0 && plan.pages[n-1].bytes+restBytes <= manifestPageBytes {
		last := plan.pages[n-1]
		lastSkip := 0
		if n == 1 {
			lastSkip, plan.skip = plan.skip, 0
		}
		seal = append(slices.Clone(last.refs[lastSkip:]), rest...)
		plan.pages = plan.pages[:n-1]
		plan.dropped = append(plan.dropped, last.id)
	}
	for _, chunk := range packRefs(seal, manifestPageBytes) {
		pg := manifestPage{
			id:    fmt.Sprintf("%012d-%016x", target, rand.Uint64()),
			refs:  slices.Clone(chunk.refs),
			bytes: len(chunk.value),
		}
		plan.pages = append(plan.pages, pg)
		plan.fresh = append(plan.fresh, freshPage{page: pg, value: chunk.value})
	}
	return plan
}

// keptPages finds the stored pages segs still holds: lay.pages[from:to],
// the first entered at skip, which account for segs[:used].
func keptPages(lay *manifestLayout, segs []SegmentRef) (from, to, skip, used int) {
	if len(segs) == 0 {
		return 0, 0, 0, 0
	}
	// The page holding segs[0], past the refs dropped from the front.
	found := false
	for i, pg := range lay.pages {
		start := 0
		if i == 0 {
			start = lay.skip
		}
		if j := slices.Index(pg.refs[start:], segs[0]); j >= 0 {
			from, skip, found = i, start+j, true
			break
		}
	}
	if !found {
		return 0, 0, 0, 0
	}
	first := lay.pages[from].refs[skip:]
	if len(segs) < len(first) || !slices.Equal(segs[:len(first)], first) {
		return 0, 0, 0, 0
	}
	to, used = from+1, len(first)
	for to < len(lay.pages) {
		refs := lay.pages[to].refs
		if len(segs)-used < len(refs) || !slices.Equal(segs[used:used+len(refs)], refs) {
			break
		}
		to, used = to+1, used+len(refs)
	}
	return from, to, skip, used
}

type packed struct {
	refs  []SegmentRef
	value []byte
}

// packRefs cuts refs into JSON arrays of at most limit bytes (a ref larger
// than limit gets an array of its own, which the store may refuse as too
// large).
func packRefs(refs []SegmentRef, limit int) []packed {
	var out []packed
	var cur bytes.Buffer
	start := 0
	for i, r := range refs {
		b := encodeJSON(r)
		if cur.Len() > 0 && cur.Len()+len(b)+2 > limit {
			cur.WriteByte(']')
			out = append(out, packed{refs: refs[start:i], value: bytes.Clone(cur.Bytes())})
			cur.Reset()
			start = i
		}
		if cur.Len() == 0 {
			cur.WriteByte('[')
		} else {
			cur.WriteByte(',')
		}
		cur.Write(b)
	}
	if cur.Len() > 0 {
		cur.WriteByte(']')
		out = append(out, packed{refs: refs[start:], value: bytes.Clone(cur.Bytes())})
	}
	return out
}

func encodeManifestHead(epoch int32, start int64, plan manifestPlan) []byte {
	var segs []byte
	if len(plan.pages) == 0 && plan.skip == 0 {
		segs = plan.tailRaw // the single-item shape, which earlier versions read
	} else {
		ps := pagedSegmentsOut{Skip: plan.skip, Tail: plan.tailRaw}
		for _, pg := range plan.pages {
			ps.Pages = append(ps.Pages, pageEntry{ID: pg.id, N: len(pg.refs)})
		}
		segs = encodeJSON(ps)
	}
	return encodeJSON(manifestHead{LeaderEpoch: epoch, StartOffset: start, Segments: segs})
}

func decodeManifestEpoch(it Item) (int32, error) {
	var h manifestHead
	if err := decodeJSON(it, &h); err != nil {
		return 0, err
	}
	return h.LeaderEpoch, nil
}

// decodeManifest builds a manifest from the items of one partition's
// manifest (its head at sort key headSK, and its pages).
func decodeManifest(headSK string, items []Item) (Manifest, error) {
	var head *Item
	pages := map[string]Item{}
	for i, it := range items {
		switch {
		case it.SK == headSK:
			head = &items[i]
		case strings.HasPrefix(it.SK, headSK+"/"):
			pages[it.SK[len(headSK)+1:]] = it
		}
	}
	if head == nil {
		return Manifest{}, nil // pages without a head: a deletion under way
	}
	var h manifestHead
	if err := decodeJSON(*head, &h); err != nil {
		return Manifest{}, err
	}
	man := Manifest{LeaderEpoch: h.LeaderEpoch, StartOffset: h.StartOffset, Version: head.Version}
	lay := &manifestLayout{version: head.Version, epoch: h.LeaderEpoch}
	raw := bytes.TrimSpace(h.Segments)
	switch {
	case len(raw) == 0 || bytes.Equal(raw, []byte("null")):
	case raw[0] == '[':
		if err := json.Unmarshal(raw, &lay.tail); err != nil {
			return Manifest{}, fmt.Errorf("metastore: decode %s: %w", head.Key, err)
		}
	default:
		var ps pagedSegments
		if err := json.Unmarshal(raw, &ps); err != nil {
			return Manifest{}, fmt.Errorf("metastore: decode %s: %w", head.Key, err)
		}
		for _, e := range ps.Pages {
			it, ok := pages[e.ID]
			if !ok {
				return Manifest{}, fmt.Errorf("%s names page %s: %w", head.Key, e.ID, errPageMissing)
			}
			delete(pages, e.ID)
			var refs []SegmentRef
			if err := decodeJSON(it, &refs); err != nil {
				return Manifest{}, err
			}
			if len(refs) != e.N || len(refs) == 0 {
				return Manifest{}, fmt.Errorf("metastore: page %s holds %d refs, the head says %d", it.Key, len(refs), e.N)
			}
			lay.pages = append(lay.pages, manifestPage{id: e.ID, refs: refs, bytes: len(it.Value)})
		}
		if len(lay.pages) > 0 && (ps.Skip < 0 || ps.Skip >= len(lay.pages[0].refs)) {
			return Manifest{}, fmt.Errorf("metastore: %s skips %d of %d refs", head.Key, ps.Skip, len(lay.pages[0].refs))
		}
		lay.skip, lay.tail = ps.Skip, ps.Tail
	}
	if len(lay.tail) == 0 {
		lay.tail = nil
	}
	for id := range pages {
		if target, ok := pageTarget(id); ok && target <= head.Version {
			lay.orphans = append(lay.orphans, id)
		}
	}
	slices.Sort(lay.orphans)
	for i, pg := range lay.pages {
		refs := pg.refs
		if i == 0 {
			refs = refs[lay.skip:]
		}
		man.Segments = append(man.Segments, refs...)
	}
	man.Segments = append(man.Segments, lay.tail...)
	man.layout = lay
	return man, nil
}

// pageTarget returns the head version the write that added page id was to
// produce.
func pageTarget(id string) (int64, bool) {
	v, _, ok := strings.Cut(id, "-")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil
}

package dlqconsole

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratamq/strata/pkg/retry"
)

// TopicSummary is one .dlq topic in GET /api/topics.
type TopicSummary struct {
	Topic       string          `json:"topic"`
	OriginTopic string          `json:"originTopic"`
	Letters     int64           `json:"letters"` // left to handle
	Partitions  []PartitionInfo `json:"partitions"`
}

// PartitionInfo is one partition of a .dlq topic.
type PartitionInfo struct {
	Partition       int32 `json:"partition"`
	LogStartOffset  int64 `json:"logStartOffset"`
	LogEndOffset    int64 `json:"logEndOffset"`
	CommittedOffset int64 `json:"committedOffset"` // the console group's; -1: none
	Letters         int64 `json:"letters"`
}

// Header is a record header, its value made safe to show.
type Header struct {
	Key   string `json:"key"`
	Value Shown  `json:"value"`
}

// Letter is one dead letter.
type Letter struct {
	Topic           string          `json:"topic"`
	Partition       int32           `json:"partition"`
	Offset          int64           `json:"offset"`
	Timestamp       time.Time       `json:"timestamp"`
	OriginTopic     string          `json:"originTopic,omitempty"`
	OriginPartition int32           `json:"originPartition"`
	OriginOffset    int64           `json:"originOffset"`
	Attempts        int             `json:"attempts"`
	FirstFailure    *time.Time      `json:"firstFailure,omitempty"`
	LastError       string          `json:"lastError,omitempty"`
	Function        string          `json:"function,omitempty"`
	Replays         int             `json:"replays"`
	ReplayedAt      *time.Time      `json:"replayedAt,omitempty"`
	Handled         bool            `json:"handled"`               // already replayed or purged by the console
	HeaderError     string          `json:"headerError,omitempty"` // retry headers that do not parse, or name a foreign origin
	Key             Shown           `json:"key"`
	Value           Shown           `json:"value"`
	Headers         []Header        `json:"headers,omitempty"` // only for one letter
	History         []retry.Failure `json:"history,omitempty"` // only for one letter
}

// listPreview is how much of a key or value lists show.
const listPreview = 512

func (c *Console) letter(ctx context.Context, topic string, r *kgo.Record, full bool, handled bool) Letter {
	l := Letter{Topic: topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp.UTC(), Handled: handled}
	st, ok, err := retry.Parse(r.Headers)
	if err == nil && ok && st.OriginTopic != "" {
		err = st.CheckOrigin(topic) // shown, so nobody wonders why its replay is refused
	}
	if err != nil {
		l.HeaderError = err.Error()
	}
	l.OriginTopic, l.OriginPartition, l.OriginOffset = st.OriginTopic, st.OriginPartition, st.OriginOffset
	l.Attempts, l.LastError, l.Function, l.Replays = st.Attempts, st.LastError, st.Function, st.Replays
	if !st.FirstFailure.IsZero() {
		t := st.FirstFailure.UTC()
		l.FirstFailure = &t
	}
	if !st.ReplayedAt.IsZero() {
		t := st.ReplayedAt.UTC()
		l.ReplayedAt = &t
	}
	l.Key, l.Value = c.show(ctx, r.Key), c.show(ctx, r.Value)
	if !full {
		l.Key, l.Value = l.Key.truncate(listPreview), l.Value.truncate(listPreview)
		return l
	}
	l.History = st.History
	for _, h := range r.Headers {
		l.Headers = append(l.Headers, Header{Key: h.Key, Value: plainShown(h.Value)})
	}
	return l
}

func (c *Console) topicSummaries(ctx context.Context) ([]TopicSummary, error) {
	topics, err := c.dlqTopics(ctx)
	if err != nil {
		return nil, err
	}
	out := []TopicSummary{}
	if len(topics) == 0 {
		return out, nil
	}
	states, err := c.state(ctx, topics...)
	if err != nil {
		return nil, err
	}
	for _, t := range topics {
		ts := states[t]
		s := TopicSummary{Topic: t, OriginTopic: strings.TrimSuffix(t, retry.DLQSuffix), Partitions: []PartitionInfo{}}
		for _, p := range ts.partitions() {
			ps := ts.parts[p]
			n := ps.count()
			s.Letters += n
			s.Partitions = append(s.Partitions, PartitionInfo{Partition: p, LogStartOffset: ps.logStart, LogEndOffset: ps.end, CommittedOffset: ps.commit, Letters: n})
		}
		out = append(out, s)
	}
	return out, nil
}

func (c *Console) apiTopics(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), c.timeout)
	defer cancel()
	s, err := c.topicSummaries(ctx)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, 200, map[string]any{"topics": s})
}

// LetterPage is the answer of GET /api/topics/{topic}/letters.
type LetterPage struct {
	Topic   string   `json:"topic"`
	Letters []Letter `json:"letters"`
	Next    string   `json:"next,omitempty"` // ?after= for the next page
}

const (
	defaultLimit = 100
	maxLimit     = 1000
)

func parseListQuery(q url.Values) (limit int, after *LetterRef, err error) {
	limit = defaultLimit
	if s := q.Get("limit"); s != "" {
		n, perr := strconv.Atoi(s)
		if perr != nil || n < 1 || n > maxLimit {
			return 0, nil, errorf(400, "bad limit %q: want 1 to %d", s, maxLimit)
		}
		limit = n
	}
	if s := q.Get("after"); s != "" {
		ps, os, ok := strings.Cut(s, ":")
		if !ok {
			return 0, nil, errorf(400, "bad after %q: want partition:offset", s)
		}
		ref, perr := parseRef(ps, os)
		if perr != nil {
			return 0, nil, perr
		}
		after = &ref
	}
	return limit, after, nil
}

func parseRef(ps, os string) (LetterRef, error) {
	p, err := strconv.ParseInt(ps, 10, 32)
	if err != nil || p < 0 {
		return LetterRef{}, errorf(400, "bad partition %q: want an integer >= 0", ps)
	}
	o, err := strconv.ParseInt(os, 10, 64)
	if err != nil || o < 0 {
		return LetterRef{}, errorf(400, "bad offset %q: want an integer >= 0", os)
	}
	return LetterRef{Partition: int32(p), Offset: o}, nil
}

func (c *Console) letterPage(ctx context.Context, topic string, limit int, after *LetterRef) (LetterPage, error) {
	states, err := c.state(ctx, topic)
	if err != nil {
		return LetterPage{}, err
	}
	recs, more, err := c.listLetters(ctx, states[topic], after, limit)
	if err != nil {
		return LetterPage{}, err
	}
	page := LetterPage{Topic: topic, Letters: []Letter{}}
	for _, r := range recs {
		page.Letters = append(page.Letters, c.letter(ctx, topic, r, false, false))
	}
	if more && len(recs) > 0 {
		last := recs[len(recs)-1]
		page.Next = fmt.Sprintf("%d:%d", last.Partition, last.Offset)
	}
	return page, nil
}

func (c *Console) apiLetters(w http.ResponseWriter, r *http.Request) {
	limit, after, err := parseListQuery(r.URL.Query())
	if err != nil {
		writeError(w, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), c.timeout)
	defer cancel()
	page, err := c.letterPage(ctx, r.PathValue("topic"), limit, after)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, 200, page)
}

func (c *Console) oneLetter(ctx context.Context, topic, ps, os string) (Letter, error) {
	ref, err := parseRef(ps, os)
	if err != nil {
		return Letter{}, err
	}
	states, err := c.state(ctx, topic)
	if err != nil {
		return Letter{}, err
	}
	ts := states[topic]
	rec, err := c.readOne(ctx, ts, ref.Partition, ref.Offset)
	if err != nil {
		return Letter{}, err
	}
	return c.letter(ctx, topic, rec, true, ts.parts[ref.Partition].hidden(ref.Offset)), nil
}

func (c *Console) apiLetter(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), c.timeout)
	defer cancel()
	l, err := c.oneLetter(ctx, r.PathValue("topic"), r.PathValue("partition"), r.PathValue("offset"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, 200, l)
}

// ReplayRequest is the body of POST /api/topics/{topic}/replay.
type ReplayRequest struct {
	Letters []LetterRef `json:"letters"`
	Force   bool        `json:"force"`
}

// PurgeRequest is the body of POST /api/topics/{topic}/purge: purge every
// letter up to and including each UpTo entry's offset in its partition,
// exactly the letters in Letters, or, with All, every letter of the topic.
type PurgeRequest struct {
	UpTo    []LetterRef `json:"upTo"`
	Letters []LetterRef `json:"letters"`
	All     bool        `json:"all"`
}

// checkJSONPost rejects cross-site and non-JSON posts.
func checkJSONPost(r *http.Request) error {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return errorf(http.StatusUnsupportedMediaType, "Content-Type must be application/json")
	}
	return checkSameOrigin(r)
}

// checkSameOrigin refuses requests a browser marks as cross-site.
func checkSameOrigin(r *http.Request) error {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return errorf(http.StatusForbidden, "cross-site request refused")
	}
	if o := r.Header.Get("Origin"); o != "" && o != "null" {
		u, err := url.Parse(o)
		if err != nil || u.Host != r.Host {
			return errorf(http.StatusForbidden, "cross-origin request refused (Origin %q, Host %q)", o, r.Host)
		}
	}
	return nil
}

func decodeBody(r *http.Request, v any) error {
	if err := checkJSONPost(r); err != nil {
		return err
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errorf(400, "malformed JSON body: %v", err)
	}
	if dec.More() {
		return errorf(400, "malformed JSON body: more than one value")
	}
	return nil
}

func checkRefs(refs []LetterRef) error {
	for _, r := range refs {
		if r.Partition < 0 || r.Offset < 0 {
			return errorf(400, "bad letter %d@%d: partition and offset must be >= 0", r.Partition, r.Offset)
		}
	}
	return nil
}

func (c *Console) apiReplay(w http.ResponseWriter, r *http.Request) {
	var req ReplayRequest
	if err := decodeBody(r, &req); err != nil {
		writeError(w, err)
		return
	}
	if err := checkRefs(req.Letters); err != nil {
		writeError(w, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 2*c.timeout)
	defer cancel()
	res, err := c.replay(ctx, r.PathValue("topic"), req.Letters, req.Force)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, 200, map[string]any{"replayed": res})
}

func (c *Console) purge(ctx context.Context, topic string, req PurgeRequest) error {
	if !req.All && len(req.UpTo) == 0 && len(req.Letters) == 0 {
		return errorf(400, `name what to purge: "upTo", "letters" or "all": true`)
	}
	if err := checkRefs(append(req.UpTo, req.Letters...)); err != nil {
		return err
	}
	states, err := c.state(ctx, topic)
	if err != nil {
		return err
	}
	ts := states[topic]
	upTo, offsets := map[int32]int64{}, map[int32][]int64{}
	check := func(ref LetterRef) error {
		if _, ok := ts.parts[ref.Partition]; !ok {
			return errorf(404, "topic %q has no partition %d", topic, ref.Partition)
		}
		return nil
	}
	for _, ref := range req.UpTo {
		if err := check(ref); err != nil {
			return err
		}
		upTo[ref.Partition] = max(upTo[ref.Partition], ref.Offset)
	}
	for _, ref := range req.Letters {
		if err := check(ref); err != nil {
			return err
		}
		offsets[ref.Partition] = append(offsets[ref.Partition], ref.Offset)
	}
	if req.All {
		for p, ps := range ts.parts {
			upTo[p] = ps.end - 1
		}
	}
	return c.markDone(ctx, ts, offsets, upTo)
}

func (c *Console) apiPurge(w http.ResponseWriter, r *http.Request) {
	var req PurgeRequest
	if err := decodeBody(r, &req); err != nil {
		writeError(w, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), c.timeout)
	defer cancel()
	if err := c.purge(ctx, r.PathValue("topic"), req); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, 200, map[string]any{"purged": true})
}

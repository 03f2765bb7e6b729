// Package retry is Strata's convention for failed records: a record whose
// handler fails moves to <topic>.retry with headers saying where it came
// from and how it failed, is redelivered when due, and after the last
// attempt moves to <topic>.dlq with its whole failure history, where a
// person can inspect, replay or purge it.
package retry

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Header keys. Values are UTF-8 text; times are RFC 3339 with milliseconds
// in UTC.
const (
	HeaderAttempts        = "strata.retry.attempts"         // failed deliveries so far (1 after the first failure)
	HeaderOriginTopic     = "strata.retry.origin.topic"     // where the record was first produced
	HeaderOriginPartition = "strata.retry.origin.partition" // its partition there
	HeaderOriginOffset    = "strata.retry.origin.offset"    // its offset there
	HeaderFirstFailure    = "strata.retry.first-failure"    // time of the first failure
	HeaderLastError       = "strata.retry.last-error"       // text of the last failure
	HeaderNotBefore       = "strata.retry.not-before"       // do not redeliver before this time
	HeaderFunction        = "strata.retry.function"         // the handler or Lambda function that failed
	HeaderHistory         = "strata.retry.history"          // JSON array of Failure, oldest first
	HeaderReplayedAt      = "strata.dlq.replayed-at"        // set on a record replayed from the DLQ
	HeaderReplays         = "strata.dlq.replays"            // how many times it was replayed
)

// Suffixes of the retry and dead-letter topics of a topic.
const (
	RetrySuffix = ".retry"
	DLQSuffix   = ".dlq"
)

// RetryTopic and DLQTopic name the companions of an origin topic.
func RetryTopic(origin string) string { return origin + RetrySuffix }
func DLQTopic(origin string) string   { return origin + DLQSuffix }

// Failure is one failed delivery.
type Failure struct {
	Attempt int       `json:"attempt"`
	At      time.Time `json:"at"`
	Error   string    `json:"error"`
}

// State is what the headers of a retried or dead record say.
type State struct {
	Attempts        int
	OriginTopic     string
	OriginPartition int32
	OriginOffset    int64
	FirstFailure    time.Time
	LastError       string
	NotBefore       time.Time
	Function        string
	History         []Failure
	ReplayedAt      time.Time
	Replays         int
}

const timeLayout = "2006-01-02T15:04:05.000Z07:00"

// FormatTime renders t as header values do.
func FormatTime(t time.Time) string { return t.UTC().Format(timeLayout) }

// Parse reads the retry headers of r. A record without them (a first
// delivery) gives the zero State and ok false; malformed values are errors.
func Parse(headers []kgo.RecordHeader) (st State, ok bool, err error) {
	for _, h := range headers {
		v := string(h.Value)
		var perr error
		switch h.Key {
		case HeaderAttempts:
			st.Attempts, perr = strconv.Atoi(v)
			ok = true
		case HeaderOriginTopic:
			st.OriginTopic = v
		case HeaderOriginPartition:
			var p int64
			p, perr = strconv.ParseInt(v, 10, 32)
			st.OriginPartition = int32(p)
		case HeaderOriginOffset:
			st.OriginOffset, perr = strconv.ParseInt(v, 10, 64)
		case HeaderFirstFailure:
			st.FirstFailure, perr = time.Parse(timeLayout, v)
		case HeaderLastError:
			st.LastError = v
		case HeaderNotBefore:
			st.NotBefore, perr = time.Parse(timeLayout, v)
		case HeaderFunction:
			st.Function = v
		case HeaderHistory:
			perr = json.Unmarshal(h.Value, &st.History)
		case HeaderReplayedAt:
			st.ReplayedAt, perr = time.Parse(timeLayout, v)
		case HeaderReplays:
			st.Replays, perr = strconv.Atoi(v)
		default:
			continue
		}
		if perr != nil {
			return State{}, false, fmt.Errorf("retry: header %s=%q: %w", h.Key, v, perr)
		}
	}
	return st, ok, nil
}

// Headers renders st, replacing any retry headers in keep (the record's
// other headers are kept as they are, in order).
func (st State) Headers(keep []kgo.RecordHeader) []kgo.RecordHeader {
	out := make([]kgo.RecordHeader, 0, len(keep)+11)
	for _, h := range keep {
		if !isRetryHeader(h.Key) {
			out = append(out, h)
		}
	}
	add := func(k, v string) { out = append(out, kgo.RecordHeader{Key: k, Value: []byte(v)}) }
	add(HeaderAttempts, strconv.Itoa(st.Attempts))
	add(HeaderOriginTopic, st.OriginTopic)
	add(HeaderOriginPartition, strconv.Itoa(int(st.OriginPartition)))
	add(HeaderOriginOffset, strconv.FormatInt(st.OriginOffset, 10))
	if !st.FirstFailure.IsZero() {
		add(HeaderFirstFailure, FormatTime(st.FirstFailure))
	}
	if st.LastError != "" {
		add(HeaderLastError, st.LastError)
	}
	if !st.NotBefore.IsZero() {
		add(HeaderNotBefore, FormatTime(st.NotBefore))
	}
	if st.Function != "" {
		add(HeaderFunction, st.Function)
	}
	if len(st.History) > 0 {
		b, _ := json.Marshal(st.History) // Failure always encodes
		add(HeaderHistory, string(b))
	}
	if !st.ReplayedAt.IsZero() {
		add(HeaderReplayedAt, FormatTime(st.ReplayedAt))
		add(HeaderReplays, strconv.Itoa(st.Replays))
	}
	return out
}

func isRetryHeader(k string) bool {
	switch k {
	case HeaderAttempts, HeaderOriginTopic, HeaderOriginPartition, HeaderOriginOffset, HeaderFirstFailure,
		HeaderLastError, HeaderNotBefore, HeaderFunction, HeaderHistory, HeaderReplayedAt, HeaderReplays:
		return true
	}
	return false
}

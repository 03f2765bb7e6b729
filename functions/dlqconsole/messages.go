package dlqconsole

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// The message browser: a page of one partition's records from an offset,
// or from the first record at or after a timestamp, with keys and values
// decoded through the schema registry (show).

const (
	defaultMessages = 20
	maxMessages     = 100  // records per page
	messagePreview  = 4096 // bytes of a key or value shown
)

// MessageQuery is what the browser was asked for.
type MessageQuery struct {
	Partition int32
	Offset    int64 // -1: the newest page (or From is set)
	From      time.Time
	Limit     int
}

// Message is one record of the browser.
type Message struct {
	Partition int32
	Offset    int64
	Timestamp time.Time
	Key       Shown
	Value     Shown
	Headers   []Header
}

// MessagesPage is one page of the browser.
type MessagesPage struct {
	Topic      string
	Partitions []int32
	Query      MessageQuery
	FromText   string // the time asked for, as given
	Start, End int64  // the partition's log start offset and high watermark
	Messages   []Message
	Older      string // query of the previous page; "" at the start
	Newer      string // query of the next page; "" at the end
	Note       string
}

// parseMessageQuery reads partition, offset, time and limit; each bad one
// is a 400 naming its parameter.
func parseMessageQuery(q url.Values) (MessageQuery, string, error) {
	mq := MessageQuery{Offset: -1, Limit: defaultMessages}
	if s := q.Get("partition"); s != "" {
		p, err := strconv.ParseInt(s, 10, 32)
		if err != nil || p < 0 {
			return mq, "", errorf(http.StatusBadRequest, "invalid partition %q: want an integer >= 0", s)
		}
		mq.Partition = int32(p)
	}
	if s := q.Get("offset"); s != "" {
		o, err := strconv.ParseInt(s, 10, 64)
		if err != nil || o < 0 {
			return mq, "", errorf(http.StatusBadRequest, "invalid offset %q: want an integer >= 0", s)
		}
		mq.Offset = o
	}
	from := q.Get("time")
	if from != "" {
		// The form sends both; a time given wins.
		mq.Offset = -1
		t, err := parseTime(from)
		if err != nil {
			return mq, "", errorf(http.StatusBadRequest, "invalid time %q: want RFC 3339 (2026-12-02T03:04:05Z) or Unix milliseconds", from)
		}
		mq.From = t
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxMessages {
			return mq, "", errorf(http.StatusBadRequest, "invalid limit %q: want 1 to %d", s, maxMessages)
		}
		mq.Limit = n
	}
	return mq, from, nil
}

func parseTime(s string) (time.Time, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		if ms < 0 || ms > 1<<53 {
			return time.Time{}, strconv.ErrRange
		}
		return time.UnixMilli(ms).UTC(), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, strconv.ErrSyntax
}

func (c *Console) messagesPage(ctx context.Context, topic string, mq MessageQuery, fromText string) (MessagesPage, error) {
	t, err := c.topicDetail(ctx, topic)
	if err != nil {
		return MessagesPage{}, err
	}
	p := MessagesPage{Topic: topic, Query: mq, FromText: fromText}
	for _, pd := range t.Partitions.Sorted() {
		p.Partitions = append(p.Partitions, pd.Partition)
	}
	if _, ok := t.Partitions[mq.Partition]; !ok {
		return p, errorf(http.StatusNotFound, "topic %q has no partition %d (it has %d)", topic, mq.Partition, len(t.Partitions))
	}
	starts, err := c.adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return p, kafkaError("list offsets of "+topic, err)
	}
	ends, err := c.adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return p, kafkaError("list offsets of "+topic, err)
	}
	s, _ := starts.Lookup(topic, mq.Partition)
	e, _ := ends.Lookup(topic, mq.Partition)
	if s.Err != nil || e.Err != nil {
		return p, kafkaError("list offsets of "+topic, firstErr(s.Err, e.Err))
	}
	p.Start, p.End = s.Offset, e.Offset
	from := mq.Offset
	switch {
	case !mq.From.IsZero():
		lo, err := c.adm.ListOffsetsAfterMilli(ctx, mq.From.UnixMilli(), topic)
		if err != nil {
			return p, kafkaError("list offsets by time of "+topic, err)
		}
		o, ok := lo.Lookup(topic, mq.Partition)
		if !ok || o.Err != nil {
			return p, kafkaError("list offsets by time of "+topic, firstErr(o.Err))
		}
		from = o.Offset // the high watermark when no record is that new
		if from < 0 {
			from = p.End
		}
	case from < 0:
		from = max(p.Start, p.End-int64(mq.Limit))
	}
	if from < p.Start {
		p.Note = "offset " + strconv.FormatInt(from, 10) + " is before the log start; showing from " + strconv.FormatInt(p.Start, 10)
		from = p.Start
	}
	p.Query.Offset = from
	if from >= p.End {
		if p.Note == "" {
			p.Note = "no records at or after this position yet: the partition ends at offset " + strconv.FormatInt(p.End, 10)
		}
	} else {
		recs, err := c.readRecords(ctx, topic, map[int32]int64{mq.Partition: from}, map[int32]int64{mq.Partition: p.End}, mq.Limit,
			func(int32, int64) bool { return true }, func(int32, int64) bool { return false })
		if err != nil {
			return p, err
		}
		for _, r := range recs[mq.Partition] {
			m := Message{Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp.UTC(),
				Key: c.show(ctx, r.Key).truncate(messagePreview), Value: c.show(ctx, r.Value).truncate(messagePreview)}
			for _, h := range r.Headers {
				m.Headers = append(m.Headers, Header{Key: h.Key, Value: plainShown(h.Value).truncate(256)})
			}
			p.Messages = append(p.Messages, m)
		}
	}
	q := func(o int64) string {
		return url.Values{"partition": {strconv.Itoa(int(mq.Partition))}, "offset": {strconv.FormatInt(o, 10)}, "limit": {strconv.Itoa(mq.Limit)}}.Encode()
	}
	if from > p.Start {
		p.Older = q(max(p.Start, from-int64(mq.Limit)))
	}
	next := from + int64(mq.Limit)
	if n := len(p.Messages); n > 0 {
		next = p.Messages[n-1].Offset + 1
	}
	if next < p.End {
		p.Newer = q(next)
	}
	return p, nil
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return errorf(http.StatusBadGateway, "kafka gave no offset")
}

package metrics

import (
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/pkg/segment"
)

// Received counts a parsed request.
func (m *Broker) Received(key int16) {
	if m != nil {
		m.requests.WithLabelValues(kmsg.NameForKey(key)).Inc()
	}
}

// Responded records what one request cost and what its response says: the
// latency from frame read to response write, its non-zero error codes and,
// for Fetch, the records and bytes sent. resp is nil for requests that get
// none (acks=0 produce) or that were answered with a pre-encoded frame.
func (m *Broker) Responded(key int16, req kmsg.Request, resp kmsg.Response, took time.Duration) {
	if m == nil {
		return
	}
	api := kmsg.NameForKey(key)
	m.latency.WithLabelValues(api).Observe(took.Seconds())
	if resp == nil {
		return
	}
	m.countErrors(api, resp)
	if r, ok := resp.(*kmsg.FetchResponse); ok {
		replica := false
		if fr, ok := req.(*kmsg.FetchRequest); ok {
			replica = fr.ReplicaID >= 0
		}
		m.fetched(r, replica)
	}
}

// fetched counts the batches of a Fetch response by topic.
func (m *Broker) fetched(r *kmsg.FetchResponse, replica bool) {
	for _, t := range r.Topics {
		var records, bytes int
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
				continue
			}
			bytes += len(p.RecordBatches)
			if !replica {
				records += countRecords(p.RecordBatches)
			}
		}
		if bytes == 0 {
			continue
		}
		m.label(t.Topic)
		if replica {
			m.replicaFetchBytes.WithLabelValues(t.Topic).Add(float64(bytes))
			continue
		}
		m.fetchBytes.WithLabelValues(t.Topic).Add(float64(bytes))
		m.fetchRecords.WithLabelValues(t.Topic).Add(float64(records))
	}
}

// FetchedRecords counts records a consumer's Fetch answer sent that its
// record sets do not show: the broker's sendfile spans, whose record sets
// in the response are zero-filled placeholders (countRecords finds no
// batch in them).
func (m *Broker) FetchedRecords(topic string, n int) {
	if m == nil || n == 0 {
		return
	}
	m.label(topic)
	m.fetchRecords.WithLabelValues(topic).Add(float64(n))
}

// SentFile counts record bytes a Fetch answer sent with sendfile.
func (m *Broker) SentFile(n int64) {
	if m == nil || n == 0 {
		return
	}
	m.sendfileBytes.Add(float64(n))
}

// countRecords sums the record counts of the whole batches in data (a
// trailing partial batch, which Kafka may send, is not counted).
func countRecords(data []byte) int {
	n := 0
	for len(data) > 0 {
		h, err := segment.ParseHeader(data)
		if err != nil || h.Size() <= 0 || h.Size() > len(data) {
			break
		}
		n += int(h.NumRecords)
		data = data[h.Size():]
	}
	return n
}

// countErrors counts every non-zero error code of a response: each
// partition's of Produce and Fetch, the top-level and per-item codes of the
// other APIs clients use routinely.
func (m *Broker) countErrors(api string, resp kmsg.Response) {
	count := func(code int16) {
		if code != 0 {
			m.errors.WithLabelValues(api, errorName(code)).Inc()
		}
	}
	switch r := resp.(type) {
	case *kmsg.ProduceResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				count(p.ErrorCode)
			}
		}
	case *kmsg.FetchResponse:
		count(r.ErrorCode)
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				count(p.ErrorCode)
			}
		}
	case *kmsg.ListOffsetsResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				count(p.ErrorCode)
			}
		}
	case *kmsg.MetadataResponse:
		for _, t := range r.Topics {
			count(t.ErrorCode)
		}
	case *kmsg.OffsetCommitResponse:
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				count(p.ErrorCode)
			}
		}
	case *kmsg.OffsetFetchResponse:
		count(r.ErrorCode)
		for _, g := range r.Groups {
			count(g.ErrorCode)
		}
	case *kmsg.CreateTopicsResponse:
		for _, t := range r.Topics {
			count(t.ErrorCode)
		}
	case *kmsg.DeleteTopicsResponse:
		for _, t := range r.Topics {
			count(t.ErrorCode)
		}
	case *kmsg.FindCoordinatorResponse:
		count(r.ErrorCode)
		for _, c := range r.Coordinators {
			count(c.ErrorCode)
		}
	case *kmsg.JoinGroupResponse:
		count(r.ErrorCode)
	case *kmsg.SyncGroupResponse:
		count(r.ErrorCode)
	case *kmsg.HeartbeatResponse:
		count(r.ErrorCode)
	case *kmsg.LeaveGroupResponse:
		count(r.ErrorCode)
	case *kmsg.ApiVersionsResponse:
		count(r.ErrorCode)
	case *kmsg.InitProducerIDResponse:
		count(r.ErrorCode)
	case *kmsg.DescribeClusterResponse:
		count(r.ErrorCode)
	case *kmsg.ListGroupsResponse:
		count(r.ErrorCode)
	case *kmsg.DescribeGroupsResponse:
		for _, g := range r.Groups {
			count(g.ErrorCode)
		}
	case *kmsg.DeleteGroupsResponse:
		for _, g := range r.Groups {
			count(g.ErrorCode)
		}
	}
}

// errorName is the Kafka name of an error code (UNKNOWN_TOPIC_OR_PARTITION),
// or the number for a code kerr does not know.
func errorName(code int16) string {
	if e, ok := kerr.ErrorForCode(code).(*kerr.Error); ok && e.Code == code {
		return e.Message
	}
	return strconv.Itoa(int(code))
}

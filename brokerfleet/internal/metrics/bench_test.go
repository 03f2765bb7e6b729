package metrics

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// BenchmarkMetricsRequestPath is the metrics cost one Produce request of
// one partition adds on the request path (frame read to response write):
// the request count, the appended records and bytes, the latency and the
// error-code scan.
func BenchmarkMetricsRequestPath(b *testing.B) {
	m := New()
	req := kmsg.NewPtrProduceRequest()
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	rt := kmsg.NewProduceResponseTopic()
	rt.Topic = "bench"
	rt.Partitions = append(rt.Partitions, kmsg.NewProduceResponseTopicPartition())
	resp.Topics = append(resp.Topics, rt)
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		m.Received(0)
		m.Produced("bench", 10, 1000)
		m.Responded(0, req, resp, time.Since(start))
	}
}

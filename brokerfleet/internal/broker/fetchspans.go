package broker

import (
	"unsafe"

	"github.com/stratamq/strata/brokerfleet/internal/metrics"
	"github.com/stratamq/strata/pkg/segment"
)

// On a plain TCP connection a large record set is not read at all: the
// fetch takes it as a span of its segment file (segment.Log.ReadSpan) and
// the connection's writer sends it with sendfile(2), so the bytes go from
// the page cache to the socket without passing through the broker.
//
// In the response, the record set is a placeholder of the same length, a
// slice of hole (sendfile_linux.go) whose position names the span: byte k
// of hole starts the placeholder of the answer's span k. fetchFrame cuts
// the frame at record sets anyway and sends a placeholder's span in its
// place. Nothing else reads record bytes of an answer on its way out;
// what counts them (metrics, quotas, the fetch session) reads lengths,
// and the metrics take a span's record count from the span.

const (
	// spanMinBytes is the smallest record set left in its file: below it
	// the read's two copies (into the broker, out to the socket) cost
	// less than the span's header walk and its own sendfile and writev
	// calls. A producer spreading over many partitions sends batches of
	// tens of KiB, so the line sits well below them.
	spanMinBytes = 16 << 10
	// maxSpanBytes and maxSpans bound the placeholders; a larger record
	// set or more spans in one answer are read as before.
	maxSpanBytes = 64 << 20
	maxSpans     = 4096
)

// heldSpan is a span of an answer and its topic (for the metrics).
type heldSpan struct {
	span  *segment.Span
	topic string
}

// hold takes sp into the answer and returns its placeholder, or false
// (sp is then the caller's).
func (bs *fetchBufs) hold(sp *segment.Span, topic string) ([]byte, bool) {
	k := len(bs.spans)
	if hole == nil || k >= maxSpans || sp.Len > maxSpanBytes {
		return nil, false
	}
	bs.spans = append(bs.spans, heldSpan{span: sp, topic: topic})
	return hole[k : k+int(sp.Len)], true
}

// spanOf returns the span whose placeholder set is, or nil for a record
// set of bytes.
func (bs *fetchBufs) spanOf(set []byte) *segment.Span {
	if bs == nil || len(hole) == 0 || len(set) == 0 {
		return nil
	}
	k := uintptr(unsafe.Pointer(unsafe.SliceData(set))) - uintptr(unsafe.Pointer(unsafe.SliceData(hole)))
	if k >= uintptr(len(bs.spans)) { // also below hole: wraps around
		return nil
	}
	if sp := bs.spans[k].span; int64(len(set)) == sp.Len {
		return sp
	}
	return nil
}

// countSpans adds the bytes an answer sent from files to the metrics,
// and for a consumer (not replica) the records of its spans (the metrics
// count the records of byte record sets themselves).
func (bs *fetchBufs) countSpans(m *metrics.Broker, replica bool) {
	if bs == nil {
		return
	}
	for _, h := range bs.spans {
		m.SentFile(h.span.Len)
		if !replica {
			m.FetchedRecords(h.topic, h.span.Records)
		}
	}
}

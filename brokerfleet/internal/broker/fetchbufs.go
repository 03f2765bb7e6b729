package broker

import (
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fetch read buffers come from a pool and go back once the answer is
// written (writeResponses), so a consumer's or follower's fetch reads
// the log into memory the previous fetch used instead of a new, zeroed
// allocation per partition (they were most of a broker's allocations).
//
// A buffer belongs to one answer: fetchRead takes them (buf) and keeps
// the list, an answer it does not send gives its buffers back at once
// (discard), and the one it sends is registered under the response
// (pooledAnswers) until the writer has written it and the metrics have
// counted it. Record sets from elsewhere (the tier, its cache) are never
// in the list, so they are never pooled.
var fetchBufPool = sync.Pool{New: func() any { return new([]byte) }} // sized by its first read

// maxPooledFetchBuf is the largest buffer kept: a follower's 8 MiB
// partition read (grown by doubling, so up to twice that) is kept, a
// larger one is not pinned for a small consumer's next fetch.
const maxPooledFetchBuf = 16<<20 + 128<<10

// pooledAnswers maps a *kmsg.FetchResponse being sent to its *fetchBufs.
var pooledAnswers sync.Map

// fetchBufs are the pooled buffers of one answer, and the record sets it
// leaves in their segment files (spans, fetchspans.go).
type fetchBufs struct {
	pooled []*[]byte
	spans  []heldSpan
}

// take returns an empty buffer from the pool, noted in bs, if a read
// from offset below end can return records (ok); else nothing (an idle
// partition of a 1,000-partition fetch takes no buffer).
func (bs *fetchBufs) take(offset, end int64) (buf []byte, ok bool) {
	if offset >= end {
		return nil, false
	}
	b := fetchBufPool.Get().(*[]byte)
	bs.pooled = append(bs.pooled, b)
	return (*b)[:0], true
}

// keep records that the buffer taken last (if took) now holds data, which
// may have grown past it (a new array: that one is pooled instead).
func (bs *fetchBufs) keep(took bool, data []byte) {
	if n := len(bs.pooled); n > 0 && took && cap(data) > 0 {
		*bs.pooled[n-1] = data[:0]
	}
}

// poisonFetchBufs, set by tests, overwrites every buffer given back, so
// an answer written from a buffer after its release shows it.
var poisonFetchBufs atomic.Bool

// release gives every buffer back and closes the spans.
func (bs *fetchBufs) release() {
	for _, b := range bs.pooled {
		if poisonFetchBufs.Load() {
			full := (*b)[:cap(*b)]
			for i := range full {
				full[i] = 0xA5
			}
		}
		if cap(*b) <= maxPooledFetchBuf {
			fetchBufPool.Put(b)
		}
	}
	for _, h := range bs.spans {
		_ = h.span.Close()
	}
	bs.pooled, bs.spans = nil, nil
}

// sendWith registers bs as resp's buffers, released by answered.
func (bs *fetchBufs) sendWith(resp *kmsg.FetchResponse) {
	if len(bs.pooled) > 0 || len(bs.spans) > 0 {
		held := *bs
		pooledAnswers.Store(resp, &held)
		*bs = fetchBufs{}
	}
}

// heldBy returns what resp holds (nil: nothing pooled, no spans).
func heldBy(resp *kmsg.FetchResponse) *fetchBufs {
	if v, ok := pooledAnswers.Load(resp); ok {
		return v.(*fetchBufs)
	}
	return nil
}

// answered releases the buffers of a response once it is written and
// counted: nothing reads its record sets afterwards.
func answered(resp kmsg.Response) {
	fr, ok := resp.(*kmsg.FetchResponse)
	if !ok {
		return
	}
	if v, ok := pooledAnswers.LoadAndDelete(fr); ok {
		v.(*fetchBufs).release()
	}
}

//go:build chaos

package chaos

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"
)

// Op types, as in Jepsen: an operation is invoked, then completes ok (it
// happened), fail (it certainly did not happen) or info (unknown: a
// timeout or a lost connection may or may not have applied it).
const (
	Invoke = "invoke"
	OK     = "ok"
	Fail   = "fail"
	Info   = "info"
)

// Op functions.
const (
	// FSend is one produced record: invoke carries key and value; ok adds
	// the partition and offset the broker acknowledged.
	FSend = "send"
	// FPoll is one fetch of one partition by an assign-mode consumer: ok
	// carries the records in the order the client returned them.
	FPoll = "poll"
	// FFinal is the final read after healing: ok carries one partition's
	// records from its start to End (the high watermark when it began).
	FFinal = "final"
	// FGroup is what a consumer-group member processed and then committed
	// (ok), from a member process that may be killed at any time.
	FGroup = "group"
	// FNemesis is a fault starting (invoke) or ending (ok); Value says
	// what.
	FNemesis = "nemesis"
)

// Rec is one record a read returned.
type Rec struct {
	Partition int32  `json:"p"`
	Offset    int64  `json:"o"`
	Key       string `json:"k"`
	Value     string `json:"v"`
	Tomb      bool   `json:"tomb,omitempty"` // a null value (compacted topics: a delete)
	// Share-group deliveries: the broker's delivery count, and when the
	// member's client decoded the ShareFetch response that acquired it
	// (Unix nanoseconds, the member's clock).
	Count   int32 `json:"n,omitempty"`
	Fetched int64 `json:"fetched,omitempty"`
}

// Op is one line of a history.
type Op struct {
	Index   int64  `json:"index"`
	Time    int64  `json:"time"` // nanoseconds since the history began
	Process int    `json:"process"`
	Type    string `json:"type"`
	F       string `json:"f"`
	// send
	Key       string `json:"key,omitempty"`
	Value     string `json:"value,omitempty"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	// poll, final, group
	Recs []Rec `json:"recs,omitempty"`
	// final: the partition's end offset the read went up to
	End int64 `json:"end,omitempty"`
	// fail, info: why
	Error string `json:"error,omitempty"`
	// table-send: the write is a delete (a null value)
	Tomb bool `json:"tomb,omitempty"`
	// txn (ok): whether the transaction committed
	Committed bool `json:"committed,omitempty"`
	// share: when the member saw it happen (Unix nanoseconds, its own
	// clock, shared by every process of the machine)
	Wall int64 `json:"wall,omitempty"`
}

// History records operations in order, from many goroutines. Ops get
// their index and time when added.
type History struct {
	mu    sync.Mutex
	start time.Time
	ops   []Op
}

// NewHistory returns an empty history whose clock starts now.
func NewHistory() *History { return &History{start: time.Now()} }

// Add appends op, setting its index and time, and returns the stored op.
func (h *History) Add(op Op) Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	op.Index = int64(len(h.ops))
	op.Time = int64(time.Since(h.start))
	h.ops = append(h.ops, op)
	return op
}

// Ops returns a copy of the operations so far.
func (h *History) Ops() []Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Op(nil), h.ops...)
}

// Elapsed is the history's clock.
func (h *History) Elapsed() time.Duration { return time.Since(h.start) }

// WriteJSONLines writes ops as one JSON object per line.
func WriteJSONLines(w io.Writer, ops []Op) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for _, op := range ops {
		if err := enc.Encode(op); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// ReadJSONLines reads a history written by WriteJSONLines.
func ReadJSONLines(r io.Reader) ([]Op, error) {
	var ops []Op
	dec := json.NewDecoder(r)
	for {
		var op Op
		if err := dec.Decode(&op); err == io.EOF {
			return ops, nil
		} else if err != nil {
			return ops, fmt.Errorf("history line %d: %w", len(ops)+1, err)
		}
		ops = append(ops, op)
	}
}

package bench

import (
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Hist is a latency histogram (HdrHistogram, 1 µs to 5 min at three
// significant digits: exact enough for a p99.9 without keeping samples).
type Hist struct{ h *hdrhistogram.Histogram }

// NewHist returns an empty histogram.
func NewHist() *Hist { return &Hist{h: hdrhistogram.New(1, int64(5*time.Minute/time.Microsecond), 3)} }

// Record adds one latency; values outside the range are clamped.
func (h *Hist) Record(d time.Duration) {
	us := max(int64(d/time.Microsecond), 1)
	if err := h.h.RecordValue(us); err != nil {
		h.h.RecordValue(h.h.HighestTrackableValue())
	}
}

// Latency summarizes a histogram, in microseconds.
type Latency struct {
	Count int64   `json:"count"`
	Mean  float64 `json:"mean_us"`
	P50   int64   `json:"p50_us"`
	P99   int64   `json:"p99_us"`
	P999  int64   `json:"p999_us"`
	Max   int64   `json:"max_us"`
}

// Summary returns the histogram's percentiles.
func (h *Hist) Summary() Latency {
	return Latency{
		Count: h.h.TotalCount(), Mean: h.h.Mean(),
		P50: h.h.ValueAtQuantile(50), P99: h.h.ValueAtQuantile(99), P999: h.h.ValueAtQuantile(99.9), Max: h.h.Max(),
	}
}

// Package latency models the response times of remote services (S3,
// DynamoDB) for the local stand-ins, so `brokerfleet dev` and `brokerfleet
// bench` can show what a deployment would see: each request waits a time
// drawn from a log-normal distribution fitted to a median and a 99th
// percentile, the usual shape of a service's latency (a floor, a body
// near the median, a long right tail).
package latency

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"
)

// Model is a latency distribution given by its median and 99th
// percentile. The zero Model adds nothing.
type Model struct {
	P50, P99 time.Duration
}

// Presets are the named models: published or commonly measured figures
// for requests from the same region.
var Presets = map[string]Model{
	"none": {},
	// S3 Standard PUTs of a few MiB.
	"s3-standard": {P50: 25 * time.Millisecond, P99: 80 * time.Millisecond},
	// S3 Express One Zone (directory buckets) in the client's zone.
	"s3-express": {P50: 4 * time.Millisecond, P99: 10 * time.Millisecond},
	// DynamoDB single-item reads and conditional writes.
	"dynamodb": {P50: 4 * time.Millisecond, P99: 12 * time.Millisecond},
}

// z99 is the standard normal's 99th percentile.
const z99 = 2.3263478740408408

// Parse reads a model: a preset name (none, s3-standard, s3-express,
// dynamodb) or "P50,P99" as two durations (for example 25ms,80ms).
func Parse(s string) (Model, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return Model{}, nil
	}
	if m, ok := Presets[s]; ok {
		return m, nil
	}
	a, b, ok := strings.Cut(s, ",")
	if !ok {
		return Model{}, fmt.Errorf("latency model %q: want one of %s, or p50,p99 (e.g. 25ms,80ms)", s, strings.Join(presetNames(), ", "))
	}
	p50, err := time.ParseDuration(strings.TrimSpace(a))
	if err != nil {
		return Model{}, fmt.Errorf("latency model %q: p50: %v", s, err)
	}
	p99, err := time.ParseDuration(strings.TrimSpace(b))
	if err != nil {
		return Model{}, fmt.Errorf("latency model %q: p99: %v", s, err)
	}
	m := Model{P50: p50, P99: p99}
	if err := m.Validate(); err != nil {
		return Model{}, fmt.Errorf("latency model %q: %w", s, err)
	}
	return m, nil
}

func presetNames() []string {
	var out []string
	for k := range Presets {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Validate checks 0 < P50 <= P99 (or both zero) and bounds them to a
// minute, beyond which a stand-in would only look hung.
func (m Model) Validate() error {
	switch {
	case m.P50 == 0 && m.P99 == 0:
		return nil
	case m.P50 <= 0 || m.P99 < m.P50:
		return fmt.Errorf("want 0 < p50 <= p99, got p50 %v, p99 %v", m.P50, m.P99)
	case m.P99 > time.Minute:
		return fmt.Errorf("p99 %v is over a minute", m.P99)
	}
	return nil
}

// IsZero reports whether m adds no latency.
func (m Model) IsZero() bool { return m.P50 == 0 && m.P99 == 0 }

// String is the model as Parse reads it.
func (m Model) String() string {
	for name, p := range Presets {
		if p == m && name != "none" {
			return name
		}
	}
	if m.IsZero() {
		return "none"
	}
	return m.P50.String() + "," + m.P99.String()
}

// Quantile returns the q-quantile (0 < q < 1) of m.
func (m Model) Quantile(q float64) time.Duration {
	if m.IsZero() {
		return 0
	}
	return m.at(normalQuantile(q))
}

// at is the duration at z standard deviations of the log.
func (m Model) at(z float64) time.Duration {
	mu := math.Log(float64(m.P50))
	sigma := math.Log(float64(m.P99)/float64(m.P50)) / z99
	return time.Duration(math.Exp(mu + sigma*z))
}

// normalQuantile inverts the standard normal CDF by bisection over erf
// (accurate to well under a microsecond of any model here).
func normalQuantile(q float64) float64 {
	lo, hi := -10.0, 10.0
	for range 100 {
		mid := (lo + hi) / 2
		if 0.5*(1+math.Erf(mid/math.Sqrt2)) < q {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}

// Injector draws waits from a model that can be changed while in use
// (the bench measures one run under several models). The zero Injector
// and a nil one add nothing. It is safe for concurrent use.
type Injector struct {
	mu    sync.Mutex
	model Model
	rng   *rand.Rand
}

// NewInjector returns an Injector drawing from m with a fixed seed, so a
// run's sequence of waits can be repeated.
func NewInjector(m Model) *Injector {
	return &Injector{model: m, rng: rand.New(rand.NewPCG(1, 2))}
}

// SetModel changes the model for the waits drawn from now on.
func (in *Injector) SetModel(m Model) {
	in.mu.Lock()
	in.model = m
	in.mu.Unlock()
}

// Model returns the current model.
func (in *Injector) Model() Model {
	if in == nil {
		return Model{}
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.model
}

// Draw returns one wait.
func (in *Injector) Draw() time.Duration {
	if in == nil {
		return 0
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.model.IsZero() {
		return 0
	}
	if in.rng == nil {
		in.rng = rand.New(rand.NewPCG(1, 2))
	}
	return in.model.at(in.rng.NormFloat64())
}

// Wait sleeps one drawn wait, or until ctx ends (its error then).
func (in *Injector) Wait(ctx context.Context) error {
	d := in.Draw()
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

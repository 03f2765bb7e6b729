package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	dto "github.com/prometheus/client_model/go"
)

// StageMetric is the broker histogram the stage breakdown reads.
const StageMetric = "strata_produce_stage_seconds"

// stageOrder is the order of a produce's stages, for the report.
var stageOrder = []string{"append", "follower_fetch_answered", "follower_append", "follower_acked", "high_watermark_advanced", "producer_woken", "response_written"}

// Stage is one produce stage's share of the one-in-flight phase, from the
// target's own histograms (Strata only): follower_fetch_answered,
// follower_acked and high_watermark_advanced count from the leader's
// append; the others are durations of their own.
type Stage struct {
	Name  string  `json:"stage"`
	Count int64   `json:"count"`
	P50   float64 `json:"p50_us"`
	P99   float64 `json:"p99_us"`
}

// stageCounts is, per stage, the cumulative count of each bucket (keyed
// by its upper bound, +Inf included), summed over a target's brokers.
type stageCounts map[string]map[float64]uint64

// Scrape reads every metrics URL (Prometheus text format): one family
// map per URL.
func Scrape(ctx context.Context, urls []string) ([]map[string]*dto.MetricFamily, error) {
	var out []map[string]*dto.MetricFamily
	for _, u := range urls {
		fams, err := scrapeOne(ctx, u)
		if err != nil {
			return nil, fmt.Errorf("metrics of %s: %w", u, err)
		}
		out = append(out, fams)
	}
	return out, nil
}

func scrapeOne(ctx context.Context, u string) (map[string]*dto.MetricFamily, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, errors.New(resp.Status)
	}
	return parseMetrics(resp.Body)
}

// Label returns the value of a metric's label name ("" if it has none).
func Label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// scrapeStages reads StageMetric from every metrics URL.
func scrapeStages(ctx context.Context, urls []string) (stageCounts, error) {
	scraped, err := Scrape(ctx, urls)
	if err != nil {
		return nil, err
	}
	out := stageCounts{}
	for i, fams := range scraped {
		fam := fams[StageMetric]
		if fam == nil {
			return nil, fmt.Errorf("metrics of %s: no %s", urls[i], StageMetric)
		}
		for _, m := range fam.GetMetric() {
			stage, h := Label(m, "stage"), m.GetHistogram()
			if h == nil || stage == "" {
				continue
			}
			b := out[stage]
			if b == nil {
				b = map[float64]uint64{}
				out[stage] = b
			}
			for _, bk := range h.GetBucket() {
				if !math.IsInf(bk.GetUpperBound(), 1) { // the text format lists +Inf too
					b[bk.GetUpperBound()] += bk.GetCumulativeCount()
				}
			}
			b[math.Inf(1)] += h.GetSampleCount()
		}
	}
	return out, nil
}

func parseMetrics(r io.Reader) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	return p.TextToMetricFamilies(r)
}

// stagesBetween returns each stage's percentiles over what was observed
// between two scrapes, interpolated within buckets as Prometheus's
// histogram_quantile does.
func stagesBetween(before, after stageCounts) []Stage {
	var out []Stage
	for _, name := range stageOrder {
		a := after[name]
		if a == nil {
			continue
		}
		bounds := make([]float64, 0, len(a))
		for ub := range a {
			bounds = append(bounds, ub)
		}
		sort.Float64s(bounds)
		cum := make([]uint64, len(bounds))
		for i, ub := range bounds {
			cum[i] = a[ub] - before[name][ub]
		}
		total := cum[len(cum)-1]
		if total == 0 {
			continue
		}
		out = append(out, Stage{Name: name, Count: int64(total),
			P50: 1e6 * bucketQuantile(0.5, bounds, cum), P99: 1e6 * bucketQuantile(0.99, bounds, cum)})
	}
	return out
}

// bucketQuantile is histogram_quantile over sorted upper bounds (the last
// +Inf) and their cumulative counts.
func bucketQuantile(q float64, bounds []float64, cum []uint64) float64 {
	total := float64(cum[len(cum)-1])
	rank := q * total
	for i, c := range cum {
		if float64(c) < rank {
			continue
		}
		if math.IsInf(bounds[i], 1) {
			if i == 0 {
				return 0
			}
			return bounds[i-1] // beyond the last finite bound
		}
		lo, below := 0.0, 0.0
		if i > 0 {
			lo, below = bounds[i-1], float64(cum[i-1])
		}
		if float64(c) == below {
			return bounds[i]
		}
		return lo + (bounds[i]-lo)*(rank-below)/(float64(c)-below)
	}
	return bounds[len(bounds)-1]
}

// stageTable writes the stage breakdown of every result that has one.
func (r *Report) stageTable(w io.Writer) {
	for _, res := range r.Results {
		if len(res.Stages) == 0 {
			continue
		}
		fmt.Fprintf(w, "\nstages, one in flight: %s on %s (p50 / p99 ms; the client saw %.2f / %.2f)\n", res.Workload, res.Target,
			float64(res.OneInFlightLatency.P50)/1000, float64(res.OneInFlightLatency.P99)/1000)
		for _, s := range res.Stages {
			fmt.Fprintf(w, "  %-26s %7.3f / %7.3f   (%d)\n", s.Name, s.P50/1000, s.P99/1000, s.Count)
		}
	}
	if r.hasStages() {
		fmt.Fprintln(w, "follower_fetch_answered, follower_acked and high_watermark_advanced count from the leader's append of the newest batch; the others are stages of their own.")
	}
}

func (r *Report) hasStages() bool {
	for _, res := range r.Results {
		if len(res.Stages) > 0 {
			return true
		}
	}
	return false
}

// scalingTable writes, for every workload run at several partition
// counts on one target, its throughput at each count relative to the
// fewest partitions (the same bytes spread over more partitions).
func (r *Report) scalingTable(w io.Writer) {
	type family struct {
		target, acks, durability string
		recordBytes              int
		keyed                    bool
		records                  int64
	}
	byFamily := map[family][]Result{}
	var order []family
	for _, res := range r.Results {
		if res.Error != "" {
			continue
		}
		f := family{res.Target, res.Acks, res.Durability, res.RecordBytes, res.Keyed, res.Records}
		if byFamily[f] == nil {
			order = append(order, f)
		}
		byFamily[f] = append(byFamily[f], res)
	}
	for _, f := range order {
		rs := byFamily[f]
		if len(rs) < 2 {
			continue
		}
		sort.SliceStable(rs, func(i, j int) bool { return rs[i].Partitions < rs[j].Partitions })
		base := rs[0]
		fmt.Fprintf(w, "\npartition scaling on %s (%s, as p%d):", f.target, base.Workload, base.Partitions)
		for _, res := range rs[1:] {
			fmt.Fprintf(w, " p%d produce %.2f× consume %.2f×;", res.Partitions, res.ProduceMBps/base.ProduceMBps, res.ConsumeMBps/base.ConsumeMBps)
		}
		fmt.Fprintln(w)
	}
}

// peerTable writes, for every Strata workload that JetStream ran too
// (same record size and count), Strata's figures relative to JetStream's.
func (r *Report) peerTable(w io.Writer) {
	var js []Result
	for _, res := range r.Results {
		if res.Target == "jetstream" && res.Error == "" {
			js = append(js, res)
		}
	}
	for _, res := range r.Results {
		if res.Target == "jetstream" || res.Target == r.Baseline || res.Error != "" {
			continue
		}
		for _, j := range js {
			if j.RecordBytes != res.RecordBytes || j.Records != res.Records || j.Acks != res.Acks {
				continue
			}
			fmt.Fprintf(w, "\nvs jetstream R%d: %s on %s: produce %.2f×, consume %.2f×, one-in-flight p99 %.2f× (%.2f vs %.2f ms)\n",
				j.RF, res.Workload, res.Target, res.ProduceMBps/j.ProduceMBps, res.ConsumeMBps/j.ConsumeMBps,
				float64(res.OneInFlightLatency.P99)/float64(max(j.OneInFlightLatency.P99, 1)),
				float64(res.OneInFlightLatency.P99)/1000, float64(j.OneInFlightLatency.P99)/1000)
		}
	}
}

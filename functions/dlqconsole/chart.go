package dlqconsole

import (
	"fmt"
	"html/template"
	"math"
	"strconv"
	"strings"
	"time"
)

// The lag chart: an SVG drawn on the server from the coordinator's lag
// history, so the page needs no script. It uses presentation attributes
// only (no style attributes or elements), which the console's CSP allows.

// ChartPoint is one sample of a series: a time and a value (lag, >= 0).
type ChartPoint struct {
	At    time.Time
	Value int64
}

// ChartSeries is one line of the chart.
type ChartSeries struct {
	Name   string
	Points []ChartPoint // oldest first
}

const (
	chartW, chartH                 = 760.0, 260.0
	chartLeft, chartRight          = 70.0, 150.0 // room for the y labels and the legend
	chartTop, chartBottom          = 14.0, 30.0
	chartMaxSeries                 = 8 // lines beyond it are left out of the legend and the drawing
	chartPlotW, chartPlotH float64 = chartW - chartLeft - chartRight, chartH - chartTop - chartBottom
)

var chartColors = []string{"#23395d", "#c0392b", "#27ae60", "#8e44ad", "#d35400", "#16a085", "#7f8c8d", "#2c3e50"}

// lagChart draws series as an SVG line chart titled title. It never
// yields NaN or infinite coordinates: a single sample is a dot, a flat or
// all-zero history a line on a scale of at least 1, and values up to
// MaxInt64 are scaled as floats.
func lagChart(title string, series []ChartSeries) template.HTML {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" viewBox="0 0 %g %g" width="%g" height="%g">`, chartW, chartH, chartW, chartH)
	fmt.Fprintf(&b, `<title>%s</title>`, template.HTMLEscapeString(title))
	if len(series) > chartMaxSeries {
		series = series[:chartMaxSeries]
	}
	var tMin, tMax int64 = math.MaxInt64, math.MinInt64
	var vMax int64
	n := 0
	for _, s := range series {
		for _, p := range s.Points {
			ms := p.At.UnixMilli()
			tMin, tMax = min(tMin, ms), max(tMax, ms)
			vMax = max(vMax, p.Value)
			n++
		}
	}
	fmt.Fprintf(&b, `<rect x="%g" y="%g" width="%g" height="%g" fill="#fafafa" stroke="#ccc"/>`, chartLeft, chartTop, chartPlotW, chartPlotH)
	if n == 0 {
		fmt.Fprintf(&b, `<text x="%g" y="%g" text-anchor="middle" fill="#777" font-size="13">no samples yet</text></svg>`, chartLeft+chartPlotW/2, chartTop+chartPlotH/2)
		return template.HTML(b.String())
	}
	top := niceCeil(vMax)
	span := float64(tMax - tMin)
	x := func(ms int64) float64 {
		if span <= 0 {
			return chartLeft + chartPlotW/2
		}
		return chartLeft + float64(ms-tMin)/span*chartPlotW
	}
	y := func(v int64) float64 {
		f := float64(max(v, 0)) / float64(top)
		return chartTop + chartPlotH*(1-min(f, 1))
	}
	// The y axis, with grid lines.
	for _, v := range yTicks(top) {
		yy := y(v)
		fmt.Fprintf(&b, `<line x1="%g" y1="%.1f" x2="%g" y2="%.1f" stroke="#e3e3e3"/>`, chartLeft, yy, chartLeft+chartPlotW, yy)
		fmt.Fprintf(&b, `<text x="%g" y="%.1f" text-anchor="end" fill="#555" font-size="11">%s</text>`, chartLeft-6, yy+4, humanCount(v))
	}
	// The x axis: the first and last sample's times.
	t0, t1 := time.UnixMilli(tMin).UTC(), time.UnixMilli(tMax).UTC()
	fmt.Fprintf(&b, `<text x="%g" y="%g" fill="#555" font-size="11">%s</text>`, chartLeft, chartH-10, t0.Format("15:04:05 UTC"))
	if tMax > tMin {
		fmt.Fprintf(&b, `<text x="%g" y="%g" text-anchor="end" fill="#555" font-size="11">%s</text>`, chartLeft+chartPlotW, chartH-10, t1.Format("15:04:05 UTC"))
	}
	for i, s := range series {
		color := chartColors[i%len(chartColors)]
		if len(s.Points) == 1 {
			p := s.Points[0]
			fmt.Fprintf(&b, `<circle class="sample" cx="%.1f" cy="%.1f" r="3" fill="%s"/>`, x(p.At.UnixMilli()), y(p.Value), color)
		} else if len(s.Points) > 1 {
			var pts strings.Builder
			for j, p := range s.Points {
				if j > 0 {
					pts.WriteByte(' ')
				}
				fmt.Fprintf(&pts, "%.1f,%.1f", x(p.At.UnixMilli()), y(p.Value))
			}
			fmt.Fprintf(&b, `<polyline class="series" fill="none" stroke="%s" stroke-width="2" points="%s"/>`, color, pts.String())
		}
		ly := chartTop + 8 + float64(i)*18
		fmt.Fprintf(&b, `<rect x="%g" y="%g" width="10" height="10" fill="%s"/>`, chartW-chartRight+12, ly-8, color)
		fmt.Fprintf(&b, `<text x="%g" y="%g" fill="#333" font-size="11">%s</text>`, chartW-chartRight+27, ly+1, template.HTMLEscapeString(truncName(s.Name, 20)))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// yTicks are the labelled values from 0 to top (a niceCeil result): steps
// of a fifth for 1 and 5 times a power of ten, a quarter for 2 times one.
func yTicks(top int64) []int64 {
	step := top / 5
	if lead := top; lead >= 20 {
		for lead >= 10 && lead%10 == 0 {
			lead /= 10
		}
		if lead == 2 {
			step = top / 4
		}
	}
	if top <= 2 || step <= 0 {
		step = 1
	}
	var out []int64
	for i := int64(0); i < 6 && i*step < top-step/2; i++ {
		out = append(out, i*step)
	}
	out = append(out, top)
	return out
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten (at least 1).
func niceCeil(v int64) int64 {
	if v <= 1 {
		return 1
	}
	for p := int64(1); ; p *= 10 {
		for _, m := range []int64{1, 2, 5} {
			if p > math.MaxInt64/m {
				return math.MaxInt64
			}
			if c := m * p; c >= v {
				return c
			}
		}
		if p > math.MaxInt64/10 {
			return math.MaxInt64
		}
	}
}

// humanCount shortens a count: 950, 1.2k, 3.4M, 5.6G, ...
func humanCount(v int64) string {
	f := float64(v)
	for _, u := range []struct {
		div  float64
		unit string
	}{{1e18, "E"}, {1e15, "P"}, {1e12, "T"}, {1e9, "G"}, {1e6, "M"}, {1e3, "k"}} {
		if f >= u.div {
			return strconv.FormatFloat(f/u.div, 'f', 1, 64) + u.unit
		}
	}
	return strconv.FormatInt(v, 10)
}

func truncName(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return Shown{Data: s}.truncate(n).Data + "…"
}

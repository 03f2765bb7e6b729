package dlqconsole

import (
	"encoding/xml"
	"fmt"
	"math"
	"net/url"
	"strings"
	"testing"
	"time"
)

// checkSVG parses the chart as XML and fails on NaN or infinite numbers.
func checkSVG(t *testing.T, svg string) {
	t.Helper()
	for _, bad := range []string{"NaN", "Inf", "<script", "style="} {
		if strings.Contains(svg, bad) {
			t.Fatalf("chart contains %q:\n%s", bad, svg)
		}
	}
	d := xml.NewDecoder(strings.NewReader(svg))
	for {
		if _, err := d.Token(); err != nil {
			if err.Error() == "EOF" {
				return
			}
			t.Fatalf("chart is not well-formed XML: %v\n%s", err, svg)
		}
	}
}

func TestLagChart(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	pts := func(vs ...int64) []ChartPoint {
		var out []ChartPoint
		for i, v := range vs {
			out = append(out, ChartPoint{At: t0.Add(time.Duration(i) * 5 * time.Second), Value: v})
		}
		return out
	}
	cases := []struct {
		name   string
		series []ChartSeries
		want   []string
	}{
		{"none", nil, []string{"no samples yet"}},
		{"empty series", []ChartSeries{{Name: "total"}}, []string{"no samples yet"}},
		{"one sample", []ChartSeries{{Name: "total", Points: pts(7)}}, []string{`<circle class="sample"`, "03:00:00 UTC", ">10<"}},
		{"zero lag", []ChartSeries{{Name: "total", Points: pts(0, 0, 0)}}, []string{`<polyline class="series"`, ">1<", ">0<"}},
		{"huge", []ChartSeries{{Name: "total", Points: pts(0, math.MaxInt64, math.MaxInt64/3)}}, []string{"9.2E"}},
		{"same instant", []ChartSeries{{Name: "a", Points: []ChartPoint{{At: t0, Value: 1}, {At: t0, Value: 5}}}}, []string{"<polyline"}},
		{"negative clamps", []ChartSeries{{Name: "a", Points: pts(-5, 3)}}, []string{"<polyline"}},
		{"escaped names", []ChartSeries{{Name: "<script>x</script>", Points: pts(1, 2)}}, []string{"&lt;script&gt;"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			svg := string(lagChart("lag of <g>", c.series))
			checkSVG(t, svg)
			for _, w := range c.want {
				if !strings.Contains(svg, w) {
					t.Fatalf("chart lacks %q:\n%s", w, svg)
				}
			}
		})
	}
	// Many series: bounded.
	var many []ChartSeries
	for i := range 50 {
		many = append(many, ChartSeries{Name: "p", Points: pts(int64(i), int64(i+1))})
	}
	svg := string(lagChart("many", many))
	checkSVG(t, svg)
	if n := strings.Count(svg, "<polyline"); n != chartMaxSeries {
		t.Fatalf("%d lines drawn, want %d", n, chartMaxSeries)
	}
}

func TestYTicks(t *testing.T) {
	for top, want := range map[int64]string{1: "[0 1]", 2: "[0 1 2]", 5: "[0 1 2 3 4 5]", 10: "[0 2 4 6 8 10]", 20: "[0 5 10 15 20]",
		50: "[0 10 20 30 40 50]", 2000: "[0 500 1000 1500 2000]", math.MaxInt64: "[0 1844674407370955161 3689348814741910322 5534023222112865483 7378697629483820644 9223372036854775807]"} {
		if got := fmt.Sprint(yTicks(top)); got != want {
			t.Errorf("yTicks(%d) = %s, want %s", top, got, want)
		}
	}
}

func TestNiceCeil(t *testing.T) {
	for in, want := range map[int64]int64{-3: 1, 0: 1, 1: 1, 2: 2, 3: 5, 7: 10, 11: 20, 999: 1000, 1001: 2000, math.MaxInt64: math.MaxInt64, math.MaxInt64 / 2: 5e18} {
		if got := niceCeil(in); got != want {
			t.Errorf("niceCeil(%d) = %d, want %d", in, got, want)
		}
	}
}

// FuzzLagChart draws arbitrary samples: always well-formed, never NaN.
func FuzzLagChart(f *testing.F) {
	f.Add(int64(0), int64(0), int64(0), int64(1))
	f.Add(int64(math.MaxInt64), int64(-1), int64(math.MinInt64), int64(math.MaxInt64))
	f.Fuzz(func(t *testing.T, t0, v0, t1, v1 int64) {
		pts := []ChartPoint{{At: time.UnixMilli(t0 % (1 << 50)), Value: v0}, {At: time.UnixMilli(t1 % (1 << 50)), Value: v1}}
		checkSVG(t, string(lagChart("f", []ChartSeries{{Name: "a", Points: pts}, {Name: "b", Points: pts[:1]}})))
	})
}

// FuzzMessageQuery: any query is a valid bounded query or a 400.
func FuzzMessageQuery(f *testing.F) {
	f.Add("partition=1&offset=5&limit=10")
	f.Add("time=2026-12-02T03:04:05Z")
	f.Add("offset=-1&time=x&limit=1000")
	f.Fuzz(func(t *testing.T, q string) {
		v, err := url.ParseQuery(q)
		if err != nil {
			return
		}
		mq, _, err := parseMessageQuery(v)
		if err != nil {
			if statusOf(err) != 400 {
				t.Fatalf("%q: status %d", q, statusOf(err))
			}
			return
		}
		if mq.Partition < 0 || mq.Limit < 1 || mq.Limit > maxMessages || mq.Offset < -1 {
			t.Fatalf("%q: %+v", q, mq)
		}
	})
}

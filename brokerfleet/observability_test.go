package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.yaml.in/yaml/v3"

	"github.com/stratamq/strata/pkg/testenv"
)

// The Prometheus alerting rules and the Grafana dashboard of
// infra/observability, checked against Prometheus's own tool and against
// what `brokerfleet dev` exports.

const observabilityDir = "../infra/observability"

// ruleFile is the part of a Prometheus rule file the tests read.
type ruleFile struct {
	Groups []struct {
		Name  string
		Rules []struct {
			Alert, Record, Expr string
		}
	}
}

// dashboard is the part of the Grafana dashboard the tests read.
type dashboard struct {
	UID        string
	Templating struct {
		List []struct {
			Name, Type string
			Query      json.RawMessage
		}
	}
	Panels []dashboardPanel
}

type dashboardPanel struct {
	ID          int
	Type, Title string
	Datasource  *struct{ Type, UID string }
	GridPos     struct{ H, W, X, Y int }
	Targets     []struct{ RefID, Expr string }
}

func readRules(t *testing.T) ruleFile {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(observabilityDir, "strata.rules.yml"))
	require.NoError(t, err)
	var rf ruleFile
	require.NoError(t, yaml.Unmarshal(raw, &rf))
	require.NotEmpty(t, rf.Groups)
	return rf
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(observabilityDir, "strata-dashboard.json"))
	require.NoError(t, err)
	var d dashboard
	require.NoError(t, json.Unmarshal(raw, &d))
	return d
}

// grafanaVars are what the dashboard's variables stand for when its
// queries are checked as PromQL.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$instance", ".*")

// dashboardExprs returns every query of the dashboard's panels, with
// Grafana's variables replaced, by "panel title / refId".
func dashboardExprs(d dashboard) map[string]string {
	out := map[string]string{}
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out[p.Title+" / "+tg.RefID] = grafanaVars.Replace(tg.Expr)
		}
	}
	return out
}

// runPromtool runs promtool with args in dir and fails the test with its
// output unless it succeeds.
func runPromtool(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command(testenv.Path(t, testenv.Promtool), args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "promtool %s:\n%s", strings.Join(args, " "), out)
	t.Logf("promtool %s: %s", strings.Join(args, " "), strings.TrimSpace(string(out)))
}

// TestAlertRulesPassPromtool: the rules load in Prometheus (`promtool
// check rules`) and fire when, and only when, their unit tests say
// (`promtool test rules`).
func TestAlertRulesPassPromtool(t *testing.T) {
	runPromtool(t, observabilityDir, "check", "rules", "strata.rules.yml")
	runPromtool(t, observabilityDir, "test", "rules", "strata.rules.test.yml")
	rf := readRules(t)
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			require.NotEmpty(t, r.Alert, "group %s: only alerting rules here (%q)", g.Name, r.Record)
		}
	}
}

// TestDashboardQueriesParse: every panel query of the dashboard is PromQL
// that Prometheus accepts (checked by promtool as recording rules, with
// Grafana's variables filled in), every panel reads the dashboard's data
// source variable, and the layout fits Grafana's 24-column grid.
func TestDashboardQueriesParse(t *testing.T) {
	d := readDashboard(t)
	require.NotEmpty(t, d.UID)
	var vars []string
	for _, v := range d.Templating.List {
		vars = append(vars, v.Name)
	}
	require.Equal(t, []string{"datasource", "instance"}, vars)
	ids := map[int]bool{}
	for _, p := range d.Panels {
		require.False(t, ids[p.ID], "panel id %d used twice", p.ID)
		ids[p.ID] = true
		require.LessOrEqual(t, p.GridPos.X+p.GridPos.W, 24, "panel %q is wider than the grid", p.Title)
		if p.Type == "row" {
			continue
		}
		require.NotNil(t, p.Datasource, "panel %q has no data source", p.Title)
		require.Equal(t, "${datasource}", p.Datasource.UID, "panel %q", p.Title)
		require.NotEmpty(t, p.Targets, "panel %q has no query", p.Title)
	}

	exprs := dashboardExprs(d)
	names := make([]string, 0, len(exprs))
	for k := range exprs {
		names = append(names, k)
	}
	slices.Sort(names)
	type rule struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	var rules []rule
	for i, k := range names {
		rules = append(rules, rule{Record: fmt.Sprintf("dashboard:query_%d", i), Expr: exprs[k]})
	}
	out, err := yaml.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "dashboard.rules.yml"), out, 0o644))
	runPromtool(t, dir, "check", "rules", "dashboard.rules.yml")
}

// TestObservabilityMetricsExistInDev: every metric an alert or a
// dashboard panel reads is in a scrape of a `brokerfleet dev` cluster that
// has produced, replicated, consumed in a group, committed, failed a
// request, used its S3 tier, compacted a topic and aborted a transaction;
// and every strata_* metric the brokers export has a panel.
func TestObservabilityMetricsExistInDev(t *testing.T) {
	p := startProcess(t, "dev", "-listen", "127.0.0.1:0", "-http", "127.0.0.1:0", "-registry", "",
		"-data", t.TempDir(), "-group-stats-interval", "200ms", "-cleaner-backoff", "200ms")
	urls := metricsURLs(t, p)
	require.Len(t, urls, 3, "one /metrics per broker")

	// Traffic: a replicated topic, a group that reads and commits part of
	// it (lag), and a produce to a partition that does not exist (an
	// error by code).
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.addrs...), kgo.ConsumerGroup("observers"), kgo.ConsumeTopics("observed"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	require.NoError(t, err)
	defer cl.Close()
	adm := kadm.NewClient(cl)
	created, err := adm.CreateTopic(ctx, 3, 3, nil, "observed")
	require.NoError(t, err)
	require.NoError(t, created.Err)
	const n = 300
	for i := 0; i < n; i++ {
		cl.Produce(ctx, &kgo.Record{Topic: "observed", Value: []byte(fmt.Sprintf("observation %d", i))}, nil)
	}
	require.NoError(t, cl.Flush(ctx))
	for got := 0; got < n/2; {
		fs := cl.PollFetches(ctx)
		require.NoError(t, fs.Err())
		got += fs.NumRecords()
	}
	require.NoError(t, cl.CommitUncommittedOffsets(ctx))
	strays, err := kgo.NewClient(kgo.SeedBrokers(p.addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordRetries(0),
		kgo.RequestRetries(0), kgo.ProduceRequestTimeout(5*time.Second))
	require.NoError(t, err)
	defer strays.Close()
	_ = strays.ProduceSync(ctx, &kgo.Record{Topic: "observed", Partition: 7, Value: []byte("nowhere")})

	// A compacted topic (the cleaner's per-replica series) and an aborted
	// transaction (the abort counter).
	compacted, err := adm.CreateTopic(ctx, 1, 3, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, "observed-compacted")
	require.NoError(t, err)
	require.NoError(t, compacted.Err)
	for i := 0; i < 20; i++ {
		cl.Produce(ctx, &kgo.Record{Topic: "observed-compacted", Key: []byte(fmt.Sprint(i % 4)), Value: []byte("v")}, nil)
	}
	require.NoError(t, cl.Flush(ctx))
	txn, err := kgo.NewClient(kgo.SeedBrokers(p.addrs...), kgo.TransactionalID("observer"))
	require.NoError(t, err)
	defer txn.Close()
	require.NoError(t, txn.BeginTransaction())
	require.NoError(t, txn.ProduceSync(ctx, &kgo.Record{Topic: "observed", Value: []byte("never")}).FirstErr())
	require.NoError(t, txn.EndTransaction(ctx, kgo.TryAbort))

	// A share group holding records (the share backlog series of the
	// partitions' leaders).
	shareCfg := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, "observing-share"
	res.Configs = []kmsg.IncrementalAlterConfigsRequestResourceConfig{{Name: "share.auto.offset.reset", Value: kmsg.StringPtr("earliest")}}
	shareCfg.Resources = append(shareCfg.Resources, res)
	_, err = shareCfg.RequestWith(ctx, cl)
	require.NoError(t, err)
	sc, err := kgo.NewClient(kgo.SeedBrokers(p.addrs...), kgo.ShareGroup("observing-share"), kgo.ConsumeTopics("observed"))
	require.NoError(t, err)
	defer sc.Close()
	for got := 0; got == 0; {
		got = len(sc.PollFetches(ctx).Records())
	}

	used := map[string][]string{} // metric -> where it is used
	for _, g := range readRules(t).Groups {
		for _, r := range g.Rules {
			for _, m := range metricNames(r.Expr) {
				used[m] = append(used[m], "alert "+r.Alert)
			}
		}
	}
	d := readDashboard(t)
	for where, expr := range dashboardExprs(d) {
		for _, m := range metricNames(expr) {
			used[m] = append(used[m], "panel "+where)
		}
	}
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			var q struct{ Query string }
			require.NoError(t, json.Unmarshal(v.Query, &q), "variable %s", v.Name)
			m := regexp.MustCompile(`^label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)`).FindStringSubmatch(q.Query)
			require.NotNil(t, m, "variable %s: %q", v.Name, q.Query)
			used[m[1]] = append(used[m[1]], "variable "+v.Name)
		}
	}
	// up is Prometheus's own series about each scrape, in no scrape.
	delete(used, "up")

	// The group's lag is refreshed in the background and the tier's
	// counters need an upload: scrape until everything is there, then
	// report what is missing.
	var samples, families map[string]bool
	missing := func() []string {
		var out []string
		for m := range used {
			if !samples[m] {
				out = append(out, fmt.Sprintf("%s (%s)", m, strings.Join(used[m], "; ")))
			}
		}
		slices.Sort(out)
		return out
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		samples, families = scrape(t, urls)
		if len(missing()) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	require.Empty(t, missing(), "metrics the alerts and the dashboard use but no broker of dev exports")

	var unshown []string
	for f := range families {
		if !strings.HasPrefix(f, "strata_") {
			continue
		}
		shown := false
		for _, suffix := range []string{"", "_bucket", "_sum", "_count"} {
			shown = shown || len(used[f+suffix]) > 0
		}
		if !shown {
			unshown = append(unshown, f)
		}
	}
	slices.Sort(unshown)
	require.Empty(t, unshown, "strata_* metrics the brokers export that no dashboard panel shows")
	t.Logf("%d metrics used by the alerts and the dashboard, all in a scrape of dev", len(used))
}

// metricsURLs reads the /metrics address of each broker from dev's log
// (msg="serving metrics and health" ... url=http://HOST:PORT/metrics).
func metricsURLs(t *testing.T, p *devProcess) []string {
	t.Helper()
	re := regexp.MustCompile(`msg="serving metrics and health".*url=(http://\S+/metrics)`)
	var urls []string
	require.Eventually(t, func() bool {
		urls = urls[:0]
		for _, m := range re.FindAllStringSubmatch(p.stderr.String(), -1) {
			urls = append(urls, m[1])
		}
		return len(urls) == len(p.addrs)
	}, 10*time.Second, 50*time.Millisecond, "dev's log names every broker's /metrics:\n%s", p.stderr)
	return urls
}

// scrape reads every URL in Prometheus's text format and returns the
// sample names seen (a histogram's _bucket, _sum and _count) and the
// family names of their TYPE lines.
func scrape(t *testing.T, urls []string) (samples, families map[string]bool) {
	t.Helper()
	samples, families = map[string]bool{}, map[string]bool{}
	for _, u := range urls {
		resp, err := http.Get(u)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, u)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if f, ok := strings.CutPrefix(line, "# TYPE "); ok {
				families[strings.Fields(f)[0]] = true
				continue
			}
			if line == "" || line[0] == '#' {
				continue
			}
			if i := strings.IndexAny(line, "{ "); i > 0 {
				samples[line[:i]] = true
			}
		}
		resp.Body.Close()
		require.NoError(t, sc.Err())
	}
	return samples, families
}

// promqlWords are PromQL's keywords and literals, which look like metric
// names but select nothing.
var promqlWords = map[string]bool{
	"and": true, "or": true, "unless": true, "bool": true, "offset": true, "atan2": true,
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"inf": true, "nan": true, "start": true, "end": true,
}

// labelLists are the keywords followed by a parenthesized list of label
// names.
var labelLists = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}

// metricNames returns the metric names a PromQL expression selects, in
// order of first use: its identifiers that are not functions or
// aggregations (followed by "("), keywords, label names (in {...} or a
// by/without/on/ignoring/group_left/group_right list), numbers or
// durations (in [...] or after offset), or inside strings.
func metricNames(expr string) []string {
	var out []string
	seen := map[string]bool{}
	isStart := func(c byte) bool { return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
	isPart := func(c byte) bool { return isStart(c) || c >= '0' && c <= '9' }
	skipSpace := func(i int) int {
		for i < len(expr) && (expr[i] == ' ' || expr[i] == '\t' || expr[i] == '\n' || expr[i] == '\r') {
			i++
		}
		return i
	}
	// skipString returns the index after the string opening at i.
	skipString := func(i int) int {
		q := expr[i]
		for i++; i < len(expr) && expr[i] != q; i++ {
			if expr[i] == '\\' && q != '`' {
				i++
			}
		}
		return i + 1
	}
	// skipTo returns the index after the close matching the open at i,
	// strings skipped.
	skipTo := func(i int, open, close byte) int {
		depth := 0
		for i < len(expr) {
			switch c := expr[i]; {
			case c == '"' || c == '\'' || c == '`':
				i = skipString(i)
				continue
			case c == open:
				depth++
			case c == close:
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	}
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			i = skipString(i)
		case c == '{':
			i = skipTo(i, '{', '}')
		case c == '[':
			i = skipTo(i, '[', ']')
		case c == '#': // a comment, to the end of the line
			for i < len(expr) && expr[i] != '\n' {
				i++
			}
		case c >= '0' && c <= '9' || c == '.':
			for i < len(expr) && (isPart(expr[i]) || expr[i] == '.') {
				i++
			}
		case isStart(c):
			j := i
			for j < len(expr) && isPart(expr[j]) {
				j++
			}
			word, next := expr[i:j], skipSpace(j)
			i = j
			switch {
			case labelLists[strings.ToLower(word)] && next < len(expr) && expr[next] == '(':
				i = skipTo(next, '(', ')')
			case promqlWords[strings.ToLower(word)]:
			case next < len(expr) && expr[next] == '(' || modifierAt(expr, next):
				// a function or an aggregation (sum by (x) (...))
			case !seen[word]:
				seen[word] = true
				out = append(out, word)
			}
		default:
			i++
		}
	}
	return out
}

// modifierAt reports whether an aggregation's by or without clause
// starts at i.
func modifierAt(expr string, i int) bool {
	for _, kw := range []string{"by", "without"} {
		if rest, ok := strings.CutPrefix(strings.ToLower(expr[i:]), kw); ok && strings.HasPrefix(strings.TrimLeft(rest, " \t\n"), "(") {
			return true
		}
	}
	return false
}

func TestMetricNames(t *testing.T) {
	for _, c := range []struct {
		expr string
		want []string
	}{
		{`up{job="strata"} == 0`, []string{"up"}},
		{`sum by (le) (x) / sum without(y) (z) + max(by_name)`, []string{"x", "z", "by_name"}},
		{`sum(strata_offline_partitions) > 0`, []string{"strata_offline_partitions"}},
		{`max by (group, topic) (strata_consumer_group_lag{instance=~".*"}) > 10000`, []string{"strata_consumer_group_lag"}},
		{"histogram_quantile(0.99, sum by (le) (rate(strata_request_duration_seconds_bucket{api=\"Produce\", error=\"by(x)\"}[5m]))) > 1",
			[]string{"strata_request_duration_seconds_bucket"}},
		{`a / on (instance) group_left (job) b offset 5m and ignoring(x) c unless bool d`, []string{"a", "b", "c", "d"}},
		{"sum without (op) (rate(x_total[1h:5m])) / 1e3 # comment names y\n+ z", []string{"x_total", "z"}},
		{`{__name__="hidden"} or label_replace(v, "dst", "$1", "src", "(.*)")`, []string{"v"}},
		{`process_open_fds / process_max_fds > 0.8`, []string{"process_open_fds", "process_max_fds"}},
	} {
		require.Equal(t, c.want, metricNames(c.expr), c.expr)
	}
}

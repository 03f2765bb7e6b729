//go:build chaos

package chaos

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/stretchr/testify/require"
)

// Environment:
//
//	STRATA_CHAOS_DURATION  how long each scenario's nemesis runs (default 60s)
//	STRATA_CHAOS_SEED      the seed of every scenario's fault schedule
//	                       (default: the clock; the seed is logged)
//	STRATA_CHAOS_OUT       a directory for <scenario>.history.jsonl,
//	                       <scenario>.report.json and broker logs
const (
	durationEnv = "STRATA_CHAOS_DURATION"
	seedEnv     = "STRATA_CHAOS_SEED"
	outEnv      = "STRATA_CHAOS_OUT"
)

// The same as flags of the test binary (they win over the variables):
// go test -tags chaos ./e2e/chaos/ -args -chaos.duration 5m -chaos.seed 42
var (
	durationFlag = flag.Duration("chaos.duration", 0, "how long each scenario's nemesis runs (default $"+durationEnv+", else 60s)")
	seedFlag     = flag.Uint64("chaos.seed", 0, "seed of the fault schedules (default $"+seedEnv+", else the clock)")
)

func TestMain(m *testing.M) {
	if b := os.Getenv(memberEnv); b != "" {
		runMember(b) // a consumer-group member process: never returns
	}
	if b := os.Getenv(txnEnv); b != "" {
		runTransformer(b, os.Getenv(txnSlotEnv), os.Getenv(txnProcEnv)) // a transformer process: never returns
	}
	if b := os.Getenv(shareEnv); b != "" {
		runShareMember(b, os.Getenv(shareProcEnv)) // a share-group member process: never returns
	}
	os.Exit(m.Run())
}

// scenario is a cluster, a workload and a nemesis.
type scenario struct {
	name  string
	opts  clusterOpts
	group bool // consumer-group members run too
	// consumerProtocol: the members use the consumer group protocol
	// (KIP-848, kgo.ServerSideBalancer) instead of the classic one.
	consumerProtocol bool
	nemesis          func(*nemesis)
}

var scenarios = []scenario{
	{name: "none", nemesis: noFaults},
	{name: "leader-kill", nemesis: killLoop},
	{name: "rolling-restart", nemesis: rollingLoop},
	{name: "pause", nemesis: pauseLoop},
	{name: "partition", nemesis: partitionLoop},
	{name: "dynamodb", nemesis: dynamoLoop},
	{name: "dynamodb-outage", nemesis: dynamoOutage},
	{name: "s3", nemesis: s3Loop},
	{name: "group", group: true, nemesis: groupLoop},
	{name: "group-consumer-protocol", group: true, consumerProtocol: true, nemesis: groupLoop},
	{name: "combined", group: true, opts: clusterOpts{skew: [brokers]string{"90m", "-45m", ""}}, nemesis: combined},
	// Keyed overwrites and deletes of a compacted topic beside the usual
	// workload, under kill -9 and SIGSTOP of leaders (CheckTable).
	{name: "compaction", opts: clusterOpts{compaction: true}, nemesis: compactionLoop},
}

// report is one scenario's row.
type report struct {
	Scenario      string   `json:"scenario"`
	Seed          uint64   `json:"seed"`
	Duration      string   `json:"duration"`
	Ops           int      `json:"ops"`
	Faults        int      `json:"faults"`
	ReplicaDiffs  []string `json:"replica_diffs,omitempty"`
	GroupComplete bool     `json:"group_complete,omitempty"`
	// S3 is the requests the S3 stand-in saw, by operation (uploads are
	// PutObject), injected failures included.
	S3     map[string]int64 `json:"s3"`
	S3Puts int64            `json:"s3_puts"`
	Result *Result          `json:"result"`
	// Table is the compacted topic's check (the compaction scenario).
	Table *TableResult `json:"table,omitempty"`
	// Txn is the transactional scenario's check of its output topic.
	Txn *TxnResult `json:"txn,omitempty"`
	// Share is the share-group scenario's check of its consumers.
	Share *ShareResult `json:"share,omitempty"`
}

func (r *report) pass() bool {
	return r.Result != nil && r.Result.Valid && len(r.ReplicaDiffs) == 0 && (r.Table == nil || r.Table.Valid) && (r.Txn == nil || r.Txn.Valid) && (r.Share == nil || r.Share.Valid)
}

func chaosDuration(t *testing.T) time.Duration {
	d := 60 * time.Second
	if *durationFlag > 0 {
		return *durationFlag
	}
	if v := os.Getenv(durationEnv); v != "" {
		var err error
		d, err = time.ParseDuration(v)
		require.NoError(t, err, durationEnv)
	}
	return d
}

func chaosSeed(t *testing.T) uint64 {
	if *seedFlag != 0 {
		return *seedFlag
	}
	if v := os.Getenv(seedEnv); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		require.NoError(t, err, seedEnv)
		return s
	}
	return uint64(time.Now().UnixNano())
}

// TestChaos runs every scenario against a fresh cluster and checks its
// history; the report table is logged at the end.
func TestChaos(t *testing.T) {
	dur, seed := chaosDuration(t), chaosSeed(t)
	t.Logf("seed %d (%s=%d replays it), %v per scenario", seed, seedEnv, seed, dur)
	var mu sync.Mutex
	var rows []*report
	t.Cleanup(func() { t.Log("\n" + table(rows)) })
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			r := runScenario(t, sc, seed, dur)
			mu.Lock()
			rows = append(rows, r)
			mu.Unlock()
		})
	}
	t.Run("txn", func(t *testing.T) {
		r := runTxnScenario(t, seed, dur)
		mu.Lock()
		rows = append(rows, r)
		mu.Unlock()
	})
}

// TestChaosUnsafeAckIsCaught shows the checker fails a broker that breaks
// invariant 1: with -test-unsafe-ack a leader acknowledges acks=all
// before its followers have the batch. Freeze both followers of a leader
// (SIGSTOP) so nothing it acknowledges is replicated, let it acknowledge
// for a moment, kill it with SIGKILL, then let the followers go: one of
// them leads without what was acknowledged.
func TestChaosUnsafeAckIsCaught(t *testing.T) {
	sc := scenario{name: "unsafe-ack", opts: clusterOpts{unsafeAck: true}, nemesis: func(n *nemesis) {
		for round := 0; round < 3 && n.sleep(2*time.Second); round++ {
			b, what := n.target(0)
			if b < 0 || !n.c.Up(b) {
				continue
			}
			n.fault("freeze the followers of "+what+", then kill -9 it", 1500*time.Millisecond, func() {
				for j := range brokers {
					if j != b {
						n.c.Pause(j)
					}
				}
			}, func() {
				n.c.Kill(b)
				for j := range brokers {
					if j != b {
						n.c.Resume(j)
					}
				}
			})
			time.Sleep(4 * time.Second)
			n.c.start(b)
		}
	}}
	r := runScenario(t, sc, chaosSeed(t), 20*time.Second, true)
	t.Log("\n" + table([]*report{r}))
	require.False(t, r.Result.Valid, "the checker accepted a broker that acknowledges before replication")
	require.Positive(t, r.Result.Count(Lost), "acknowledged writes lost: %v", r.Result.Examples)
}

// runScenario runs sc for dur and checks it; expectInvalid skips the
// assertions (the caller makes its own).
func runScenario(t *testing.T, sc scenario, seed uint64, dur time.Duration, expectInvalid ...bool) *report {
	c := startCluster(t, sc.opts)
	h := NewHistory()
	w := startWorkload(t, c, h)
	var tw *tableWorkload
	if sc.opts.compaction {
		tw = startTableWorkload(t, c, h)
	}
	var g *group
	if sc.group {
		g = newGroup(t, c, h, sc.consumerProtocol)
		g.Start()
		g.Start()
	}
	time.Sleep(2 * time.Second) // traffic before faults
	ctx, cancel := context.WithTimeout(context.Background(), dur)
	// One random stream per seed and scenario: the same seed replays the
	// same decisions.
	n := &nemesis{t: t, c: c, h: h, g: g, rng: rand.New(rand.NewPCG(seed, hash(sc.name))), ctx: ctx}
	sc.nemesis(n)
	cancel()
	t.Logf("%6.1fs nemesis done; healing", h.Elapsed().Seconds())
	c.HealAll()
	w.Finish()
	if tw != nil {
		tw.Finish()
	}
	t.Logf("%6.1fs workload stopped; waiting for full ISRs", h.Elapsed().Seconds())
	waitFor(t, 2*time.Minute, "every partition led with a full ISR after healing", func() bool { return c.healthy(context.Background()) })
	ends := finalRead(t, c, h)
	var tableEnds map[int32]int64
	var clean map[int32][]Rec
	if tw != nil {
		tableEnds = tableFinalRead(t, c, h)
		clean = tableCleanRead(t, c)
	}
	r := &report{Scenario: sc.name, Seed: seed, Duration: dur.String()}
	if g != nil {
		for len(g.Members()) < 2 {
			g.Start()
		}
		deadline := time.Now().Add(2 * time.Minute)
		for !r.GroupComplete && time.Now().Before(deadline) {
			got, err := g.Committed(c)
			r.GroupComplete = err == nil
			for p, e := range ends {
				r.GroupComplete = r.GroupComplete && got[p] == e
			}
			time.Sleep(500 * time.Millisecond)
		}
		g.StopAll()
	}
	ops := h.Ops()
	r.Ops = len(ops)
	for _, op := range ops {
		if op.F == FNemesis && op.Type == Invoke {
			r.Faults++
		}
	}
	r.Result = Check(ops)
	if tw != nil {
		r.Table = CheckTable(ops, clean)
	}
	r.S3, r.S3Puts = c.S3Faults.Counts(), c.S3Faults.Count("PutObject")
	r.ReplicaDiffs = c.StopAndCompare(ends)
	if tw != nil {
		r.ReplicaDiffs = append(r.ReplicaDiffs, c.compareTableReplicas(tableEnds)...)
	}
	if dir := os.Getenv(outEnv); dir != "" {
		writeOut(t, dir, c, r, ops)
	}
	t.Logf("%s s3_puts=%d", r.Result.Summary(), r.S3Puts)
	if r.Table != nil {
		t.Log(r.Table.Summary())
	}
	if len(expectInvalid) > 0 && expectInvalid[0] {
		return r
	}
	for _, k := range AnomalyKinds {
		for _, ex := range r.Result.Examples[k] {
			t.Errorf("%s: %s", k, ex)
		}
	}
	for _, d := range r.ReplicaDiffs {
		t.Errorf("replicas: %s", d)
	}
	if r.Table != nil {
		for _, k := range TableKinds {
			for _, ex := range r.Table.Examples[k] {
				t.Errorf("%s: %s", k, ex)
			}
		}
		require.Greater(t, r.Table.Acked, 1000, "too few acknowledged writes of the compacted topic to judge")
		require.Positive(t, r.Table.Deletes)
	}
	if g != nil && !r.GroupComplete {
		t.Errorf("the consumer group did not commit up to the end offsets %v within 2 minutes of healing", ends)
	}
	require.Greater(t, r.Result.Acked, 1000, "too little acknowledged to judge")
	return r
}

func hash(s string) uint64 {
	var h uint64 = 14695981039346656037
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * 1099511628211
	}
	return h
}

func writeOut(t *testing.T, dir string, c *cluster, r *report, ops []Op) {
	require.NoError(t, os.MkdirAll(dir, 0o755))
	f, err := os.Create(filepath.Join(dir, r.Scenario+".history.jsonl"))
	require.NoError(t, err)
	require.NoError(t, WriteJSONLines(f, ops))
	require.NoError(t, f.Close())
	b, err := json.MarshalIndent(r, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, r.Scenario+".report.json"), b, 0o644))
	for i := range brokers {
		if b, err := os.ReadFile(c.logPath(i)); err == nil {
			os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s.broker-%d.log", r.Scenario, i)), b, 0o644)
		}
	}
}

// table renders reports as the suite's summary.
func table(rows []*report) string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tfaults\tops\tsends\tacked\tinfo\tlost\tdup\treordered\tinconsistent\tother\treplicas\ts3 puts\tmax ack gap\tfailover p50\tfailover max\ttable\tresult\t")
	for _, r := range rows {
		res := r.Result
		other := 0
		for _, k := range AnomalyKinds {
			if k != Lost && k != Duplicated && k != Reordered && k != Inconsistent {
				other += res.Count(k)
			}
		}
		replicas := "equal"
		if len(r.ReplicaDiffs) > 0 {
			replicas = fmt.Sprintf("%d diffs", len(r.ReplicaDiffs))
		}
		gaps := slices.Clone(res.FaultGaps)
		slices.Sort(gaps)
		p50, mx := "-", "-"
		if len(gaps) > 0 {
			p50, mx = gaps[len(gaps)/2].Round(10*time.Millisecond).String(), gaps[len(gaps)-1].Round(10*time.Millisecond).String()
		}
		tbl := "-"
		if t := r.Table; t != nil {
			bad := 0
			for _, n := range t.Counts {
				bad += n
			}
			tbl = fmt.Sprintf("%d acked, %d keys, %d anomalies", t.Acked, t.Keys, bad)
		}
		verdict := "PASS"
		if !r.pass() {
			verdict = "FAIL"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t\n", r.Scenario, r.Faults, r.Ops, res.Sends, res.Acked, res.Indeterminate,
			res.Count(Lost), res.Count(Duplicated), res.Count(Reordered), res.Count(Inconsistent), other, replicas, r.S3Puts,
			res.MaxAckGap.Round(10*time.Millisecond), p50, mx, tbl, verdict)
	}
	tw.Flush()
	for _, r := range rows {
		if r.Txn != nil {
			fmt.Fprintf(&b, "%s output: %s\n", r.Scenario, r.Txn.Summary())
		}
		if r.Share != nil {
			fmt.Fprintf(&b, "%s share group: %s\n", r.Scenario, r.Share.Summary())
		}
	}
	return b.String()
}

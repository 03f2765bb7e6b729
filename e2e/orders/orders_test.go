package orders_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/stratamq/strata/e2e/orders"
	"github.com/stratamq/strata/functions/dlqconsole"
	"github.com/stratamq/strata/pkg/retry"
)

const (
	runID   = "e2e"
	nOrders = 10_000
	rate    = 400 // orders per second: the producer runs for 25 s, through the faults
)

// TestOrderPipeline runs the order pipeline end to end on three
// `brokerfleet serve` processes over one DynamoDB stand-in, with
// PostgreSQL behind billing and ClickHouse behind analytics: 10,000 Avro
// orders, 1% poison; billing (its own process) killed with SIGKILL three
// times mid-batch and the billing group's coordinator broker killed once.
// Then: one invoice per good order and none for a poison one, every
// poison order in the DLQ console with three attempts of history,
// analytics' collapsed view equal to billing (one row per order, though
// every poison order came three times), both groups' lag zero. Then two
// operator rewinds of analytics: a replay over the table (every record
// stored again, the collapsed view unchanged) and a rebuild into an
// emptied table (the same facts as before).
func TestOrderPipeline(t *testing.T) {
	if testing.Short() {
		t.Skip("a multi-process pipeline run of about a minute")
	}
	pgURL := postgresURL(t)
	chURL := clickhouseURL(t)
	ctx := context.Background()
	schema := orders.DefaultBillingSchema
	if os.Getenv("STRATA_POSTGRES_URL") != "" {
		// Someone else's server: a schema of our own, dropped at the end.
		schema = fmt.Sprintf("billing_e2e_%d", os.Getpid())
	}
	conn, err := pgx.Connect(ctx, pgURL)
	require.NoError(t, err)
	t.Cleanup(func() {
		if os.Getenv("STRATA_POSTGRES_URL") != "" {
			_ = orders.DropSchema(ctx, conn, schema)
		}
		conn.Close(ctx)
	})
	require.NoError(t, orders.DropSchema(ctx, conn, schema))
	require.NoError(t, orders.Migrate(ctx, conn, schema))
	db := analyticsDB(orders.DefaultAnalyticsDB)
	ch, err := orders.OpenClickHouse(ctx, chURL)
	require.NoError(t, err)
	t.Cleanup(func() {
		if os.Getenv("STRATA_CLICKHOUSE_URL") != "" {
			_ = orders.DropAnalytics(ctx, ch, db)
		}
		ch.Close()
	})
	require.NoError(t, orders.DropAnalytics(ctx, ch, db))
	require.NoError(t, orders.MigrateFacts(ctx, ch, db))

	brokerBin, ordersBin := buildBinaries(t)
	f := startFleet(t, brokerBin)
	adm := f.admin()
	require.NoError(t, orders.CreateTopics(ctx, adm, 6, 3))
	for _, topic := range []string{orders.Topic, retry.RetryTopic(orders.Topic), retry.DLQTopic(orders.Topic)} {
		waitFor(t, 30*time.Second, topic+" with 6 partitions, 3 replicas, leaders", func() (bool, string) {
			md, err := adm.Metadata(ctx, topic)
			if err != nil {
				return false, err.Error()
			}
			td := md.Topics[topic]
			if len(td.Partitions) != 6 {
				return false, fmt.Sprintf("%d partitions", len(td.Partitions))
			}
			for _, p := range td.Partitions {
				if p.Leader < 0 || len(p.Replicas) != 3 {
					return false, fmt.Sprintf("partition %d: leader %d, replicas %v", p.Partition, p.Leader, p.Replicas)
				}
			}
			return true, ""
		})
	}

	policy := orders.PipelinePolicy(200 * time.Millisecond)
	timing := orders.DefaultGroupTiming()

	// The retry worker, in this process.
	workerLog := &syncBuffer{}
	wctx, wstop := context.WithCancel(ctx)
	var wwg sync.WaitGroup
	wwg.Add(1)
	go func() {
		defer wwg.Done()
		log := slog.New(slog.NewTextHandler(workerLog, nil))
		_ = orders.Supervise(wctx, "retryworker", log, 0, func(ctx context.Context) error {
			return orders.RunRetryWorker(ctx, f.seeds(), policy, timing)
		})
	}()
	t.Cleanup(func() {
		wstop()
		wwg.Wait()
		if t.Failed() {
			t.Logf("--- retry worker log:\n%s", tail(workerLog.String(), 30))
		}
	})

	consumerArgs := []string{"-bootstrap", strings.Join(f.seeds(), ","), "-registry", strings.Join(f.registryURLs(), ","),
		"-postgres", pgURL, "-billing-schema", schema, "-clickhouse", chURL, "-analytics-db", db,
		"-retry-base", "200ms", "-session-timeout", timing.Session.String()}
	billingN := 0
	var billingProcs []*proc
	startBilling := func() *proc {
		billingN++
		p := startProc(t, fmt.Sprintf("billing #%d", billingN), "", ordersBin, append([]string{"billing"}, consumerArgs...)...)
		billingProcs = append(billingProcs, p)
		return p
	}
	analytics := startProc(t, "analytics #1", "", ordersBin, append([]string{"analytics"}, consumerArgs...)...)

	count := func(q string) int64 {
		var n int64
		require.NoError(t, conn.QueryRow(ctx, q, runID+"-%").Scan(&n))
		return n
	}
	invoicesQ := `SELECT count(*) FROM ` + pgx.Identifier{schema, "invoices"}.Sanitize() + ` WHERE order_id LIKE $1`
	invoices := func() int64 { return count(invoicesQ) }

	// The order service, in this process.
	var acked atomic.Int64
	type produced struct {
		err  error
		took time.Duration
	}
	prodDone := make(chan produced, 1)
	began := time.Now()
	go func() {
		err := orders.Produce(ctx, orders.ProducerConfig{Seeds: f.seeds(), Registries: f.registryURLs(), Run: runID,
			Count: nOrders, Rate: rate}, &acked)
		prodDone <- produced{err, time.Since(began)}
	}()
	since := func() string { return time.Since(began).Round(100 * time.Millisecond).String() }

	// Billing starts behind, so that it works through full polls, and
	// each kill lands while it is catching up: mid-batch.
	waitFor(t, 60*time.Second, "2000 acknowledged orders", func() (bool, string) {
		return acked.Load() >= 2000, fmt.Sprint(acked.Load())
	})
	billing := startBilling()

	// resumed waits until billing bills again after a fault at from
	// invoices, and says how long that took.
	resumed := func(what string, from int64, at time.Time) int64 {
		var n int64
		waitFor(t, 90*time.Second, "billing to resume after "+what, func() (bool, string) {
			n = invoices()
			return n > from, fmt.Sprintf("%d invoices", n)
		})
		t.Logf("%s: billing resumed after %v (at %d invoices)", what, time.Since(at).Round(100*time.Millisecond), n)
		return n
	}
	killBilling := func(k int, atLeast int64) {
		waitFor(t, 90*time.Second, fmt.Sprintf("%d invoices", atLeast), func() (bool, string) {
			n := invoices()
			return n >= atLeast, fmt.Sprintf("%d invoices", n)
		})
		billing.kill9(t)
		at, n := time.Now(), invoices()
		t.Logf("%s: kill -9 %s at %d invoices, %d orders acknowledged", since(), billing.name, n, acked.Load())
		billing = startBilling()
		resumed(fmt.Sprintf("billing kill %d", k), n, at)
	}
	killBilling(1, 1000)
	killBilling(2, invoices()+500)

	// One broker: the billing group's coordinator, which also leads some
	// partitions of orders.
	target := invoices() + 300
	waitFor(t, 60*time.Second, "invoices before the broker kill", func() (bool, string) {
		n := invoices()
		return n >= target, fmt.Sprint(n)
	})
	var victim int32 = -1
	waitFor(t, 30*time.Second, "the billing group's coordinator", func() (bool, string) {
		dg, err := adm.DescribeGroups(ctx, orders.GroupBilling)
		if err != nil {
			return false, err.Error()
		}
		g := dg[orders.GroupBilling]
		if g.Err != nil {
			return false, g.Err.Error()
		}
		victim = g.Coordinator.NodeID
		return victim >= 0 && victim < 3, fmt.Sprint(victim)
	})
	ackedAt, invAt := acked.Load(), invoices()
	f.procs[victim].kill9(t)
	brokerKilled := time.Now()
	t.Logf("%s: kill -9 broker %d (the billing coordinator) at %d invoices, %d orders acknowledged", since(), victim, invAt, ackedAt)
	time.Sleep(time.Second)
	f.start(int(victim))
	t.Logf("broker %d restarted %v after the kill", victim, time.Since(brokerKilled).Round(100*time.Millisecond))
	if p := acked.Load(); p < nOrders {
		waitFor(t, 90*time.Second, "the producer to get acks again", func() (bool, string) {
			return acked.Load() > p || acked.Load() == nOrders, fmt.Sprint(acked.Load())
		})
		t.Logf("broker kill: producer acknowledged again %v after the kill", time.Since(brokerKilled).Round(100*time.Millisecond))
	}
	n := resumed("broker kill", invoices(), brokerKilled)
	killBilling(3, n+300)

	pr := <-prodDone
	require.NoError(t, pr.err)
	t.Logf("producer: %d orders acknowledged in %v (%.0f orders/s, rate limit %d/s)", acked.Load(), pr.took.Round(time.Millisecond),
		float64(acked.Load())/pr.took.Seconds(), rate)
	require.EqualValues(t, nOrders, acked.Load())

	// Everything settles: every good order billed, every poison order
	// dead-lettered, both groups and the retry worker caught up.
	good, poison, goodCents := orders.Expected(nOrders)
	dlqTopic := retry.DLQTopic(orders.Topic)
	waitFor(t, 120*time.Second, "the pipeline to drain", func() (bool, string) {
		inv := invoices()
		dlq, err1 := orders.EndSum(ctx, adm, dlqTopic)
		lb, err2 := orders.Lag(ctx, adm, orders.GroupBilling, orders.Topic)
		la, err3 := orders.Lag(ctx, adm, orders.GroupAnalytics, orders.Topic)
		lr, err4 := orders.Lag(ctx, adm, orders.GroupRetry, retry.RetryTopic(orders.Topic))
		note := fmt.Sprintf("invoices %d/%d, dlq %d/%d, lag billing %d analytics %d retry %d (errs %v %v %v %v)",
			inv, good, dlq, poison, lb, la, lr, err1, err2, err3, err4)
		return inv == int64(good) && dlq >= int64(poison) && lb == 0 && la == 0 && lr == 0 &&
			err1 == nil && err2 == nil && err3 == nil && err4 == nil, note
	})
	drained := time.Since(began)
	t.Logf("%s: drained: all %d good orders billed, %d poison orders dead-lettered", since(), good, poison)

	// Exactly one invoice per good order, none for a poison order.
	inv, err := orders.InvoicedOrders(ctx, conn, schema, runID)
	require.NoError(t, err)
	for i := 0; i < nOrders; i++ {
		id := orders.OrderID(runID, i)
		if orders.IsPoison(i) {
			require.Zero(t, inv[id], "poison order %s has an invoice", id)
		} else {
			require.Equal(t, 1, inv[id], "invoices of order %s", id)
		}
	}
	require.Len(t, inv, good)

	// Analytics agrees with billing, in total and per customer, and its
	// collapsed view holds each order once, though the topic holds every
	// poison order three times (its retried copies).
	bill, err := orders.ReadBillingTotals(ctx, conn, schema, runID)
	require.NoError(t, err)
	require.EqualValues(t, good, bill.Invoices)
	require.Equal(t, goodCents, bill.InvoiceCents)
	facts, err := orders.ReadFactTotals(ctx, ch, db, runID)
	require.NoError(t, err)
	require.Equal(t, bill.Invoices, facts.Good, "analytics' good orders = billing's invoices")
	require.Equal(t, bill.InvoiceCents, facts.GoodCents, "analytics' amount = billing's amount")
	require.EqualValues(t, poison, facts.Poison)
	require.EqualValues(t, nOrders, facts.Facts, "orders in the collapsed view")
	require.EqualValues(t, nOrders, facts.Distinct, "distinct order ids in the collapsed view")
	records, err := orders.EndSum(ctx, adm, orders.Topic)
	require.NoError(t, err)
	require.GreaterOrEqual(t, records, int64(nOrders+2*poison), "records in %s: the orders and the poison orders' retried copies", orders.Topic)
	byBilling, err := orders.InvoicesByCustomer(ctx, conn, schema, runID)
	require.NoError(t, err)
	byAnalytics, err := orders.FactsByCustomer(ctx, ch, db, runID)
	require.NoError(t, err)
	require.Empty(t, orders.DiffCustomers(byBilling, byAnalytics), "customers whose billing and analytics totals differ")
	require.Len(t, byAnalytics, len(byBilling))
	t.Logf("analytics: %d orders (%d good, %.2f EUR; %d poison) over %d customers, equal to billing, from %d records of %s; %d rows stored",
		facts.Facts, facts.Good, float64(facts.GoodCents)/100, facts.Poison, len(byAnalytics), records, orders.Topic, facts.Stored)
	require.Positive(t, bill.Redeliveries, "no record was billed twice: no kill landed mid-batch")
	t.Logf("billing: %d records redelivered after the kills and handled as no-ops", bill.Redeliveries)

	// Every poison order is in the DLQ console, with its failure history.
	checkDLQ(t, f, poison)
	retried, err := orders.EndSum(ctx, adm, retry.RetryTopic(orders.Topic))
	require.NoError(t, err)
	t.Logf("retry path: %d records through %s (%d poison orders x 2 retries = %d)", retried, retry.RetryTopic(orders.Topic), poison, 2*poison)
	require.GreaterOrEqual(t, retried, int64(2*poison))
	for i, p := range billingProcs {
		for _, l := range strings.Split(p.stderr.String(), "\n") {
			if strings.Contains(l, "restarting") || strings.Contains(l, "commit failed") {
				t.Logf("billing #%d: %s", i+1, l)
			}
		}
	}
	t.Logf("pipeline: %d orders produced, billed and analysed in %v (%.0f orders/s end to end, with 4 kills)",
		nOrders, drained.Round(100*time.Millisecond), nOrders/drained.Seconds())

	// The operator's rewinds of analytics: stop it, reset its group to the
	// start of orders, start it again.
	before, err := orders.FactsSnapshot(ctx, ch, db, runID)
	require.NoError(t, err)
	require.Len(t, before, nOrders)
	analyticsN := 1
	rewind := func() {
		t.Helper()
		analytics.stop(t)
		waitFor(t, 30*time.Second, "the analytics group to be empty", func() (bool, string) {
			dg, err := adm.DescribeGroups(ctx, orders.GroupAnalytics)
			if err != nil {
				return false, err.Error()
			}
			g := dg[orders.GroupAnalytics]
			return g.Err == nil && len(g.Members) == 0, fmt.Sprintf("%s, %d members, %v", g.State, len(g.Members), g.Err)
		})
		out, err := exec.Command(brokerBin, "groups", "reset", "-bootstrap", strings.Join(f.seeds(), ","),
			"-to-earliest", "-topic", orders.Topic, orders.GroupAnalytics).CombinedOutput()
		require.NoError(t, err, "brokerfleet groups reset: %s", out)
		if analyticsN == 1 {
			t.Logf("brokerfleet groups reset analytics -to-earliest:\n%s", strings.TrimSpace(string(out)))
		}
		lag, err := orders.Lag(ctx, adm, orders.GroupAnalytics, orders.Topic)
		require.NoError(t, err)
		require.Equal(t, records, lag, "after the reset the analytics group is at the start of every partition")
	}
	startAnalytics := func() {
		analyticsN++
		analytics = startProc(t, fmt.Sprintf("analytics #%d", analyticsN), "", ordersBin, append([]string{"analytics"}, consumerArgs...)...)
	}
	readFacts := func() orders.FactTotals {
		t.Helper()
		tot, err := orders.ReadFactTotals(ctx, ch, db, runID)
		require.NoError(t, err)
		return tot
	}
	caughtUp := func(what string, cond func(orders.FactTotals) bool) {
		t.Helper()
		began := time.Now()
		var tot orders.FactTotals
		waitFor(t, 90*time.Second, what, func() (bool, string) {
			la, err := orders.Lag(ctx, adm, orders.GroupAnalytics, orders.Topic)
			tot = readFacts()
			return err == nil && la == 0 && cond(tot), fmt.Sprintf("%+v, lag %d (%v)", tot, la, err)
		})
		t.Logf("%s: %d records in %v; %d orders in the collapsed view, %d rows stored",
			what, records, time.Since(began).Round(100*time.Millisecond), tot.Facts, tot.Stored)
	}
	// Merged down to one stored row per order, background merges
	// stopped: from here every row a load writes stays visible as stored.
	waitFor(t, 30*time.Second, "OPTIMIZE ... FINAL to leave one row per order", func() (bool, string) {
		if err := orders.OptimizeFacts(ctx, ch, db); err != nil {
			return false, err.Error()
		}
		tot := readFacts()
		return tot.Stored == nOrders, fmt.Sprintf("%d rows stored", tot.Stored)
	})
	require.NoError(t, orders.SetMerges(ctx, ch, db, false))

	// 1. A replay over the table: every record is loaded again, and the
	// collapsed view does not change.
	rewind()
	startAnalytics()
	caughtUp("replay over the table", func(tot orders.FactTotals) bool { return tot.Stored >= nOrders+records })
	replayed := readFacts()
	require.EqualValues(t, nOrders, replayed.Facts, "orders in the collapsed view after the replay")
	require.EqualValues(t, nOrders, replayed.Distinct)
	require.Equal(t, facts.Good, replayed.Good)
	require.Equal(t, facts.GoodCents, replayed.GoodCents)
	after, err := orders.FactsSnapshot(ctx, ch, db, runID)
	require.NoError(t, err)
	require.Equal(t, before, after, "the collapsed view after a replay equals the one before")
	require.NoError(t, orders.SetMerges(ctx, ch, db, true))

	// 2. A rebuild: the table emptied, then every record loaded again:
	// the same facts as before.
	rewind()
	require.NoError(t, orders.TruncateFacts(ctx, ch, db))
	require.Zero(t, readFacts().Stored)
	startAnalytics()
	caughtUp("rebuild into an empty table", func(tot orders.FactTotals) bool { return tot.Facts == nOrders })
	after, err = orders.FactsSnapshot(ctx, ch, db, runID)
	require.NoError(t, err)
	require.Equal(t, before, after, "the rebuilt analytics table equals the one before the rewind")
	rebuilt := readFacts()
	require.Equal(t, facts.Good, rebuilt.Good)
	require.Equal(t, facts.GoodCents, rebuilt.GoodCents)
	require.EqualValues(t, nOrders, rebuilt.Distinct)
}

// checkDLQ queries the DLQ console's API, as an operator would: every
// poison order is a letter with three failed attempts and their errors,
// and its value decodes through the schema registry.
func checkDLQ(t *testing.T, f *fleet, poison int) {
	t.Helper()
	h, err := dlqconsole.New(dlqconsole.Options{Seeds: f.seeds(), RegistryURL: f.registryURLs()[0]})
	require.NoError(t, err)
	defer dlqconsole.Close(h)
	srv := httptest.NewServer(h)
	defer srv.Close()
	get := func(path string, v any) {
		t.Helper()
		var lastErr string
		for attempt := 0; attempt < 20; attempt++ { // 503 while the console connects
			resp, err := http.Get(srv.URL + path)
			require.NoError(t, err)
			if resp.StatusCode == http.StatusOK {
				require.NoError(t, json.NewDecoder(resp.Body).Decode(v))
				resp.Body.Close()
				return
			}
			var e map[string]string
			_ = json.NewDecoder(resp.Body).Decode(&e)
			resp.Body.Close()
			lastErr = fmt.Sprintf("%d %s", resp.StatusCode, e["error"])
			time.Sleep(500 * time.Millisecond)
		}
		t.Fatalf("GET %s: %s", path, lastErr)
	}
	var topics struct{ Topics []dlqconsole.TopicSummary }
	get("/api/topics", &topics)
	dlq := retry.DLQTopic(orders.Topic)
	var summary *dlqconsole.TopicSummary
	for i := range topics.Topics {
		if topics.Topics[i].Topic == dlq {
			summary = &topics.Topics[i]
		}
	}
	require.NotNil(t, summary, "%s in the console's topics: %+v", dlq, topics.Topics)
	require.Equal(t, orders.Topic, summary.OriginTopic)

	var letters []dlqconsole.Letter
	for after := ""; ; {
		var page dlqconsole.LetterPage
		q := "/api/topics/" + dlq + "/letters?limit=1000"
		if after != "" {
			q += "&after=" + after
		}
		get(q, &page)
		letters = append(letters, page.Letters...)
		if after = page.Next; after == "" {
			break
		}
	}
	require.EqualValues(t, len(letters), summary.Letters, "letters listed = the topic summary's count")
	seen := map[string]int{}
	for _, l := range letters {
		var full dlqconsole.Letter
		get(fmt.Sprintf("/api/topics/%s/letters/%d/%d", dlq, l.Partition, l.Offset), &full)
		require.Equal(t, orders.Topic, full.OriginTopic)
		require.Equal(t, orders.FunctionName, full.Function)
		require.Equal(t, 3, full.Attempts, "attempts of %d/%d", l.Partition, l.Offset)
		require.Len(t, full.History, 3, "failure history of %d/%d", l.Partition, l.Offset)
		for i, h := range full.History {
			require.Equal(t, i+1, h.Attempt)
			require.Contains(t, h.Error, orders.ErrPoison.Error())
			require.False(t, h.At.IsZero())
		}
		require.Contains(t, full.LastError, orders.ErrPoison.Error())
		require.Equal(t, "json", full.Value.Encoding, "value decoded through the registry: %+v", full.Value)
		require.Equal(t, "AVRO", full.Value.SchemaType)
		var o struct {
			ID     string `json:"id"`
			Poison bool   `json:"poison"`
		}
		require.NoError(t, json.Unmarshal([]byte(full.Value.Data), &o), full.Value.Data)
		require.True(t, o.Poison, "a good order in the DLQ: %s", full.Value.Data)
		require.Equal(t, o.ID, full.Key.Data, "the letter's key is its order id")
		seen[o.ID]++
	}
	for i := 0; i < nOrders; i++ {
		if orders.IsPoison(i) {
			require.NotZero(t, seen[orders.OrderID(runID, i)], "poison order %s is not in the DLQ", orders.OrderID(runID, i))
		}
	}
	require.Len(t, seen, poison)
	t.Logf("DLQ console: %d letters for %d poison orders (%d extra copies: routed, then killed before the routing was recorded), each with 3 attempts of history",
		len(letters), poison, len(letters)-poison)
}

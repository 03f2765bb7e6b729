package orders

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratamq/strata/pkg/retry"
)

// DemoConfig configures RunDemo.
type DemoConfig struct {
	Seeds         []string      // Kafka bootstrap brokers (brokerfleet dev: 127.0.0.1:9092)
	Registries    []string      // schema registry URLs (brokerfleet dev: http://127.0.0.1:8081)
	ConsoleURL    string        // the DLQ console, printed for the reader
	PostgresURL   string        // billing's invoices; empty: start a throwaway server from Debian's postgresql package
	BillingSchema string        // their PostgreSQL schema
	ClickHouseURL string        // analytics' order facts; empty: start a throwaway server from Debian's clickhouse-server package
	AnalyticsDB   string        // their ClickHouse database
	Count         int           // orders to produce
	Rate          float64       // orders per second; 0: unthrottled
	Run           string        // order id prefix; empty: derived from the time
	RetryBase     time.Duration // first retry backoff
	Partitions    int32         // partitions of the topics it creates
	Timeout       time.Duration // give up after this long
	Logger        *slog.Logger  // the components' logs; nil: discard
}

// DemoSummary is one line of RunDemo's output.
type DemoSummary struct {
	Elapsed                      time.Duration
	Produced, Billed, Facts      int64
	Retried, DeadLettered        int64
	LagBilling, LagAnalytics     int64
	GoodExpected, PoisonExpected int
}

func (s DemoSummary) String() string {
	return fmt.Sprintf("%5.1fs produced %d  billed %d/%d  analytics orders %d  retried %d  DLQ'd %d/%d  lag billing %d analytics %d",
		s.Elapsed.Seconds(), s.Produced, s.Billed, s.GoodExpected, s.Facts, s.Retried, s.DeadLettered, s.PoisonExpected, s.LagBilling, s.LagAnalytics)
}

// RunDemo runs the whole pipeline in this process against a running
// cluster: the order service, billing, analytics and the retry worker,
// printing a summary line to w every second until every order is billed
// or dead-lettered and both groups' lag is zero.
func RunDemo(ctx context.Context, cfg DemoConfig, w io.Writer) error {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Run == "" {
		cfg.Run = "demo" + time.Now().UTC().Format("150405")
	}
	if cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.Timeout)
		defer cancel()
	}
	if cfg.PostgresURL == "" {
		fmt.Fprintln(w, "starting a throwaway PostgreSQL server for billing (no -postgres given)")
		pg, err := StartPostgres(ctx)
		if err != nil {
			return fmt.Errorf("%w (or pass -postgres URL)", err)
		}
		defer pg.Stop()
		cfg.PostgresURL = pg.URL
	}
	if cfg.ClickHouseURL == "" {
		fmt.Fprintln(w, "starting a throwaway ClickHouse server for analytics (no -clickhouse given)")
		ch, err := StartClickHouse(ctx)
		if err != nil {
			return fmt.Errorf("%w (or pass -clickhouse URL)", err)
		}
		defer ch.Stop()
		cfg.ClickHouseURL = ch.URL
	}
	conn, err := pgx.Connect(ctx, cfg.PostgresURL)
	if err != nil {
		return fmt.Errorf("orders: connect to PostgreSQL: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := Migrate(ctx, conn, cfg.BillingSchema); err != nil {
		return err
	}
	chConn, err := OpenClickHouse(ctx, cfg.ClickHouseURL)
	if err != nil {
		return err
	}
	defer chConn.Close()
	if v, err := chConn.ServerVersion(); err == nil {
		fmt.Fprintf(w, "analytics: ClickHouse %s at %s, database %s\n", v.Version, strings.TrimPrefix(cfg.ClickHouseURL, "clickhouse://"), cfg.AnalyticsDB)
	}
	if err := MigrateFacts(ctx, chConn, cfg.AnalyticsDB); err != nil {
		return err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(cfg.Seeds...))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	// Metadata of all topics, not BrokerMetadata: kadm answers the latter
	// from kgo's metadata cache, which can hold a partial broker list.
	md, err := adm.Metadata(ctx)
	if err != nil {
		return fmt.Errorf("orders: reach the cluster at %v: %w", cfg.Seeds, err)
	}
	if err := CreateTopics(ctx, adm, cfg.Partitions, int16(min(3, len(md.Brokers)))); err != nil {
		return err
	}
	base := map[string]int64{}
	for _, t := range []string{retry.RetryTopic(Topic), retry.DLQTopic(Topic)} {
		if base[t], err = EndSum(ctx, adm, t); err != nil {
			return err
		}
	}
	good, poison, _ := Expected(cfg.Count)
	fmt.Fprintf(w, "run %s: %d orders (%d poison) to %s; DLQ console %s\n", cfg.Run, cfg.Count, poison, Topic, cfg.ConsoleURL)

	cctx := ConsumerConfig{Seeds: cfg.Seeds, Registries: cfg.Registries, PostgresURL: cfg.PostgresURL, BillingSchema: cfg.BillingSchema,
		ClickHouseURL: cfg.ClickHouseURL, AnalyticsDB: cfg.AnalyticsDB,
		Policy: PipelinePolicy(cfg.RetryBase), Timing: DefaultGroupTiming(), Logger: cfg.Logger}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	errc := make(chan error, 4)
	goRun := func(name string, fn func(context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := Supervise(runCtx, name, cfg.Logger, 5, fn); err != nil {
				errc <- fmt.Errorf("%s: %w", name, err)
			}
		}()
	}
	goRun("billing", func(ctx context.Context) error { return RunBilling(ctx, cctx, nil) })
	goRun("analytics", func(ctx context.Context) error { return RunAnalytics(ctx, cctx, nil) })
	goRun("retryworker", func(ctx context.Context) error {
		return RunRetryWorker(ctx, cfg.Seeds, cctx.Policy, cctx.Timing)
	})
	var produced atomic.Int64
	prodDone := make(chan error, 1)
	go func() {
		prodDone <- Produce(runCtx, ProducerConfig{Seeds: cfg.Seeds, Registries: cfg.Registries, Run: cfg.Run, Count: cfg.Count, Rate: cfg.Rate}, &produced)
	}()
	defer func() { stop(); wg.Wait() }()

	start := time.Now()
	producing := true
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("orders: demo: %w", ctx.Err())
		case err := <-errc:
			return err
		case err := <-prodDone:
			if err != nil {
				return err
			}
			producing = false
			continue
		case <-tick.C:
		}
		s := DemoSummary{Elapsed: time.Since(start), Produced: produced.Load(), GoodExpected: good, PoisonExpected: poison}
		bill, err := ReadBillingTotals(ctx, conn, cfg.BillingSchema, cfg.Run)
		if err != nil {
			return err
		}
		facts, err := ReadFactTotals(ctx, chConn, cfg.AnalyticsDB, cfg.Run)
		if err != nil {
			return err
		}
		s.Billed, s.Facts = bill.Invoices, facts.Facts
		var errs []error
		r, err := EndSum(ctx, adm, retry.RetryTopic(Topic))
		errs = append(errs, err)
		d, err := EndSum(ctx, adm, retry.DLQTopic(Topic))
		errs = append(errs, err)
		s.Retried, s.DeadLettered = r-base[retry.RetryTopic(Topic)], d-base[retry.DLQTopic(Topic)]
		s.LagBilling, err = Lag(ctx, adm, GroupBilling, Topic)
		errs = append(errs, err)
		s.LagAnalytics, err = Lag(ctx, adm, GroupAnalytics, Topic)
		errs = append(errs, err)
		if err := errors.Join(errs...); err != nil {
			fmt.Fprintf(w, "%5.1fs (cluster not answering: %v)\n", s.Elapsed.Seconds(), err)
			continue
		}
		fmt.Fprintln(w, s)
		if !producing && s.Billed == int64(good) && s.DeadLettered >= int64(poison) && s.LagBilling == 0 && s.LagAnalytics == 0 {
			return demoDone(ctx, w, cfg, conn, chConn, s, bill, facts)
		}
	}
}

// demoDone prints billing's totals (PostgreSQL) beside analytics' (read
// from ClickHouse, collapsed) and fails when they disagree.
func demoDone(ctx context.Context, w io.Writer, cfg DemoConfig, conn *pgx.Conn, chConn driver.Conn, s DemoSummary, bill BillingTotals, facts FactTotals) error {
	byBilling, err := InvoicesByCustomer(ctx, conn, cfg.BillingSchema, cfg.Run)
	if err != nil {
		return err
	}
	byAnalytics, err := FactsByCustomer(ctx, chConn, cfg.AnalyticsDB, cfg.Run)
	if err != nil {
		return err
	}
	diff := DiffCustomers(byBilling, byAnalytics)
	fmt.Fprintf(w, "done in %.1fs; %d poison orders in %s, see %s\n", s.Elapsed.Seconds(), s.DeadLettered, retry.DLQTopic(Topic), cfg.ConsoleURL)
	fmt.Fprintf(w, "billing   (PostgreSQL %s.invoices): %d invoices, %.2f EUR, %d customers\n",
		cfg.BillingSchema, bill.Invoices, float64(bill.InvoiceCents)/100, len(byBilling))
	fmt.Fprintf(w, "analytics (ClickHouse %s, FINAL): %d good orders, %.2f EUR, %d customers; %d poison orders; %d orders in %d stored rows\n",
		factsTable(cfg.AnalyticsDB), facts.Good, float64(facts.GoodCents)/100, len(byAnalytics), facts.Poison, facts.Facts, facts.Stored)
	fmt.Fprintf(w, "customers whose totals differ: %d\n", len(diff))
	if len(diff) != 0 || facts.Good != bill.Invoices || facts.GoodCents != bill.InvoiceCents || facts.Distinct != facts.Facts {
		for _, d := range diff[:min(len(diff), 10)] {
			fmt.Fprintln(w, "  "+d)
		}
		return errors.New("orders: demo: analytics and billing disagree")
	}
	return nil
}

package orders

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratamq/strata/pkg/retry"
)

// ConsumerConfig configures the billing and analytics consumers.
type ConsumerConfig struct {
	Seeds         []string     // Kafka bootstrap brokers
	Registries    []string     // schema registry URLs, tried in order
	PostgresURL   string       // billing: where the invoices go
	BillingSchema string       // billing: the PostgreSQL schema of its tables
	ClickHouseURL string       // analytics: where the order facts go, clickhouse://host:port (OpenClickHouse)
	AnalyticsDB   string       // analytics: the ClickHouse database of its table
	Policy        retry.Policy // billing: attempts and backoff before the DLQ
	Timing        GroupTiming  // consumer group timeouts
	Logger        *slog.Logger // nil: discard
}

// ValidateBilling checks what RunBilling needs.
func (c *ConsumerConfig) ValidateBilling() error { return c.validate(false) }

// ValidateAnalytics checks what RunAnalytics needs (the ClickHouse URL's
// form too, not whether the server answers).
func (c *ConsumerConfig) ValidateAnalytics() error { return c.validate(true) }

func (c *ConsumerConfig) validate(analytics bool) error {
	switch {
	case len(c.Seeds) == 0:
		return errors.New("orders: consumer: no bootstrap brokers")
	case len(c.Registries) == 0:
		return errors.New("orders: consumer: no schema registry")
	case analytics && c.ClickHouseURL == "":
		return errNoClickHouseURL
	case analytics:
		if _, err := parseClickHouseURL(c.ClickHouseURL); err != nil {
			return err
		}
		if err := checkDB(c.AnalyticsDB); err != nil {
			return err
		}
	case c.PostgresURL == "":
		return errors.New("orders: billing: no PostgreSQL URL")
	case c.BillingSchema == "":
		return errors.New("orders: billing: no PostgreSQL schema name")
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if analytics {
		return nil
	}
	return c.Policy.Validate()
}

// PipelinePolicy is the retry policy of the pipeline: three attempts, the
// n-th retry after base×2^(n-1) (±20%), capped at 4×base.
func PipelinePolicy(base time.Duration) retry.Policy {
	return retry.Policy{MaxAttempts: 3, Backoff: retry.ExponentialBackoff(base, 4*base, 0.2, nil)}
}

// BillingStats counts what billing did in this process.
type BillingStats struct {
	Billed      atomic.Int64 // records billed (one transaction each)
	Redelivered atomic.Int64 // records handled before (no-ops)
	Routed      atomic.Int64 // failed records handed to the retry path
}

// RunBilling consumes Topic in group GroupBilling until ctx ends.
//
// Each record is billed in one PostgreSQL transaction (Bill: the record's
// position and the invoice). A poison order fails and goes, through
// pkg/retry's Router, to orders.retry with its failure history in the
// headers, or to orders.dlq after the policy's attempts; once the broker
// acknowledged that, its position is recorded too (Routed). A record whose
// position is recorded is a no-op when it comes again, so a crash costs
// neither a second invoice nor, but for the moment between the routing
// and its record, a second trip through the retry path.
//
// Offsets are committed manually, after the transactions of the whole
// poll. A failed commit (the group moved on: a rebalance, a coordinator
// failover) is not fatal: the records come again and change nothing.
func RunBilling(ctx context.Context, cfg ConsumerConfig, stats *BillingStats) error {
	if err := cfg.validate(false); err != nil {
		return err
	}
	if stats == nil {
		stats = new(BillingStats)
	}
	conn, err := pgx.Connect(ctx, cfg.PostgresURL)
	if err != nil {
		return fmt.Errorf("orders: billing: connect to PostgreSQL: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := Migrate(ctx, conn, cfg.BillingSchema); err != nil {
		return err
	}
	codec, err := NewCodec(cfg.Registries...)
	if err != nil {
		return err
	}
	// retry.GroupOpts: manual commits, rebalances held during a poll,
	// retry.Partitioner for the records the router re-produces.
	cl, err := kgo.NewClient(append(append(retry.GroupOpts(GroupBilling, Topic),
		kgo.SeedBrokers(cfg.Seeds...), kgo.ClientID("orders-billing")), cfg.Timing.opts()...)...)
	if err != nil {
		return fmt.Errorf("orders: billing client: %w", err)
	}
	defer cl.Close() // leaves the group
	router, err := retry.NewRouter(cl, cfg.Policy, FunctionName, nil)
	if err != nil {
		return err
	}
	b := &biller{cfg: cfg, conn: conn, codec: codec, cl: cl, router: router, stats: stats}
	cfg.Logger.Info("billing: consuming", "topic", Topic, "group", GroupBilling)
	for ctx.Err() == nil {
		fs := cl.PollRecords(ctx, 1000)
		if fs.IsClientClosed() {
			break
		}
		fs.EachError(func(t string, p int32, err error) {
			if ctx.Err() == nil {
				cfg.Logger.Warn("billing: fetch", "topic", t, "partition", p, "err", err)
			}
		})
		err := b.poll(ctx, fs)
		cl.AllowRebalance()
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			return err
		}
	}
	return nil
}

type biller struct {
	cfg    ConsumerConfig
	conn   *pgx.Conn
	codec  *Codec
	cl     *kgo.Client
	router *retry.Router
	stats  *BillingStats
}

func (b *biller) poll(ctx context.Context, fs kgo.Fetches) error {
	recs := fs.Records()
	if len(recs) == 0 {
		return nil
	}
	for _, r := range recs {
		if err := b.handle(ctx, r); err != nil {
			return err // nothing of this poll committed: it all comes again, as no-ops
		}
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := b.cl.CommitRecords(cctx, recs...); err != nil {
		b.cfg.Logger.Warn("billing: commit failed; the records will come again as no-ops", "records", len(recs), "err", err)
	}
	return nil
}

func (b *biller) handle(ctx context.Context, r *kgo.Record) error {
	pos := Position{r.Topic, r.Partition, r.Offset}
	o, cause := b.codec.Decode(ctx, r.Value)
	if cause == nil && o.Poison {
		cause = fmt.Errorf("bill order %s: %w", o.ID, ErrPoison)
	}
	if cause == nil {
		again, err := Bill(ctx, b.conn, b.cfg.BillingSchema, o, pos)
		if err != nil {
			return err
		}
		if again {
			b.stats.Redelivered.Add(1)
		} else {
			b.stats.Billed.Add(1)
		}
		return nil
	}
	again, err := Handled(ctx, b.conn, b.cfg.BillingSchema, pos)
	if err != nil {
		return err
	}
	if again {
		b.stats.Redelivered.Add(1)
		return nil
	}
	routed, err := b.router.Fail(ctx, cause, r)
	if err != nil {
		return err
	}
	b.stats.Routed.Add(1)
	id := o.ID
	if id == "" {
		id = string(r.Key)
	}
	return Routed(ctx, b.conn, b.cfg.BillingSchema, pos, id, routed[0].Topic)
}

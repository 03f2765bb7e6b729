package orders

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Schemas names the PostgreSQL schemas of the two consumers: billing's
// invoices and processed records, analytics' order facts.
type Schemas struct {
	Billing   string
	Analytics string
}

// DefaultSchemas are "billing" and "analytics".
func DefaultSchemas() Schemas { return Schemas{Billing: "billing", Analytics: "analytics"} }

func (s Schemas) invoices() string  { return pgx.Identifier{s.Billing, "invoices"}.Sanitize() }
func (s Schemas) processed() string { return pgx.Identifier{s.Billing, "processed"}.Sanitize() }
func (s Schemas) facts() string     { return pgx.Identifier{s.Analytics, "order_facts"}.Sanitize() }

// Migrate creates the schemas and tables that do not exist yet.
func Migrate(ctx context.Context, conn *pgx.Conn, s Schemas) error {
	stmts := []string{
		`CREATE SCHEMA IF NOT EXISTS ` + pgx.Identifier{s.Billing}.Sanitize(),
		`CREATE SCHEMA IF NOT EXISTS ` + pgx.Identifier{s.Analytics}.Sanitize(),
		// One invoice per order: the order id is the key.
		`CREATE TABLE IF NOT EXISTS ` + s.invoices() + ` (
			order_id      text PRIMARY KEY,
			customer      text NOT NULL,
			amount_cents  bigint NOT NULL,
			currency      text NOT NULL,
			items         int NOT NULL,
			src_partition int NOT NULL,
			src_offset    bigint NOT NULL,
			billed_at     timestamptz NOT NULL DEFAULT now())`,
		// Every record billing handled, by its position: a redelivered
		// record finds its row and changes nothing but the count.
		`CREATE TABLE IF NOT EXISTS ` + s.processed() + ` (
			topic      text NOT NULL,
			partition  int NOT NULL,
			"offset"   bigint NOT NULL,
			order_id   text NOT NULL,
			outcome    text NOT NULL, -- billed, or the topic a failed record was routed to
			deliveries int NOT NULL DEFAULT 1,
			PRIMARY KEY (topic, partition, "offset"))`,
		`CREATE TABLE IF NOT EXISTS ` + s.facts() + ` (
			order_id      text PRIMARY KEY,
			customer      text NOT NULL,
			amount_cents  bigint NOT NULL,
			currency      text NOT NULL,
			items         int NOT NULL,
			created_at    timestamptz NOT NULL,
			poison        boolean NOT NULL,
			src_partition int NOT NULL,
			src_offset    bigint NOT NULL)`,
	}
	for _, q := range stmts {
		if _, err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("orders: migrate: %w", err)
		}
	}
	return nil
}

// Position is where a record was read: topic, partition, offset.
type Position struct {
	Topic     string
	Partition int32
	Offset    int64
}

// Bill records o, read at pos, in one transaction: the position in the
// processed table and, the first time that position is seen, the invoice
// (a no-op when the order already has one). redelivered is true when the
// position was processed before.
func Bill(ctx context.Context, conn *pgx.Conn, s Schemas, o Order, pos Position) (redelivered bool, err error) {
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		var deliveries int
		if err := tx.QueryRow(ctx, `INSERT INTO `+s.processed()+` (topic, partition, "offset", order_id, outcome) VALUES ($1, $2, $3, $4, 'billed')
			ON CONFLICT (topic, partition, "offset") DO UPDATE SET deliveries = `+s.processed()+`.deliveries + 1
			RETURNING deliveries`, pos.Topic, pos.Partition, pos.Offset, o.ID).Scan(&deliveries); err != nil {
			return err
		}
		if redelivered = deliveries > 1; redelivered {
			return nil
		}
		_, err := tx.Exec(ctx, `INSERT INTO `+s.invoices()+` (order_id, customer, amount_cents, currency, items, src_partition, src_offset)
			VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (order_id) DO NOTHING`,
			o.ID, o.Customer, o.AmountCents, o.Currency, o.Items, pos.Partition, pos.Offset)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("orders: bill %s at %s/%d@%d: %w", o.ID, pos.Topic, pos.Partition, pos.Offset, err)
	}
	return redelivered, nil
}

// Handled says whether the record at pos was billed or routed before; a
// record that was is counted as delivered once more.
func Handled(ctx context.Context, conn *pgx.Conn, s Schemas, pos Position) (bool, error) {
	tag, err := conn.Exec(ctx, `UPDATE `+s.processed()+` SET deliveries = deliveries + 1 WHERE topic = $1 AND partition = $2 AND "offset" = $3`,
		pos.Topic, pos.Partition, pos.Offset)
	if err != nil {
		return false, fmt.Errorf("orders: look up %s/%d@%d: %w", pos.Topic, pos.Partition, pos.Offset, err)
	}
	return tag.RowsAffected() > 0, nil
}

// Routed records that the record at pos, order orderID, failed and was
// routed to topic (after the broker acknowledged it there).
func Routed(ctx context.Context, conn *pgx.Conn, s Schemas, pos Position, orderID, topic string) error {
	_, err := conn.Exec(ctx, `INSERT INTO `+s.processed()+` (topic, partition, "offset", order_id, outcome) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (topic, partition, "offset") DO NOTHING`, pos.Topic, pos.Partition, pos.Offset, orderID, topic)
	if err != nil {
		return fmt.Errorf("orders: record routing of %s/%d@%d: %w", pos.Topic, pos.Partition, pos.Offset, err)
	}
	return nil
}

// Fact is one row of analytics' order facts.
type Fact struct {
	Order
	Partition int32
	Offset    int64
}

// LoadFacts inserts facts in one transaction; orders already loaded are
// left as they are.
func LoadFacts(ctx context.Context, conn *pgx.Conn, s Schemas, facts []Fact) error {
	if len(facts) == 0 {
		return nil
	}
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		var b pgx.Batch
		for _, f := range facts {
			b.Queue(`INSERT INTO `+s.facts()+` (order_id, customer, amount_cents, currency, items, created_at, poison, src_partition, src_offset)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (order_id) DO NOTHING`,
				f.ID, f.Customer, f.AmountCents, f.Currency, f.Items, time.UnixMilli(f.CreatedAtMS).UTC(), f.Poison, f.Partition, f.Offset)
		}
		return tx.SendBatch(ctx, &b).Close()
	})
	if err != nil {
		return fmt.Errorf("orders: load %d facts: %w", len(facts), err)
	}
	return nil
}

// Totals are counts and sums over one run's orders (ids prefixed "run-").
type Totals struct {
	Invoices      int64 // billing: invoices
	InvoiceCents  int64 // billing: their amount
	Redeliveries  int64 // billing: records handled more than once (after a crash, a rebalance)
	Facts         int64 // analytics: rows
	GoodFacts     int64 // analytics: rows of orders that are not poison
	GoodFactCents int64 // analytics: their amount
	PoisonFacts   int64 // analytics: rows of poison orders
}

// ReadTotals reads the totals of run's orders.
func ReadTotals(ctx context.Context, conn *pgx.Conn, s Schemas, run string) (Totals, error) {
	var t Totals
	like := run + "-%"
	if err := conn.QueryRow(ctx, `SELECT count(*), coalesce(sum(amount_cents), 0)::bigint FROM `+s.invoices()+` WHERE order_id LIKE $1`, like).
		Scan(&t.Invoices, &t.InvoiceCents); err != nil {
		return t, fmt.Errorf("orders: billing totals: %w", err)
	}
	if err := conn.QueryRow(ctx, `SELECT coalesce(sum(deliveries - 1), 0)::bigint FROM `+s.processed()+` WHERE order_id LIKE $1`, like).
		Scan(&t.Redeliveries); err != nil {
		return t, fmt.Errorf("orders: billing redeliveries: %w", err)
	}
	if err := conn.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE NOT poison),
			coalesce(sum(amount_cents) FILTER (WHERE NOT poison), 0)::bigint, count(*) FILTER (WHERE poison)
			FROM `+s.facts()+` WHERE order_id LIKE $1`, like).
		Scan(&t.Facts, &t.GoodFacts, &t.GoodFactCents, &t.PoisonFacts); err != nil {
		return t, fmt.Errorf("orders: analytics totals: %w", err)
	}
	return t, nil
}

// InvoicedOrders returns the ids of run's orders that have an invoice.
func InvoicedOrders(ctx context.Context, conn *pgx.Conn, s Schemas, run string) (map[string]int, error) {
	rows, err := conn.Query(ctx, `SELECT order_id, count(*) FROM `+s.invoices()+` WHERE order_id LIKE $1 GROUP BY order_id`, run+"-%")
	if err != nil {
		return nil, fmt.Errorf("orders: invoices: %w", err)
	}
	out := map[string]int{}
	var id string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&id, &n}, func() error { out[id] = n; return nil })
	if err != nil {
		return nil, fmt.Errorf("orders: invoices: %w", err)
	}
	return out, nil
}

// CustomerMismatches counts the customers whose invoice count or amount
// differs between billing and analytics (good orders only), in run.
func CustomerMismatches(ctx context.Context, conn *pgx.Conn, s Schemas, run string) (int64, error) {
	var n int64
	err := conn.QueryRow(ctx, `WITH b AS (SELECT customer, count(*) AS n, sum(amount_cents) AS cents FROM `+s.invoices()+`
				WHERE order_id LIKE $1 GROUP BY customer),
			a AS (SELECT customer, count(*) AS n, sum(amount_cents) AS cents FROM `+s.facts()+`
				WHERE order_id LIKE $1 AND NOT poison GROUP BY customer)
		SELECT count(*) FROM b FULL OUTER JOIN a USING (customer)
		WHERE b.n IS DISTINCT FROM a.n OR b.cents IS DISTINCT FROM a.cents`, run+"-%").Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("orders: compare customers: %w", err)
	}
	return n, nil
}

// FactsSnapshot returns every analytics row of run, in order id order, one
// string per row.
func FactsSnapshot(ctx context.Context, conn *pgx.Conn, s Schemas, run string) ([]string, error) {
	rows, err := conn.Query(ctx, `SELECT concat_ws('|', order_id, customer, amount_cents, currency, items,
			to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS'), poison, src_partition, src_offset)
		FROM `+s.facts()+` WHERE order_id LIKE $1 ORDER BY order_id`, run+"-%")
	if err != nil {
		return nil, fmt.Errorf("orders: snapshot: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("orders: snapshot: %w", err)
	}
	return out, nil
}

// TruncateFacts empties analytics' table (the operator's rewind).
func TruncateFacts(ctx context.Context, conn *pgx.Conn, s Schemas) error {
	if _, err := conn.Exec(ctx, `TRUNCATE `+s.facts()); err != nil {
		return fmt.Errorf("orders: truncate facts: %w", err)
	}
	return nil
}

// DropSchemas removes both schemas and their tables.
func DropSchemas(ctx context.Context, conn *pgx.Conn, s Schemas) error {
	for _, name := range []string{s.Billing, s.Analytics} {
		if _, err := conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{name}.Sanitize()+` CASCADE`); err != nil {
			return fmt.Errorf("orders: drop schema %s: %w", name, err)
		}
	}
	return nil
}

package orders

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// DefaultBillingSchema is the PostgreSQL schema of billing's tables.
const DefaultBillingSchema = "billing"

func invoicesTable(schema string) string  { return pgx.Identifier{schema, "invoices"}.Sanitize() }
func processedTable(schema string) string { return pgx.Identifier{schema, "processed"}.Sanitize() }

// Migrate creates billing's schema and tables if they do not exist.
func Migrate(ctx context.Context, conn *pgx.Conn, schema string) error {
	if schema == "" {
		return fmt.Errorf("orders: migrate: no PostgreSQL schema name")
	}
	stmts := []string{
		`CREATE SCHEMA IF NOT EXISTS ` + pgx.Identifier{schema}.Sanitize(),
		// One invoice per order: the order id is the key.
		`CREATE TABLE IF NOT EXISTS ` + invoicesTable(schema) + ` (
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
		`CREATE TABLE IF NOT EXISTS ` + processedTable(schema) + ` (
			topic      text NOT NULL,
			partition  int NOT NULL,
			"offset"   bigint NOT NULL,
			order_id   text NOT NULL,
			outcome    text NOT NULL, -- billed, or the topic a failed record was routed to
			deliveries int NOT NULL DEFAULT 1,
			PRIMARY KEY (topic, partition, "offset"))`,
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
func Bill(ctx context.Context, conn *pgx.Conn, schema string, o Order, pos Position) (redelivered bool, err error) {
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		var deliveries int
		if err := tx.QueryRow(ctx, `INSERT INTO `+processedTable(schema)+` (topic, partition, "offset", order_id, outcome) VALUES ($1, $2, $3, $4, 'billed')
			ON CONFLICT (topic, partition, "offset") DO UPDATE SET deliveries = `+processedTable(schema)+`.deliveries + 1
			RETURNING deliveries`, pos.Topic, pos.Partition, pos.Offset, o.ID).Scan(&deliveries); err != nil {
			return err
		}
		if redelivered = deliveries > 1; redelivered {
			return nil
		}
		_, err := tx.Exec(ctx, `INSERT INTO `+invoicesTable(schema)+` (order_id, customer, amount_cents, currency, items, src_partition, src_offset)
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
func Handled(ctx context.Context, conn *pgx.Conn, schema string, pos Position) (bool, error) {
	tag, err := conn.Exec(ctx, `UPDATE `+processedTable(schema)+` SET deliveries = deliveries + 1 WHERE topic = $1 AND partition = $2 AND "offset" = $3`,
		pos.Topic, pos.Partition, pos.Offset)
	if err != nil {
		return false, fmt.Errorf("orders: look up %s/%d@%d: %w", pos.Topic, pos.Partition, pos.Offset, err)
	}
	return tag.RowsAffected() > 0, nil
}

// Routed records that the record at pos, order orderID, failed and was
// routed to topic (after the broker acknowledged it there).
func Routed(ctx context.Context, conn *pgx.Conn, schema string, pos Position, orderID, topic string) error {
	_, err := conn.Exec(ctx, `INSERT INTO `+processedTable(schema)+` (topic, partition, "offset", order_id, outcome) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (topic, partition, "offset") DO NOTHING`, pos.Topic, pos.Partition, pos.Offset, orderID, topic)
	if err != nil {
		return fmt.Errorf("orders: record routing of %s/%d@%d: %w", pos.Topic, pos.Partition, pos.Offset, err)
	}
	return nil
}

// BillingTotals are billing's counts and sums over one run's orders (ids
// prefixed "<run>-").
type BillingTotals struct {
	Invoices     int64 // invoices
	InvoiceCents int64 // their amount
	Redeliveries int64 // records handled more than once (after a crash, a rebalance)
}

// ReadBillingTotals reads billing's totals of run's orders.
func ReadBillingTotals(ctx context.Context, conn *pgx.Conn, schema, run string) (BillingTotals, error) {
	var t BillingTotals
	like := run + "-%"
	if err := conn.QueryRow(ctx, `SELECT count(*), coalesce(sum(amount_cents), 0)::bigint FROM `+invoicesTable(schema)+` WHERE order_id LIKE $1`, like).
		Scan(&t.Invoices, &t.InvoiceCents); err != nil {
		return t, fmt.Errorf("orders: billing totals: %w", err)
	}
	if err := conn.QueryRow(ctx, `SELECT coalesce(sum(deliveries - 1), 0)::bigint FROM `+processedTable(schema)+` WHERE order_id LIKE $1`, like).
		Scan(&t.Redeliveries); err != nil {
		return t, fmt.Errorf("orders: billing redeliveries: %w", err)
	}
	return t, nil
}

// InvoicedOrders returns the ids of run's orders that have an invoice.
func InvoicedOrders(ctx context.Context, conn *pgx.Conn, schema, run string) (map[string]int, error) {
	rows, err := conn.Query(ctx, `SELECT order_id, count(*) FROM `+invoicesTable(schema)+` WHERE order_id LIKE $1 GROUP BY order_id`, run+"-%")
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

// InvoicesByCustomer reads run's invoices per customer.
func InvoicesByCustomer(ctx context.Context, conn *pgx.Conn, schema, run string) (map[string]CustomerTotal, error) {
	rows, err := conn.Query(ctx, `SELECT customer, count(*), sum(amount_cents)::bigint FROM `+invoicesTable(schema)+`
		WHERE order_id LIKE $1 GROUP BY customer`, run+"-%")
	if err != nil {
		return nil, fmt.Errorf("orders: invoices per customer: %w", err)
	}
	out := map[string]CustomerTotal{}
	var c string
	var t CustomerTotal
	_, err = pgx.ForEachRow(rows, []any{&c, &t.Orders, &t.Cents}, func() error { out[c] = t; return nil })
	if err != nil {
		return nil, fmt.Errorf("orders: invoices per customer: %w", err)
	}
	return out, nil
}

// DropSchema removes billing's schema and its tables.
func DropSchema(ctx context.Context, conn *pgx.Conn, schema string) error {
	if _, err := conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
		return fmt.Errorf("orders: drop schema %s: %w", schema, err)
	}
	return nil
}

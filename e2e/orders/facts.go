package orders

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// DefaultAnalyticsDB is the ClickHouse database of analytics' order facts.
const DefaultAnalyticsDB = "analytics"

// OpenClickHouse connects to the server at rawURL over ClickHouse's native
// protocol with clickhouse-go and pings it. rawURL is
// clickhouse://[user[:password]@]host:port[/database][?options], options
// as clickhouse-go's DSN takes them (dial_timeout, compress, ...).
//
// Only the native protocol: Debian 12's server (18.16.1, native revision
// 54412) answers clickhouse-go's HTTP mode with "Unknown setting
// client_protocol_version" before the first query.
func OpenClickHouse(ctx context.Context, rawURL string) (driver.Conn, error) {
	opts, err := parseClickHouseURL(rawURL)
	if err != nil {
		return nil, err
	}
	addr := strings.Join(opts.Addr, ",")
	conn, err := clickhouse.Open(opts)
	if err != nil {
		return nil, fmt.Errorf("orders: ClickHouse at %s: %w", addr, err)
	}
	if err := conn.Ping(ctx); err != nil {
		conn.Close()
		return nil, fmt.Errorf("orders: ClickHouse at %s: %w", addr, err)
	}
	return conn, nil
}

func parseClickHouseURL(rawURL string) (*clickhouse.Options, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("orders: ClickHouse URL: %w", err)
	}
	if u.Scheme != "clickhouse" || u.Host == "" {
		return nil, fmt.Errorf("orders: ClickHouse URL %q: want clickhouse://host:port[/database] (the native protocol, port 9000 by default)", redact(u))
	}
	opts, err := clickhouse.ParseDSN(rawURL)
	if err != nil {
		return nil, fmt.Errorf("orders: ClickHouse URL %q: %w", redact(u), err)
	}
	if opts.DialTimeout == 0 || opts.DialTimeout > 5*time.Second {
		opts.DialTimeout = 5 * time.Second
	}
	return opts, nil
}

func redact(u *url.URL) string {
	if u.User == nil {
		return u.String()
	}
	c := *u
	c.User = url.User(u.User.Username())
	return c.String()
}

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func checkDB(db string) error {
	if !identifier.MatchString(db) {
		return fmt.Errorf("orders: ClickHouse database name %q: want letters, digits and underscores, not starting with a digit", db)
	}
	return nil
}

func factsTable(db string) string { return db + ".order_facts" }

// factColumns are the columns LoadFacts writes, in its order.
const factColumns = `order_id, customer, amount_cents, currency, items, created_at_ms, poison, src_partition, src_offset`

// MigrateFacts creates db and its order_facts table if they do not exist.
//
// The table is a ReplacingMergeTree ordered by order id with src_offset
// as its version: every copy of an order (a record delivered again after
// a crash or a failed commit, a poison order's retried copies, a replay
// after a rewind) is stored as it comes, and merges, or FINAL at read
// time, keep one row per order: the copy at the highest offset. An
// order's copies all sit in one partition of orders (its key's; the
// retry worker redelivers to the origin partition), so the offset orders
// them, and the row kept does not depend on the order in which copies
// arrive. Readers see the collapsed view: FINAL, or argMax over
// src_offset with GROUP BY order_id.
func MigrateFacts(ctx context.Context, conn driver.Conn, db string) error {
	if err := checkDB(db); err != nil {
		return err
	}
	stmts := []string{
		`CREATE DATABASE IF NOT EXISTS ` + db,
		`CREATE TABLE IF NOT EXISTS ` + factsTable(db) + ` (
			order_id      String,
			customer      String,
			amount_cents  Int64,
			currency      String,
			items         Int32,
			created_at_ms Int64,
			created_at    DateTime ALIAS toDateTime(intDiv(created_at_ms, 1000)),
			poison        UInt8,
			src_partition Int32,
			src_offset    UInt64
		) ENGINE = ReplacingMergeTree(src_offset) ORDER BY order_id`,
	}
	for _, q := range stmts {
		if err := conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("orders: migrate ClickHouse %s: %w", db, err)
		}
	}
	return nil
}

// Fact is one row of analytics' order facts.
type Fact struct {
	Order
	Partition int32
	Offset    int64
}

// LoadFacts writes facts to db's order facts in one INSERT (one block: the
// server stores all of it or none). Copies of orders already there are
// written too; the table's engine collapses them (MigrateFacts).
func LoadFacts(ctx context.Context, conn driver.Conn, db string, facts []Fact) error {
	if len(facts) == 0 {
		return nil
	}
	// The column list is needed: without one, 18.16 answers the INSERT
	// with a header block of no columns and clickhouse-go can append
	// nothing ("expected 0 arguments").
	b, err := conn.PrepareBatch(ctx, `INSERT INTO `+factsTable(db)+` (`+factColumns+`)`)
	if err != nil {
		return fmt.Errorf("orders: load %d facts: %w", len(facts), err)
	}
	for _, f := range facts {
		if f.Offset < 0 {
			_ = b.Abort()
			return fmt.Errorf("orders: load fact %s: negative offset %d", f.ID, f.Offset)
		}
		poison := uint8(0)
		if f.Poison {
			poison = 1
		}
		if err := b.Append(f.ID, f.Customer, f.AmountCents, f.Currency, f.Items, f.CreatedAtMS, poison, f.Partition, uint64(f.Offset)); err != nil {
			_ = b.Abort()
			return fmt.Errorf("orders: load fact %s: %w", f.ID, err)
		}
	}
	if err := b.Send(); err != nil {
		return fmt.Errorf("orders: load %d facts: %w", len(facts), err)
	}
	return nil
}

// FactTotals are counts and sums over one run's facts (order ids
// prefixed "<run>-"), in the collapsed view but for Stored.
type FactTotals struct {
	Facts     int64 // orders
	Good      int64 // orders that are not poison
	GoodCents int64 // their amount
	Poison    int64 // poison orders
	Distinct  int64 // distinct order ids (= Facts when nothing is duplicated)
	Stored    int64 // rows as stored: copies that no merge has collapsed yet count too
}

// ReadFactTotals reads run's totals: FINAL for the collapsed view, and the
// stored rows without it.
func ReadFactTotals(ctx context.Context, conn driver.Conn, db, run string) (FactTotals, error) {
	var t FactTotals
	if err := checkDB(db); err != nil {
		return t, err
	}
	var facts, good, poison, distinct, stored uint64
	err := conn.QueryRow(ctx, `SELECT count(), countIf(poison = 0), toInt64(sumIf(amount_cents, poison = 0)), countIf(poison = 1), uniqExact(order_id)
		FROM `+factsTable(db)+` FINAL WHERE order_id LIKE ?`, run+"-%").Scan(&facts, &good, &t.GoodCents, &poison, &distinct)
	if err != nil {
		return t, fmt.Errorf("orders: analytics totals: %w", err)
	}
	if err := conn.QueryRow(ctx, `SELECT count() FROM `+factsTable(db)+` WHERE order_id LIKE ?`, run+"-%").Scan(&stored); err != nil {
		return t, fmt.Errorf("orders: analytics stored rows: %w", err)
	}
	t.Facts, t.Good, t.Poison, t.Distinct, t.Stored = int64(facts), int64(good), int64(poison), int64(distinct), int64(stored)
	return t, nil
}

// CustomerTotal is one customer's good orders and their amount.
type CustomerTotal struct {
	Orders int64
	Cents  int64
}

// FactsByCustomer reads run's good orders per customer, collapsed (FINAL).
func FactsByCustomer(ctx context.Context, conn driver.Conn, db, run string) (map[string]CustomerTotal, error) {
	if err := checkDB(db); err != nil {
		return nil, err
	}
	rows, err := conn.Query(ctx, `SELECT customer, count(), toInt64(sum(amount_cents)) FROM `+factsTable(db)+` FINAL
		WHERE order_id LIKE ? AND poison = 0 GROUP BY customer`, run+"-%")
	if err != nil {
		return nil, fmt.Errorf("orders: analytics per customer: %w", err)
	}
	defer rows.Close()
	out := map[string]CustomerTotal{}
	for rows.Next() {
		var c string
		var n uint64
		var cents int64
		if err := rows.Scan(&c, &n, &cents); err != nil {
			return nil, fmt.Errorf("orders: analytics per customer: %w", err)
		}
		out[c] = CustomerTotal{Orders: int64(n), Cents: cents}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("orders: analytics per customer: %w", err)
	}
	return out, nil
}

// DiffCustomers lists the customers whose totals differ between a and b,
// sorted, one "customer: a ... b ..." line each.
func DiffCustomers(a, b map[string]CustomerTotal) []string {
	var out []string
	for c, ta := range a {
		if tb, ok := b[c]; !ok || tb != ta {
			out = append(out, fmt.Sprintf("%s: %+v, %+v", c, ta, b[c]))
		}
	}
	for c, tb := range b {
		if _, ok := a[c]; !ok {
			out = append(out, fmt.Sprintf("%s: %+v, %+v", c, CustomerTotal{}, tb))
		}
	}
	sort.Strings(out)
	return out
}

// FactsSnapshot returns run's facts in order id order, one string per
// order, collapsed with argMax over src_offset (not FINAL: the other way
// to read the collapsed view, so the two are checked against each other).
func FactsSnapshot(ctx context.Context, conn driver.Conn, db, run string) ([]string, error) {
	if err := checkDB(db); err != nil {
		return nil, err
	}
	rows, err := conn.Query(ctx, `SELECT concat(order_id, '|', argMax(customer, src_offset), '|', toString(argMax(amount_cents, src_offset)),
			'|', argMax(currency, src_offset), '|', toString(argMax(items, src_offset)), '|', toString(argMax(created_at_ms, src_offset)),
			'|', toString(argMax(poison, src_offset)), '|', toString(argMax(src_partition, src_offset)), '|', toString(max(src_offset)))
		FROM `+factsTable(db)+` WHERE order_id LIKE ? GROUP BY order_id ORDER BY order_id`, run+"-%")
	if err != nil {
		return nil, fmt.Errorf("orders: snapshot: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, fmt.Errorf("orders: snapshot: %w", err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("orders: snapshot: %w", err)
	}
	return out, nil
}

// TruncateFacts empties db's order facts (an operator's rebuild).
func TruncateFacts(ctx context.Context, conn driver.Conn, db string) error {
	if err := checkDB(db); err != nil {
		return err
	}
	if err := conn.Exec(ctx, `TRUNCATE TABLE `+factsTable(db)); err != nil {
		return fmt.Errorf("orders: truncate facts: %w", err)
	}
	return nil
}

// SetMerges stops or starts the background merges of db's order facts
// (SYSTEM STOP|START MERGES), so that a test sees stored copies before a
// merge collapses them.
func SetMerges(ctx context.Context, conn driver.Conn, db string, on bool) error {
	if err := checkDB(db); err != nil {
		return err
	}
	verb := "STOP"
	if on {
		verb = "START"
	}
	if err := conn.Exec(ctx, `SYSTEM `+verb+` MERGES `+factsTable(db)); err != nil {
		return fmt.Errorf("orders: %s merges: %w", verb, err)
	}
	return nil
}

// OptimizeFacts merges every part of db's order facts now (OPTIMIZE ...
// FINAL), collapsing the stored copies.
func OptimizeFacts(ctx context.Context, conn driver.Conn, db string) error {
	if err := checkDB(db); err != nil {
		return err
	}
	if err := conn.Exec(ctx, `OPTIMIZE TABLE `+factsTable(db)+` FINAL`); err != nil {
		return fmt.Errorf("orders: optimize facts: %w", err)
	}
	return nil
}

// DropAnalytics removes db and its tables.
func DropAnalytics(ctx context.Context, conn driver.Conn, db string) error {
	if err := checkDB(db); err != nil {
		return err
	}
	if err := conn.Exec(ctx, `DROP DATABASE IF EXISTS `+db); err != nil {
		return fmt.Errorf("orders: drop ClickHouse database %s: %w", db, err)
	}
	return nil
}

// errNoClickHouseURL is the consumer's error without a server.
var errNoClickHouseURL = errors.New("orders: analytics: no ClickHouse URL")

package orders_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stratamq/strata/e2e/orders"
)

// TestFactsCollapse loads copies of orders into a real ClickHouse, as an
// at-least-once consumer does: a poll's records, a redelivery of some of
// them after a lost commit, and a poison order's retried copies at later
// offsets of its partition. With merges stopped, every copy is stored;
// the collapsed view (FINAL, and argMax in FactsSnapshot) has one row per
// order, the copy at the highest offset, whatever order the copies came
// in; a merge leaves one stored row per order.
func TestFactsCollapse(t *testing.T) {
	url := clickhouseURL(t)
	ctx := context.Background()
	conn, err := orders.OpenClickHouse(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	db := analyticsDB("analytics_collapse")
	require.NoError(t, orders.DropAnalytics(ctx, conn, db))
	t.Cleanup(func() { _ = orders.DropAnalytics(ctx, conn, db) })
	require.NoError(t, orders.MigrateFacts(ctx, conn, db))
	require.NoError(t, orders.MigrateFacts(ctx, conn, db), "migrating twice is a no-op")
	require.NoError(t, orders.SetMerges(ctx, conn, db, false))

	// Orders 40-49 of run "ct" (order 42 is poison) over 3 partitions.
	const run = "ct"
	var first []orders.Fact
	next := map[int32]int64{}
	var goodCents int64
	for i := 40; i < 50; i++ {
		o := orders.Generate(run, i)
		p := int32(i % 3)
		first = append(first, orders.Fact{Order: o, Partition: p, Offset: next[p]})
		next[p]++
		if !o.Poison {
			goodCents += o.AmountCents
		}
	}
	poison := first[2]
	require.True(t, poison.Poison)
	// A redelivery of five records (same positions) and the poison
	// order's two retried copies, later in its partition.
	second := slices.Clone(first[3:8])
	for k := int64(1); k <= 2; k++ {
		c := poison
		c.Offset = next[c.Partition] + 100*k
		second = append(second, c)
	}
	require.NoError(t, orders.LoadFacts(ctx, conn, db, first))
	require.NoError(t, orders.LoadFacts(ctx, conn, db, second))

	want := make([]string, 0, len(first))
	for _, f := range first {
		if f.ID == poison.ID {
			f.Offset = second[len(second)-1].Offset // the last retried copy
		}
		p := 0
		if f.Poison {
			p = 1
		}
		want = append(want, fmt.Sprintf("%s|%s|%d|%s|%d|%d|%d|%d|%d", f.ID, f.Customer, f.AmountCents, f.Currency, f.Items, f.CreatedAtMS, p, f.Partition, f.Offset))
	}
	tot, err := orders.ReadFactTotals(ctx, conn, db, run)
	require.NoError(t, err)
	require.Equal(t, orders.FactTotals{Facts: 10, Good: 9, GoodCents: goodCents, Poison: 1, Distinct: 10, Stored: 17}, tot,
		"collapsed view: 10 orders; stored: 10 + 5 redelivered + 2 retried copies")
	snap, err := orders.FactsSnapshot(ctx, conn, db, run)
	require.NoError(t, err)
	require.Equal(t, want, snap)

	byCustomer, err := orders.FactsByCustomer(ctx, conn, db, run)
	require.NoError(t, err)
	var n, cents int64
	for _, c := range byCustomer {
		n, cents = n+c.Orders, cents+c.Cents
	}
	require.Equal(t, []int64{9, goodCents}, []int64{n, cents}, "per customer, good orders only")

	// The same copies in the opposite order, into an empty table: the
	// same collapsed view.
	require.NoError(t, orders.TruncateFacts(ctx, conn, db))
	require.NoError(t, orders.LoadFacts(ctx, conn, db, second))
	require.NoError(t, orders.LoadFacts(ctx, conn, db, first))
	snap, err = orders.FactsSnapshot(ctx, conn, db, run)
	require.NoError(t, err)
	require.Equal(t, want, snap, "the row kept does not depend on the order copies arrive in")

	// A merge collapses what is stored.
	require.NoError(t, orders.SetMerges(ctx, conn, db, true))
	require.NoError(t, orders.OptimizeFacts(ctx, conn, db))
	tot, err = orders.ReadFactTotals(ctx, conn, db, run)
	require.NoError(t, err)
	require.EqualValues(t, 10, tot.Stored, "stored rows after OPTIMIZE ... FINAL")
	snap, err = orders.FactsSnapshot(ctx, conn, db, run)
	require.NoError(t, err)
	require.Equal(t, want, snap)

	// Bad input gets errors that say what is wrong.
	bad := first[0]
	bad.Offset = -1
	require.ErrorContains(t, orders.LoadFacts(ctx, conn, db, []orders.Fact{bad}), "negative offset")
	require.ErrorContains(t, orders.MigrateFacts(ctx, conn, "analytics; DROP DATABASE x"), "database name")
	_, err = orders.OpenClickHouse(ctx, strings.Replace(url, "clickhouse://", "http://", 1))
	require.ErrorContains(t, err, "want clickhouse://host:port")
	_, err = orders.OpenClickHouse(ctx, "clickhouse://127.0.0.1:1")
	require.ErrorContains(t, err, "127.0.0.1:1")
}

package orders_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/stratamq/strata/e2e/orders"
)

// postgresURL returns the URL of a PostgreSQL server for the test: the one
// named by STRATA_POSTGRES_URL, else a throwaway one started from Debian's
// packages (stopped when the test ends). Without either the test skips,
// or fails when STRATA_REQUIRE_ALL is set (CI).
func postgresURL(t *testing.T) string {
	t.Helper()
	if u := os.Getenv("STRATA_POSTGRES_URL"); u != "" {
		return u
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pg, err := orders.StartPostgres(ctx)
	if err != nil {
		msg := "PostgreSQL is not available: " + err.Error() +
			"; install it (apt-get install -y postgresql) or set STRATA_POSTGRES_URL"
		if os.Getenv("STRATA_REQUIRE_ALL") != "" {
			t.Fatal(msg + " (STRATA_REQUIRE_ALL is set, so this is a failure)")
		}
		if errors.Is(err, orders.ErrNoPostgres) {
			t.Skip(msg)
		}
		t.Fatal(msg) // installed but broken: worth a failure
	}
	t.Cleanup(pg.Stop)
	return pg.URL
}

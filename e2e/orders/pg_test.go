package orders_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/stratamq/strata/e2e/orders"
	"github.com/stratamq/strata/pkg/testenv"
)

// postgresURL returns the URL of a PostgreSQL server for the test: the one
// named by STRATA_POSTGRES_URL, else a throwaway one started from Debian's
// packages (stopped when the test ends). Without either the test skips,
// or fails when STRATA_REQUIRE_ALL is set (CI; testenv.Missing); a server
// that is installed but does not start is a failure.
func postgresURL(t *testing.T) string {
	t.Helper()
	if u := os.Getenv("STRATA_POSTGRES_URL"); u != "" {
		return u
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pg, err := orders.StartPostgres(ctx)
	if errors.Is(err, orders.ErrNoPostgres) {
		testenv.Missing(t, testenv.PostgreSQL, err.Error()+", and STRATA_POSTGRES_URL is not set")
	}
	if err != nil {
		t.Fatalf("PostgreSQL is installed but did not start: %v", err)
	}
	t.Cleanup(pg.Stop)
	return pg.URL
}

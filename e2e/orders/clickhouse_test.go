package orders_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/stratamq/strata/e2e/orders"
	"github.com/stratamq/strata/pkg/testenv"
)

// clickhouseURL returns the URL of a ClickHouse server for the test: the
// one named by STRATA_CLICKHOUSE_URL, else a throwaway one started from
// Debian's clickhouse-server package (stopped when the test ends).
// Without either the test skips, or fails when STRATA_REQUIRE_ALL is set
// (CI; testenv.Missing); a server that is installed but does not start is
// a failure.
func clickhouseURL(t *testing.T) string {
	t.Helper()
	if u := os.Getenv("STRATA_CLICKHOUSE_URL"); u != "" {
		return u
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ch, err := orders.StartClickHouse(ctx)
	if errors.Is(err, orders.ErrNoClickHouse) {
		testenv.Missing(t, testenv.ClickHouse, err.Error()+", and STRATA_CLICKHOUSE_URL is not set")
	}
	if err != nil {
		t.Fatalf("ClickHouse is installed but did not start: %v", err)
	}
	t.Cleanup(ch.Stop)
	return ch.URL
}

// analyticsDB is the ClickHouse database a test uses: a name of its own
// (dropped at the end) on someone else's server, else the default.
func analyticsDB(name string) string {
	if os.Getenv("STRATA_CLICKHOUSE_URL") == "" {
		return name
	}
	return fmt.Sprintf("%s_%d", name, os.Getpid())
}

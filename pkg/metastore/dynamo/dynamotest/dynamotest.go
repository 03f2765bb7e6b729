// Package dynamotest runs DynamoDB stand-ins for tests: minidyn in-process
// (package dynamolocal) behind httptest, dynalite as one Node process per
// test binary, a request Counter and a fault injector (Faults). It imports
// testing and is used only from tests.
//
// A typical broker test:
//
//	endpoint := dynamotest.StartMinidyn(t) // or StartDynalite(t)
//	counter := dynamotest.NewCounter()
//	store := dynamotest.NewStore(t, endpoint, counter.Option())
//	counter.Reset() // forget the table's creation
//	... run brokers on store ...
//	t.Logf("%d writes", counter.Writes())
//
// Faults goes in front of minidyn (StartMinidynWith(t, faults.Wrap)) to
// fail or delay requests.
package dynamotest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/stratamq/strata/pkg/metastore/dynamo"
	"github.com/stratamq/strata/pkg/metastore/dynamo/dynamolocal"
)

// StartMinidyn serves a fresh, empty minidyn on 127.0.0.1 for the rest of
// the test and returns its endpoint URL.
func StartMinidyn(t testing.TB) string {
	return StartMinidynWith(t, nil)
}

// StartMinidynWith is StartMinidyn with wrap (for instance Faults.Wrap)
// in front of minidyn's handler; a nil wrap adds nothing.
func StartMinidynWith(t testing.TB, wrap func(http.Handler) http.Handler) string {
	t.Helper()
	h := dynamolocal.NewHandler() // serializes requests: minidyn is not safe for concurrent use
	if wrap != nil {
		h = wrap(h)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}

// NewClient returns a client for endpoint with dynamo.NewClient's
// retryer; opts apply last (Counter.Option, a retry budget...).
func NewClient(t testing.TB, endpoint string, opts ...func(*dynamodb.Options)) *dynamodb.Client {
	t.Helper()
	c, err := dynamo.NewClient(context.Background(), endpoint, "", 0, opts...)
	if err != nil {
		t.Fatalf("dynamodb client for %s: %v", endpoint, err)
	}
	return c
}

var tableSeq atomic.Int64

// NewTable creates a table with a name unique in this process and returns
// the name. Tables are left in place: every stand-in lives no longer than
// the test binary.
func NewTable(t testing.TB, client *dynamodb.Client) string {
	t.Helper()
	name := fmt.Sprintf("strata-test-%d-%d", os.Getpid(), tableSeq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := dynamo.CreateTable(ctx, client, name); err != nil {
		t.Fatalf("create table %s: %v", name, err)
	}
	return name
}

// NewStore returns a store on a fresh table at endpoint; opts configure
// its client (a Counter sees the table's creation too).
func NewStore(t testing.TB, endpoint string, opts ...func(*dynamodb.Options)) *dynamo.Store {
	t.Helper()
	c := NewClient(t, endpoint, opts...)
	return dynamo.New(c, NewTable(t, c))
}

// Retries returns a client option that sets the retryer to
// dynamo.Retryer(retries).
func Retries(retries int) func(*dynamodb.Options) {
	return func(o *dynamodb.Options) { o.Retryer = dynamo.Retryer(retries) }
}

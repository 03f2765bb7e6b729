package dynamo_test

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/stratamq/strata/pkg/metastore"
	"github.com/stratamq/strata/pkg/metastore/dynamo"
	"github.com/stratamq/strata/pkg/metastore/dynamo/dynamotest"
	"github.com/stratamq/strata/pkg/metastore/metastoretest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	dynamotest.StopDynalite()
	os.Exit(code)
}

const noTransactions = "dynalite does not implement TransactWriteItems"

func TestConformanceMinidyn(t *testing.T) {
	endpoint := dynamotest.StartMinidyn(t)
	metastoretest.Run(t, func(t *testing.T) metastore.Store {
		return dynamotest.NewStore(t, endpoint)
	}, metastoretest.Options{})
}

func TestConformanceDynalite(t *testing.T) {
	endpoint := dynamotest.StartDynalite(t)
	metastoretest.Run(t, func(t *testing.T) metastore.Store {
		return dynamotest.NewStore(t, endpoint)
	}, metastoretest.Options{NoTransactions: noTransactions})
}

// backends runs fn against each stand-in's endpoint.
func backends(t *testing.T, fn func(t *testing.T, endpoint string, transactions bool)) {
	t.Run("minidyn", func(t *testing.T) { fn(t, dynamotest.StartMinidyn(t), true) })
	t.Run("dynalite", func(t *testing.T) { fn(t, dynamotest.StartDynalite(t), false) })
}

var testCtx = metastoretest.Ctx

func must[T any](t *testing.T) func(T, error) T { return metastoretest.Must[T](t) }

var wantErr = metastoretest.WantErr

// Counters and versioned items at the same key are independent, and
// counters never show in Get or Query.
func TestCountersApart(t *testing.T) {
	backends(t, func(t *testing.T, endpoint string, _ bool) {
		s, c := dynamotest.NewStore(t, endpoint), testCtx(t)
		k := metastore.Key{PK: "p", SK: "c"}
		if n := must[int64](t)(s.Add(c, k, 5)); n != 5 {
			t.Fatalf("add: %d", n)
		}
		_, err := s.Get(c, k)
		wantErr(t, err, metastore.ErrNotFound)
		if items := must[[]metastore.Item](t)(s.Query(c, "p", "")); len(items) != 0 {
			t.Fatalf("query lists counters: %+v", items)
		}
		if items := must[[]metastore.Item](t)(s.Query(c, dynamo.CounterPrefix+"p", "")); len(items) != 0 {
			t.Fatalf("query of the counter key space: %+v", items)
		}
		must[metastore.Item](t)(s.Put(c, metastore.Item{Key: k, Value: []byte("x")}, metastore.IfAbsent()))
		if n := must[int64](t)(s.Add(c, k, -2)); n != 3 {
			t.Fatalf("add after put: %d", n)
		}
		must[metastore.Item](t)(s.Put(c, metastore.Item{Key: k, Value: []byte("y")}, metastore.IfVersion(1)))
		if err := s.Delete(c, k, metastore.IfVersion(2)); err != nil {
			t.Fatal(err)
		}
		if n := must[int64](t)(s.Add(c, k, 0)); n != 3 {
			t.Fatalf("a delete touched the counter: %d", n)
		}
	})
}

// Conditions treat an expired item as absent, and its version keeps
// counting.
func TestExpiredConditions(t *testing.T) {
	backends(t, func(t *testing.T, endpoint string, transactions bool) {
		s, c := dynamotest.NewStore(t, endpoint), testCtx(t)
		k := metastore.Key{PK: "e", SK: "k"}
		past := time.Now().Add(-time.Minute).Unix()
		future := time.Now().Add(time.Hour).Unix()
		must[metastore.Item](t)(s.Put(c, metastore.Item{Key: k, Value: []byte("a"), Expires: past}, metastore.Always))
		_, err := s.Put(c, metastore.Item{Key: k, Value: []byte("b")}, metastore.IfVersion(1))
		wantErr(t, err, metastore.ErrConditionFailed)
		_, err = s.Put(c, metastore.Item{Key: k, Value: []byte("b")}, metastore.IfExists())
		wantErr(t, err, metastore.ErrConditionFailed)
		wantErr(t, s.Delete(c, k, metastore.IfExists()), metastore.ErrConditionFailed)
		it := must[metastore.Item](t)(s.Put(c, metastore.Item{Key: k, Value: []byte("b"), Expires: future}, metastore.IfAbsent()))
		if it.Version != 2 || it.Expires != future {
			t.Fatalf("put over an expired item: %+v", it)
		}
		_, err = s.Put(c, metastore.Item{Key: k}, metastore.IfAbsent())
		wantErr(t, err, metastore.ErrConditionFailed)
		// Dropping the expiry makes the item permanent.
		it = must[metastore.Item](t)(s.Put(c, metastore.Item{Key: k, Value: []byte("c")}, metastore.IfVersion(2)))
		if got := must[metastore.Item](t)(s.Get(c, k)); got.Expires != 0 || got.Version != 3 || string(got.Value) != "c" {
			t.Fatalf("got %+v", got)
		}
		// Unconditional puts drop an expiry too.
		must[metastore.Item](t)(s.Put(c, metastore.Item{Key: k, Value: []byte("d"), Expires: future}, metastore.Always))
		must[metastore.Item](t)(s.Put(c, metastore.Item{Key: k}, metastore.Always))
		if got := must[metastore.Item](t)(s.Get(c, k)); got.Expires != 0 || got.Version != 5 || len(got.Value) != 0 {
			t.Fatalf("got %+v", got)
		}
		if !transactions {
			return
		}
		must[metastore.Item](t)(s.Put(c, metastore.Item{Key: k, Expires: past}, metastore.Always))
		err = s.Transact(c, []metastore.Op{{Kind: metastore.OpCheck, Item: metastore.Item{Key: k}, Cond: metastore.IfExists()}})
		wantErr(t, err, metastore.ErrConditionFailed)
		// The transaction keeps an expiry: minidyn ignores REMOVE in update
		// expressions, so a transactional put that drops one is not
		// testable there (see repairRemove).
		put := metastore.Item{Key: k, Value: []byte("t"), Expires: future}
		if err := s.Transact(c, []metastore.Op{{Kind: metastore.OpPut, Item: put, Cond: metastore.IfAbsent()}}); err != nil {
			t.Fatal(err)
		}
		if got := must[metastore.Item](t)(s.Get(c, k)); got.Version != 7 || string(got.Value) != "t" || got.Expires != future {
			t.Fatalf("got %+v", got)
		}
	})
}

// Keys that DynamoDB cannot store are rejected before any request, and
// prefixes that end inside a UTF-8 sequence still match.
func TestKeys(t *testing.T) {
	backends(t, func(t *testing.T, endpoint string, _ bool) {
		s, c := dynamotest.NewStore(t, endpoint), testCtx(t)
		bad := metastore.Key{PK: "p", SK: "\xff"}
		if _, err := s.Put(c, metastore.Item{Key: bad, Value: []byte("x")}, metastore.Always); err == nil {
			t.Fatal("put of a non-UTF-8 key succeeded")
		}
		if _, err := s.Get(c, bad); err == nil || errors.Is(err, metastore.ErrNotFound) {
			t.Fatalf("get of a non-UTF-8 key: %v", err)
		}
		for _, sk := range []string{"é1", "é2", "ê", "e\x00z", "e"} {
			must[metastore.Item](t)(s.Put(c, metastore.Item{Key: metastore.Key{PK: "p", SK: sk}}, metastore.Always))
		}
		if items := must[[]metastore.Item](t)(s.Query(c, "p", "\xc3")); len(items) != 3 {
			t.Fatalf("prefix \\xc3: %d items, want 3", len(items))
		}
		if items := must[[]metastore.Item](t)(s.Query(c, "p", "é")); len(items) != 2 || items[0].SK != "é1" {
			t.Fatalf("prefix é: %+v", items)
		}
		if items := must[[]metastore.Item](t)(s.Query(c, "p", "e\x00")); len(items) != 1 {
			t.Fatalf("prefix e NUL: %+v", items)
		}
		if items := must[[]metastore.Item](t)(s.Query(c, "p", "\xff")); len(items) != 0 {
			t.Fatalf("invalid prefix: %+v", items)
		}
		for _, pk := range []string{"", "p\x00", "\xff"} {
			if items := must[[]metastore.Item](t)(s.Query(c, pk, "")); len(items) != 0 {
				t.Fatalf("query %q: %+v", pk, items)
			}
		}
	})
}

// A transaction on dynalite reports ErrUnsupported.
func TestTransactUnsupportedOnDynalite(t *testing.T) {
	s := dynamotest.NewStore(t, dynamotest.StartDynalite(t))
	err := s.Transact(testCtx(t), []metastore.Op{{Kind: metastore.OpPut, Item: metastore.Item{Key: metastore.Key{PK: "a", SK: "b"}}}})
	wantErr(t, err, metastore.ErrUnsupported)
}

// Transact's extra rules: checks that always hold cost nothing, and the
// values of one transaction stay under DynamoDB's 4 MB request limit.
func TestTransactShape(t *testing.T) {
	endpoint := dynamotest.StartMinidyn(t)
	counter := dynamotest.NewCounter()
	s, c := dynamotest.NewStore(t, endpoint, counter.Option()), testCtx(t)
	k := metastore.Key{PK: "t", SK: "a"}
	if err := s.Transact(c, []metastore.Op{{Kind: metastore.OpCheck, Item: metastore.Item{Key: k}}}); err != nil {
		t.Fatal(err)
	}
	if n := counter.Count("TransactWriteItems"); n != 0 {
		t.Fatalf("an always-true check sent %d requests", n)
	}
	var ops []metastore.Op
	for i := 0; i < 12; i++ {
		ops = append(ops, metastore.Op{Kind: metastore.OpPut, Item: metastore.Item{
			Key: metastore.Key{PK: "t", SK: string(rune('a' + i))}, Value: make([]byte, metastore.MaxItemBytes)}})
	}
	wantErr(t, s.Transact(c, ops), metastore.ErrTooLarge)
}

// CreateTable is idempotent and the table it makes works at once.
func TestCreateTableTwice(t *testing.T) {
	backends(t, func(t *testing.T, endpoint string, _ bool) {
		client := dynamotest.NewClient(t, endpoint)
		table := dynamotest.NewTable(t, client)
		if err := dynamo.CreateTable(testCtx(t), client, table); err != nil {
			t.Fatalf("second create: %v", err)
		}
		s := dynamo.New(client, table)
		must[metastore.Item](t)(s.Put(testCtx(t), metastore.Item{Key: metastore.Key{PK: "a", SK: "b"}}, metastore.IfAbsent()))
	})
}

// faulty returns a store on minidyn behind faults, with retries retries
// and a counter of the requests sent.
func faulty(t *testing.T, retries int) (*dynamo.Store, *dynamotest.Faults, *dynamotest.Counter) {
	faults := new(dynamotest.Faults)
	counter := dynamotest.NewCounter()
	endpoint := dynamotest.StartMinidynWith(t, faults.Wrap)
	s := dynamotest.NewStore(t, endpoint, dynamotest.Retries(retries), counter.Option())
	counter.Reset()
	return s, faults, counter
}

var key = metastore.Key{PK: "f", SK: "k"}

// Failures within the retry budget are invisible; beyond it they surface
// as ErrUnavailable.
func TestRetries(t *testing.T) {
	const retries = 4
	for _, tc := range []struct {
		name  string
		fault dynamotest.Fault
	}{{"500", dynamotest.Fault500}, {"throttle", dynamotest.FaultThrottle}} {
		t.Run(tc.name+"/within", func(t *testing.T) {
			s, faults, counter := faulty(t, retries)
			faults.Fail("UpdateItem", retries, tc.fault)
			it := must[metastore.Item](t)(s.Put(testCtx(t), metastore.Item{Key: key, Value: []byte("v")}, metastore.IfAbsent()))
			if it.Version != 1 {
				t.Fatalf("version %d", it.Version)
			}
			if n := counter.Count("UpdateItem"); n != retries+1 {
				t.Fatalf("%d attempts, want %d", n, retries+1)
			}
		})
		t.Run(tc.name+"/beyond", func(t *testing.T) {
			s, faults, counter := faulty(t, retries)
			faults.Fail("", retries+1, tc.fault)
			_, err := s.Get(testCtx(t), key)
			wantErr(t, err, metastore.ErrUnavailable)
			if n := counter.Count("GetItem"); n != retries+1 {
				t.Fatalf("%d attempts, want %d", n, retries+1)
			}
			if faults.Injected() != retries+1 {
				t.Fatalf("%d faults injected", faults.Injected())
			}
			// The budget is per call: the next call succeeds.
			_, err = s.Get(testCtx(t), key)
			wantErr(t, err, metastore.ErrNotFound)
		})
	}
}

// Every operation maps exhausted retries to ErrUnavailable.
func TestUnavailableEverywhere(t *testing.T) {
	s, faults, _ := faulty(t, 1)
	c := testCtx(t)
	calls := map[string]func() error{
		"get":    func() error { _, err := s.Get(c, key); return err },
		"query":  func() error { _, err := s.Query(c, "f", ""); return err },
		"put":    func() error { _, err := s.Put(c, metastore.Item{Key: key}, metastore.Always); return err },
		"delete": func() error { return s.Delete(c, key, metastore.Always) },
		"add":    func() error { _, err := s.Add(c, key, 1); return err },
		"transact": func() error {
			return s.Transact(c, []metastore.Op{{Kind: metastore.OpPut, Item: metastore.Item{Key: key}}})
		},
	}
	for name, call := range calls {
		faults.Fail("", 2, dynamotest.Fault500)
		if err := call(); !errors.Is(err, metastore.ErrUnavailable) {
			t.Errorf("%s: got %v, want ErrUnavailable", name, err)
		}
	}
}

// A write that was applied but whose answer was lost, then retried, must
// not report ErrConditionFailed: the failing condition is its own write.
func TestAmbiguousConditionFailure(t *testing.T) {
	s, faults, counter := faulty(t, 3)
	c := testCtx(t)
	faults.Fail("UpdateItem", 1, dynamotest.FaultApplied500)
	_, err := s.Put(c, metastore.Item{Key: key, Value: []byte("mine")}, metastore.IfAbsent())
	wantErr(t, err, metastore.ErrUnavailable)
	if errors.Is(err, metastore.ErrConditionFailed) {
		t.Fatalf("ambiguous failure reported as a condition failure: %v", err)
	}
	if n := counter.Count("UpdateItem"); n != 2 {
		t.Fatalf("%d attempts, want 2", n)
	}
	if got := must[metastore.Item](t)(s.Get(c, key)); string(got.Value) != "mine" || got.Version != 1 {
		t.Fatalf("got %+v", got)
	}
	// A throttled attempt is a definite "not applied": a condition failure
	// after it is genuine.
	faults.Fail("UpdateItem", 1, dynamotest.FaultThrottle)
	_, err = s.Put(c, metastore.Item{Key: key, Value: []byte("again")}, metastore.IfAbsent())
	wantErr(t, err, metastore.ErrConditionFailed)
	// Unconditional writes and deletes are simply retried.
	faults.Fail("DeleteItem", 1, dynamotest.FaultApplied500)
	if err := s.Delete(c, key, metastore.Always); err != nil {
		t.Fatal(err)
	}
	// Transactions are retried (DynamoDB dedups them by their idempotency
	// token; minidyn does not, so the same rule applies).
	faults.Fail("TransactWriteItems", 1, dynamotest.Fault500)
	create := []metastore.Op{{Kind: metastore.OpPut, Item: metastore.Item{Key: key}, Cond: metastore.IfAbsent()}}
	if err := s.Transact(c, create); err != nil {
		t.Fatal(err)
	}
	faults.Fail("TransactWriteItems", 1, dynamotest.FaultApplied500)
	again := []metastore.Op{{Kind: metastore.OpPut, Item: metastore.Item{Key: key}, Cond: metastore.IfVersion(1)}}
	err = s.Transact(c, again)
	wantErr(t, err, metastore.ErrUnavailable)
	if got := must[metastore.Item](t)(s.Get(c, key)); got.Version != 2 {
		t.Fatalf("version %d, want 2", got.Version)
	}
}

// Transactions cancelled by a conflicting transaction are tried again a
// few times.
func TestTransactConflict(t *testing.T) {
	s, faults, counter := faulty(t, 3)
	c := testCtx(t)
	op := []metastore.Op{{Kind: metastore.OpPut, Item: metastore.Item{Key: key}, Cond: metastore.IfAbsent()}}
	faults.Fail("TransactWriteItems", 2, dynamotest.FaultTransactionConflict)
	if err := s.Transact(c, op); err != nil {
		t.Fatal(err)
	}
	if n := counter.Count("TransactWriteItems"); n != 3 {
		t.Fatalf("%d requests, want 3", n)
	}
	counter.Reset()
	faults.Fail("TransactWriteItems", 100, dynamotest.FaultTransactionConflict)
	wantErr(t, s.Transact(c, op), metastore.ErrUnavailable)
	if n := counter.Count("TransactWriteItems"); n != dynamo.DefaultTransactAttempts {
		t.Fatalf("%d requests, want %d", n, dynamo.DefaultTransactAttempts)
	}
}

// Latency beyond the caller's deadline gives ErrUnavailable, and the error
// still says it was the deadline.
func TestDeadline(t *testing.T) {
	s, faults, _ := faulty(t, 2)
	faults.Delay(2 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := s.Get(ctx, key)
	wantErr(t, err, metastore.ErrUnavailable)
	wantErr(t, err, context.DeadlineExceeded)
	if d := time.Since(start); d > time.Second {
		t.Fatalf("returned after %v", d)
	}
	// Cancellation is the caller's doing, not an outage.
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	_, err = s.Put(ctx, metastore.Item{Key: key}, metastore.Always)
	wantErr(t, err, context.Canceled)
	if errors.Is(err, metastore.ErrUnavailable) {
		t.Fatalf("cancellation reported as unavailable: %v", err)
	}
}

// The counter sees every attempt, by operation.
func TestCounter(t *testing.T) {
	counter := dynamotest.NewCounter()
	s := dynamotest.NewStore(t, dynamotest.StartMinidyn(t), counter.Option())
	c := testCtx(t)
	counter.Reset()
	must[metastore.Item](t)(s.Put(c, metastore.Item{Key: key}, metastore.Always))
	must[metastore.Item](t)(s.Get(c, key))
	must[[]metastore.Item](t)(s.Query(c, key.PK, ""))
	must[int64](t)(s.Add(c, key, 1))
	if err := s.Delete(c, key, metastore.Always); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"UpdateItem": 2, "GetItem": 1, "Query": 1, "DeleteItem": 1}
	for op, n := range want {
		if got := counter.Count(op); got != n {
			t.Errorf("%s: %d requests, want %d", op, got, n)
		}
	}
	if counter.Writes() != 3 || counter.Total() != 5 {
		t.Errorf("writes %d total %d, want 3 and 5 (%v)", counter.Writes(), counter.Total(), counter.Counts())
	}
}

// NewClient: an endpoint override needs no AWS configuration; without one
// the region comes from the caller or the environment. Both get the
// bounded retryer.
func TestNewClient(t *testing.T) {
	c, err := dynamo.NewClient(context.Background(), "http://127.0.0.1:1", "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if o := c.Options(); o.Region != dynamo.DefaultRegion || o.Retryer.MaxAttempts() != dynamo.DefaultRetries+1 {
		t.Fatalf("region %q, %d attempts", o.Region, o.Retryer.MaxAttempts())
	}
	t.Setenv("AWS_CONFIG_FILE", os.DevNull)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", os.DevNull)
	c, err = dynamo.NewClient(context.Background(), "", "eu-west-1", -1)
	if err != nil {
		t.Fatal(err)
	}
	if o := c.Options(); o.Region != "eu-west-1" || o.Retryer.MaxAttempts() != 1 {
		t.Fatalf("region %q, %d attempts", o.Region, o.Retryer.MaxAttempts())
	}
	// Nothing listens on port 1: a connection error, retried, then
	// ErrUnavailable.
	c, _ = dynamo.NewClient(context.Background(), "http://127.0.0.1:1", "", 2)
	_, err = dynamo.New(c, "t").Get(testCtx(t), key)
	wantErr(t, err, metastore.ErrUnavailable)
}

package dynamotest

import (
	"maps"
	"net/http"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// Counter counts the HTTP requests a DynamoDB client sends, by operation
// (GetItem, PutItem, UpdateItem, DeleteItem, Query, TransactWriteItems...).
// Every attempt counts, retries included, as DynamoDB bills them. It is
// safe for concurrent use.
type Counter struct {
	mu     sync.Mutex
	counts map[string]int64
}

// NewCounter returns an empty Counter.
func NewCounter() *Counter { return &Counter{counts: map[string]int64{}} }

// Option returns a client option that routes the client's requests
// through c (keeping the client's own HTTP client behind it).
func (c *Counter) Option() func(*dynamodb.Options) {
	return func(o *dynamodb.Options) {
		next := o.HTTPClient
		if next == nil {
			next = http.DefaultClient
		}
		o.HTTPClient = &countingClient{c: c, next: next}
	}
}

// Transport wraps an http.RoundTripper (nil: http.DefaultTransport) so
// that it counts into c.
func (c *Counter) Transport(next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		c.note(r)
		return next.RoundTrip(r)
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

type countingClient struct {
	c    *Counter
	next dynamodb.HTTPClient
}

func (cc *countingClient) Do(r *http.Request) (*http.Response, error) {
	cc.c.note(r)
	return cc.next.Do(r)
}

// Operation returns the DynamoDB operation of a request ("GetItem"), from
// its X-Amz-Target header.
func Operation(r *http.Request) string {
	target := r.Header.Get("X-Amz-Target")
	if i := strings.LastIndexByte(target, '.'); i >= 0 {
		return target[i+1:]
	}
	return target
}

func (c *Counter) note(r *http.Request) {
	op := Operation(r)
	c.mu.Lock()
	c.counts[op]++
	c.mu.Unlock()
}

// Count returns the requests of operation op.
func (c *Counter) Count(op string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[op]
}

// Counts returns a copy of the counts by operation.
func (c *Counter) Counts() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.counts)
}

// writeOps are the operations that write items.
var writeOps = []string{"PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "BatchWriteItem"}

// Writes returns the requests that write items.
func (c *Counter) Writes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int64
	for _, op := range writeOps {
		n += c.counts[op]
	}
	return n
}

// Total returns all requests.
func (c *Counter) Total() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int64
	for _, v := range c.counts {
		n += v
	}
	return n
}

// Reset zeroes the counts.
func (c *Counter) Reset() {
	c.mu.Lock()
	clear(c.counts)
	c.mu.Unlock()
}

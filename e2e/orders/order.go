package orders

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"
)

// Names the pipeline uses on the Kafka side.
const (
	Topic          = "orders"          // order events, keyed by order id
	Subject        = "orders-value"    // the value schema's registry subject
	GroupBilling   = "billing"         // the billing consumer's group
	GroupAnalytics = "analytics"       // the analytics consumer's group
	GroupRetry     = "orders-retry"    // the retry worker's group (consumes orders.retry)
	FunctionName   = "billing"         // the handler named in the retry headers
	PoisonEvery    = 100               // one order in PoisonEvery is poison
	poisonAt       = 42                // ... the one whose sequence number is 42 modulo PoisonEvery
	customers      = 200               // orders spread over this many customers
	createdBase    = 1_795_000_000_000 // created_at of order 0, in Unix milliseconds
)

// SchemaText is the Avro schema of an order event's value.
const SchemaText = `{
  "type": "record",
  "name": "Order",
  "namespace": "io.stratamq.orders",
  "fields": [
    {"name": "id", "type": "string"},
    {"name": "customer", "type": "string"},
    {"name": "amount_cents", "type": "long"},
    {"name": "currency", "type": "string"},
    {"name": "items", "type": "int"},
    {"name": "created_at_ms", "type": "long"},
    {"name": "poison", "type": "boolean", "default": false}
  ]
}`

// Order is one order event. Poison orders always fail in billing.
type Order struct {
	ID          string `avro:"id"`
	Customer    string `avro:"customer"`
	AmountCents int64  `avro:"amount_cents"`
	Currency    string `avro:"currency"`
	Items       int32  `avro:"items"`
	CreatedAtMS int64  `avro:"created_at_ms"`
	Poison      bool   `avro:"poison"`
}

// Generate returns order number i of run: the same order every time, so a
// test knows what to expect. One order in PoisonEvery is poison.
func Generate(run string, i int) Order {
	return Order{
		ID:          OrderID(run, i),
		Customer:    fmt.Sprintf("cust-%03d", (i*7919)%customers),
		AmountCents: 100 + int64((i*104729)%99_900),
		Currency:    "EUR",
		Items:       int32(1 + i%5),
		CreatedAtMS: createdBase + int64(i)*1000,
		Poison:      IsPoison(i),
	}
}

// OrderID is the id (and record key) of order i of run.
func OrderID(run string, i int) string { return fmt.Sprintf("%s-%06d", run, i) }

// IsPoison says whether order i is a poison order.
func IsPoison(i int) bool { return i%PoisonEvery == poisonAt }

// Expected counts the good and poison orders among n, and the good ones'
// amount.
func Expected(n int) (good, poison int, goodCents int64) {
	for i := 0; i < n; i++ {
		if o := Generate("", i); o.Poison {
			poison++
		} else {
			good++
			goodCents += o.AmountCents
		}
	}
	return good, poison, goodCents
}

// ErrPoison is the failure of every poison order in billing.
var ErrPoison = errors.New("payment declined (poison order)")

// Codec encodes orders in the Confluent wire format (a zero byte, the
// schema id as a big-endian uint32, then Avro) and decodes values by the
// writer schema their id names, fetched from the schema registry.
type Codec struct {
	reg *sr.Client

	mu      sync.Mutex
	id      int                 // the id Encode writes; 0 until Register
	schemas map[int]avro.Schema // writer schemas by id
}

// NewCodec uses the schema registries at urls (tried in order).
func NewCodec(urls ...string) (*Codec, error) {
	if len(urls) == 0 {
		return nil, errors.New("orders: no schema registry url")
	}
	reg, err := sr.NewClient(sr.URLs(urls...))
	if err != nil {
		return nil, fmt.Errorf("orders: schema registry client: %w", err)
	}
	return &Codec{reg: reg, schemas: map[int]avro.Schema{}}, nil
}

// Register registers SchemaText under Subject (a no-op when it is there)
// and makes its id the one Encode writes.
func (c *Codec) Register(ctx context.Context) (int, error) {
	s, err := parseSchema(SchemaText)
	if err != nil {
		return 0, err
	}
	var ss sr.SubjectSchema
	for attempt := 0; ; attempt++ {
		ss, err = c.reg.CreateSchema(ctx, Subject, sr.Schema{Schema: SchemaText, Type: sr.TypeAvro})
		if err == nil || attempt == 20 || ctx.Err() != nil {
			break
		}
		time.Sleep(250 * time.Millisecond) // the registry may be starting
	}
	if err != nil {
		return 0, fmt.Errorf("orders: register %s: %w", Subject, err)
	}
	c.mu.Lock()
	c.id, c.schemas[ss.ID] = ss.ID, s
	c.mu.Unlock()
	return ss.ID, nil
}

// Encode renders o with the registered schema's id.
func (c *Codec) Encode(o Order) ([]byte, error) {
	c.mu.Lock()
	id, s := c.id, c.schemas[c.id]
	c.mu.Unlock()
	if id == 0 {
		return nil, errors.New("orders: encode before Register")
	}
	b, err := (&sr.ConfluentHeader{}).AppendEncode(make([]byte, 0, 64), id, nil)
	if err != nil {
		return nil, err
	}
	body, err := avro.Marshal(s, o)
	if err != nil {
		return nil, fmt.Errorf("orders: encode %s: %w", o.ID, err)
	}
	return append(b, body...), nil
}

// Decode reads a value in the Confluent wire format.
func (c *Codec) Decode(ctx context.Context, b []byte) (Order, error) {
	id, body, err := (&sr.ConfluentHeader{}).DecodeID(b)
	if err != nil {
		return Order{}, fmt.Errorf("orders: decode: %w", err)
	}
	s, err := c.schema(ctx, id)
	if err != nil {
		return Order{}, err
	}
	var o Order
	if err := avro.Unmarshal(s, body, &o); err != nil {
		return Order{}, fmt.Errorf("orders: decode with schema %d: %w", id, err)
	}
	return o, nil
}

func (c *Codec) schema(ctx context.Context, id int) (avro.Schema, error) {
	c.mu.Lock()
	s, ok := c.schemas[id]
	c.mu.Unlock()
	if ok {
		return s, nil
	}
	got, err := c.reg.SchemaByID(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("orders: schema %d: %w", id, err)
	}
	if got.Type != sr.TypeAvro {
		return nil, fmt.Errorf("orders: schema %d is %s, not AVRO", id, got.Type)
	}
	if s, err = parseSchema(got.Schema); err != nil {
		return nil, fmt.Errorf("orders: schema %d: %w", id, err)
	}
	c.mu.Lock()
	c.schemas[id] = s
	c.mu.Unlock()
	return s, nil
}

// parseSchema parses with a fresh name cache: hamba/avro's default cache is
// process-wide and would mix up versions of the same record name.
func parseSchema(text string) (avro.Schema, error) {
	s, err := avro.ParseWithCache(text, "", &avro.SchemaCache{})
	if err != nil {
		return nil, fmt.Errorf("orders: parse schema: %w", err)
	}
	return s, nil
}

// Package dynamo is the metastore.Store on Amazon DynamoDB (aws-sdk-go-v2),
// the control plane of a deployed Strata fleet.
//
// # Table layout
//
// One table, key schema pk (S, hash) + sk (S, range). A versioned item
// (metastore.Key{PK, SK}) is stored at pk=PK, sk=SK with the attributes
//
//	v    N  version
//	val  B  the value; absent when the value is empty
//	ttl  N  Unix seconds after which the item reads as absent; absent when
//	        Item.Expires is 0 (also the table's TTL attribute, see CreateTable)
//
// A Put under IfVersion(n) knows the new version, n+1, and writes the
// item whole (PutItem, nothing returned). Every other Put is an UpdateItem
// that adds one to whatever version is stored ("ADD v 1", SET val and ttl,
// REMOVE them when empty), so the version keeps counting across expiry;
// it starts again at 1 after a Delete.
//
// Counters (Store.Add) live at pk = "\x00n/" + PK, sk = SK, in a numeric
// attribute n ("ADD n delta"). metastore.CheckKey forbids NUL in partition
// keys, so no versioned item can ever have such a pk: counters and
// versioned items never collide, Get and Query never see a counter, and
// Add never sees a versioned item. Keys must be valid UTF-8 (DynamoDB
// strings are); a key that is not is rejected before any request.
//
// # Expiry
//
// No stand-in deletes expired items and DynamoDB deletes them only
// eventually, so expiry is evaluated by this package, on the local clock:
// Get and Query drop items whose ttl is before now, and conditions carry
// the clock as :now (IfAbsent is "attribute_not_exists(v) OR ttl < :now";
// IfVersion and IfExists also require "attribute_not_exists(ttl) OR
// ttl >= :now"). DynamoDB's background TTL deletion may later delete an
// expired item, which restarts its version at 1 like a Delete: items whose
// versions fence writers must not carry an expiry.
//
// # Errors and retries
//
// The client's retryer (see NewClient and Retryer: bounded attempts, full
// jitter) retries throttling, 5xx and connection errors. When it gives up,
// and on timeouts (including the caller's context deadline), the error
// wraps metastore.ErrUnavailable and keeps its cause, so
// errors.Is(err, context.DeadlineExceeded) holds as well. A cancelled
// context returns an error wrapping context.Canceled only.
//
// A conditional write whose condition fails after an earlier attempt of
// the same call ended ambiguously (a 5xx or no response: that attempt may
// have been applied) returns ErrUnavailable, not ErrConditionFailed,
// because the failing condition may be the call's own earlier write. A 4xx
// (throttling included) is a definite "not applied" and does not count.
// Transactions get the same treatment although DynamoDB's idempotency
// token (the SDK reuses it across retries) already makes a retried applied
// transaction succeed. Add may skip values after such a retry (the first
// attempt may have added), never return one twice. Transact also retries,
// a few times with jitter, a transaction cancelled only by a conflicting
// transaction or throttling.
//
// Transact uses TransactWriteItems; a service without it (dynalite)
// yields an error wrapping metastore.ErrUnsupported.
package dynamo

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/stratamq/strata/pkg/metastore"
)

// Attribute names of the table.
const (
	AttrPK      = "pk"
	AttrSK      = "sk"
	AttrVersion = "v"
	AttrValue   = "val"
	AttrTTL     = "ttl"
	AttrCounter = "n"
)

// CounterPrefix starts the partition key of every counter item. NUL cannot
// appear in a metastore partition key, so this key space is disjoint from
// the versioned items'.
const CounterPrefix = "\x00n/"

// DefaultTransactAttempts is how often Transact tries a transaction that
// DynamoDB cancels only because of a conflicting transaction or throttling.
const DefaultTransactAttempts = 5

// Options configure a Store.
type Options struct {
	// Table is the table name (set by New).
	Table string
	// Now is the wall clock used for expiry (default time.Now).
	Now func() time.Time
	// TransactAttempts bounds the tries of a transaction cancelled by a
	// conflict or throttling (default DefaultTransactAttempts).
	TransactAttempts int
}

// Option configures New.
type Option func(*Options)

// WithClock sets the wall clock used for item expiry.
func WithClock(now func() time.Time) Option { return func(o *Options) { o.Now = now } }

// WithTransactAttempts sets Options.TransactAttempts.
func WithTransactAttempts(n int) Option { return func(o *Options) { o.TransactAttempts = n } }

// Store is the DynamoDB-backed metastore.Store.
type Store struct {
	client *dynamodb.Client
	opts   Options
	table  *string
	call   []func(*dynamodb.Options)
}

var _ metastore.Store = (*Store)(nil)

// New returns a Store on table through client. The table must exist (see
// CreateTable). The client is the caller's; Close does not close it.
func New(client *dynamodb.Client, table string, opts ...Option) *Store {
	o := Options{Table: table, Now: time.Now, TransactAttempts: DefaultTransactAttempts}
	for _, f := range opts {
		f(&o)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.TransactAttempts < 1 {
		o.TransactAttempts = 1
	}
	return &Store{
		client: client,
		opts:   o,
		table:  aws.String(table),
		call: []func(*dynamodb.Options){func(do *dynamodb.Options) {
			do.APIOptions = append(do.APIOptions, addAttemptTracker)
		}},
	}
}

// Options returns the store's options.
func (s *Store) Options() Options { return s.opts }

// Close implements metastore.Store. It releases nothing: the client
// belongs to the caller.
func (s *Store) Close() error { return nil }

func checkUTF8(k metastore.Key) error {
	if !utf8.ValidString(k.PK) || !utf8.ValidString(k.SK) {
		return fmt.Errorf("key %q: not valid UTF-8 (DynamoDB strings are UTF-8)", k)
	}
	return nil
}

func checkKey(k metastore.Key) error {
	if err := metastore.CheckKey(k); err != nil {
		return err
	}
	return checkUTF8(k)
}

func keyAttrs(pk, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		AttrPK: &types.AttributeValueMemberS{Value: pk},
		AttrSK: &types.AttributeValueMemberS{Value: sk},
	}
}

func itemKey(k metastore.Key) map[string]types.AttributeValue { return keyAttrs(k.PK, k.SK) }

func counterKey(k metastore.Key) map[string]types.AttributeValue {
	return keyAttrs(CounterPrefix+k.PK, k.SK)
}

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

// expr collects the names and values one request's expressions use:
// DynamoDB rejects unused ones and empty maps.
type expr struct {
	names  map[string]string
	values map[string]types.AttributeValue
}

func (e *expr) name(attr string) string {
	if e.names == nil {
		e.names = map[string]string{}
	}
	e.names["#"+attr] = attr
	return "#" + attr
}

func (e *expr) value(name string, v types.AttributeValue) string {
	if e.values == nil {
		e.values = map[string]types.AttributeValue{}
	}
	e.values[":"+name] = v
	return ":" + name
}

// cond translates c into a condition expression ("" for Always). An item
// is live when it has a version and no ttl before now.
func (e *expr) cond(c metastore.Cond, now int64) string {
	absent, version, exists, v := c.Kind()
	live := func() string {
		ttl := e.name(AttrTTL)
		return fmt.Sprintf("(attribute_not_exists(%s) OR %s >= %s)", ttl, ttl, e.value("now", num(now)))
	}
	switch {
	case absent:
		return fmt.Sprintf("attribute_not_exists(%s) OR %s < %s", e.name(AttrVersion), e.name(AttrTTL), e.value("now", num(now)))
	case version:
		return fmt.Sprintf("%s = %s AND %s", e.name(AttrVersion), e.value("ver", num(v)), live())
	case exists:
		return fmt.Sprintf("attribute_exists(%s) AND %s", e.name(AttrVersion), live())
	}
	return ""
}

// put returns the update expression that writes it: one more version, the
// value and the expiry (removed when empty or zero).
func (e *expr) put(it metastore.Item) string {
	var set, remove []string
	if len(it.Value) > 0 {
		set = append(set, e.name(AttrValue)+" = "+e.value("val", &types.AttributeValueMemberB{Value: it.Value}))
	} else {
		remove = append(remove, e.name(AttrValue))
	}
	if it.Expires != 0 {
		set = append(set, e.name(AttrTTL)+" = "+e.value("ttl", num(it.Expires)))
	} else {
		remove = append(remove, e.name(AttrTTL))
	}
	u := "ADD " + e.name(AttrVersion) + " " + e.value("one", num(1))
	if len(set) > 0 {
		u += " SET " + strings.Join(set, ", ")
	}
	if len(remove) > 0 {
		u += " REMOVE " + strings.Join(remove, ", ")
	}
	return u
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func (s *Store) now() int64 { return s.opts.Now().Unix() }

// decode reads a versioned item; ok is false for an expired or malformed
// one.
func (s *Store) decode(k metastore.Key, av map[string]types.AttributeValue, now int64) (metastore.Item, bool, error) {
	it := metastore.Item{Key: k}
	v, ok := av[AttrVersion].(*types.AttributeValueMemberN)
	if !ok {
		return it, false, nil
	}
	var err error
	if it.Version, err = strconv.ParseInt(v.Value, 10, 64); err != nil {
		return it, false, fmt.Errorf("item %s: version %q: %w", k, v.Value, err)
	}
	if t, ok := av[AttrTTL].(*types.AttributeValueMemberN); ok {
		if it.Expires, err = strconv.ParseInt(t.Value, 10, 64); err != nil {
			return it, false, fmt.Errorf("item %s: ttl %q: %w", k, t.Value, err)
		}
	}
	if b, ok := av[AttrValue].(*types.AttributeValueMemberB); ok && len(b.Value) > 0 {
		it.Value = b.Value
	}
	if it.Expires != 0 && it.Expires < now {
		return it, false, nil
	}
	return it, true, nil
}

// Get implements metastore.Store.
func (s *Store) Get(ctx context.Context, k metastore.Key) (metastore.Item, error) {
	if err := checkKey(k); err != nil {
		return metastore.Item{}, err
	}
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      s.table,
		Key:            itemKey(k),
		ConsistentRead: aws.Bool(true),
	}, s.call...)
	if err != nil {
		return metastore.Item{}, classify(fmt.Sprintf("get %s", k), err, false)
	}
	it, ok, err := s.decode(k, out.Item, s.now())
	if err != nil {
		return metastore.Item{}, fmt.Errorf("get %s: %w", k, err)
	}
	if !ok {
		return metastore.Item{}, fmt.Errorf("get %s: %w", k, metastore.ErrNotFound)
	}
	return it, nil
}

// queryPrefix returns the begins_with operand for prefix: prefix itself, or
// prefix without an incomplete UTF-8 sequence at its end (results are then
// filtered by the full prefix). ok is false when no valid sort key can
// start with prefix.
func queryPrefix(prefix string) (string, bool) {
	p := prefix
	for i := 0; i < utf8.UTFMax && !utf8.ValidString(p); i++ {
		p = p[:len(p)-1]
	}
	return p, utf8.ValidString(p)
}

// Query implements metastore.Store. A partition key that no item can have
// (empty, with NUL, too long, not UTF-8) has no items.
func (s *Store) Query(ctx context.Context, pk, prefix string) ([]metastore.Item, error) {
	if pk == "" || strings.IndexByte(pk, 0) >= 0 || len(pk) > metastore.MaxKeyBytes || !utf8.ValidString(pk) || len(prefix) > metastore.MaxKeyBytes {
		return nil, nil
	}
	p, ok := queryPrefix(prefix)
	if !ok {
		return nil, nil
	}
	var e expr
	kc := e.name(AttrPK) + " = " + e.value("pk", &types.AttributeValueMemberS{Value: pk})
	if p != "" {
		kc += " AND begins_with(" + e.name(AttrSK) + ", " + e.value("prefix", &types.AttributeValueMemberS{Value: p}) + ")"
	}
	in := &dynamodb.QueryInput{
		TableName:                 s.table,
		KeyConditionExpression:    aws.String(kc),
		ExpressionAttributeNames:  e.names,
		ExpressionAttributeValues: e.values,
		ConsistentRead:            aws.Bool(true),
	}
	now := s.now()
	var items []metastore.Item
	for {
		out, err := s.client.Query(ctx, in, s.call...)
		if err != nil {
			return nil, classify(fmt.Sprintf("query %s/%s*", pk, prefix), err, false)
		}
		for _, av := range out.Items {
			sk, _ := av[AttrSK].(*types.AttributeValueMemberS)
			if sk == nil || !strings.HasPrefix(sk.Value, prefix) {
				continue
			}
			it, ok, err := s.decode(metastore.Key{PK: pk, SK: sk.Value}, av, now)
			if err != nil {
				return nil, fmt.Errorf("query %s/%s*: %w", pk, prefix, err)
			}
			if ok {
				items = append(items, it)
			}
		}
		if len(out.LastEvaluatedKey) == 0 {
			return items, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// Put implements metastore.Store. Under IfVersion(n) the new version is
// known (n+1), so the item is written whole with PutItem and nothing comes
// back; otherwise UpdateItem adds one to the stored version (which may
// belong to an expired item) and returns the result.
func (s *Store) Put(ctx context.Context, it metastore.Item, c metastore.Cond) (metastore.Item, error) {
	if err := metastore.CheckItem(it); err != nil {
		return metastore.Item{}, err
	}
	if err := checkUTF8(it.Key); err != nil {
		return metastore.Item{}, err
	}
	stored := metastore.Item{Key: it.Key, Expires: it.Expires}
	if len(it.Value) > 0 {
		stored.Value = append([]byte(nil), it.Value...)
	}
	ctx, attempts := trackAttempts(ctx)
	if _, isVersion, _, v := c.Kind(); isVersion {
		stored.Version = v + 1
		var e expr
		cond := e.cond(c, s.now())
		_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{
			TableName:                 s.table,
			Item:                      whole(stored),
			ConditionExpression:       aws.String(cond),
			ExpressionAttributeNames:  e.names,
			ExpressionAttributeValues: e.values,
		}, s.call...)
		if err != nil {
			return metastore.Item{}, classify(fmt.Sprintf("put %s %s", it.Key, c), err, attempts.ambiguous.Load())
		}
		return stored, nil
	}
	var e expr
	update := e.put(it)
	cond := e.cond(c, s.now())
	out, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 s.table,
		Key:                       itemKey(it.Key),
		UpdateExpression:          aws.String(update),
		ConditionExpression:       optional(cond),
		ExpressionAttributeNames:  e.names,
		ExpressionAttributeValues: e.values,
		ReturnValues:              types.ReturnValueAllNew,
	}, s.call...)
	if err != nil {
		return metastore.Item{}, classify(fmt.Sprintf("put %s %s", it.Key, c), err, attempts.ambiguous.Load())
	}
	v, ok := out.Attributes[AttrVersion].(*types.AttributeValueMemberN)
	if !ok {
		return metastore.Item{}, fmt.Errorf("put %s: the response carries no version", it.Key)
	}
	if stored.Version, err = strconv.ParseInt(v.Value, 10, 64); err != nil {
		return metastore.Item{}, fmt.Errorf("put %s: version %q: %w", it.Key, v.Value, err)
	}
	if err := s.repairRemove(ctx, stored, out.Attributes); err != nil {
		return metastore.Item{}, err
	}
	return stored, nil
}

// repairRemove works around services that ignore REMOVE in an update
// expression (minidyn v0.8.2 leaves the attributes in place): when the
// item that UpdateItem returns still has a value or an expiry that the
// write removed, it writes the item whole, on condition that its version
// is still the one just written (if not, a later write has replaced it
// anyway). On DynamoDB and dynalite the returned item never has them and
// this costs nothing.
func (s *Store) repairRemove(ctx context.Context, stored metastore.Item, got map[string]types.AttributeValue) error {
	_, hasVal := got[AttrValue]
	_, hasTTL := got[AttrTTL]
	if !(len(stored.Value) == 0 && hasVal) && !(stored.Expires == 0 && hasTTL) {
		return nil
	}
	var e expr
	cond := e.name(AttrVersion) + " = " + e.value("ver", num(stored.Version))
	_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                 s.table,
		Item:                      whole(stored),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  e.names,
		ExpressionAttributeValues: e.values,
	}, s.call...)
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return fmt.Errorf("put %s: rewrite after an ignored REMOVE: %w: %w", stored.Key, metastore.ErrUnavailable, err)
	}
	return nil
}

// whole returns the attributes of a versioned item written whole.
func whole(it metastore.Item) map[string]types.AttributeValue {
	av := itemKey(it.Key)
	av[AttrVersion] = num(it.Version)
	if len(it.Value) > 0 {
		av[AttrValue] = &types.AttributeValueMemberB{Value: it.Value}
	}
	if it.Expires != 0 {
		av[AttrTTL] = num(it.Expires)
	}
	return av
}

// Delete implements metastore.Store.
func (s *Store) Delete(ctx context.Context, k metastore.Key, c metastore.Cond) error {
	if err := checkKey(k); err != nil {
		return err
	}
	var e expr
	cond := e.cond(c, s.now())
	ctx, attempts := trackAttempts(ctx)
	_, err := s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 s.table,
		Key:                       itemKey(k),
		ConditionExpression:       optional(cond),
		ExpressionAttributeNames:  e.names,
		ExpressionAttributeValues: e.values,
	}, s.call...)
	if err != nil {
		return classify(fmt.Sprintf("delete %s %s", k, c), err, attempts.ambiguous.Load())
	}
	return nil
}

// Add implements metastore.Store.
func (s *Store) Add(ctx context.Context, k metastore.Key, delta int64) (int64, error) {
	if err := checkKey(k); err != nil {
		return 0, err
	}
	var e expr
	update := "ADD " + e.name(AttrCounter) + " " + e.value("d", num(delta))
	out, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 s.table,
		Key:                       counterKey(k),
		UpdateExpression:          aws.String(update),
		ExpressionAttributeNames:  e.names,
		ExpressionAttributeValues: e.values,
		ReturnValues:              types.ReturnValueAllNew,
	}, s.call...)
	if err != nil {
		return 0, classify(fmt.Sprintf("add %s", k), err, false)
	}
	n, ok := out.Attributes[AttrCounter].(*types.AttributeValueMemberN)
	if !ok {
		return 0, fmt.Errorf("add %s: the response carries no counter", k)
	}
	v, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("add %s: counter %q: %w", k, n.Value, err)
	}
	return v, nil
}

// Transact implements metastore.Store.
func (s *Store) Transact(ctx context.Context, ops []metastore.Op) error {
	if err := metastore.CheckOps(ops); err != nil {
		return err
	}
	now := s.now()
	var items []types.TransactWriteItem
	var idx []int // ops index of each item
	for i, op := range ops {
		if err := checkUTF8(op.Item.Key); err != nil {
			return fmt.Errorf("transact: %w", err)
		}
		var e expr
		cond := e.cond(op.Cond, now)
		var w types.TransactWriteItem
		switch op.Kind {
		case metastore.OpPut:
			if _, isVersion, _, v := op.Cond.Kind(); isVersion {
				it := op.Item
				it.Version = v + 1
				w.Put = &types.Put{TableName: s.table, Item: whole(it),
					ConditionExpression: aws.String(cond), ExpressionAttributeNames: e.names, ExpressionAttributeValues: e.values}
				break
			}
			update := e.put(op.Item)
			w.Update = &types.Update{TableName: s.table, Key: itemKey(op.Item.Key), UpdateExpression: aws.String(update),
				ConditionExpression: optional(cond), ExpressionAttributeNames: e.names, ExpressionAttributeValues: e.values}
		case metastore.OpDelete:
			w.Delete = &types.Delete{TableName: s.table, Key: itemKey(op.Item.Key),
				ConditionExpression: optional(cond), ExpressionAttributeNames: e.names, ExpressionAttributeValues: e.values}
		case metastore.OpCheck:
			if cond == "" {
				continue // a check that always holds
			}
			w.ConditionCheck = &types.ConditionCheck{TableName: s.table, Key: itemKey(op.Item.Key),
				ConditionExpression: aws.String(cond), ExpressionAttributeNames: e.names, ExpressionAttributeValues: e.values}
		default:
			return fmt.Errorf("transact: unknown op kind %d", op.Kind)
		}
		items = append(items, w)
		idx = append(idx, i)
	}
	if len(items) == 0 {
		return nil
	}
	in := &dynamodb.TransactWriteItemsInput{TransactItems: items}
	ctx, attempts := trackAttempts(ctx)
	var last error
	for attempt := 1; ; attempt++ {
		_, err := s.client.TransactWriteItems(ctx, in, s.call...)
		if err == nil {
			return nil
		}
		var tce *types.TransactionCanceledException
		if !errors.As(err, &tce) {
			return classify("transact", err, false)
		}
		retry := false
		for i, r := range tce.CancellationReasons {
			switch aws.ToString(r.Code) {
			case "ConditionalCheckFailed":
				op := ops[idx[min(i, len(idx)-1)]]
				if attempts.ambiguous.Load() {
					// DynamoDB's idempotency token makes a retry of an
					// applied transaction succeed, but not every service
					// honours it.
					return fmt.Errorf("transact: %s %s: condition failed after a retried attempt that may have been applied: %w: %w",
						op.Item.Key, op.Cond, metastore.ErrUnavailable, err)
				}
				return fmt.Errorf("transact: %s %s: %w", op.Item.Key, op.Cond, metastore.ErrConditionFailed)
			case "TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded":
				retry = true
			}
		}
		if !retry {
			return fmt.Errorf("transact: %w", err)
		}
		last = err
		if attempt >= s.opts.TransactAttempts {
			break
		}
		if err := sleep(ctx, backoff(attempt, 25*time.Millisecond, time.Second)); err != nil {
			return classify("transact", err, false)
		}
	}
	return fmt.Errorf("transact: cancelled %d times by conflicts or throttling: %w: %w", s.opts.TransactAttempts, metastore.ErrUnavailable, last)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// attempts records, for one call, whether an attempt ended ambiguously.
type attempts struct {
	ambiguous atomic.Bool
}

type attemptsKey struct{}

func trackAttempts(ctx context.Context) (context.Context, *attempts) {
	a := new(attempts)
	return context.WithValue(ctx, attemptsKey{}, a), a
}

// addAttemptTracker adds, at the end of the finalize step (inside the
// retry loop), a middleware that notes every attempt that ended without a
// definite answer from the service: no response, or a 5xx.
func addAttemptTracker(stack *middleware.Stack) error {
	return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("StrataAttempts",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleFinalize(ctx, in)
			if a, ok := ctx.Value(attemptsKey{}).(*attempts); ok && err != nil && !definite(err) {
				a.ambiguous.Store(true)
			}
			return out, md, err
		}), middleware.After)
}

// definite reports whether err is an answer from the service that the
// request was not applied: any 4xx.
func definite(err error) bool {
	var se interface{ HTTPStatusCode() int }
	if errors.As(err, &se) {
		c := se.HTTPStatusCode()
		return c >= 400 && c < 500
	}
	return false
}

package broker_test

import (
	"context"
	"encoding/binary"
	"errors"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/stratamq/strata/brokerfleet/internal/brokertest"
)

const (
	orderV1 = `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"string"},{"name":"amount","type":"long"}]}`
	// v2 adds a field with a default: BACKWARD compatible.
	orderV2 = `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"string"},{"name":"amount","type":"long"},{"name":"note","type":"string","default":""}]}`
	// v3 adds a field without a default: not BACKWARD compatible.
	orderV3 = `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"string"},{"name":"amount","type":"long"},{"name":"note","type":"string","default":""},{"name":"customer","type":"string"}]}`
)

type order struct {
	ID     string `avro:"id"`
	Amount int64  `avro:"amount"`
	Note   string `avro:"note"`
}

// The registry every broker serves, used the way a producer does: register
// with franz-go's sr client, serialize with sr.Serde, produce through the
// broker with strata.schema.validation on, consume and decode; records
// without a registered schema are refused with INVALID_RECORD and stored
// nowhere.
func TestSchemaRegistryAndValidation(t *testing.T) {
	brokers := startCluster(t, 2)
	reg := httptest.NewServer(brokers[1].Registry()) // any broker: the state is in the metastore
	t.Cleanup(reg.Close)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	src, err := sr.NewClient(sr.URLs(reg.URL))
	require.NoError(t, err)
	addr := brokers[0].Addr
	brokertest.CreateTopic(t, addr, "orders", 1, map[string]*string{"strata.schema.validation": kadm.StringPtr("true")})
	cl := brokertest.Client(t, addr, kgo.DefaultProduceTopic("orders"), kgo.RecordRetries(1))

	// Refused: no header, then an id nobody registered.
	err = cl.ProduceSync(ctx, &kgo.Record{Value: []byte("plain text")}).FirstErr()
	require.ErrorIs(t, err, kerr.InvalidRecord)
	unregistered := binary.BigEndian.AppendUint32([]byte{0}, 4242)
	err = cl.ProduceSync(ctx, &kgo.Record{Value: append(unregistered, 1, 2, 3)}).FirstErr()
	require.ErrorIs(t, err, kerr.InvalidRecord)

	// Register v1, evolve to v2, refuse v3.
	s1, err := src.CreateSchema(ctx, "orders-value", sr.Schema{Schema: orderV1})
	require.NoError(t, err)
	s2, err := src.CreateSchema(ctx, "orders-value", sr.Schema{Schema: orderV2})
	require.NoError(t, err)
	require.NotEqual(t, s1.ID, s2.ID)
	_, err = src.CreateSchema(ctx, "orders-value", sr.Schema{Schema: orderV3})
	var re *sr.ResponseError
	require.True(t, errors.As(err, &re), "%v", err)
	require.Equal(t, 409, re.ErrorCode)
	byID, err := src.SchemaByID(ctx, s2.ID)
	require.NoError(t, err)
	schema, err := avro.ParseWithCache(byID.Schema, "", &avro.SchemaCache{})
	require.NoError(t, err)

	var serde sr.Serde
	serde.Register(s2.ID, order{},
		sr.EncodeFn(func(v any) ([]byte, error) { return avro.Marshal(schema, v) }),
		sr.DecodeFn(func(b []byte, v any) error { return avro.Unmarshal(schema, b, v) }))
	want := []order{{ID: "o-1", Amount: 1250, Note: "gift"}, {ID: "o-2", Amount: 99}, {ID: "o-3", Amount: 1 << 40, Note: "bulk"}}
	for _, o := range want {
		v, err := serde.Encode(o)
		require.NoError(t, err)
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Key: []byte(o.ID), Value: v}).FirstErr())
	}
	// A batch with one bad record among good ones is refused whole.
	good, err := serde.Encode(order{ID: "o-4"})
	require.NoError(t, err)
	batchCl := brokertest.Client(t, addr, kgo.DefaultProduceTopic("orders"), kgo.RecordRetries(1), kgo.ProducerLinger(50*time.Millisecond))
	results := make(chan error, 2)
	batchCl.Produce(ctx, &kgo.Record{Value: good}, func(_ *kgo.Record, err error) { results <- err })
	batchCl.Produce(ctx, &kgo.Record{Value: []byte("bad")}, func(_ *kgo.Record, err error) { results <- err })
	require.ErrorIs(t, <-results, kerr.InvalidRecord)
	require.ErrorIs(t, <-results, kerr.InvalidRecord)

	adm := brokertest.Admin(t, addr)
	ends, err := adm.ListEndOffsets(ctx, "orders")
	require.NoError(t, err)
	end, _ := ends.Lookup("orders", 0)
	require.Equal(t, int64(len(want)), end.Offset, "only the valid records are stored")

	cons := brokertest.Client(t, addr, kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []order
	for len(got) < len(want) {
		fs := cons.PollFetches(ctx)
		require.NoError(t, ctx.Err())
		fs.EachRecord(func(r *kgo.Record) {
			var o order
			require.NoError(t, serde.Decode(r.Value, &o))
			got = append(got, o)
		})
	}
	require.Equal(t, want, got)

	// Topics without validation take anything.
	brokertest.CreateTopic(t, addr, "free", 1, nil)
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Topic: "free", Value: []byte("plain text")}).FirstErr())
}

package dlqconsole

import (
	"context"
	"encoding/binary"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/stratamq/strata/functions/internal/testbroker"
	"github.com/stratamq/strata/pkg/retry"
)

func TestMain(m *testing.M) { os.Exit(testbroker.Main(m)) }

// cluster is a one-broker Strata dev cluster with its schema registry.
type cluster struct {
	bootstrap string
	registry  string // http://127.0.0.1:PORT
}

// freePort returns an address nothing listens on (for failure tests).
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func startCluster(t *testing.T) cluster {
	t.Helper()
	c := testbroker.StartCluster(t, true)
	return cluster{bootstrap: c.Bootstrap, registry: c.Registry}
}

const orderSchema = `{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"long"},{"name":"item","type":"string"}]}`

type order struct {
	ID   int64  `avro:"id"`
	Item string `avro:"item"`
}

// seeded names the letters seed produces, by their place in orders.dlq.
type seeded struct {
	avro, binary, script, replayed LetterRef
	schemaID                       int
}

// seed creates orders (3 partitions), orders.dlq (2 partitions) and
// payments (1 partition) and produces four dead letters.
func seed(t *testing.T, c cluster) seeded {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for topic, n := range map[string]int32{"orders": 3, "orders.dlq": 2, "payments": 1} {
		resp, err := adm.CreateTopic(ctx, n, 1, nil, topic)
		if err != nil || resp.Err != nil {
			t.Fatalf("create %s: %v %v", topic, err, resp.Err)
		}
	}
	rc, err := sr.NewClient(sr.URLs(c.registry))
	if err != nil {
		t.Fatal(err)
	}
	ss, err := rc.CreateSchema(ctx, "orders-value", sr.Schema{Schema: orderSchema, Type: sr.TypeAvro})
	if err != nil {
		t.Fatalf("register schema: %v", err)
	}
	body, err := avro.Marshal(avro.MustParse(orderSchema), order{ID: 42, Item: "<b>book</b>"})
	if err != nil {
		t.Fatal(err)
	}
	avroValue := binary.BigEndian.AppendUint32([]byte{0}, uint32(ss.ID))
	avroValue = append(avroValue, body...)

	t0 := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	letter := func(p int32, key, value []byte, origin int32, originOffset int64, replays int, errText string) *kgo.Record {
		st := retry.State{
			Attempts: 3, OriginTopic: "orders", OriginPartition: origin, OriginOffset: originOffset,
			FirstFailure: t0, LastError: errText, Function: "orders-handler",
			History: []retry.Failure{{Attempt: 1, At: t0, Error: "first " + errText}, {Attempt: 2, At: t0.Add(time.Second), Error: errText}, {Attempt: 3, At: t0.Add(2 * time.Second), Error: errText}},
		}
		if replays > 0 {
			st.ReplayedAt, st.Replays = t0.Add(time.Hour), replays
		}
		return &kgo.Record{Topic: "orders.dlq", Partition: p, Key: key, Value: value,
			Headers: st.Headers([]kgo.RecordHeader{{Key: "trace-id", Value: []byte("abc")}})}
	}
	recs := []*kgo.Record{
		letter(0, []byte("order-42"), avroValue, 1, 10, 0, "price missing"),
		letter(0, []byte{0xfe, 0xff}, []byte{0xff, 0x00, 0x01, 0x02}, 2, 5, 0, "bad bytes"),
		letter(1, []byte("k<i>1</i>"), []byte("<script>alert(1)</script>"), 0, 7, 0, "<img src=x onerror=alert(2)>"),
		letter(1, []byte("again"), []byte("already replayed once"), 0, 8, 1, "still failing"),
	}
	for _, r := range recs {
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	return seeded{
		avro: LetterRef{0, recs[0].Offset}, binary: LetterRef{0, recs[1].Offset},
		script: LetterRef{1, recs[2].Offset}, replayed: LetterRef{1, recs[3].Offset},
		schemaID: ss.ID,
	}
}

// newTestConsole starts a cluster, seeds it and serves a console under
// /console.
func newTestConsole(t *testing.T) (*httptest.Server, cluster, seeded) {
	t.Helper()
	c := startCluster(t)
	s := seed(t, c)
	h, err := New(Options{Seeds: []string{c.bootstrap}, RegistryURL: c.registry, BasePath: "/console"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Close(h) })
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, c, s
}

// consumeOrigin reads every record of orders.
func consumeOrigin(t *testing.T, c cluster, want int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap), kgo.ConsumeTopics("orders"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var out []*kgo.Record
	for len(out) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records of orders", len(out), want)
		}
		out = append(out, fs.Records()...)
	}
	return out
}

func header(r *kgo.Record, key string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

var _ = http.StatusOK

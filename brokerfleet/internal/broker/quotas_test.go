package broker_test

import (
	"context"
	"crypto/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratamq/strata/brokerfleet/internal/brokertest"
)

func qe(parts ...string) kadm.ClientQuotaEntity {
	var e kadm.ClientQuotaEntity
	for i := 0; i < len(parts); i += 2 {
		c := kadm.ClientQuotaEntityComponent{Type: parts[i]}
		if parts[i+1] != "<default>" {
			c.Name = &parts[i+1]
		}
		e = append(e, c)
	}
	return e
}

func randomBytes(t *testing.T, n int) []byte {
	b := make([]byte, n)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return b
}

func set(key string, v float64) kadm.AlterClientQuotaOp {
	return kadm.AlterClientQuotaOp{Key: key, Value: v}
}

// TestClientQuotasAdminAPI: AlterClientQuotas validates each entry as
// Kafka does and stores the valid ones; DescribeClientQuotas filters by
// exact, default and any matches, strictly or not.
func TestClientQuotasAdminAPI(t *testing.T) {
	b := brokertest.Start(t)
	adm := kadm.NewClient(brokertest.Client(t, b.Addr))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: qe("user", "alice"), Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 1024)}},
		{Entity: qe("user", "<default>"), Ops: []kadm.AlterClientQuotaOp{set("consumer_byte_rate", 2048)}},
		{Entity: qe("client-id", "app"), Ops: []kadm.AlterClientQuotaOp{set("request_percentage", 50.5)}},
		{Entity: qe("user", "alice", "client-id", "app"), Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 512), set("consumer_byte_rate", 4096)}},
		// Invalid ones, refused one by one.
		{Entity: qe("user", "bob"), Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 1.5)}},
		{Entity: qe("user", "bob"), Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", -1)}},
		{Entity: qe("user", "bob"), Ops: []kadm.AlterClientQuotaOp{set("no_such_quota", 1)}},
		{Entity: qe("user", "bob"), Ops: []kadm.AlterClientQuotaOp{set("controller_mutation_rate", 1)}},
		{Entity: qe("user", "bob"), Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 1), set("producer_byte_rate", 2)}},
		{Entity: qe("ip", "10.0.0.1"), Ops: []kadm.AlterClientQuotaOp{set("connection_creation_rate", 1)}},
		{Entity: qe("user", "bob", "user", "carol"), Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 1)}},
		{Entity: qe("group", "g"), Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 1)}},
		{Entity: nil, Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 1)}},
	})
	require.NoError(t, err)
	require.Len(t, res, 13)
	for i, r := range res {
		if i < 4 {
			require.NoError(t, r.Err, "entry %d %v", i, r.Entity)
		} else {
			require.ErrorIs(t, r.Err, kerr.InvalidRequest, "entry %d %v", i, r.Entity)
			require.NotEmpty(t, r.ErrMessage)
		}
	}

	// Validation only stores nothing.
	_, err = adm.ValidateAlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{{Entity: qe("user", "dave"), Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", 1)}}})
	require.NoError(t, err)

	describe := func(strict bool, cs ...kadm.DescribeClientQuotaComponent) []string {
		t.Helper()
		d, err := adm.DescribeClientQuotas(ctx, strict, cs)
		require.NoError(t, err)
		var out []string
		for _, q := range d {
			s := q.Entity.String()
			for _, v := range q.Values {
				s += " " + v.String()
			}
			out = append(out, s)
		}
		return out
	}
	exact := func(typ, name string) kadm.DescribeClientQuotaComponent {
		return kadm.DescribeClientQuotaComponent{Type: typ, MatchName: &name, MatchType: 0}
	}
	def := func(typ string) kadm.DescribeClientQuotaComponent {
		return kadm.DescribeClientQuotaComponent{Type: typ, MatchType: 1}
	}
	anyOf := func(typ string) kadm.DescribeClientQuotaComponent {
		return kadm.DescribeClientQuotaComponent{Type: typ, MatchType: 2}
	}
	require.Len(t, describe(false), 4)
	require.Empty(t, describe(true), "strict with no components matches nothing")
	require.ElementsMatch(t, []string{
		"{user=alice} producer_byte_rate=1024.000000",
		"{client-id=app, user=alice} producer_byte_rate=512.000000 consumer_byte_rate=4096.000000",
	}, describe(false, exact("user", "alice")))
	require.Equal(t, []string{"{user=alice} producer_byte_rate=1024.000000"}, describe(true, exact("user", "alice")))
	require.Equal(t, []string{"{user=<default>} consumer_byte_rate=2048.000000"}, describe(false, def("user")))
	require.Equal(t, []string{"{client-id=app} request_percentage=50.500000"}, describe(true, anyOf("client-id")))
	require.Len(t, describe(false, anyOf("user")), 3)
	require.Equal(t, []string{"{client-id=app, user=alice} producer_byte_rate=512.000000 consumer_byte_rate=4096.000000"},
		describe(true, anyOf("user"), exact("client-id", "app")))

	// A filter naming a type twice, or an exact match without a name, is
	// refused.
	_, err = adm.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{anyOf("user"), def("user")})
	require.ErrorIs(t, err, kerr.InvalidRequest)
	_, err = adm.DescribeClientQuotas(ctx, false, []kadm.DescribeClientQuotaComponent{{Type: "user", MatchType: 0}})
	require.ErrorIs(t, err, kerr.InvalidRequest)

	// Removing a value keeps the rest; removing the last drops the entity.
	res, err = adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: qe("user", "alice", "client-id", "app"), Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Remove: true}}},
		{Entity: qe("user", "alice"), Ops: []kadm.AlterClientQuotaOp{{Key: "producer_byte_rate", Remove: true}}},
	})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	require.NoError(t, res[1].Err)
	require.Equal(t, []string{"{client-id=app, user=alice} consumer_byte_rate=4096.000000"}, describe(false, exact("user", "alice")))
}

// throttleHook counts the throttled responses a client sees, by API key.
type throttleHook struct {
	mu  sync.Mutex
	n   int
	max time.Duration
}

func (h *throttleHook) OnBrokerThrottle(_ kgo.BrokerMetadata, d time.Duration, after bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if d > 0 && after {
		h.n++
		h.max = max(h.max, d)
	}
}

func (h *throttleHook) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// TestProducerAndConsumerThrottledToTheirQuotas: a producer over its
// producer_byte_rate and a consumer over its consumer_byte_rate, both
// going as fast as they can, get their quota within 10% over 30 s once
// throttled (after the burst the quota window allows), and their answers
// carry throttle_time_ms. Other clients are not slowed.
func TestProducerAndConsumerThrottledToTheirQuotas(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for 30 s")
	}
	t.Parallel()
	b := brokertest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	fast := brokertest.Client(t, b.Addr, kgo.ClientID("fast"), kgo.DefaultProduceTopic("fill"))
	adm := kadm.NewClient(fast)
	_, err := adm.CreateTopic(ctx, 1, 1, nil, "fill")
	require.NoError(t, err)
	_, err = adm.CreateTopic(ctx, 1, 1, nil, "quota")
	require.NoError(t, err)
	const rate = 1 << 20
	res, err := adm.AlterClientQuotas(ctx, []kadm.AlterClientQuotaEntry{
		{Entity: qe("client-id", "slow-producer"), Ops: []kadm.AlterClientQuotaOp{set("producer_byte_rate", rate)}},
		{Entity: qe("client-id", "slow-consumer"), Ops: []kadm.AlterClientQuotaOp{set("consumer_byte_rate", rate)}},
	})
	require.NoError(t, err)
	require.NoError(t, res[0].Err)
	require.NoError(t, res[1].Err)

	// The consumer's topic holds more than it may read in the test.
	// Values are random: quotas count bytes on the wire, and the clients
	// compress.
	var fill []*kgo.Record
	for range (64 << 20) / (4 << 10) {
		fill = append(fill, &kgo.Record{Value: randomBytes(t, 4<<10)})
	}
	value := fill[0].Value
	require.NoError(t, fast.ProduceSync(ctx, fill...).FirstErr())

	pHook, cHook := &throttleHook{}, &throttleHook{}
	producer := brokertest.Client(t, b.Addr, kgo.ClientID("slow-producer"), kgo.DefaultProduceTopic("quota"),
		kgo.ProducerBatchMaxBytes(256<<10), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.WithHooks(pHook))
	consumer := brokertest.Client(t, b.Addr, kgo.ClientID("slow-consumer"), kgo.ConsumeTopics("fill"),
		kgo.FetchMaxBytes(256<<10), kgo.FetchMaxPartitionBytes(256<<10), kgo.WithHooks(cHook))

	var produced, consumed atomic.Int64
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for runCtx.Err() == nil {
			producer.Produce(runCtx, &kgo.Record{Value: value}, func(r *kgo.Record, err error) {
				if err == nil {
					produced.Add(int64(len(r.Value)))
				}
			})
		}
	}()
	go func() {
		defer wg.Done()
		for runCtx.Err() == nil {
			fs := consumer.PollFetches(runCtx)
			fs.EachRecord(func(r *kgo.Record) { consumed.Add(int64(len(r.Value))) })
		}
	}()
	// Wait until both are throttled (the burst spent), then measure 30 s.
	require.Eventually(t, func() bool { return pHook.count() > 0 && cHook.count() > 0 }, 60*time.Second, 10*time.Millisecond, "never throttled")
	p0, c0, t0 := produced.Load(), consumed.Load(), time.Now()
	// A client without a quota is not slowed meanwhile.
	require.NoError(t, fast.ProduceSync(ctx, fill[:1024]...).FirstErr())
	time.Sleep(30 * time.Second)
	p1, c1, el := produced.Load(), consumed.Load(), time.Since(t0).Seconds()
	stop()
	wg.Wait()
	pRate, cRate := float64(p1-p0)/el, float64(c1-c0)/el
	t.Logf("over %.1fs: producer %.0f B/s, consumer %.0f B/s (quota %d B/s); throttled answers: producer %d (max %v), consumer %d (max %v)",
		el, pRate, cRate, rate, pHook.count(), pHook.max, cHook.count(), cHook.max)
	require.InEpsilon(t, rate, pRate, 0.10, "producer rate")
	require.InEpsilon(t, rate, cRate, 0.10, "consumer rate")
	require.Greater(t, pHook.count(), 10)
	require.Greater(t, cHook.count(), 10)
}

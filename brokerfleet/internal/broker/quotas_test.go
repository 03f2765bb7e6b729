package broker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

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

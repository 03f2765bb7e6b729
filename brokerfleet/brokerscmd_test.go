package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBrokersBadInput(t *testing.T) {
	t.Parallel()
	checkBadInput(t, []badInputCase{
		{"unknown verb", []string{"brokers", "frob"}, []string{`unknown verb "frob"`}},
		{"drain without id", []string{"brokers", "drain"}, []string{"argument ID"}},
		{"drain bad id", []string{"brokers", "drain", "two"}, []string{`"two" is not a broker id`, "argument ID"}},
		{"drain negative id", []string{"brokers", "drain", "--", "-1"}, []string{`"-1" is not a broker id`}},
		{"drain two ids", []string{"brokers", "drain", "1", "2"}, []string{"one broker at a time"}},
		{"drain bad interval", []string{"brokers", "drain", "1", "-interval", "0s"}, []string{"-interval"}},
		{"undrain without id", []string{"brokers", "undrain"}, []string{"argument ID"}},
		{"undrain takes no -wait", []string{"brokers", "undrain", "1", "-wait"}, []string{"-wait"}},
		{"list argument", []string{"brokers", "list", "1"}, []string{`unexpected argument "1"`}},
	})
}

// brokersEnv is three brokers with topic orders: three partitions, two
// replicas each, placed 0,1 / 1,2 / 2,0 (leaders 0, 1, 2).
func brokersEnv(t *testing.T) *adminEnv {
	e := newAdminEnv(t, 3)
	e.createTopic("orders", 3, 2, nil)
	return e
}

func listBrokers(t *testing.T, e *adminEnv) brokersJSON {
	t.Helper()
	var doc brokersJSON
	out := e.mustRun("brokers", "list", "-json")
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	return doc
}

func TestGoldenBrokers(t *testing.T) {
	t.Parallel()
	e := brokersEnv(t)
	e.createTopic("audit", 1, 3, nil)
	e.goldenEventually("brokers_list", func() string { return e.mustRun("brokers", "list") })

	doc := listBrokers(t, e)
	require.Equal(t, "strata", doc.Cluster)
	controllers := 0
	for i, b := range doc.Brokers {
		require.Equal(t, int32(i), b.ID)
		require.Equal(t, "127.0.0.1", b.Host)
		require.Equal(t, e.brokers[i].Addr, "127.0.0.1:"+itoa(int64(b.Port)))
		require.Equal(t, []string{"az-a", "az-b"}[i%2], b.Rack)
		if b.Controller {
			controllers++
			require.Equal(t, doc.Controller, b.ID)
		}
	}
	require.Equal(t, 1, controllers)
	// The controller is the lease holder, whichever broker answered.
	holder, ok, err := e.meta.Controller(e.ctx)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, holder, doc.Controller)
	// orders: 0,1 / 1,2 / 2,0; audit: 0,1,2.
	require.Equal(t, []int{2, 1, 1}, []int{doc.Brokers[0].Leaders, doc.Brokers[1].Leaders, doc.Brokers[2].Leaders})
	require.Equal(t, []int{3, 3, 3}, []int{doc.Brokers[0].Replicas, doc.Brokers[1].Replicas, doc.Brokers[2].Replicas})

	for _, verb := range []string{"drain", "undrain"} {
		code, out, errOut := e.run("brokers", verb, "7")
		require.Equal(t, 1, code)
		require.Empty(t, out)
		require.Contains(t, errOut, "unknown broker 7 (argument ID): the cluster has brokers 0,1,2")
	}
}

// TestBrokersDrain needs the broker side of draining: the dynamic broker
// config strata.broker.draining and the controller moving replicas off a
// draining broker.
func TestBrokersDrain(t *testing.T) {
	t.Parallel()
	e := brokersEnv(t)

	// Without -wait: the broker is marked and the command returns.
	var doc drainJSON
	out := e.mustRun("brokers", "drain", "2", "-wait=false", "-json")
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	require.Equal(t, drainJSON{Broker: 2, Draining: true, ReplicasLeft: 2, LeadersLeft: 1}, doc)
	e.eventually("brokers list shows broker 2 draining", func() bool {
		bs := listBrokers(t, e).Brokers
		return !bs[0].Draining && !bs[1].Draining && bs[2].Draining
	})

	// With -wait (the default): progress until broker 2 holds nothing.
	out = e.mustRun("brokers", "drain", "2", "-interval", "100ms", "-timeout", "60s")
	golden(t, "brokers_drain", out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.GreaterOrEqual(t, len(lines), 2, out)
	require.Regexp(t, `^\[[= >]{20}\] \d+/\d+ moved; replicas left on broker 2: \d+ → \d+, leading \d+$`, lines[0])
	require.Equal(t, "broker 2 holds no replicas and leads no partitions; it may be stopped", lines[len(lines)-1])

	e.eventually("broker 2 holds nothing", func() bool {
		b := listBrokers(t, e).Brokers[2]
		return b.Replicas == 0 && b.Leaders == 0
	})
	md, err := e.adm.Metadata(e.ctx, "orders")
	require.NoError(t, err)
	for _, p := range md.Topics["orders"].Partitions {
		require.Len(t, p.Replicas, 2, "partition %d keeps its replication factor", p.Partition)
		require.NotContains(t, p.Replicas, int32(2))
	}

	// Draining an empty broker finishes at once; -json keeps stdout JSON.
	code, out, errOut := e.run("brokers", "drain", "2", "-interval", "100ms", "-json")
	require.Equal(t, 0, code, errOut)
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	require.Equal(t, drainJSON{Broker: 2, Draining: true, Waited: true, Drained: true}, doc)
	require.Contains(t, errOut, "0/0 moved; replicas left on broker 2: 0 → 0, leading 0")

	golden(t, "brokers_undrain", e.mustRun("brokers", "undrain", "2"))
	out = e.mustRun("brokers", "undrain", "2", "-json")
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	require.Equal(t, drainJSON{Broker: 2}, doc)
	require.False(t, listBrokers(t, e).Brokers[2].Draining)
	rc, err := e.adm.DescribeBrokerConfigs(e.ctx, 2)
	require.NoError(t, err)
	r, err := rc.On("2", nil)
	require.NoError(t, err)
	for _, c := range r.Configs {
		if c.Key == drainingConfig {
			require.Equal(t, "false", c.MaybeValue())
		}
	}
}

func TestGoldenBrokersDrainNoWait(t *testing.T) {
	t.Parallel()
	e := brokersEnv(t)
	golden(t, "brokers_drain_nowait", e.mustRun("brokers", "drain", "1", "-wait=false"))
}

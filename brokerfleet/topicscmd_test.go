package main

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratamq/strata/brokerfleet/internal/broker"
	"github.com/stratamq/strata/pkg/metastore"
)

// runNoCluster runs a command against an address nothing listens on: a
// usage error must be reported before any connection is tried.
func runNoCluster(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	all := []string{args[0]}
	if args[1] != "" { // "" for a command without verbs
		all = append(all, args[1])
	}
	all = append(all, "-bootstrap", "127.0.0.1:1", "-timeout", "500ms")
	code = run(append(all, args[2:]...), &out, &errb)
	return code, out.String(), errb.String()
}

type badInputCase struct {
	name string
	args []string // command, verb ("" for none), arguments
	want []string // substrings of stderr
}

func checkBadInput(t *testing.T, cases []badInputCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runNoCluster(t, tc.args...)
			require.Equal(t, 2, code, errOut) // a refused connection would be 1
			require.Empty(t, out)
			for _, w := range tc.want {
				require.Contains(t, errOut, w)
			}
		})
	}
}

func TestTopicsBadInput(t *testing.T) {
	t.Parallel()
	checkBadInput(t, []badInputCase{
		{"unknown verb", []string{"topics", "frob"}, []string{`unknown verb "frob"`}},
		{"describe without topic", []string{"topics", "describe"}, []string{"TOPIC"}},
		{"create without topic", []string{"topics", "create", "-partitions", "3"}, []string{"TOPIC"}},
		{"zero partitions", []string{"topics", "create", "t", "-partitions", "0"}, []string{"-partitions"}},
		{"bad partitions", []string{"topics", "create", "t", "-partitions", "many"}, []string{"-partitions", `"many"`}},
		{"zero replication factor", []string{"topics", "create", "t", "-replication-factor", "0"}, []string{"-replication-factor"}},
		{"bad config", []string{"topics", "create", "t", "-config", "retention.ms"}, []string{"-config", "key=value"}},
		{"alter without changes", []string{"topics", "alter", "t"}, []string{"-partitions", "-config", "-delete-config"}},
		{"alter without topic", []string{"topics", "alter", "-partitions", "3"}, []string{"TOPIC"}},
		{"alter two topics", []string{"topics", "alter", "a", "b", "-partitions", "3"}, []string{"one topic"}},
		{"alter set and delete", []string{"topics", "alter", "t", "-config", "retention.ms=1", "-delete-config", "retention.ms"}, []string{"-config", "-delete-config", "retention.ms"}},
		{"delete without -yes", []string{"topics", "delete", "orders"}, []string{"-yes", "orders"}},
		{"list argument", []string{"topics", "list", "orders"}, []string{`unexpected argument "orders"`}},
		{"unknown flag", []string{"topics", "describe", "orders", "--frob"}, []string{"-frob"}},
	})
	var out, errb bytes.Buffer
	require.Equal(t, 2, run([]string{"topics"}, &out, &errb))
	require.Contains(t, errb.String(), "missing verb")
	require.Equal(t, 0, run([]string{"topics", "-help"}, &out, &errb))
	require.Contains(t, out.String(), "brokerfleet topics <verb>")
}

// TestGoldenTopics checks the human output of every topics verb against
// testdata/golden on three brokers.
func TestGoldenTopics(t *testing.T) {
	t.Parallel()
	e := newAdminEnv(t, 3)

	golden(t, "topics_create", e.mustRun("topics", "create", "orders", "-partitions", "3", "-replication-factor", "2", "-config", "retention.ms=3600000"))
	// Go's flag package takes --flag as well.
	e.mustRun("topics", "create", "audit", "--partitions", "1", "--replication-factor", "3")
	e.goldenEventually("topics_list", func() string { return e.mustRun("topics", "list") })
	e.goldenEventually("topics_describe", func() string { return e.mustRun("topics", "describe", "orders", "audit") })
	golden(t, "topics_alter", e.mustRun("topics", "alter", "orders", "-partitions", "4", "-config", "max.message.bytes=2097152", "-config", "min.insync.replicas=2", "-delete-config", "retention.ms"))
	e.goldenEventually("topics_describe_altered", func() string { return e.mustRun("topics", "describe", "orders") })

	code, out, errOut := e.run("topics", "delete", "audit")
	require.Equal(t, 2, code)
	require.Empty(t, out)
	require.Contains(t, errOut, "add -yes to confirm (flag -yes)")
	golden(t, "topics_delete", e.mustRun("topics", "delete", "audit", "-yes"))
	e.goldenEventually("topics_list_after_delete", func() string { return e.mustRun("topics", "list") })

	// Failures: exit 1, naming what is wrong.
	code, out, errOut = e.run("topics", "describe", "nosuch")
	require.Equal(t, 1, code)
	require.Empty(t, out)
	require.Contains(t, errOut, "topic nosuch does not exist")
	code, out, errOut = e.run("topics", "create", "orders", "-partitions", "1")
	require.Equal(t, 1, code)
	require.Contains(t, out, "topic orders: not created: it already exists")
	require.Contains(t, errOut, "topic orders not created")
	code, _, errOut = e.run("topics", "alter", "orders", "-partitions", "2")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "cannot be reduced to 2 (flag -partitions)")
	code, _, errOut = e.run("topics", "alter", "orders", "-config", "no.such.config=1")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "no.such.config")
	code, out, errOut = e.run("topics", "delete", "ghost", "-yes")
	require.Equal(t, 1, code)
	require.Contains(t, out, "topic ghost: not deleted: it does not exist")
	require.Contains(t, errOut, "topic ghost not deleted")
	code, _, errOut = e.run("topics", "create", "big", "-replication-factor", "4")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "topic big not created")

	// A failed config change leaves the partitions as they were.
	code, _, _ = e.run("topics", "alter", "orders", "-partitions", "6", "-config", "no.such.config=1")
	require.Equal(t, 1, code)
	td, err := e.adm.ListTopics(e.ctx, "orders")
	require.NoError(t, err)
	require.Len(t, td["orders"].Partitions, 4)
}

func TestTopicsJSON(t *testing.T) {
	t.Parallel()
	e := newAdminEnv(t, 3)

	var created struct {
		Topics []createdTopicJSON `json:"topics"`
	}
	out := e.mustRun("topics", "create", "orders", "events", "-partitions", "3", "-replication-factor", "2", "-config", "retention.ms=60000", "--json")
	require.NoError(t, json.Unmarshal([]byte(out), &created), out)
	require.Len(t, created.Topics, 2)
	for i, name := range []string{"orders", "events"} {
		c := created.Topics[i]
		require.Equal(t, name, c.Topic)
		require.True(t, c.Created)
		require.Empty(t, c.Error)
		require.Equal(t, int32(3), c.Partitions)
		require.Equal(t, int16(2), c.ReplicationFactor)
		require.NotEmpty(t, c.ID)
	}

	var listed struct {
		Topics []listedTopicJSON `json:"topics"`
	}
	out = e.mustRun("topics", "list", "-json")
	require.NoError(t, json.Unmarshal([]byte(out), &listed), out)
	require.Equal(t, []listedTopicJSON{
		{Topic: "events", ID: created.Topics[1].ID, Partitions: 3, ReplicationFactor: 2},
		{Topic: "orders", ID: created.Topics[0].ID, Partitions: 3, ReplicationFactor: 2},
	}, listed.Topics)

	var described struct {
		Topics []describedTopicJSON `json:"topics"`
	}
	out = e.mustRun("topics", "describe", "orders", "-json")
	require.NoError(t, json.Unmarshal([]byte(out), &described), out)
	require.Len(t, described.Topics, 1)
	d := described.Topics[0]
	require.Equal(t, "orders", d.Topic)
	require.Equal(t, created.Topics[0].ID, d.ID)
	require.Equal(t, 2, d.ReplicationFactor)
	require.Equal(t, map[string]string{"retention.ms": "60000"}, d.Configs)
	require.Len(t, d.Partitions, 3)
	md, err := e.adm.Metadata(e.ctx, "orders")
	require.NoError(t, err)
	for _, p := range d.Partitions {
		want := md.Topics["orders"].Partitions[p.Partition]
		require.Equal(t, want.Leader, p.Leader)
		require.Equal(t, want.Replicas, p.Replicas)
		require.ElementsMatch(t, want.ISR, p.ISR)
		require.Equal(t, []int32{}, p.OfflineReplicas)
		require.False(t, p.Offline)
		require.False(t, p.UnderReplicated)
	}

	var altered alteredTopicJSON
	out = e.mustRun("topics", "alter", "orders", "-partitions", "5", "-config", "retention.ms=120000", "-config", "max.message.bytes=2097152", "-json")
	require.NoError(t, json.Unmarshal([]byte(out), &altered), out)
	require.Equal(t, alteredTopicJSON{Topic: "orders", PartitionsFrom: 3, PartitionsTo: 5,
		Set: map[string]string{"retention.ms": "120000", "max.message.bytes": "2097152"}, Deleted: []string{}}, altered)
	e.eventually("the cluster has the new configs", func() bool {
		rc, err := e.adm.DescribeTopicConfigs(e.ctx, "orders")
		require.NoError(t, err)
		got := map[string]string{}
		r, err := rc.On("orders", nil)
		require.NoError(t, err)
		for _, c := range r.Configs {
			got[c.Key] = c.MaybeValue()
		}
		return got["retention.ms"] == "120000" && got["max.message.bytes"] == "2097152"
	})

	out = e.mustRun("topics", "alter", "orders", "-delete-config", "max.message.bytes,segment.ms", "-json")
	require.NoError(t, json.Unmarshal([]byte(out), &altered), out)
	require.Equal(t, []string{"max.message.bytes", "segment.ms"}, altered.Deleted)
	require.Equal(t, 5, altered.PartitionsTo)
	// The metastore holds the topic's truth; brokers learn of it later.
	mt, err := e.meta.Topic(e.ctx, "orders")
	require.NoError(t, err)
	require.Equal(t, map[string]string{"retention.ms": "120000"}, mt.Configs)
	require.Equal(t, int32(5), mt.Partitions)

	var deleted struct {
		Topics []deletedTopicJSON `json:"topics"`
	}
	code, out, _ := e.run("topics", "delete", "events", "ghost", "-yes", "-json")
	require.Equal(t, 1, code)
	require.NoError(t, json.Unmarshal([]byte(out), &deleted), out)
	require.Equal(t, []deletedTopicJSON{{Topic: "events", Deleted: true}, {Topic: "ghost", Error: "it does not exist"}}, deleted.Topics)
	e.eventually("events deleted", func() bool {
		td, err := e.adm.ListTopics(e.ctx)
		require.NoError(t, err)
		return slices.Equal([]string{"orders"}, td.Names())
	})
}

// TestTopicsDescribeOffline stops broker 2: partitions with a replica on
// it become under-replicated, and the one whose only replica it held goes
// offline.
func TestTopicsDescribeOffline(t *testing.T) {
	t.Parallel()
	e := newAdminEnv(t, 3, func(c *broker.Config) {
		c.Lease = metastore.LeaseOptions{Duration: 2 * time.Second, Margin: 500 * time.Millisecond}
		c.ReplicaLagMax = time.Second
	})
	e.createTopic("orders", 3, 2, nil) // 0,1 / 1,2 / 2,0
	e.createTopic("solo", 3, 1, nil)   // 0 / 1 / 2
	require.NoError(t, e.brokers[2].Close())

	var doc struct {
		Topics []describedTopicJSON `json:"topics"`
	}
	status := func(p describedPartitionJSON) string {
		switch {
		case p.Offline:
			return "offline"
		case p.UnderReplicated:
			return "under"
		}
		return "ok"
	}
	e.eventually("the partitions on broker 2 are under-replicated or offline", func() bool {
		out := e.mustRun("topics", "describe", "orders", "solo", "-json")
		require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
		var got []string
		for _, td := range doc.Topics {
			for _, p := range td.Partitions {
				got = append(got, status(p))
			}
		}
		return slices.Equal([]string{"ok", "under", "under", "ok", "ok", "offline"}, got)
	})
	for _, p := range doc.Topics[0].Partitions[1:] {
		require.NotContains(t, p.ISR, int32(2), "orders/%d", p.Partition)
		require.NotEqual(t, int32(2), p.Leader, "orders/%d", p.Partition)
	}

	var listed struct {
		Topics []listedTopicJSON `json:"topics"`
	}
	out := e.mustRun("topics", "list", "-json")
	require.NoError(t, json.Unmarshal([]byte(out), &listed), out)
	require.Len(t, listed.Topics, 2)
	require.Equal(t, 2, listed.Topics[0].UnderReplicated, "orders")
	require.Equal(t, 0, listed.Topics[0].Offline, "orders")
	require.Equal(t, 1, listed.Topics[1].Offline, "solo")

	e.goldenEventually("topics_describe_offline", func() string { return e.mustRun("topics", "describe", "orders", "solo") })
	out = e.mustRun("topics", "describe", "orders", "solo")
	require.Equal(t, [][]string{{"topic", "solo:", "3", "partition(s),", "replication", "factor", "1,", "0", "under-replicated,", "1", "offline"}}, tableRows(out, "topic")[1:])
	rows := tableRows(out, "2")
	require.Len(t, rows, 2, out)
	require.Equal(t, "under-replicated", rows[0][len(rows[0])-1], out)
	require.Equal(t, "offline", rows[1][len(rows[1])-1], out)

	// The preferred leader of orders/2, broker 2, is down: no election.
	code, out, errOut := e.run("partitions", "elect", "orders:2")
	require.Equal(t, 1, code)
	require.Len(t, tableRows(out, "orders"), 1, out)
	require.Contains(t, tableRows(out, "orders")[0], "failed:", out)
	require.Contains(t, errOut, "elect leaders: 1 of 1 partitions failed: orders/2:")

	// Back and in sync, it can lead again.
	e.brokers[2] = e.brokers[2].Restart(t)
	e.eventually("broker 2 back in the ISR of orders/2", func() bool {
		return slices.Contains(e.partition("orders", 2).ISR, 2)
	})
	var elected electJSON
	out = e.mustRun("partitions", "elect", "orders:2", "-json")
	require.NoError(t, json.Unmarshal([]byte(out), &elected), out)
	require.Equal(t, electJSON{Type: "preferred", Partitions: []electedPartitionJSON{{Topic: "orders", Partition: 2, Elected: true}}}, elected)
	e.eventually("broker 2 leads orders/2", func() bool { return e.partition("orders", 2).Leader == 2 })
}

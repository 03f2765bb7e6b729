package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
	return p
}

func TestPartitionsBadInput(t *testing.T) {
	t.Parallel()
	notJSON := writeFile(t, "plan.json", `{"version":1,"partitions":[{"topic":"orders",`)
	v2 := writeFile(t, "v2.json", `{"version":2,"partitions":[{"topic":"orders","partition":0,"replicas":[1]}]}`)
	empty := writeFile(t, "empty.json", `{"version":1,"partitions":[]}`)
	noTopic := writeFile(t, "notopic.json", `{"version":1,"partitions":[{"partition":0,"replicas":[1]}]}`)
	repeated := writeFile(t, "repeated.json", `{"version":1,"partitions":[{"topic":"orders","partition":0,"replicas":[1,1]}]}`)
	twice := writeFile(t, "twice.json", `{"version":1,"partitions":[{"topic":"orders","partition":0,"replicas":[1]},{"topic":"orders","partition":0,"replicas":[2]}]}`)
	noReplicas := writeFile(t, "noreplicas.json", `{"version":1,"partitions":[{"topic":"orders","partition":0}]}`)
	checkBadInput(t, []badInputCase{
		{"unknown verb", []string{"partitions", "frob"}, []string{`unknown verb "frob"`}},
		{"reassign nothing", []string{"partitions", "reassign"}, []string{"-plan", "-move"}},
		{"move without partition", []string{"partitions", "reassign", "-move", "orders=1,2"}, []string{"flag -move", "TOPIC:PARTITION"}},
		{"move bad partition", []string{"partitions", "reassign", "-move", "orders:x=1,2"}, []string{"flag -move", `"x" is not a partition number`}},
		{"move bad broker", []string{"partitions", "reassign", "-move", "orders:0=1,b"}, []string{"flag -move", `"b" is not a broker id`}},
		{"move repeated broker", []string{"partitions", "reassign", "-move", "orders:0=1,1"}, []string{"flag -move", "broker 1 is listed twice"}},
		{"move without replicas", []string{"partitions", "reassign", "-move", "orders:0"}, []string{"flag -move", "no replicas", "-cancel"}},
		{"move twice", []string{"partitions", "reassign", "-move", "orders:0=1", "-move", "orders:0=2"}, []string{"flag -move", "listed twice"}},
		{"plan not JSON", []string{"partitions", "reassign", "-plan", notJSON}, []string{"flag -plan", "is not a reassignment plan"}},
		{"plan version", []string{"partitions", "reassign", "-plan", v2}, []string{"flag -plan", "version 2"}},
		{"plan empty", []string{"partitions", "reassign", "-plan", empty}, []string{"flag -plan", "no partitions"}},
		{"plan without topic", []string{"partitions", "reassign", "-plan", noTopic}, []string{"flag -plan", "partitions[0]: no topic"}},
		{"plan repeated broker", []string{"partitions", "reassign", "-plan", repeated}, []string{"flag -plan", "orders/0", "repeated"}},
		{"plan twice", []string{"partitions", "reassign", "-plan", twice}, []string{"flag -plan", "listed twice"}},
		{"plan without replicas", []string{"partitions", "reassign", "-plan", noReplicas}, []string{"flag -plan", "no replicas"}},
		{"plan missing", []string{"partitions", "reassign", "-plan", filepath.Join(t.TempDir(), "nosuch.json")}, []string{"flag -plan", "no such file"}},
		{"plan and move", []string{"partitions", "reassign", "-plan", v2, "-move", "orders:0=1"}, []string{"-plan and -move"}},
		{"reassign argument", []string{"partitions", "reassign", "orders:0=1"}, []string{`unexpected argument "orders:0=1"`}},
		{"reassign bad interval", []string{"partitions", "reassign", "-move", "orders:0=1", "-interval", "0s"}, []string{"-interval"}},
		{"elect nothing", []string{"partitions", "elect"}, []string{"-all", "TOPIC:PARTITION"}},
		{"elect all and partitions", []string{"partitions", "elect", "-all", "orders:0"}, []string{"-all", "orders:0"}},
		{"elect bad type", []string{"partitions", "elect", "-all", "-type", "dirty"}, []string{"flag -type", `"dirty"`}},
		{"elect bad partition", []string{"partitions", "elect", "orders:x"}, []string{"argument", `"x" is not a partition number`}},
		{"list bad flag", []string{"partitions", "list-reassignments", "-frob"}, []string{"-frob"}},
	})

	// -plan - reads standard input.
	stdin = strings.NewReader("not json")
	t.Cleanup(func() { stdin = os.Stdin })
	var out, errb bytes.Buffer
	code := run([]string{"partitions", "reassign", "-plan", "-", "-bootstrap", "127.0.0.1:1"}, &out, &errb)
	require.Equal(t, 2, code)
	require.Contains(t, errb.String(), "flag -plan: standard input is not a reassignment plan")
}

// TestGoldenPartitionsElect runs elect on partitions whose preferred
// replicas lead (nothing to do) and checks its failures.
func TestGoldenPartitionsElect(t *testing.T) {
	t.Parallel()
	e := brokersEnv(t)
	golden(t, "partitions_elect", e.mustRun("partitions", "elect", "orders:1", "orders"))
	golden(t, "partitions_elect_all", e.mustRun("partitions", "elect", "-all"))

	var doc electJSON
	out := e.mustRun("partitions", "elect", "-type", "unclean", "orders:2", "-json")
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	require.Equal(t, electJSON{Type: "unclean", Partitions: []electedPartitionJSON{{Topic: "orders", Partition: 2, NotNeeded: true}}}, doc)

	code, out, errOut := e.run("partitions", "elect", "nosuch:0")
	require.Equal(t, 1, code)
	require.Empty(t, out)
	require.Contains(t, errOut, "topic nosuch does not exist")
	code, _, errOut = e.run("partitions", "elect", "orders:9")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "topic orders has no partition 9; it has 3 (argument orders:9)")
}

// TestGoldenPartitionsReassign needs AlterPartitionReassignments and
// ListPartitionReassignments on the broker.
func TestGoldenPartitionsReassign(t *testing.T) {
	t.Parallel()
	e := brokersEnv(t)
	e.produce("orders", 0, 20)

	// Broker-side checks come first: nothing is moved.
	for _, tc := range []struct{ move, want string }{
		{"nosuch:0=1", "flag -move: topic nosuch does not exist"},
		{"orders:9=1", "flag -move: topic orders has no partition 9; it has 3"},
		{"orders:0=1,7", "flag -move: orders/0: unknown broker 7; the cluster has brokers 0,1,2"},
	} {
		code, out, errOut := e.run("partitions", "reassign", "-move", tc.move)
		require.Equal(t, 1, code, tc.move)
		require.Empty(t, out)
		require.Contains(t, errOut, tc.want)
	}

	golden(t, "partitions_reassign", e.mustRun("partitions", "reassign", "-move", "orders:0=1,2", "-wait", "-interval", "100ms"))
	e.eventually("orders/0 on 1,2", func() bool {
		return slices.Equal(e.partition("orders", 0).Replicas, []int32{1, 2})
	})
	golden(t, "partitions_list_reassignments", e.mustRun("partitions", "list-reassignments"))

	// A plan from a file, JSON output; its rollback plan moves them back.
	plan := writeFile(t, "plan.json", `{"version":1,"partitions":[
		{"topic":"orders","partition":2,"replicas":[0,1],"log_dirs":["any","any"]},
		{"topic":"orders","partition":1,"replicas":[2,0]}]}`)
	var doc reassignJSON
	out := e.mustRun("partitions", "reassign", "-plan", plan, "-wait", "-interval", "100ms", "-json")
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	rollback := reassignPlan{Version: 1, Partitions: []reassignment{
		{Topic: "orders", Partition: 1, Replicas: []int32{1, 2}},
		{Topic: "orders", Partition: 2, Replicas: []int32{2, 0}},
	}}
	require.Equal(t, reassignJSON{
		Partitions: []reassignedPartitionJSON{
			{Topic: "orders", Partition: 1, CurrentReplicas: []int32{1, 2}, NewReplicas: []int32{2, 0}},
			{Topic: "orders", Partition: 2, CurrentReplicas: []int32{2, 0}, NewReplicas: []int32{0, 1}},
		},
		Rollback: rollback, Waited: true, Complete: true,
	}, doc)
	e.eventually("plan applied", func() bool {
		return slices.Equal(e.partition("orders", 1).Replicas, []int32{2, 0}) && slices.Equal(e.partition("orders", 2).Replicas, []int32{0, 1})
	})

	// The rollback plan moves them back.
	rb, err := json.Marshal(doc.Rollback)
	require.NoError(t, err)
	out = e.mustRun("partitions", "reassign", "-plan", writeFile(t, "rollback.json", string(rb)), "-wait", "-interval", "100ms")
	require.Contains(t, out, "no partition is being reassigned any more (2 partition(s))")
	e.eventually("rolled back", func() bool {
		return slices.Equal(e.partition("orders", 1).Replicas, []int32{1, 2}) && slices.Equal(e.partition("orders", 2).Replicas, []int32{2, 0})
	})

	// Cancelling partitions that are not being reassigned is not an error.
	golden(t, "partitions_cancel", e.mustRun("partitions", "reassign", "-cancel", "-move", "orders:0", "-move", "orders:1=0,1"))

	var listed struct {
		Reassignments []listedReassignmentJSON `json:"reassignments"`
	}
	out = e.mustRun("partitions", "list-reassignments", "orders", "-json")
	require.NoError(t, json.Unmarshal([]byte(out), &listed), out)
	require.Equal(t, []listedReassignmentJSON{}, listed.Reassignments)

	// A reassignment that cannot finish: broker 2 cannot reach the leader,
	// broker 0, to copy the partition.
	e.createTopic("stuck", 1, 2, nil) // on 0,1, led by 0
	e.links.Cut("2", e.brokers[0].Addr)
	defer e.links.Restore("2", e.brokers[0].Addr)
	golden(t, "partitions_reassign_stuck", e.mustRun("partitions", "reassign", "-move", "stuck:0=0,2"))
	e.goldenEventually("partitions_list_reassignments_stuck", func() string { return e.mustRun("partitions", "list-reassignments") })
	out = e.mustRun("partitions", "list-reassignments", "stuck", "-json")
	require.NoError(t, json.Unmarshal([]byte(out), &listed), out)
	require.Equal(t, []listedReassignmentJSON{{Topic: "stuck", Partition: 0, Replicas: []int32{0, 2, 1}, AddingReplicas: []int32{2}, RemovingReplicas: []int32{1}}}, listed.Reassignments)

	// -wait gives up at -timeout.
	code, out, errOut := e.run("partitions", "reassign", "-move", "stuck:0=0,2", "-wait", "-interval", "100ms", "-timeout", "1s")
	require.Equal(t, 1, code)
	require.Contains(t, out, "[>                   ] 0/1 partitions reassigned")
	require.Contains(t, errOut, "wait for the reassignments: no answer from "+e.brokers[0].Addr+" within 1s (flag -timeout)")

	golden(t, "partitions_cancel_stuck", e.mustRun("partitions", "reassign", "-cancel", "-move", "stuck:0"))
	e.eventually("stuck back on 0,1", func() bool {
		out := e.mustRun("partitions", "list-reassignments", "-json")
		require.NoError(t, json.Unmarshal([]byte(out), &listed), out)
		return len(listed.Reassignments) == 0 && slices.Equal(e.partition("stuck", 0).Replicas, []int32{0, 1})
	})
}

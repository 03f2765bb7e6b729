package interop_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stratamq/strata/brokerfleet/internal/brokertest"
	"github.com/stratamq/strata/pkg/testenv"
)

// @platformatic/kafka is a Kafka client for Node.js written from the
// protocol up (no librdkafka, no KafkaJS code): a fourth implementation
// of the wire format and of the classic group protocol reading our
// answers. testdata/platformatic/client.mjs drives it; this test starts
// the cluster and checks what the script reports against the cluster.

// platformaticDir holds the npm package of the script (`npm ci --prefix`
// installs @platformatic/kafka there).
const platformaticDir = "testdata/platformatic"

// platformaticResult is what client.mjs prints.
type platformaticResult struct {
	Created []struct {
		Name                 string
		Partitions, Replicas int
	}
	Topics   []string
	Produced []struct {
		Partition int32
		Offset    int64
	}
	Read, Duplicates int
	ByMember         []int
	Described        struct {
		State, ProtocolType string
		Members             int
	}
	Listed    []string
	Committed map[string]int64 // "topic/partition" -> offset
}

// TestPlatformatic: @platformatic/kafka's admin creates (and deletes) a
// replicated topic, its producer writes with acks all in plain and gzip
// batches, and two consumers in one group read every message once,
// committing each; the group is described and listed while it runs and
// its committed offsets are listed after the consumers leave.
func TestPlatformatic(t *testing.T) {
	node := nodeFor(t, 20, 19, 4, "@platformatic/kafka 1.35")
	if _, err := os.Stat(filepath.Join(platformaticDir, "node_modules", "@platformatic", "kafka", "package.json")); err != nil {
		testenv.Missing(t, testenv.Platformatic, "no "+platformaticDir+"/node_modules/@platformatic/kafka")
	}
	bs := startCluster(t, 3)
	seeds := addrs(bs)
	const topicName, group, n = "platformatic", "platformatic-readers", 200

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "client.mjs")
	cmd.Dir = platformaticDir
	cmd.Env = append(os.Environ(), "STRATA_BOOTSTRAP="+strings.Join(seeds, ","), "STRATA_TOPIC="+topicName,
		"STRATA_GROUP="+group, "STRATA_COUNT="+strconv.Itoa(n))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	require.NoError(t, err, "node client.mjs\nstderr:\n%s\nstdout:\n%s", &stderr, &stdout)
	var res platformaticResult
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &res), "client.mjs output: %s", &stdout)
	if stderr.Len() > 0 {
		t.Logf("client.mjs stderr:\n%s", &stderr)
	}
	t.Logf("client.mjs: read %d (per consumer %v), group %+v, committed %v", res.Read, res.ByMember, res.Described, res.Committed)

	// Admin.
	require.Len(t, res.Created, 2)
	for _, c := range res.Created {
		require.Equal(t, 3, c.Partitions, c.Name)
		require.Equal(t, 3, c.Replicas, c.Name)
	}
	require.Equal(t, []string{topicName}, res.Topics, "the scratch topic is deleted")
	topics, err := brokertest.Admin(t, seeds[0]).ListTopics(ctx)
	require.NoError(t, err)
	require.True(t, topics.Has(topicName))
	require.False(t, topics.Has(topicName+"-scratch"))

	// Producer: what franz-go reads is what was produced, at the offsets
	// the producer was told.
	require.Len(t, res.Produced, n)
	recs := readAll(t, seeds, topicName, n)
	at := map[string]record{}
	for _, r := range recs {
		at[fmt.Sprintf("%d/%d", r.Partition, r.Offset)] = r
	}
	for i, p := range res.Produced {
		r, ok := at[fmt.Sprintf("%d/%d", p.Partition, p.Offset)]
		require.True(t, ok, "message %d acknowledged at %d/%d, not in the log", i, p.Partition, p.Offset)
		require.Equal(t, fmt.Sprintf("value-%04d", i), r.Value)
		require.Equal(t, fmt.Sprintf("key-%d", i%7), r.Key)
		require.Equal(t, "i="+strconv.Itoa(i), r.Headers)
	}

	// The group: every message read once, by both members, committed to
	// the end of each partition.
	require.Equal(t, n, res.Read)
	require.Zero(t, res.Duplicates, "messages read twice")
	require.Len(t, res.ByMember, 2)
	for m, c := range res.ByMember {
		require.Positive(t, c, "consumer %d read nothing (%v)", m, res.ByMember)
	}
	require.Equal(t, "STABLE", res.Described.State)
	require.Equal(t, "consumer", res.Described.ProtocolType)
	require.Equal(t, 2, res.Described.Members)
	require.Equal(t, []string{group}, res.Listed)
	ends := endOffsets(t, seeds[0], topicName)
	got := committed(t, seeds[0], group, topicName)
	for p, end := range ends {
		require.Equal(t, end, got[p], "partition %d: committed offset (franz-go)", p)
		require.Equal(t, end, res.Committed[fmt.Sprintf("%s/%d", topicName, p)], "partition %d: committed offset (platformatic)", p)
	}
}

// nodeFor returns node's path when its version is at least
// major.minor.patch, or ends the test through testenv.Missing.
func nodeFor(t *testing.T, major, minor, patch int, who string) string {
	t.Helper()
	node := brokertest.RequireTool(t, "node")
	out, err := exec.Command(node, "--version").Output()
	require.NoError(t, err)
	v := strings.TrimPrefix(strings.TrimSpace(string(out)), "v")
	var have [3]int
	for i, f := range strings.SplitN(v, ".", 3) {
		have[i], _ = strconv.Atoi(f)
	}
	want := [3]int{major, minor, patch}
	for i := range have {
		if have[i] != want[i] {
			if have[i] < want[i] {
				testenv.Missing(t, testenv.Node, fmt.Sprintf("node v%s; %s needs %d.%d.%d or newer", v, who, major, minor, patch))
			}
			break
		}
	}
	return node
}

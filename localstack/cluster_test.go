package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratamq/strata/pkg/objstore/s3store"
)

// process is a running binary that printed its ready line.
type process struct {
	cmd    *exec.Cmd
	ready  string // the ready line
	stderr *syncBuffer
	exited chan error
}

// startBinary runs bin with args and waits for its first stdout line,
// which must contain want. The process is killed at the end of the test;
// its stderr is logged if the test failed.
func startBinary(t *testing.T, name, want, bin string, args ...string) *process {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = cleanEnv()
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	p := &process{cmd: cmd, stderr: &syncBuffer{}, exited: make(chan error, 1)}
	cmd.Stderr = p.stderr
	require.NoError(t, cmd.Start())
	go func() { p.exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		if t.Failed() {
			t.Logf("%s stderr (last 40 lines):\n%s", name, lastLines(p.stderr.String(), 40))
		}
	})
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
	}()
	select {
	case l := <-lines:
		require.Contains(t, l, want, "%s: ready line", name)
		p.ready = l
	case err := <-p.exited:
		t.Fatalf("%s exited before ready: %v\n%s", name, err, p.stderr)
	case <-time.After(30 * time.Second):
		t.Fatalf("%s not ready in 30s\n%s", name, p.stderr)
	}
	return p
}

// cleanEnv is this process's environment without STRATA_* variables,
// which would set the brokers' flags.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "STRATA_") {
			env = append(env, kv)
		}
	}
	return env
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// TestThreeBrokersOnStandIn is the acceptance test of the stand-in: the
// localstack and brokerfleet binaries, three `brokerfleet serve` processes
// sharing its DynamoDB table and S3 bucket, a topic of three partitions
// with three replicas, 1,000 records produced (idempotent, acks=all) and
// consumed back, and closed segments tiered to the bucket.
func TestThreeBrokersOnStandIn(t *testing.T) {
	if testing.Short() {
		t.Skip("builds two binaries and runs four processes")
	}
	bin := t.TempDir()
	start := time.Now()
	build := exec.Command("go", "build", "-o", bin+string(filepath.Separator), ".", "../brokerfleet")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	t.Logf("built localstack and brokerfleet in %v", time.Since(start).Round(time.Millisecond))

	stand := startBinary(t, "localstack", readyPrefix, filepath.Join(bin, "localstack"),
		"-listen", "127.0.0.1:0", "-data", t.TempDir(), "-bucket", "strata")
	endpoint := strings.TrimPrefix(stand.ready, readyPrefix)
	require.True(t, strings.HasPrefix(endpoint, "http://127.0.0.1:"), "endpoint %q", endpoint)

	var addrs []string
	for id := range 3 {
		p := startBinary(t, fmt.Sprintf("broker %d", id), "ready", filepath.Join(bin, "brokerfleet"),
			"serve", "-node-id", strconv.Itoa(id), "-listen", "127.0.0.1:0", "-data", t.TempDir(),
			"-metastore", "dynamodb://strata", "-aws-endpoint", endpoint, "-create-table",
			"-bucket", "s3://strata/tier", "-tier-interval", "200ms",
			"-lease", "3s", "-lease-margin", "500ms", "-default-replication-factor", "3")
		addrs = append(addrs, p.ready[strings.LastIndex(p.ready, " ")+1:])
	}
	t.Logf("brokers %v ready after %v", addrs, time.Since(start).Round(time.Millisecond))

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const topic = "orders"
	adm, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	require.NoError(t, err)
	defer adm.Close()
	admin := kadm.NewClient(adm)
	waitFor(t, ctx, "three brokers in the metadata", func() bool {
		md, err := admin.Metadata(ctx)
		return err == nil && len(md.Brokers) == 3
	})
	t.Logf("three brokers in the metadata after %v", time.Since(start).Round(time.Millisecond))
	resp, err := admin.CreateTopic(ctx, 3, 3, map[string]*string{"segment.bytes": kadm.StringPtr("4096")}, topic)
	require.NoError(t, err)
	require.NoError(t, resp.Err)
	t.Logf("topic created after %v", time.Since(start).Round(time.Millisecond))
	leaders := map[int32]int32{} // partition -> leader
	waitFor(t, ctx, "a leader and three in-sync replicas per partition", func() bool {
		md, err := admin.Metadata(ctx, topic)
		if err != nil || md.Topics[topic].Err != nil || len(md.Topics[topic].Partitions) != 3 {
			return false
		}
		for _, p := range md.Topics[topic].Partitions {
			if p.Err != nil || p.Leader < 0 || len(p.Replicas) != 3 || len(p.ISR) != 3 {
				return false
			}
			leaders[p.Partition] = p.Leader
		}
		return true
	})
	t.Logf("topic ready after %v, leaders by partition: %v", time.Since(start).Round(time.Millisecond), leaders)
	distinct := map[int32]bool{}
	for _, l := range leaders {
		distinct[l] = true
	}
	require.Len(t, distinct, 3, "each broker leads one partition, so the records go through all three: %v", leaders)

	// Produce through every broker: the client sends each partition's
	// records to its leader. Small uncompressed batches, so that segments
	// of 4 KiB close (a segment holds whole batches).
	prod, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerBatchMaxBytes(1024))
	require.NoError(t, err)
	defer prod.Close()
	const n = 1000
	want := map[string]string{}
	errs := make(chan error, n)
	for i := range n {
		k, v := fmt.Sprintf("k%04d", i), fmt.Sprintf("value %04d %s", i, strings.Repeat("x", 64))
		want[k] = v
		prod.Produce(ctx, &kgo.Record{Key: []byte(k), Value: []byte(v)}, func(_ *kgo.Record, err error) { errs <- err })
	}
	for range n {
		require.NoError(t, <-errs)
	}
	t.Logf("produced %d records after %v", n, time.Since(start).Round(time.Millisecond))

	cons, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cons.Close()
	got := map[string]string{}
	perPartition := map[int32]int{}
	for len(got) < n {
		fs := cons.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "consumed %d of %d", len(got), n)
		for _, e := range fs.Errors() {
			t.Logf("fetch %s/%d: %v", e.Topic, e.Partition, e.Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			_, dup := got[string(r.Key)]
			require.False(t, dup, "record %s read twice", r.Key)
			got[string(r.Key)] = string(r.Value)
			perPartition[r.Partition]++
		})
	}
	require.Equal(t, want, got)
	t.Logf("consumed %d records (per partition %v) after %v", n, perPartition, time.Since(start).Round(time.Millisecond))
	require.Len(t, perPartition, 3)

	// Closed segments reach the bucket, for every partition.
	store, err := s3store.Open(ctx, s3store.Options{Bucket: "strata", Prefix: "tier", Endpoint: endpoint})
	require.NoError(t, err)
	var segments []string
	waitFor(t, ctx, "segment objects of all three partitions in s3://strata/tier", func() bool {
		objs, err := store.List(ctx, "")
		if err != nil {
			return false
		}
		segments = segments[:0]
		parts := map[string]bool{}
		for _, o := range objs {
			if strings.HasSuffix(o.Key, ".log") {
				segments = append(segments, o.Key)
				parts[filepath.Dir(o.Key)] = true // TOPICID/PARTITION
			}
		}
		return len(parts) == 3
	})
	sort.Strings(segments)
	t.Logf("%d segment objects after %v, first %s", len(segments), time.Since(start).Round(time.Millisecond), segments[0])
}

// waitFor polls cond every 100 ms until it holds, failing the test when
// ctx ends first.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

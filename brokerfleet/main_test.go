package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratamq/strata/pkg/metastore/dynamo/dynamotest"
	"github.com/stratamq/strata/pkg/objstore/objstoretest"
	"github.com/stratamq/strata/pkg/objstore/s3store"
)

var binPath string

func TestMain(m *testing.M) {
	if os.Getenv(changelogChildEnv) != "" {
		os.Exit(changelogChild()) // the store process of TestChangelogRestoreAfterKill
	}
	if os.Getenv(shareChildEnv) != "" {
		os.Exit(shareChild()) // the share consumer TestShareConsumerKill9 kills
	}
	dir, err := os.MkdirTemp("", "brokerfleet-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binPath = filepath.Join(dir, "brokerfleet")
	if out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build brokerfleet: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// devProcess is a running `brokerfleet dev`.
type devProcess struct {
	cmd    *exec.Cmd
	addr   string   // the first bootstrap address
	addrs  []string // every broker's address
	stderr *syncBuffer
	exited chan error
}

func startDev(t *testing.T, dataDir string) *devProcess {
	t.Helper()
	return startProcess(t, "dev", "-listen", "127.0.0.1:0", "-http", "127.0.0.1:0", "-registry", "127.0.0.1:0", "-data", dataDir)
}

// startProcess runs the brokerfleet binary and waits for its ready line.
func startProcess(t *testing.T, args ...string) *devProcess {
	t.Helper()
	cmd := exec.Command(binPath, args...)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	p := &devProcess{cmd: cmd, stderr: &syncBuffer{}, exited: make(chan error, 1)}
	cmd.Stderr = p.stderr
	require.NoError(t, cmd.Start())
	go func() { p.exited <- cmd.Wait() }()
	t.Cleanup(func() { cmd.Process.Kill() })
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
		require.Contains(t, l, "ready")
		i := strings.LastIndex(l, " ")
		p.addrs = strings.Split(l[i+1:], ",")
		p.addr = p.addrs[0]
	case err := <-p.exited:
		t.Fatalf("dev exited before ready: %v\n%s", err, p.stderr)
	case <-time.After(30 * time.Second):
		t.Fatalf("dev not ready in 30s\n%s", p.stderr)
	}
	return p
}

func TestDevServesAndStopsOnSignal(t *testing.T) {
	p := startDev(t, t.TempDir())
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.addr), kgo.DefaultProduceTopic("signals"), kgo.AllowAutoTopicCreation())
	require.NoError(t, err)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte("hi")}).FirstErr(), "dev auto-creates topics")

	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-p.exited:
		require.NoError(t, err, "clean exit on SIGTERM\n%s", p.stderr)
	case <-time.After(15 * time.Second):
		t.Fatal("dev did not exit within 15s of SIGTERM")
	}
}

// TestKill9KeepsAcknowledgedRecords kills the broker process mid-stream and
// restarts it on the same data directory: no record fails before the
// kill, and every record acknowledged before it is there, once.
func TestKill9KeepsAcknowledgedRecords(t *testing.T) {
	dir := t.TempDir()
	p := startDev(t, dir)
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.addr), kgo.DefaultProduceTopic("kill9"), kgo.AllowAutoTopicCreation(),
		kgo.RecordDeliveryTimeout(5*time.Second))
	require.NoError(t, err)
	var mu sync.Mutex
	acked := map[string]bool{}
	killed := false
	var failedWhileUp []error // the broker answered, yet a record failed
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			cl.Produce(context.Background(), &kgo.Record{Value: []byte(fmt.Sprintf("r%07d", i))}, func(r *kgo.Record, err error) {
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					acked[string(r.Value)] = true
				case !killed:
					failedWhileUp = append(failedWhileUp, err)
				}
			})
			if i%200 == 199 {
				time.Sleep(time.Millisecond)
			}
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		if n >= 20000 {
			break
		}
		require.True(t, time.Now().Before(deadline), "only %d acks in 30s", n)
		time.Sleep(5 * time.Millisecond)
	}
	mu.Lock()
	killed = true // from here records may fail: the broker is gone
	failed := failedWhileUp
	mu.Unlock()
	require.Empty(t, failed, "records failed while the broker was up")
	require.NoError(t, p.cmd.Process.Kill()) // SIGKILL mid-stream
	<-p.exited
	mu.Lock()
	snapshot := make([]string, 0, len(acked))
	for v := range acked {
		snapshot = append(snapshot, v)
	}
	mu.Unlock()
	close(stop)
	<-done
	cl.Close()

	p2 := startDev(t, dir)
	cons, err := kgo.NewClient(kgo.SeedBrokers(p2.addr), kgo.ConsumeTopics("kill9"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cons.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	seen := map[string]int{}
	for len(seen) < len(snapshot) {
		fs := cons.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "read %d records, %d were acknowledged", len(seen), len(snapshot))
		fs.EachRecord(func(r *kgo.Record) { seen[string(r.Value)]++ })
	}
	for _, v := range snapshot {
		require.Equal(t, 1, seen[v], "acknowledged record %s", v)
	}
}

func TestFlagErrorsNameTheFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"serve", "-node-id", "abc"}, "", "-node-id"},
		{[]string{"serve", "-no-such-flag"}, "", "no-such-flag"},
		{[]string{"serve"}, "STRATA_NODE_ID=abc", "STRATA_NODE_ID"},
		{[]string{"serve", "-topic-default", "retention.ms=soon"}, "", "retention.ms"},
		{[]string{"serve", "-default-partitions", "0"}, "", "default-partitions"},
		{[]string{"dev", "-log-level", "loud"}, "", "-log-level"},
		{[]string{"dev", "-racks", "az-a,az-b"}, "", "-racks"},
		{[]string{"dev", "-brokers", "2", "-racks", "az-a,"}, "", "-racks"},
		{[]string{"serve", "-fetch-session-slots", "-1"}, "", "fetch-session-slots"},
		{[]string{"nonsense"}, "", "unknown command"},
		{[]string{"trigger", "-topic", "t", "-group", "g"}, "", "-function"},
		{[]string{"trigger", "-function", "f", "-topic", "t", "-group", "g", "-batch-size", "0"}, "", "-batch-size"},
		{[]string{"trigger", "-function", "f", "-topic", "t", "-group", "g", "-bootstrap", "nohost"}, "", "-bootstrap"},
		{[]string{"dlq", "list", "-console", "ftp://x"}, "", "-console"},
		{[]string{"dlq", "show", "orders", "0:1"}, "", ".dlq"},
		{[]string{"dlq", "explode"}, "", "unknown verb"},
		{[]string{"bench", "-record-bytes", "1KiB,huge"}, "", "-record-bytes"},
		{[]string{"bench", "-record-bytes", "1MiB"}, "", "-record-bytes"},
		{[]string{"bench", "-keyed", "maybe"}, "", "-keyed"},
		{[]string{"bench", "-partitions", "0"}, "", "-partitions"},
		{[]string{"bench", "-acks", "2"}, "", "-acks"},
		{[]string{"bench", "-durability", "eventual"}, "", "-durability"},
		{[]string{"bench", "-bytes", "lots"}, "", "-bytes"},
		{[]string{"bench", "-targets", "kafka"}, "", "-targets"},
		{[]string{"bench", "-targets", ""}, "", "-bootstrap"},
		{[]string{"bench", "-targets", "kfake", "-idle-partitions", "1000"}, "", "-idle-partitions"},
		{[]string{"bench", "-disk-bytes", "-1"}, "", "-disk-bytes"},
		{[]string{"bench", "-share", "1,0"}, "", "-share"},
		{[]string{"bench", "-share", "four"}, "", "-share"},
		{[]string{"bench", "-targets", "kfake", "-share", "4"}, "", "-share"},
		{[]string{"bench", "-share-bytes", "64KiB"}, "", "-share-bytes"},
		{[]string{"bench", "-share-bytes", "lots"}, "", "-share-bytes"},
		{[]string{"bench", "-object-latency", "s3-standard,slow"}, "", "-object-latency"},
		{[]string{"bench", "-object-latency", "80ms/25ms"}, "", "-object-latency"},
		{[]string{"dev", "-s3-latency", "25ms"}, "", "-s3-latency"},
		{[]string{"dev", "-metastore-latency", "dynamo"}, "", "-metastore-latency"},
	} {
		var stdout, stderr bytes.Buffer
		if c.env != "" {
			k, v, _ := strings.Cut(c.env, "=")
			t.Setenv(k, v)
		}
		code := run(c.args, &stdout, &stderr)
		require.Equal(t, 2, code, "%v: exit code; stderr: %s", c.args, stderr.String())
		require.Contains(t, stderr.String(), c.want, "%v", c.args)
		if c.env != "" {
			k, _, _ := strings.Cut(c.env, "=")
			os.Unsetenv(k)
		}
	}
}

func TestBadFlagsCreateNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	var stdout, stderr bytes.Buffer
	code := run([]string{"serve", "-data", dir, "-topic-default", "retention.ms=soon"}, &stdout, &stderr)
	require.Equal(t, 2, code, stderr.String())
	_, err := os.Stat(dir)
	require.True(t, os.IsNotExist(err), "a rejected command created %s", dir)
}

// TestServeOnDynamoDB runs `brokerfleet serve` against DynamoDB (minidyn
// in this process): topics live in the table, so a second broker process
// on a fresh data directory sees them, and a restart keeps them.
func TestServeOnDynamoDB(t *testing.T) {
	endpoint := dynamotest.StartMinidyn(t)
	serve := func(dataDir string) *devProcess {
		return startProcess(t, "serve", "-listen", "127.0.0.1:0", "-data", dataDir,
			"-metastore", "dynamodb://strata-serve-test", "-aws-endpoint", endpoint, "-create-table",
			"-auto-create-topics", "-lease", "2s", "-lease-margin", "500ms")
	}
	dir := t.TempDir()
	p := serve(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm, err := kgo.NewClient(kgo.SeedBrokers(p.addr))
	require.NoError(t, err)
	resp, err := kadm.NewClient(adm).CreateTopic(ctx, 4, 1, map[string]*string{"retention.ms": kadm.StringPtr("3600000")}, "in-dynamo")
	require.NoError(t, err)
	require.NoError(t, resp.Err)
	adm.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.addr), kgo.DefaultProduceTopic("in-dynamo"))
	require.NoError(t, err)
	for i := 0; i < 100; i++ {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Key: []byte(fmt.Sprint(i)), Value: []byte("v")}).FirstErr())
	}
	cl.Close()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, <-p.exited, p.stderr.String())

	// The same table, a new process and data directory: the topic and its
	// config come from DynamoDB.
	p2 := serve(t.TempDir())
	adm2, err := kgo.NewClient(kgo.SeedBrokers(p2.addr))
	require.NoError(t, err)
	defer adm2.Close()
	md, err := kadm.NewClient(adm2).Metadata(ctx, "in-dynamo")
	require.NoError(t, err)
	require.Len(t, md.Topics["in-dynamo"].Partitions, 4)
	rcs, err := kadm.NewClient(adm2).DescribeTopicConfigs(ctx, "in-dynamo")
	require.NoError(t, err)
	rc, err := rcs.On("in-dynamo", nil)
	require.NoError(t, err)
	found := false
	for _, c := range rc.Configs {
		if c.Key == "retention.ms" {
			found = *c.Value == "3600000"
		}
	}
	require.True(t, found, "the topic's config came from DynamoDB")

	// Back on the first data directory: the records are there too.
	require.NoError(t, p2.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, <-p2.exited, p2.stderr.String())
	p3 := serve(dir)
	cons, err := kgo.NewClient(kgo.SeedBrokers(p3.addr), kgo.ConsumeTopics("in-dynamo"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	require.NoError(t, err)
	defer cons.Close()
	got := 0
	for got < 100 {
		fs := cons.PollFetches(ctx)
		require.NoError(t, ctx.Err(), "read %d of 100", got)
		got += fs.NumRecords()
	}
	require.Equal(t, 100, got)
}

// TestServeTiersToS3 runs `brokerfleet serve -bucket s3://BUCKET/PREFIX
// -aws-endpoint URL` against an S3 stand-in: closed segments appear under
// the prefix, and a second process on an empty disk reads them back.
func TestServeTiersToS3(t *testing.T) {
	s3 := objstoretest.StartS3(t, "")
	meta := filepath.Join(t.TempDir(), "meta.db")
	serve := func(dataDir string) *devProcess {
		return startProcess(t, "serve", "-listen", "127.0.0.1:0", "-data", dataDir, "-metastore", "embedded:"+meta,
			"-bucket", "s3://"+objstoretest.Bucket+"/serve-test", "-aws-endpoint", s3.URL(), "-tier-interval", "100ms",
			"-lease", "2s", "-lease-margin", "500ms")
	}
	p := serve(t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(p.addr), kgo.DefaultProduceTopic("tiered"))
	require.NoError(t, err)
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, map[string]*string{"segment.bytes": kadm.StringPtr("2048")}, "tiered")
	require.NoError(t, err)
	require.NoError(t, resp.Err)
	for i := 0; i < 200; i++ {
		require.NoError(t, cl.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("%064d", i))}).FirstErr())
	}
	cl.Close()
	store := s3.Store(t, s3store.Options{Prefix: "serve-test"})
	waitUntil(t, 30*time.Second, "segments in S3", func() bool {
		objs, err := store.List(ctx, "")
		return err == nil && len(objs) >= 3
	})
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, <-p.exited, p.stderr.String())

	// A new process on an empty disk serves offset 0 from S3.
	p2 := serve(t.TempDir())
	c2, err := kgo.NewClient(kgo.SeedBrokers(p2.addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"tiered": {0: kgo.NewOffset().At(0)}}))
	require.NoError(t, err)
	defer c2.Close()
	fs := c2.PollFetches(ctx)
	require.NoError(t, ctx.Err())
	recs := fs.Records()
	require.NotEmpty(t, recs)
	require.Equal(t, int64(0), recs[0].Offset)
	require.Equal(t, fmt.Sprintf("%064d", 0), string(recs[0].Value))
}

// TestDevServesSchemaRegistry: `brokerfleet dev -registry ADDR` serves the
// Confluent API at the root path and the DLQ console under /console/.
func TestDevServesSchemaRegistry(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	ln.Close()
	startProcess(t, "dev", "-listen", "127.0.0.1:0", "-http", "", "-registry", addr, "-tier=false", "-data", t.TempDir())
	body := `{"schema":"{\"type\":\"string\"}"}`
	resp, err := http.Post("http://"+addr+"/subjects/greetings-value/versions", "application/vnd.schemaregistry.v1+json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	require.Equal(t, 200, resp.StatusCode, string(b))
	var reg struct{ ID int }
	require.NoError(t, json.Unmarshal(b, &reg))
	require.Equal(t, 1, reg.ID)
	resp2, err := http.Get("http://" + addr + "/subjects")
	require.NoError(t, err)
	defer resp2.Body.Close()
	b, _ = io.ReadAll(resp2.Body)
	require.JSONEq(t, `["greetings-value"]`, string(b))

	// The console shares the address, under /console/: its pages and the
	// DLQ API.
	resp3, err := http.Get("http://" + addr + "/console/api/topics")
	require.NoError(t, err)
	defer resp3.Body.Close()
	b, _ = io.ReadAll(resp3.Body)
	require.Equal(t, 200, resp3.StatusCode, string(b))
	require.True(t, json.Valid(b), string(b))
	for path, want := range map[string]string{"/console/": "Cluster strata-dev", "/console/schemas": "greetings-value"} {
		resp, err := http.Get("http://" + addr + path)
		require.NoError(t, err)
		b, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, 200, resp.StatusCode, "%s: %s", path, b)
		require.Contains(t, string(b), want, path)
	}
	// And the admin endpoints beside the registry, for every broker of dev.
	resp4, err := http.Get("http://" + addr + "/strata/v1/groups/nobody/lag")
	require.NoError(t, err)
	resp4.Body.Close()
	require.Equal(t, 404, resp4.StatusCode)
}

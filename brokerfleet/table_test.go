package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratamq/strata/brokerfleet/internal/broker"
	"github.com/stratamq/strata/brokerfleet/internal/brokertest"
	"github.com/stratamq/strata/pkg/metastore"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// adminEnv is a cluster of brokers sharing one metastore, with an admin
// client for setting it up and checking what the commands did.
type adminEnv struct {
	t       *testing.T
	ctx     context.Context
	brokers []*brokertest.Broker
	links   *brokertest.Links // broker i dials its peers as "i"
	meta    *metastore.Meta
	adm     *kadm.Client
	cl      *kgo.Client
}

// newAdminEnv starts n brokers, ids 0..n-1, racks alternating az-a and
// az-b, and waits until every broker sees every other.
func newAdminEnv(t *testing.T, n int, opts ...brokertest.Option) *adminEnv {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	meta := brokertest.NewMeta(t)
	e := &adminEnv{t: t, ctx: ctx, meta: meta, links: brokertest.NewLinks()}
	for id := 0; id < n; id++ {
		e.brokers = append(e.brokers, brokertest.Start(t, func(c *broker.Config) {
			c.Meta, c.NodeID, c.Rack = meta, int32(id), []string{"az-a", "az-b"}[id%2]
			c.DialPeer = e.links.Dialer(strconv.Itoa(id))
			for _, o := range opts {
				o(c)
			}
		}))
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.brokers[0].Addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	e.cl, e.adm = cl, kadm.NewClient(cl)
	// Every broker must list every other. A broker that missed a
	// registration (a failed metastore read is not retried until the next
	// change) is nudged by bumping the change version.
	// A fresh client each time: kgo caches metadata.
	for _, b := range e.brokers {
		tries := 0
		require.Eventually(t, func() bool {
			cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr))
			require.NoError(t, err)
			defer cl.Close()
			md, err := kadm.NewClient(cl).BrokerMetadata(ctx)
			if err == nil && len(md.Brokers) == n {
				return true
			}
			if tries++; tries%20 == 0 {
				_ = meta.NotifyChange(ctx)
			}
			return false
		}, 30*time.Second, 25*time.Millisecond, "broker %d never saw %d brokers", b.Cfg.NodeID, n)
	}
	return e
}

// run runs `brokerfleet CMD VERB -bootstrap B0 ARGS...`, B0 being broker
// 0's address.
func (e *adminEnv) run(cmd, verb string, args ...string) (code int, stdout, stderr string) {
	e.t.Helper()
	all := []string{cmd}
	if verb != "" {
		all = append(all, verb)
	}
	all = append(all, "-bootstrap", e.brokers[0].Addr)
	var out, errb bytes.Buffer
	code = run(append(all, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// mustRun is run that fails the test unless the command succeeds.
func (e *adminEnv) mustRun(cmd, verb string, args ...string) string {
	e.t.Helper()
	code, out, errOut := e.run(cmd, verb, args...)
	require.Equal(e.t, 0, code, "brokerfleet %s %s %v: %s", cmd, verb, args, errOut)
	return out
}

func (e *adminEnv) createTopic(name string, partitions int32, rf int16, configs map[string]*string) {
	e.t.Helper()
	r, err := e.adm.CreateTopic(e.ctx, partitions, rf, configs, name)
	require.NoError(e.t, err)
	require.NoError(e.t, r.Err)
	// Every broker must know it before commands ask any of them.
	for _, b := range e.brokers {
		e.eventually("broker knows topic "+name, func() bool {
			cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr)) // its first request goes to b
			require.NoError(e.t, err)
			defer cl.Close()
			md, err := kadm.NewClient(cl).Metadata(e.ctx, name)
			return err == nil && md.Topics[name].Err == nil && len(md.Topics[name].Partitions) == int(partitions)
		})
	}
}

func (e *adminEnv) produce(topic string, partition int32, n int) {
	e.t.Helper()
	var rs []*kgo.Record
	for i := 0; i < n; i++ {
		rs = append(rs, &kgo.Record{Topic: topic, Partition: partition, Value: []byte{byte(i)}})
	}
	require.NoError(e.t, e.cl.ProduceSync(e.ctx, rs...).FirstErr())
}

// partition returns a partition's metadata as broker 0 has it.
func (e *adminEnv) partition(topic string, p int32) kadm.PartitionDetail {
	e.t.Helper()
	md, err := e.adm.Metadata(e.ctx, topic)
	require.NoError(e.t, err)
	d, ok := md.Topics[topic].Partitions[p]
	require.True(e.t, ok, "%s/%d not in metadata", topic, p)
	return d
}

var (
	portRE     = regexp.MustCompile(`127\.0\.0\.1:\d+`)
	clockRE    = regexp.MustCompile(`\d\d:\d\d:\d\d UTC`)
	progressRE = regexp.MustCompile(`^\[[= >]{20}\] `)
)

// normalize makes command output comparable across runs: addresses become
// 127.0.0.1:PORT, clock times HH:MM:SS UTC, and of each run of progress
// bar lines only the last is kept (how many are drawn depends on timing).
func normalize(out string) string {
	out = portRE.ReplaceAllString(out, "127.0.0.1:PORT")
	out = clockRE.ReplaceAllString(out, "HH:MM:SS UTC")
	lines := strings.SplitAfter(out, "\n")
	var kept []string
	for i, l := range lines {
		if progressRE.MatchString(l) && i+1 < len(lines) && progressRE.MatchString(lines[i+1]) {
			continue
		}
		kept = append(kept, l)
	}
	return strings.Join(kept, "")
}

// golden compares normalized output with testdata/golden/NAME.golden, or
// rewrites that file with -update.
func golden(t *testing.T, name, out string) {
	t.Helper()
	path := filepath.Join("testdata", "golden", name+".golden")
	got := normalize(out)
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "no golden file; run go test ./brokerfleet -run %s -update", t.Name())
	require.Equal(t, string(want), got, "output differs from %s (rerun with -update if the change is intended)", path)
}

// nudge bumps the metastore's change version so that every broker
// re-reads it. A broker in these in-process clusters sometimes misses a
// change (under -race) until the next one; tests that read right after a
// change call this while they wait.
func (e *adminEnv) nudge() {
	_ = e.meta.NotifyChange(e.ctx)
}

// eventually runs cond until it holds, nudging the brokers between tries.
func (e *adminEnv) eventually(what string, cond func() bool) {
	e.t.Helper()
	require.Eventually(e.t, func() bool {
		if cond() {
			return true
		}
		e.nudge()
		return false
	}, 15*time.Second, 100*time.Millisecond, what)
}

// goldenEventually is golden for a command whose output may lag behind a
// change a moment ago (brokers learn of changes through the metastore):
// it reruns cmd for up to 10 s until the output matches.
func (e *adminEnv) goldenEventually(name string, cmd func() string) {
	t := e.t
	t.Helper()
	path := filepath.Join("testdata", "golden", name+".golden")
	if *update {
		time.Sleep(time.Second)
		e.nudge()
		time.Sleep(time.Second)
		golden(t, name, cmd())
		return
	}
	want, _ := os.ReadFile(path)
	out := cmd()
	for deadline := time.Now().Add(10 * time.Second); normalize(out) != string(want) && time.Now().Before(deadline); {
		e.nudge()
		time.Sleep(100 * time.Millisecond)
		out = cmd()
	}
	golden(t, name, out)
}

func TestNormalizeKeepsLastProgressLine(t *testing.T) {
	t.Parallel()
	in := "head 127.0.0.1:45123\n[>                   ] a\n[==========>         ] b\n[====================] c\ndone at 21:04:05 UTC\n"
	require.Equal(t, "head 127.0.0.1:PORT\n[====================] c\ndone at HH:MM:SS UTC\n", normalize(in))
}

func TestAdminParsers(t *testing.T) {
	t.Parallel()
	topic, p, err := parseTopicPartition("a:b:7")
	require.NoError(t, err)
	require.Equal(t, "a:b", topic)
	require.Equal(t, int32(7), p)
	for _, bad := range []string{"orders", ":1", "orders:", "orders:-1", "orders:x"} {
		_, _, err := parseTopicPartition(bad)
		require.Error(t, err, bad)
	}
	ids, err := parseBrokerIDs("2, 0,1")
	require.NoError(t, err)
	require.Equal(t, []int32{2, 0, 1}, ids)
	for _, bad := range []string{"", "1,1", "-1", "a"} {
		_, err := parseBrokerIDs(bad)
		require.Error(t, err, bad)
	}
	var c configFlag
	require.NoError(t, c.Set("cleanup.policy=compact,delete"))
	require.NoError(t, c.Set("retention.ms=1"))
	require.NoError(t, c.Set("retention.ms=2"))
	require.Equal(t, []string{"cleanup.policy", "retention.ms"}, c.keys)
	require.Equal(t, "compact,delete", c.values["cleanup.policy"])
	require.Equal(t, "2", c.values["retention.ms"])
	require.Error(t, c.Set("novalue"))
}

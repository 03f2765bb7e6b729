package interop_test

import (
	"bufio"
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
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratamq/strata/brokerfleet/internal/broker"
	"github.com/stratamq/strata/brokerfleet/internal/brokertest"
	"github.com/stratamq/strata/pkg/testenv"
)

// LinkedIn's Burrow (Debian's burrow, 1.2.1: Sarama inside) monitors
// consumer lag the way it does against Kafka: it learns committed offsets
// by consuming __consumer_offsets and decoding Kafka's records, and log
// end offsets by ListOffsets to each partition's leader, then serves lag
// over HTTP. It keeps its own coordination state in ZooKeeper (Debian's
// zookeeper, a throwaway server here).

// zooKeeperJar is where Debian's zookeeper package puts the server.
const zooKeeperJar = "/usr/share/java/zookeeper.jar"

// burrowLag is the part of Burrow's /v3/kafka/C/consumer/G/lag answer the
// test reads.
type burrowLag struct {
	Error   bool
	Message string
	Status  struct {
		Status     string
		TotalLag   int64 `json:"totallag"`
		Partitions []struct {
			Topic      string
			Partition  int32
			CurrentLag int64 `json:"current_lag"`
			End        struct{ Offset int64 }
		}
	}
}

// TestBurrow: Burrow evaluates a consumer group's lag from a Strata
// cluster that keeps __consumer_offsets (-offsets-topic-partitions): the
// lag it reports per partition and in total is the log end offset minus
// the committed offset, and it follows new records and new commits.
func TestBurrow(t *testing.T) {
	burrow := testenv.Path(t, testenv.Burrow)
	java, err := exec.LookPath("java")
	if err != nil {
		testenv.Missing(t, testenv.ZooKeeper, "no java on PATH")
	}
	if _, err := os.Stat(zooKeeperJar); err != nil {
		testenv.Missing(t, testenv.ZooKeeper, "no "+zooKeeperJar)
	}
	zk := startZooKeeper(t, java)

	meta := brokertest.NewMeta(t)
	var bs []*brokertest.Broker
	for id := 0; id < 3; id++ {
		bs = append(bs, brokertest.Start(t, func(c *broker.Config) {
			c.Meta, c.NodeID, c.DefaultReplicationFactor, c.OffsetsTopicPartitions = meta, int32(id), 3, 5
		}))
	}
	seeds := addrs(bs)
	waitShardsBalanced(t, bs)
	const topicName, group = "burrowed", "burrow-watched"
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	adm := brokertest.Admin(t, seeds[0])
	require.Eventually(t, func() bool {
		topics, err := adm.ListTopics(ctx, "__consumer_offsets")
		return err == nil && topics["__consumer_offsets"].Err == nil && len(topics["__consumer_offsets"].Partitions) == 5
	}, 30*time.Second, 100*time.Millisecond, "the offsets topic is created")
	brokertest.CreateTopicRF(t, seeds[0], topicName, 3, 3, nil)
	cl := brokertest.Client(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce := func(partition int32, n int) {
		t.Helper()
		recs := make([]*kgo.Record, n)
		for i := range recs {
			recs[i] = &kgo.Record{Topic: topicName, Partition: partition, Value: []byte("watched")}
		}
		require.NoError(t, cl.ProduceSync(ctx, recs...).FirstErr())
	}
	for p := int32(0); p < 3; p++ {
		produce(p, 100)
	}

	// Burrow, once it has read the topic's end offsets (it drops commits
	// of topics it does not know yet).
	api := startBurrow(t, burrow, zk, seeds)
	require.Eventually(t, func() bool {
		var topic struct{ Offsets []int64 }
		return burrowGet(t, api+"/v3/kafka/strata/topic/"+topicName, &topic) && fmt.Sprint(topic.Offsets) == "[100 100 100]"
	}, time.Minute, 250*time.Millisecond, "Burrow reads the end offsets of %s", topicName)

	commit := func(at map[int32]int64) {
		t.Helper()
		offs := kadm.Offsets{}
		for p, o := range at {
			offs.Add(kadm.Offset{Topic: topicName, Partition: p, At: o, LeaderEpoch: -1})
		}
		resp, err := adm.CommitOffsets(ctx, group, offs)
		require.NoError(t, err)
		require.NoError(t, resp.Error())
	}
	// waitLag waits until Burrow reports want (partition -> lag) for the
	// group, and their sum as its total lag.
	waitLag := func(want map[int32]int64) {
		t.Helper()
		var last burrowLag
		total := int64(0)
		for _, l := range want {
			total += l
		}
		ok := assertEventually(time.Minute, func() bool {
			last = burrowLag{}
			if !burrowGet(t, api+"/v3/kafka/strata/consumer/"+group+"/lag", &last) || last.Status.TotalLag != total {
				return false
			}
			got := map[int32]int64{}
			for _, p := range last.Status.Partitions {
				if p.Topic == topicName {
					got[p.Partition] = p.CurrentLag
				}
			}
			return fmt.Sprint(got) == fmt.Sprint(want)
		})
		require.True(t, ok, "Burrow's lag of %s: want %v (total %d), last answer %+v", group, want, total, last)
	}

	commit(map[int32]int64{0: 40, 1: 70, 2: 100})
	waitLag(map[int32]int64{0: 60, 1: 30, 2: 0})

	// More records on partition 2 and a commit that catches partition 0
	// up: Burrow follows both.
	produce(2, 50)
	commit(map[int32]int64{0: 100, 1: 70, 2: 100})
	waitLag(map[int32]int64{0: 0, 1: 30, 2: 50})

	var list struct{ Consumers []string }
	require.True(t, burrowGet(t, api+"/v3/kafka/strata/consumer", &list))
	require.Contains(t, list.Consumers, group)
}

// assertEventually polls cond every 250 ms until it holds or d passes.
func assertEventually(d time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(d); ; time.Sleep(250 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// burrowGet decodes Burrow's JSON answer at url into v; false when it is
// not there (yet) or an error.
func burrowGet(t *testing.T, url string, v any) bool {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return false
	}
	var e struct{ Error bool }
	if json.Unmarshal(body, &e) != nil || e.Error {
		return false
	}
	require.NoError(t, json.Unmarshal(body, v), "Burrow's answer at %s: %s", url, body)
	return true
}

// freeAddr returns a loopback address with a port nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

// startZooKeeper runs a standalone ZooKeeper on loopback with its data in
// a temporary directory, until the test ends, and returns its address.
func startZooKeeper(t *testing.T, java string) string {
	t.Helper()
	dir := t.TempDir()
	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	cfg := strings.Join([]string{
		"tickTime=500", "dataDir=" + filepath.Join(dir, "data"), "clientPort=" + port, "clientPortAddress=127.0.0.1",
		"admin.enableServer=false", "4lw.commands.whitelist=ruok", "",
	}, "\n")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "zoo.cfg"), []byte(cfg), 0o644))
	log, err := os.Create(filepath.Join(dir, "zookeeper.log"))
	require.NoError(t, err)
	cmd := exec.Command(java, "-Xmx256m", "-cp", zooKeeperJar, "org.apache.zookeeper.server.ZooKeeperServerMain", filepath.Join(dir, "zoo.cfg"))
	cmd.Stdout, cmd.Stderr = log, log
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		log.Close()
	})
	ok := assertEventually(30*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return false
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(time.Second))
		if _, err := io.WriteString(c, "ruok"); err != nil {
			return false
		}
		b, _ := io.ReadAll(c)
		return string(b) == "imok"
	})
	require.True(t, ok, "ZooKeeper at %s not serving in 30 s:\n%s", addr, tail(log.Name()))
	return addr
}

// startBurrow runs Burrow with a configuration for this cluster (named
// "strata"), until the test ends, and returns its HTTP API's base URL.
// Refreshes are every second so the test need not wait long.
func startBurrow(t *testing.T, burrow, zk string, seeds []string) string {
	t.Helper()
	dir := t.TempDir()
	httpAddr := freeAddr(t)
	list := func(addrs []string) string { return `["` + strings.Join(addrs, `", "`) + `"]` }
	cfg := fmt.Sprintf(`[general]
pidfile=%[1]q

[logging]
filename=%[2]q
level="debug"

[zookeeper]
servers=%[3]s
timeout=6
root-path="/burrow"

[client-profile.strata]
client-id="burrow"
kafka-version="2.1.0"

[cluster.strata]
class-name="kafka"
servers=%[4]s
client-profile="strata"
topic-refresh=1
offset-refresh=1

[consumer.strata]
class-name="kafka"
cluster="strata"
servers=%[4]s
client-profile="strata"
offsets-topic="__consumer_offsets"

[httpserver.default]
address=%[5]q

[storage.default]
class-name="inmemory"
workers=2
intervals=10
expire-group=604800
min-distance=1

[evaluator.default]
class-name="caching"
expire-cache=1
`, filepath.Join(dir, "burrow.pid"), filepath.Join(dir, "burrow.log"), list([]string{zk}), list(seeds), httpAddr)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "burrow.toml"), []byte(cfg), 0o644))
	out, err := os.Create(filepath.Join(dir, "burrow.out"))
	require.NoError(t, err)
	cmd := exec.Command(burrow, "-config-dir", dir)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, out, out
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
		out.Close()
		if t.Failed() {
			t.Logf("Burrow's output:\n%s\nBurrow's log (tail):\n%s", tail(out.Name()), tail(filepath.Join(dir, "burrow.log")))
		}
	})
	api := "http://" + httpAddr
	ok := assertEventually(30*time.Second, func() bool {
		select {
		case err := <-exited:
			exited <- err
			return true
		default:
		}
		resp, err := http.Get(api + "/burrow/admin")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	select {
	case err := <-exited:
		exited <- err
		t.Fatalf("Burrow exited: %v\n%s\n%s", err, tail(out.Name()), tail(filepath.Join(dir, "burrow.log")))
	default:
	}
	require.True(t, ok, "Burrow's HTTP server at %s not up in 30 s", api)
	return api
}

// tail returns the last 40 lines of a file, or why it cannot.
func tail(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > 40 {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

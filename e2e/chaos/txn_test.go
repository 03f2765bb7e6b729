//go:build chaos

package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The transactional scenario's transformers run as child processes (this
// test binary with STRATA_CHAOS_TXN set), so the nemesis can kill them
// with SIGKILL: consume-transform-produce with franz-go's
// GroupTransactSession from the workload's topic to outTopic, one
// transaction per poll, the group's offsets committed in it.

const (
	txnEnv     = "STRATA_CHAOS_TXN"      // the bootstrap addresses, comma-separated
	txnSlotEnv = "STRATA_CHAOS_TXN_SLOT" // the transformer's slot: its transactional id
	txnProcEnv = "STRATA_CHAOS_TXN_PROC" // its process number: its transactions' names
	txnGroup   = "chaos-txn"
	outTopic   = "chaos-out"
	// txnTimeout is the transformers' transaction.timeout.ms: a killed
	// one's transaction is aborted by the next instance of its slot, or
	// after this.
	txnTimeout = 10 * time.Second
)

// txnLine is one line a transformer prints.
type txnLine struct {
	Txn       string   `json:"txn"`
	Values    []string `json:"values,omitempty"` // before End: the output values
	Done      bool     `json:"done,omitempty"`   // after End
	Committed bool     `json:"committed,omitempty"`
	Err       string   `json:"err,omitempty"`
}

// runTransformer is a transformer's main; it never returns.
func runTransformer(bootstrap, slot, proc string) {
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(strings.Split(bootstrap, ",")...),
		kgo.TransactionalID("chaos-etl-"+slot), kgo.TransactionTimeout(txnTimeout),
		kgo.ConsumerGroup(txnGroup), kgo.ConsumeTopics(topicName), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(500*time.Millisecond),
		kgo.FetchMaxWait(300*time.Millisecond), kgo.MetadataMinAge(250*time.Millisecond),
		kgo.ClientID("chaos-etl-"+proc))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	out := json.NewEncoder(os.Stdout)
	for seq := 1; ; {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := sess.PollFetches(ctx)
		cancel()
		var recs []*kgo.Record
		fs.EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
		if len(recs) == 0 {
			continue
		}
		if err := sess.Begin(); err != nil {
			fmt.Fprintln(os.Stderr, "begin:", err)
			os.Exit(1)
		}
		name := fmt.Sprintf("%s-%d", proc, seq)
		seq++
		line := txnLine{Txn: name}
		outs := make([]*kgo.Record, 0, len(recs))
		for _, r := range recs {
			v := OutValue(r.Partition, r.Offset, string(r.Value), name)
			outs = append(outs, &kgo.Record{Topic: outTopic, Partition: r.Partition, Key: r.Key, Value: []byte(v)})
			line.Values = append(line.Values, v)
		}
		out.Encode(line) // reported before the transaction can end
		ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
		var mu sync.Mutex
		var failed error
		var wg sync.WaitGroup
		for _, o := range outs {
			wg.Add(1)
			sess.Produce(ctx, o, func(_ *kgo.Record, err error) {
				defer wg.Done()
				if err != nil {
					mu.Lock()
					failed = err
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		committed, err := sess.End(ctx, kgo.TransactionEndTry(failed == nil))
		cancel()
		done := txnLine{Txn: name, Done: true, Committed: committed}
		if err != nil {
			done.Err = err.Error()
		}
		out.Encode(done)
	}
}

// transformers supervises the transformer processes, one per slot.
type transformers struct {
	t         *testing.T
	h         *History
	bootstrap string
	mu        sync.Mutex
	procs     map[string]*exec.Cmd // by slot
	next      int
	wg        sync.WaitGroup
}

func newTransformers(t *testing.T, c *cluster, h *History) *transformers {
	tr := &transformers{t: t, h: h, bootstrap: strings.Join(c.Bootstrap(), ","), procs: map[string]*exec.Cmd{}, next: 40}
	t.Cleanup(tr.StopAll)
	return tr
}

// Start runs a transformer in slot (a fresh process; an earlier one of
// the slot is fenced by it).
func (tr *transformers) Start(slot string) {
	tr.mu.Lock()
	proc := tr.next
	tr.next++
	tr.mu.Unlock()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), txnEnv+"="+tr.bootstrap, txnSlotEnv+"="+slot, txnProcEnv+"="+strconv.Itoa(proc))
	cmd.SysProcAttr = deathSignal()
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(tr.t, err)
	require.NoError(tr.t, cmd.Start())
	tr.mu.Lock()
	tr.procs[slot] = cmd
	tr.mu.Unlock()
	tr.wg.Add(1)
	go func() {
		defer tr.wg.Done()
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			var l txnLine
			if json.Unmarshal(sc.Bytes(), &l) != nil {
				continue
			}
			switch {
			case !l.Done:
				recs := make([]Rec, len(l.Values))
				for i, v := range l.Values {
					recs[i] = Rec{Value: v}
				}
				tr.h.Add(Op{Process: proc, Type: Invoke, F: FTxn, Value: l.Txn, Recs: recs})
			case l.Err != "":
				tr.h.Add(Op{Process: proc, Type: Info, F: FTxn, Value: l.Txn, Error: l.Err})
			default:
				tr.h.Add(Op{Process: proc, Type: OK, F: FTxn, Value: l.Txn, Committed: l.Committed})
			}
		}
		cmd.Wait()
	}()
}

// Kill kills the transformer of slot with SIGKILL.
func (tr *transformers) Kill(slot string) {
	tr.mu.Lock()
	cmd := tr.procs[slot]
	delete(tr.procs, slot)
	tr.mu.Unlock()
	if cmd != nil {
		cmd.Process.Kill()
	}
}

// StopAll kills every transformer and waits for their output.
func (tr *transformers) StopAll() {
	tr.mu.Lock()
	var slots []string
	for s := range tr.procs {
		slots = append(slots, s)
	}
	tr.mu.Unlock()
	for _, s := range slots {
		tr.Kill(s)
	}
	tr.wg.Wait()
}

var txnSlots = []string{"a", "b"}

// txnLoop kills a transformer with SIGKILL three times and the leader of a
// partition twice, alternating, restarting each 1-3 s later.
func txnLoop(n *nemesis) {
	steps := []string{"transformer", "leader", "transformer", "leader", "transformer"}
	gap := max(time.Second, chaosDuration(n.t)/time.Duration(len(steps)+1))
	kills := 0
	for _, step := range steps {
		if !n.sleep(gap) {
			return
		}
		hold := n.between(time.Second, 3*time.Second)
		if step == "transformer" {
			slot := txnSlots[kills%len(txnSlots)] // a, b, a
			kills++
			n.fault("kill -9 transformer "+slot, hold, func() { n.tr.Kill(slot) }, func() { n.tr.Start(slot) })
			continue
		}
		b, what := n.target(0)
		if b < 0 || !n.c.Up(b) {
			b, what = 0, "broker 0"
		}
		n.fault("kill -9 "+what, hold, func() { n.c.Kill(b) }, func() { n.c.start(b) })
	}
	<-n.ctx.Done()
}

// createOutTopic creates the transformers' output topic, like the input.
func createOutTopic(t *testing.T, c *cluster) {
	adm, done := c.admin()
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, brokers, map[string]*string{
		"min.insync.replicas": kadm.StringPtr("2"),
		"segment.bytes":       kadm.StringPtr("32768"),
	}, outTopic)
	require.NoError(t, err)
	require.NoError(t, resp.Err)
}

// outputEnds returns the output topic's end offsets at an isolation level
// (1: read_committed, the last stable offsets).
func outputEnds(c *cluster, isolation int8) (map[int32]int64, error) {
	return listEnds(c, outTopic, isolation)
}

// listEnds returns a topic's end offsets at an isolation level.
func listEnds(c *cluster, topic string, isolation int8) (map[int32]int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...), kgo.RequestTimeoutOverhead(3*time.Second), kgo.RetryTimeout(5*time.Second))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrListOffsetsRequest()
	req.IsolationLevel = isolation
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for p := range int32(partitions) {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = p, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = []kmsg.ListOffsetsRequestTopic{rt}
	shards := cl.RequestSharded(ctx, req)
	out := map[int32]int64{}
	for _, sh := range shards {
		if sh.Err != nil {
			return nil, sh.Err
		}
		for _, t := range sh.Resp.(*kmsg.ListOffsetsResponse).Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return nil, err
				}
				out[p.Partition] = p.Offset
			}
		}
	}
	if len(out) != partitions {
		return nil, fmt.Errorf("%d of %d partitions answered", len(out), partitions)
	}
	return out, nil
}

// readOutput reads every output partition from its start to ends at an
// isolation level, in offset order.
func readOutput(t *testing.T, c *cluster, committed bool, ends map[int32]int64) []Rec {
	t.Helper()
	return readTopic(t, c, outTopic, committed, ends)
}

// readTopic reads every partition of a topic from its start to ends at an
// isolation level, in offset order.
func readTopic(t *testing.T, c *cluster, topic string, committed bool, ends map[int32]int64) []Rec {
	t.Helper()
	offsets := map[int32]kgo.Offset{}
	for p := range ends {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	opts := []kgo.Opt{kgo.SeedBrokers(c.Bootstrap()...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchMaxWait(200 * time.Millisecond), kgo.ClientID("chaos-" + topic + "-final")}
	if committed {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	cl, err := kgo.NewClient(opts...)
	require.NoError(t, err)
	defer cl.Close()
	var recs []Rec
	next := map[int32]int64{}
	done := func() bool {
		for p, e := range ends {
			if e > 0 && next[p] < e-1 {
				return false
			}
		}
		return true
	}
	// read_committed skips aborted records and markers, so a partition
	// may end in offsets no record comes from: the read also ends after a
	// quiet spell.
	deadline := time.Now().Add(3 * time.Minute)
	for quiet := 0; !done() && quiet < 5; {
		if time.Now().After(deadline) {
			t.Errorf("read of %s incomplete after 3 minutes: read up to %v of %v", topic, next, ends)
			break
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		n := 0
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= ends[r.Partition] {
				return
			}
			n++
			recs = append(recs, Rec{Partition: r.Partition, Offset: r.Offset, Key: string(r.Key), Value: string(r.Value)})
			next[r.Partition] = r.Offset
		})
		if n == 0 {
			quiet++
		} else {
			quiet = 0
		}
	}
	return recs
}

// runTxnScenario runs the transactional scenario: the workload produces
// into the input topic, two transformers copy it to the output topic
// exactly once, and the nemesis kills transformers and leaders.
func runTxnScenario(t *testing.T, seed uint64, dur time.Duration) *report {
	sc := scenario{name: "txn", nemesis: txnLoop}
	c := startCluster(t, sc.opts)
	createOutTopic(t, c)
	h := NewHistory()
	w := startWorkload(t, c, h)
	tr := newTransformers(t, c, h)
	for _, s := range txnSlots {
		tr.Start(s)
	}
	time.Sleep(2 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), dur)
	n := &nemesis{t: t, c: c, h: h, tr: tr, rng: rand.New(rand.NewPCG(seed, hash(sc.name))), ctx: ctx}
	sc.nemesis(n)
	cancel()
	t.Logf("%6.1fs nemesis done; healing", h.Elapsed().Seconds())
	c.HealAll()
	w.Finish()
	waitFor(t, 2*time.Minute, "every partition led with a full ISR after healing", func() bool { return c.healthy(context.Background()) })
	ends := finalRead(t, c, h)
	for _, s := range txnSlots {
		tr.mu.Lock()
		running := tr.procs[s] != nil
		tr.mu.Unlock()
		if !running {
			tr.Start(s)
		}
	}
	r := &report{Scenario: sc.name, Seed: seed, Duration: dur.String()}
	deadline := time.Now().Add(3 * time.Minute)
	for !r.GroupComplete && time.Now().Before(deadline) {
		got, err := committedOf(c, txnGroup)
		r.GroupComplete = err == nil
		for p, e := range ends {
			r.GroupComplete = r.GroupComplete && got[p] == e
		}
		time.Sleep(500 * time.Millisecond)
	}
	if !r.GroupComplete {
		t.Errorf("the transformers did not commit up to the input's end offsets %v within 3 minutes", ends)
	}
	// Every transaction ends (a killed transformer's by fencing or its
	// timeout): no partition is left with an open one.
	var lso, hwm map[int32]int64
	waitFor(t, 2*txnTimeout+30*time.Second, "no output partition held back by an open transaction", func() bool {
		var err1, err2 error
		lso, err1 = outputEnds(c, 1)
		hwm, err2 = outputEnds(c, 0)
		if err1 != nil || err2 != nil {
			return false
		}
		for p := range hwm {
			if lso[p] != hwm[p] {
				return false
			}
		}
		return true
	})
	tr.StopAll()
	committed := readOutput(t, c, true, lso)
	uncommitted := readOutput(t, c, false, hwm)
	ops := h.Ops()
	var input []Rec
	for _, op := range ops {
		if op.F == FFinal && op.Type == OK {
			input = append(input, op.Recs...)
		}
	}
	tx := CheckTxn(input, committed, uncommitted, ops)
	r.Ops = len(ops)
	for _, op := range ops {
		if op.F == FNemesis && op.Type == Invoke {
			r.Faults++
		}
	}
	r.Result = Check(ops)
	r.Txn = tx
	r.S3, r.S3Puts = c.S3Faults.Counts(), c.S3Faults.Count("PutObject")
	r.ReplicaDiffs = c.StopAndCompareTopics(map[string]map[int32]int64{topicName: ends, outTopic: hwm})
	if dir := os.Getenv(outEnv); dir != "" {
		writeOut(t, dir, c, r, ops)
	}
	t.Logf("%s", r.Result.Summary())
	t.Logf("%s", tx.Summary())
	for _, k := range AnomalyKinds {
		for _, ex := range r.Result.Examples[k] {
			t.Errorf("%s: %s", k, ex)
		}
	}
	for _, k := range TxnAnomalyKinds {
		for _, ex := range tx.Examples[k] {
			t.Errorf("%s: %s", k, ex)
		}
	}
	for _, d := range r.ReplicaDiffs {
		t.Errorf("replicas: %s", d)
	}
	require.Greater(t, tx.Input, 1000, "too little input to judge")
	require.Positive(t, tx.Committed, "no transaction committed")
	return r
}

// committedOf returns a group's committed offsets of the input topic.
func committedOf(c *cluster, groupName string) (map[int32]int64, error) {
	adm, done := c.admin()
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := adm.FetchOffsets(ctx, groupName)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for p, o := range resp[topicName] {
		out[p] = o.At
	}
	return out, nil
}

// TestChaosTransactions runs the transactional scenario alone: every input
// record appears exactly once in the output for read_committed consumers
// while transformers and leaders are killed.
func TestChaosTransactions(t *testing.T) {
	dur, seed := chaosDuration(t), chaosSeed(t)
	t.Logf("seed %d (%s=%d replays it), %v", seed, seedEnv, seed, dur)
	r := runTxnScenario(t, seed, dur)
	t.Log("\n" + table([]*report{r}))
}

// TestChaosTxnCoordinatorFailover kills the transaction coordinator with
// SIGKILL after it wrote a commit decision and before every marker was
// written (its link to one partition's leader is cut): the transaction
// completes on the shard's next owner, every partition's last stable
// offset catches up with its high watermark, and read_committed
// consumers read the transaction whole, once.
func TestChaosTxnCoordinatorFailover(t *testing.T) {
	c := startCluster(t, clusterOpts{})
	adm, done := c.admin()
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const txnID = "failover-txn"
	coords := adm.FindTxnCoordinators(ctx, txnID)
	require.NoError(t, coords.Error())
	coord := int(coords[txnID].NodeID)
	// Two partitions led by other brokers; the coordinator's link to the
	// first one's leader is cut.
	var parts []int32
	for p := range int32(partitions) {
		if l := c.Leader(p); l >= 0 && l != coord {
			parts = append(parts, p)
		}
	}
	require.GreaterOrEqual(t, len(parts), 2, "partitions led away from coordinator %d", coord)
	cut := c.Leader(parts[0])
	t.Logf("coordinator %d; cutting its link to %d, leader of partition %d", coord, cut, parts[0])

	prod, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...), kgo.TransactionalID(txnID),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic(topicName))
	require.NoError(t, err)
	defer prod.Close()
	require.NoError(t, prod.BeginTransaction())
	want := map[string]bool{}
	for i := range 40 {
		v := fmt.Sprintf("failover-%02d", i)
		want[v] = true
		require.NoError(t, prod.ProduceSync(ctx, &kgo.Record{Partition: parts[i%2], Key: []byte("failover"), Value: []byte(v)}).FirstErr())
	}
	c.peer[coord][cut].Cut()
	require.NoError(t, prod.EndTransaction(ctx, kgo.TryCommit), "the decision is written: the commit succeeds")
	d, err := adm.DescribeTransactions(ctx, txnID)
	require.NoError(t, err)
	require.Equal(t, "PrepareCommit", d[txnID].State, "the markers of partition %d cannot be written", parts[0])
	lso, err := outputEndsOf(c, topicName, 1)
	require.NoError(t, err)
	hwm, err := outputEndsOf(c, topicName, 0)
	require.NoError(t, err)
	require.Less(t, lso[parts[0]], hwm[parts[0]], "the open transaction holds partition %d back", parts[0])

	c.Kill(coord)
	c.HealAll() // restarts the coordinator too, on a new incarnation
	waitFor(t, 2*time.Minute, "the transaction completed by the shard's new owner", func() bool {
		d, err := adm.DescribeTransactions(ctx, txnID)
		return err == nil && d[txnID].State == "CompleteCommit"
	})
	waitFor(t, time.Minute, "no partition held back by the transaction", func() bool {
		lso, err1 := outputEndsOf(c, topicName, 1)
		hwm, err2 := outputEndsOf(c, topicName, 0)
		return err1 == nil && err2 == nil && lso[parts[0]] == hwm[parts[0]] && lso[parts[1]] == hwm[parts[1]]
	})
	// read_committed: the whole transaction, once.
	offsets := map[int32]kgo.Offset{parts[0]: kgo.NewOffset().AtStart(), parts[1]: kgo.NewOffset().AtStart()}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topicName: offsets}), kgo.FetchMaxWait(200*time.Millisecond))
	require.NoError(t, err)
	defer cl.Close()
	got := map[string]int{}
	for deadline := time.Now().Add(time.Minute); len(got) < len(want) && time.Now().Before(deadline); {
		pctx, pcancel := context.WithTimeout(ctx, time.Second)
		cl.PollFetches(pctx).EachRecord(func(r *kgo.Record) { got[string(r.Value)]++ })
		pcancel()
	}
	for v := range want {
		require.Equal(t, 1, got[v], "record %s of the committed transaction", v)
	}
}

// outputEndsOf is outputEnds for any topic.
func outputEndsOf(c *cluster, topic string, isolation int8) (map[int32]int64, error) {
	return listEnds(c, topic, isolation)
}

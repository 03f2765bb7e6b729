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

// The share-group scenario's consumers run as child processes (this test
// binary with STRATA_CHAOS_SHARE set), so the nemesis can kill them with
// SIGKILL: franz-go share consumers (kgo.ShareGroup) of the workload's
// topic in one share group, accepting every record they are delivered
// and flushing the accepts after every poll.

const (
	shareEnv     = "STRATA_CHAOS_SHARE"      // the bootstrap addresses, comma-separated
	shareProcEnv = "STRATA_CHAOS_SHARE_PROC" // the member's process number
	shareGroup   = "chaos-share"
	// The group's configs: locks short enough that records a killed
	// leader or member held come back within the run, a delivery limit
	// failovers should not reach, and archived records copied to
	// dlqTopic.
	shareLock    = 5 * time.Second
	shareLimit   = 10
	dlqTopic     = topicName + ".dlq"
	shareMembers = 3
)

// shareLine is one line a share member prints: what a poll delivered
// (before it accepts them), then which accepts the broker confirmed.
type shareLine struct {
	Delivered []Rec  `json:"delivered,omitempty"`
	Outcome   bool   `json:"outcome,omitempty"`
	Accepted  []Rec  `json:"accepted,omitempty"`
	Refused   []Rec  `json:"refused,omitempty"`
	Err       string `json:"err,omitempty"`
	Wall      int64  `json:"wall"`
}

// runShareMember is a share member's main; it never returns.
func runShareMember(bootstrap, proc string) {
	// results is the outcome per partition of the accepts of this poll
	// (the callback reports per partition, not per record): an error
	// sticks, so a partition counts as confirmed only if every result of
	// it was.
	var mu sync.Mutex
	results := map[int32]error{}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(bootstrap, ",")...), kgo.ShareGroup(shareGroup),
		kgo.ConsumeTopics(topicName), kgo.ShareMaxRecords(100), kgo.FetchMaxWait(300*time.Millisecond),
		kgo.MetadataMinAge(250*time.Millisecond), kgo.ClientID("chaos-share-"+proc),
		kgo.ShareAckCallback(func(_ *kgo.Client, rs kgo.ShareAckResults) {
			mu.Lock()
			defer mu.Unlock()
			for _, r := range rs {
				if prev, seen := results[r.Partition]; r.Topic == topicName && (!seen || prev == nil) {
					results[r.Partition] = r.Err
				}
			}
		}))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	out := json.NewEncoder(os.Stdout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		recs := cl.PollRecords(ctx, 100).Records()
		cancel()
		if len(recs) == 0 {
			continue
		}
		line := shareLine{Wall: time.Now().UnixNano()}
		for _, r := range recs {
			// The client sets the deadline to when it decoded the
			// response plus the lock duration the broker sent.
			fetched := r.AcquisitionDeadline().Add(-shareLock).UnixNano()
			line.Delivered = append(line.Delivered, Rec{Partition: r.Partition, Offset: r.Offset, Key: string(r.Key), Value: string(r.Value),
				Count: r.DeliveryCount(), Fetched: fetched})
		}
		mu.Lock()
		clear(results)
		mu.Unlock()
		out.Encode(line) // delivered, before any accept can be sent
		for _, r := range recs {
			r.Ack(kgo.AckAccept)
		}
		ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
		err := cl.FlushAcks(ctx)
		cancel()
		done := shareLine{Outcome: true, Wall: time.Now().UnixNano()}
		var errs []string
		if err != nil {
			errs = append(errs, "flush: "+err.Error())
		}
		mu.Lock()
		for p, e := range results {
			if e != nil {
				errs = append(errs, fmt.Sprintf("partition %d: %v", p, e))
			}
		}
		for _, rec := range line.Delivered {
			if e, ok := results[rec.Partition]; err == nil && ok && e == nil {
				done.Accepted = append(done.Accepted, rec)
			} else {
				done.Refused = append(done.Refused, rec)
			}
		}
		mu.Unlock()
		done.Err = strings.Join(errs, "; ")
		out.Encode(done)
	}
}

// shareConsumers supervises the share member processes.
type shareConsumers struct {
	t         *testing.T
	h         *History
	bootstrap string
	mu        sync.Mutex
	members   map[int]*exec.Cmd
	next      int
	wg        sync.WaitGroup
}

func newShareConsumers(t *testing.T, c *cluster, h *History) *shareConsumers {
	s := &shareConsumers{t: t, h: h, bootstrap: strings.Join(c.Bootstrap(), ","), members: map[int]*exec.Cmd{}, next: 60}
	t.Cleanup(s.StopAll)
	return s
}

// Start runs a new member process and returns its process number.
func (s *shareConsumers) Start() int {
	s.mu.Lock()
	id := s.next
	s.next++
	s.mu.Unlock()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), shareEnv+"="+s.bootstrap, shareProcEnv+"="+strconv.Itoa(id))
	cmd.SysProcAttr = deathSignal()
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(s.t, err)
	require.NoError(s.t, cmd.Start())
	s.mu.Lock()
	s.members[id] = cmd
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			var l shareLine
			if json.Unmarshal(sc.Bytes(), &l) != nil {
				continue
			}
			if !l.Outcome {
				s.h.Add(Op{Process: id, Type: Invoke, F: FShare, Recs: l.Delivered, Wall: l.Wall})
				continue
			}
			if len(l.Accepted) > 0 {
				s.h.Add(Op{Process: id, Type: OK, F: FShare, Recs: l.Accepted, Wall: l.Wall})
			}
			if len(l.Refused) > 0 {
				s.h.Add(Op{Process: id, Type: Info, F: FShare, Recs: l.Refused, Wall: l.Wall, Error: l.Err})
			}
		}
		cmd.Wait()
	}()
	return id
}

// Members returns the running members' numbers.
func (s *shareConsumers) Members() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int
	for id := range s.members {
		out = append(out, id)
	}
	return out
}

// Kill kills member id with SIGKILL.
func (s *shareConsumers) Kill(id int) {
	s.mu.Lock()
	cmd := s.members[id]
	delete(s.members, id)
	s.mu.Unlock()
	if cmd != nil {
		cmd.Process.Kill()
	}
}

// StopAll kills every member and waits for their output.
func (s *shareConsumers) StopAll() {
	for _, id := range s.Members() {
		s.Kill(id)
	}
	s.wg.Wait()
}

// shareLoop, every 2-4 s, kills with SIGKILL the leader of a random
// partition (a third of the time) or the share group's coordinator (a
// third), pauses a leader past its lease with SIGSTOP (a sixth: it
// resumes deposed, with share state and share sessions in memory), or
// kills a share member (a sixth, replaced by a new one); a killed broker
// restarts 1-3 s later. Members accept all the time, so every fault
// lands among accepts.
func shareLoop(n *nemesis) {
	for n.sleep(n.between(2*time.Second, 4*time.Second)) {
		switch k := n.rng.IntN(6); k {
		case 5:
			ms := n.sm.Members()
			if len(ms) == 0 {
				n.sm.Start()
				continue
			}
			id := ms[n.rng.IntN(len(ms))]
			n.fault(fmt.Sprintf("kill -9 share member %d", id), n.between(500*time.Millisecond, 2*time.Second),
				func() { n.sm.Kill(id) }, func() { n.sm.Start() })
		case 2:
			b, what := n.target(0)
			if b < 0 || !n.c.Up(b) {
				continue
			}
			n.fault("SIGSTOP "+what, lease+n.between(time.Second, 3*time.Second), func() { n.c.Pause(b) }, func() { n.c.Resume(b) })
		default:
			b, what := n.target(0)
			if k >= 3 {
				b = groupCoordinator(n.c, shareGroup)
				what = fmt.Sprintf("broker %d (share group coordinator)", b)
			}
			if b < 0 || b >= brokers || !n.c.Up(b) {
				continue
			}
			n.fault("kill -9 "+what, n.between(time.Second, 3*time.Second), func() { n.c.Kill(b) }, func() { n.c.start(b) })
		}
	}
}

// groupCoordinator returns the broker coordinating a group, or -1.
func groupCoordinator(c *cluster, name string) int {
	adm, done := c.admin()
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	coords := adm.FindGroupCoordinators(ctx, name)
	if coords.Error() != nil {
		return -1
	}
	return int(coords[name].NodeID)
}

// setupShareGroup creates the dead-letter topic and sets the share
// group's configs before any member joins.
func setupShareGroup(t *testing.T, c *cluster) {
	adm, done := c.admin()
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, brokers, map[string]*string{"min.insync.replicas": kadm.StringPtr("2")}, dlqTopic)
	require.NoError(t, err)
	require.NoError(t, resp.Err)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...))
	require.NoError(t, err)
	defer cl.Close()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType, res.ResourceName = kmsg.ConfigResourceTypeGroupConfig, shareGroup
	for _, kv := range [][2]string{
		{"share.auto.offset.reset", "earliest"},
		{"share.record.lock.duration.ms", strconv.FormatInt(shareLock.Milliseconds(), 10)},
		{"share.delivery.count.limit", strconv.Itoa(shareLimit)},
		{"share.session.timeout.ms", "6000"},
		{"share.heartbeat.interval.ms", "1000"},
		{"errors.deadletterqueue.enable", "true"},
	} {
		cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		cfg.Name, cfg.Value = kv[0], kmsg.StringPtr(kv[1])
		res.Configs = append(res.Configs, cfg)
	}
	req.Resources = append(req.Resources, res)
	aresp, err := req.RequestWith(ctx, cl)
	require.NoError(t, err)
	for _, r := range aresp.Resources {
		require.NoError(t, kerr.ErrorForCode(r.ErrorCode), "configs of share group %s", shareGroup)
	}
}

// shareStarts returns the share group's start offsets of the topic's
// partitions.
func shareStarts(c *cluster) (map[int32]int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Bootstrap()...), kgo.RequestTimeoutOverhead(3*time.Second), kgo.RetryTimeout(5*time.Second))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req := kmsg.NewPtrDescribeShareGroupOffsetsRequest()
	rg := kmsg.NewDescribeShareGroupOffsetsRequestGroup()
	rg.GroupID = shareGroup
	rt := kmsg.NewDescribeShareGroupOffsetsRequestGroupTopic()
	rt.Topic = topicName
	for p := range int32(partitions) {
		rt.Partitions = append(rt.Partitions, p)
	}
	rg.Topics = append(rg.Topics, rt)
	req.Groups = append(req.Groups, rg)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	for _, g := range resp.Groups {
		if err := kerr.ErrorForCode(g.ErrorCode); err != nil {
			return nil, err
		}
		for _, t := range g.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return nil, fmt.Errorf("partition %d: %w", p.Partition, err)
				}
				out[p.Partition] = p.StartOffset
			}
		}
	}
	return out, nil
}

// runShareScenario runs a share-group scenario (sc.name "share" has
// shareLoop as its nemesis): the workload produces, three member
// processes consume through one share group and accept everything, and
// the nemesis kills partition leaders, the group's coordinator and
// members and pauses leaders. expectInvalid skips the assertions (the
// caller makes its own).
func runShareScenario(t *testing.T, sc scenario, seed uint64, dur time.Duration, expectInvalid bool) *report {
	c := startCluster(t, sc.opts)
	setupShareGroup(t, c)
	h := NewHistory()
	w := startWorkload(t, c, h)
	sm := newShareConsumers(t, c, h)
	for range shareMembers {
		sm.Start()
	}
	time.Sleep(2 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), dur)
	n := &nemesis{t: t, c: c, h: h, sm: sm, rng: rand.New(rand.NewPCG(seed, hash(sc.name))), ctx: ctx}
	sc.nemesis(n)
	cancel()
	t.Logf("%6.1fs nemesis done; healing", h.Elapsed().Seconds())
	c.HealAll()
	w.Finish()
	waitFor(t, 2*time.Minute, "every partition led with a full ISR after healing", func() bool { return c.healthy(context.Background()) })
	ends := finalRead(t, c, h)
	for len(sm.Members()) < shareMembers {
		sm.Start()
	}
	// The drain: every record accepted or archived, so the share start
	// offsets reach the ends; then a moment for the last outcomes.
	t.Logf("%6.1fs draining the share group to %v", h.Elapsed().Seconds(), ends)
	var starts map[int32]int64
	deadline := time.Now().Add(3 * time.Minute)
	for drained := false; !drained && time.Now().Before(deadline); {
		var err error
		starts, err = shareStarts(c)
		drained = err == nil
		for p, e := range ends {
			drained = drained && starts[p] >= e
		}
		if !drained {
			time.Sleep(500 * time.Millisecond)
		}
	}
	t.Logf("%6.1fs share start offsets %v", h.Elapsed().Seconds(), starts)
	time.Sleep(2 * time.Second)
	sm.StopAll()
	for p, e := range ends {
		if s, ok := starts[p]; ok {
			h.Add(Op{Process: 100, Type: OK, F: FShareOffsets, Partition: p, Offset: s, End: e})
		}
	}
	// Dead letters are copied by the leaders after archiving: give the
	// copies a moment, then read the topic to its end.
	time.Sleep(time.Second)
	dends, err := listEnds(c, dlqTopic, 0)
	require.NoError(t, err, "end offsets of %s", dlqTopic)
	h.Add(Op{Process: 100, Type: OK, F: FShareDLQ, Recs: readTopic(t, c, dlqTopic, false, dends)})

	ops := h.Ops()
	r := &report{Scenario: sc.name, Seed: seed, Duration: dur.String(), Ops: len(ops)}
	for _, op := range ops {
		if op.F == FNemesis && op.Type == Invoke {
			r.Faults++
		}
	}
	r.Result = Check(ops)
	r.Share = CheckShare(ops, shareLimit)
	r.S3, r.S3Puts = c.S3Faults.Counts(), c.S3Faults.Count("PutObject")
	r.ReplicaDiffs = c.StopAndCompare(ends)
	if dir := os.Getenv(outEnv); dir != "" {
		writeOut(t, dir, c, r, ops)
	}
	t.Logf("%s", r.Result.Summary())
	t.Logf("%s", r.Share.Summary())
	if expectInvalid {
		return r
	}
	for _, k := range AnomalyKinds {
		for _, ex := range r.Result.Examples[k] {
			t.Errorf("%s: %s", k, ex)
		}
	}
	for _, k := range ShareAnomalyKinds {
		for _, ex := range r.Share.Examples[k] {
			t.Errorf("%s: %s", k, ex)
		}
	}
	for _, d := range r.ReplicaDiffs {
		t.Errorf("replicas: %s", d)
	}
	require.Greater(t, r.Share.Accepted, 1000, "too few accepted records to judge")
	return r
}

// TestChaosShareGroups runs the share-group scenario: while leaders, the
// group's coordinator and members are killed with SIGKILL and leaders
// paused past their leases, no record is
// lost to the share group and none is delivered again after its accept
// was confirmed (CheckShare).
func TestChaosShareGroups(t *testing.T) {
	dur, seed := chaosDuration(t), chaosSeed(t)
	t.Logf("seed %d (%s=%d replays it), %v", seed, seedEnv, seed, dur)
	r := runShareScenario(t, scenario{name: "share", nemesis: shareLoop}, seed, dur, false)
	t.Log("\n" + table([]*report{r}))
}

// TestChaosShareUnsafeAckIsCaught shows CheckShare fails a broker that
// answers share acknowledgements before storing them: with
// -test-unsafe-share-ack an accept is confirmed at once and stored up to
// 2 s later, so killing a partition's leader with SIGKILL loses the
// accepts of its last seconds and the next leader hands those records
// out again, which the checker must call redelivered (the same kills
// without the flag redeliver nothing acknowledged: TestChaosShareGroups).
func TestChaosShareUnsafeAckIsCaught(t *testing.T) {
	sc := scenario{name: "share-unsafe-ack", opts: clusterOpts{unsafeShareAck: true}, nemesis: func(n *nemesis) {
		for round := 0; round < 3 && n.sleep(4*time.Second); round++ {
			b, what := n.target(0)
			if b < 0 || !n.c.Up(b) {
				continue
			}
			n.fault("kill -9 "+what, 2*time.Second, func() { n.c.Kill(b) }, func() { n.c.start(b) })
		}
	}}
	seed := chaosSeed(t)
	t.Logf("seed %d (%s=%d replays it)", seed, seedEnv, seed)
	r := runShareScenario(t, sc, seed, 20*time.Second, true)
	t.Log("\n" + table([]*report{r}))
	require.False(t, r.Share.Valid, "the share checker accepted a broker that answers acknowledgements before storing them")
	require.Positive(t, r.Share.Counts[ShareRedelivered], "accepted records delivered again: %v", r.Share.Examples)
}

package broker_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/stratamq/strata/brokerfleet/internal/brokertest"
)

// Other clients' consumer groups against our coordinator: librdkafka
// (through kcat -G) and Sarama's ConsumerGroup, each with two members
// sharing a topic, committing, leaving, and a restarted member resuming.

// producedRecord is a record franz-go got acknowledged, with its place.
type producedRecord struct {
	value     string
	partition int32
}

// produceKeyed produces records valued val-<from>..val-<to-1> with keys
// spread over the partitions, and returns them as acknowledged.
func produceKeyed(t *testing.T, addr, topicName string, from, to int) []producedRecord {
	t.Helper()
	cl := brokertest.Client(t, addr, kgo.ProducerLinger(2*time.Millisecond))
	recs := make([]*kgo.Record, 0, to-from)
	for i := from; i < to; i++ {
		recs = append(recs, &kgo.Record{Topic: topicName, Key: []byte("k" + strconv.Itoa(i%101)), Value: []byte(fmt.Sprintf("val-%05d", i))})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res := cl.ProduceSync(ctx, recs...)
	require.NoError(t, res.FirstErr())
	out := make([]producedRecord, 0, len(res))
	for _, r := range res {
		out = append(out, producedRecord{value: string(r.Record.Value), partition: r.Record.Partition})
	}
	return out
}

// countOld counts the values in got that are not among want.
func countOld(got map[string]int32, want []producedRecord) int {
	in := make(map[string]bool, len(want))
	for _, r := range want {
		in[r.value] = true
	}
	old := 0
	for v := range got {
		if !in[v] {
			old++
		}
	}
	return old
}

// describeGroup returns the group's state and, per client id, the
// partitions of topicName assigned to that member.
func describeGroup(adm *kadm.Client, group, topicName string) (state string, assigned map[string][]int32, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	described, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return "", nil, err
	}
	g := described[group]
	if g.Err != nil {
		return "", nil, g.Err
	}
	assigned = map[string][]int32{}
	for _, m := range g.Members {
		var ps []int32
		if a, ok := m.Assigned.AsConsumer(); ok {
			for _, at := range a.Topics {
				if at.Topic == topicName {
					ps = append(ps, at.Partitions...)
				}
			}
		}
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		assigned[m.ClientID] = append(assigned[m.ClientID], ps...)
	}
	return g.State, assigned, nil
}

// waitShared waits until the group is stable with exactly the members
// named by clients, each owning some partitions, together all of them.
func waitShared(t *testing.T, adm *kadm.Client, group, topicName string, partitions int, clients ...string) map[string][]int32 {
	t.Helper()
	var last map[string][]int32
	var lastState string
	var lastErr error
	deadline := time.Now().Add(30 * time.Second)
	for {
		// Until the controller has placed the group shards, describing
		// answers COORDINATOR_NOT_AVAILABLE: retried like clients do.
		state, assigned, err := describeGroup(adm, group, topicName)
		last, lastState, lastErr = assigned, state, err
		if err == nil && state == "Stable" && len(assigned) == len(clients) {
			owned := map[int32]bool{}
			ok := true
			for _, c := range clients {
				ps := assigned[c]
				if len(ps) == 0 {
					ok = false
				}
				for _, p := range ps {
					if owned[p] {
						t.Fatalf("partition %d assigned twice: %v", p, assigned)
					}
					owned[p] = true
				}
			}
			if ok && len(owned) == partitions {
				return assigned
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("group %s never shared %d partitions among %v: state %s, assignment %v, error %v", group, partitions, clients, lastState, last, lastErr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// requireCommittedAtEnd checks that the group is empty and has committed
// every partition of topicName at its end offset, and returns the commits.
func requireCommittedAtEnd(t *testing.T, adm *kadm.Client, group, topicName string, partitions int, total int) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lags, err := adm.Lag(ctx, group)
	require.NoError(t, err)
	gl := lags[group]
	require.NoError(t, gl.Error())
	require.Equal(t, "Empty", gl.State, "every member left the group")
	commits := map[int32]int64{}
	var sum int64
	for _, l := range gl.Lag[topicName] {
		require.NoError(t, l.Err, "partition %d", l.Partition)
		require.Equal(t, l.End.Offset, l.Commit.At, "partition %d: committed offset is not the end offset", l.Partition)
		require.Equal(t, int64(0), l.Lag, "partition %d", l.Partition)
		commits[l.Partition] = l.Commit.At
		sum += l.Commit.At
	}
	require.Len(t, commits, partitions, "a commit for every partition")
	require.Equal(t, int64(total), sum, "commits account for every record")
	return commits
}

// kcatOutput collects the "partition value" lines a kcat process prints.
type kcatOutput struct {
	mu      sync.Mutex
	partial []byte
	vals    map[string]int32 // value -> partition it came from
	dups    int
	bad     []string
}

func (o *kcatOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.partial = append(o.partial, p...)
	for {
		i := bytes.IndexByte(o.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := string(o.partial[:i])
		o.partial = o.partial[i+1:]
		ps, v, ok := strings.Cut(line, " ")
		part, err := strconv.Atoi(ps)
		if !ok || err != nil {
			o.bad = append(o.bad, line)
			continue
		}
		if _, seen := o.vals[v]; seen {
			o.dups++
		}
		o.vals[v] = int32(part)
	}
}

func (o *kcatOutput) snapshot() (vals map[string]int32, dups int, bad []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	vals = make(map[string]int32, len(o.vals))
	for v, p := range o.vals {
		vals[v] = p
	}
	return vals, o.dups, append([]string(nil), o.bad...)
}

// kcatMember is a kcat -G process.
type kcatMember struct {
	name   string
	cmd    *exec.Cmd
	out    *kcatOutput
	stderr *syncBuffer
	exited chan error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func startKcatMember(t *testing.T, kcat, addr, group, topicName, clientID string) *kcatMember {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	m := &kcatMember{name: clientID, out: &kcatOutput{vals: map[string]int32{}}, stderr: &syncBuffer{}, exited: make(chan error, 1)}
	args := []string{"-b", addr, "-G", group, "-q", "-u", "-f", "%p %s\n",
		"-X", "client.id=" + clientID,
		// Where no offset is committed, start at the beginning. Not -o
		// beginning: with -G kcat sets that offset on every assignment
		// (its rebalance_cb), ignoring the group's commits.
		"-X", "auto.offset.reset=earliest",
		"-X", "auto.commit.interval.ms=200",
		"-X", "session.timeout.ms=6000",
		"-X", "heartbeat.interval.ms=300",
		"-X", "fetch.wait.max.ms=100",
		"-X", "topic.metadata.refresh.interval.ms=1000",
	}
	if os.Getenv("STRATA_KCAT_DEBUG") != "" {
		args = append(args, "-d", "cgrp,protocol")
	}
	m.cmd = exec.CommandContext(ctx, kcat, append(args, topicName)...)
	m.cmd.Stdout, m.cmd.Stderr = m.out, m.stderr
	m.cmd.WaitDelay = 5 * time.Second
	require.NoError(t, m.cmd.Start())
	go func() { m.exited <- m.cmd.Wait(); cancel() }()
	t.Cleanup(func() {
		cancel() // kills the process if the test did not stop it
		<-m.exited
		if t.Failed() {
			t.Logf("%s stderr:\n%s", clientID, m.stderr.String())
		}
	})
	return m
}

// stop interrupts kcat (it commits and leaves the group) and waits for it.
func (m *kcatMember) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, m.cmd.Process.Signal(os.Interrupt))
	select {
	case err := <-m.exited:
		m.exited <- err // for the cleanup
		require.NoError(t, err, "%s exited badly; stderr:\n%s", m.name, m.stderr.String())
	case <-time.After(20 * time.Second):
		t.Fatalf("%s did not exit 20s after SIGINT; stderr:\n%s", m.name, m.stderr.String())
	}
}

// TestKcatBalancedConsumer runs two librdkafka balanced consumers (kcat -G)
// in one group: they share the partitions, consume everything, commit, and
// leave the group with its commits at the end of the log.
func TestKcatBalancedConsumer(t *testing.T) {
	kcat := brokertest.RequireTool(t, "kcat")
	b := brokertest.Start(t)
	const (
		topicName  = "kcat-group"
		group      = "kcat-balanced"
		partitions = 6
		n          = 3000
	)
	brokertest.CreateTopic(t, b.Addr, topicName, partitions, nil)
	adm := brokertest.Admin(t, b.Addr)

	// Half before the group exists (read from the beginning, no commits
	// yet), half once both members own partitions.
	produced := produceKeyed(t, b.Addr, topicName, 0, n/2)
	ma := startKcatMember(t, kcat, b.Addr, group, topicName, "kcat-a")
	mb := startKcatMember(t, kcat, b.Addr, group, topicName, "kcat-b")
	assigned := waitShared(t, adm, group, topicName, partitions, "kcat-a", "kcat-b")
	second := produceKeyed(t, b.Addr, topicName, n/2, n)
	produced = append(produced, second...)

	union := func() int {
		a, _, _ := ma.out.snapshot()
		bv, _, _ := mb.out.snapshot()
		missing := 0
		for _, r := range produced {
			if _, ok := a[r.value]; ok {
				continue
			}
			if _, ok := bv[r.value]; !ok {
				missing++
			}
		}
		return missing
	}
	deadline := time.Now().Add(30 * time.Second)
	for union() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d records never consumed; kcat-a stderr:\n%s\nkcat-b stderr:\n%s", union(), n, ma.stderr.String(), mb.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}

	// The assignment held, and each member printed the records of the
	// partitions it owned, from the right partition.
	_, final, err := describeGroup(adm, group, topicName)
	require.NoError(t, err)
	require.Equal(t, assigned, final, "the assignment changed while consuming")
	owner := map[int32]*kcatMember{}
	for _, m := range []*kcatMember{ma, mb} {
		for _, p := range assigned[m.name] {
			owner[p] = m
		}
	}
	got := map[*kcatMember]map[string]int32{}
	for _, m := range []*kcatMember{ma, mb} {
		vals, dups, bad := m.out.snapshot()
		require.Empty(t, bad, "%s printed lines not in the format", m.name)
		t.Logf("%s: partitions %v, %d records, %d printed twice", m.name, assigned[m.name], len(vals), dups)
		got[m] = vals
	}
	for _, r := range second {
		m := owner[r.partition]
		p, ok := got[m][r.value]
		require.True(t, ok, "%s owns partition %d but did not print %s", m.name, r.partition, r.value)
		require.Equal(t, r.partition, p, "%s: partition of %s", m.name, r.value)
	}
	for _, m := range []*kcatMember{ma, mb} {
		for v, p := range got[m] {
			require.True(t, p >= 0 && p < partitions, "%s: %s from partition %d", m.name, v, p)
		}
	}

	// SIGINT: librdkafka commits the consumed offsets and leaves.
	ma.stop(t)
	mb.stop(t)
	commits := requireCommittedAtEnd(t, adm, group, topicName, partitions, n)
	for _, m := range []*kcatMember{ma, mb} {
		require.NotContains(t, m.stderr.String(), "ERROR", "%s reported an error", m.name)
	}

	// A new member resumes at the commits (OffsetFetch), not at the
	// beginning: it prints the new records and none of the old. Every
	// partition gets new records, so an old one would have come first.
	const more = 300
	third := produceKeyed(t, b.Addr, topicName, n, n+more)
	newIn := map[int32]bool{}
	for _, r := range third {
		newIn[r.partition] = true
	}
	require.Len(t, newIn, partitions, "the new records reach every partition")
	mc := startKcatMember(t, kcat, b.Addr, group, topicName, "kcat-c")
	waitFor(t, "kcat-c printed the new records", func() bool {
		vals, _, _ := mc.out.snapshot()
		for _, r := range third {
			if _, ok := vals[r.value]; !ok {
				return false
			}
		}
		return true
	})
	mc.stop(t)
	vals, dups, bad := mc.out.snapshot()
	require.Empty(t, bad)
	require.Zero(t, dups)
	require.Zero(t, countOld(vals, third), "kcat-c printed records from before the committed offsets %v", commits)
	require.Len(t, vals, more)
	requireCommittedAtEnd(t, adm, group, topicName, partitions, n+more)
}

// saramaMember is a Sarama ConsumerGroup consuming in a loop.
type saramaMember struct {
	cg     sarama.ConsumerGroup
	done   chan struct{}
	stopFn func() error // ends the session (committing), leaves, closes

	mu        sync.Mutex
	claims    []int32          // partitions of the current session
	vals      map[string]int32 // value -> partition, everything delivered
	first     map[int32]int64  // first offset delivered per partition
	sessions  int
	errs      []error
	delivered atomic.Int64
}

func (m *saramaMember) Setup(s sarama.ConsumerGroupSession) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sessions++
	m.claims = nil
	for _, ps := range s.Claims() {
		m.claims = append(m.claims, ps...)
	}
	return nil
}

func (m *saramaMember) Cleanup(sarama.ConsumerGroupSession) error {
	m.mu.Lock()
	m.claims = nil
	m.mu.Unlock()
	return nil
}

func (m *saramaMember) ConsumeClaim(s sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for {
		select {
		case msg, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			m.mu.Lock()
			if _, seen := m.first[msg.Partition]; !seen {
				m.first[msg.Partition] = msg.Offset
			}
			m.vals[string(msg.Value)] = msg.Partition
			m.mu.Unlock()
			m.delivered.Add(1)
			s.MarkMessage(msg, "")
		case <-s.Context().Done():
			return nil
		}
	}
}

func (m *saramaMember) snapshot() (claims []int32, vals map[string]int32, first map[int32]int64, errs []error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	vals = make(map[string]int32, len(m.vals))
	for v, p := range m.vals {
		vals[v] = p
	}
	first = make(map[int32]int64, len(m.first))
	for p, o := range m.first {
		first[p] = o
	}
	return append([]int32(nil), m.claims...), vals, first, append([]error(nil), m.errs...)
}

func saramaGroupConfig(version sarama.KafkaVersion, clientID string) *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = version
	cfg.ClientID = clientID
	cfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	cfg.Consumer.Offsets.AutoCommit.Enable = true
	cfg.Consumer.Offsets.AutoCommit.Interval = 100 * time.Millisecond
	cfg.Consumer.Group.Session.Timeout = 6 * time.Second
	cfg.Consumer.Group.Heartbeat.Interval = 300 * time.Millisecond
	// A fresh broker answers COORDINATOR_NOT_AVAILABLE until its
	// controller places the group shards (about a second); retry sooner
	// than the default 2s.
	cfg.Consumer.Group.Rebalance.Retry.Backoff = 200 * time.Millisecond
	cfg.Consumer.MaxWaitTime = 100 * time.Millisecond
	cfg.Consumer.Return.Errors = true
	cfg.Metadata.RefreshFrequency = time.Second
	return cfg
}

func startSaramaMember(t *testing.T, addr, group, topicName string, version sarama.KafkaVersion, clientID string) *saramaMember {
	t.Helper()
	cg, err := sarama.NewConsumerGroup([]string{addr}, group, saramaGroupConfig(version, clientID))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	m := &saramaMember{cg: cg, done: make(chan struct{}), vals: map[string]int32{}, first: map[int32]int64{}}
	errsDone := make(chan struct{})
	go func() {
		defer close(errsDone)
		for err := range cg.Errors() {
			m.mu.Lock()
			m.errs = append(m.errs, err)
			m.mu.Unlock()
		}
	}()
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			if err := cg.Consume(ctx, []string{topicName}, m); err != nil {
				if errors.Is(err, sarama.ErrClosedConsumerGroup) {
					return
				}
				m.mu.Lock()
				m.errs = append(m.errs, fmt.Errorf("consume: %w", err))
				m.mu.Unlock()
				time.Sleep(50 * time.Millisecond)
			}
		}
	}()
	var once sync.Once
	m.stopFn = func() error {
		var err error
		once.Do(func() {
			// End the session first (it commits what was marked), then
			// leave the group and close the client.
			cancel()
			<-m.done
			err = cg.Close()
			<-errsDone
		})
		return err
	}
	t.Cleanup(func() { _ = m.stopFn() })
	return m
}

// TestSaramaConsumerGroup runs two Sarama ConsumerGroup members over a
// topic, checks that they consume everything and commit the end offsets
// when they close, and that a new member resumes from those commits.
func TestSaramaConsumerGroup(t *testing.T) {
	b := brokertest.Start(t)
	adm := brokertest.Admin(t, b.Addr)
	for _, version := range []sarama.KafkaVersion{sarama.V2_1_0_0, sarama.V3_6_0_0} {
		t.Run(version.String(), func(t *testing.T) {
			const partitions = 6
			const n = 3000
			topicName := "sarama-group-" + version.String()
			group := "sarama-" + version.String()
			brokertest.CreateTopic(t, b.Addr, topicName, partitions, nil)

			produced := produceKeyed(t, b.Addr, topicName, 0, n/2)
			ma := startSaramaMember(t, b.Addr, group, topicName, version, "sarama-a")
			mb := startSaramaMember(t, b.Addr, group, topicName, version, "sarama-b")
			assigned := waitShared(t, adm, group, topicName, partitions, "sarama-a", "sarama-b")
			second := produceKeyed(t, b.Addr, topicName, n/2, n)
			produced = append(produced, second...)

			missing := func() int {
				_, a, _, _ := ma.snapshot()
				_, bv, _, _ := mb.snapshot()
				k := 0
				for _, r := range produced {
					if _, ok := a[r.value]; ok {
						continue
					}
					if _, ok := bv[r.value]; !ok {
						k++
					}
				}
				return k
			}
			waitFor(t, "every record consumed by the group", func() bool { return missing() == 0 })

			// Each member consumed the partitions the group gave it, as
			// its sessions saw them.
			_, final, err := describeGroup(adm, group, topicName)
			require.NoError(t, err)
			require.Equal(t, assigned, final, "the assignment changed while consuming")
			for _, m := range []struct {
				name string
				m    *saramaMember
			}{{"sarama-a", ma}, {"sarama-b", mb}} {
				claims, vals, _, errs := m.m.snapshot()
				sort.Slice(claims, func(i, j int) bool { return claims[i] < claims[j] })
				require.Equal(t, assigned[m.name], claims, "%s: session claims against the group's assignment", m.name)
				require.Empty(t, errs, "%s reported errors", m.name)
				owned := map[int32]bool{}
				for _, p := range claims {
					owned[p] = true
				}
				for _, r := range second {
					if owned[r.partition] {
						p, ok := vals[r.value]
						require.True(t, ok, "%s owns partition %d but never got %s", m.name, r.partition, r.value)
						require.Equal(t, r.partition, p)
					}
				}
				t.Logf("%s: partitions %v, %d records delivered", m.name, claims, m.m.delivered.Load())
			}

			require.NoError(t, ma.stopFn())
			require.NoError(t, mb.stopFn())
			commits := requireCommittedAtEnd(t, adm, group, topicName, partitions, n)

			// A restarted member resumes at the commits: it gets the new
			// records and nothing before them.
			const more = 600
			third := produceKeyed(t, b.Addr, topicName, n, n+more)
			mc := startSaramaMember(t, b.Addr, group, topicName, version, "sarama-c")
			waitFor(t, "the restarted member consumed the new records", func() bool {
				_, vals, _, _ := mc.snapshot()
				for _, r := range third {
					if _, ok := vals[r.value]; !ok {
						return false
					}
				}
				return true
			})
			require.NoError(t, mc.stopFn())
			_, vals, first, errs := mc.snapshot()
			require.Empty(t, errs, "sarama-c reported errors")
			require.Zero(t, countOld(vals, third), "the restarted member got records from before the committed offsets %v", commits)
			require.Len(t, vals, more)
			for _, r := range third {
				require.Equal(t, r.partition, vals[r.value])
			}
			newPer := map[int32]bool{}
			for _, r := range third {
				newPer[r.partition] = true
			}
			for p, off := range first {
				require.True(t, newPer[p], "partition %d had nothing new but delivered offset %d", p, off)
				require.Equal(t, commits[p], off, "partition %d: first delivery against the committed offset", p)
			}
			require.Len(t, first, len(newPer))
			requireCommittedAtEnd(t, adm, group, topicName, partitions, n+more)
		})
	}
}

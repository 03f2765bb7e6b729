//go:build chaos

package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A consumer-group member runs as a child process (this test binary with
// STRATA_CHAOS_MEMBER set), so the nemesis can kill it with SIGKILL. It
// prints one JSON line per poll with the records it processed, then
// commits them and prints the commit once it is acknowledged.

const (
	memberEnv = "STRATA_CHAOS_MEMBER" // the bootstrap addresses, comma-separated
	// protocolEnv set to "consumer" makes a member use the consumer group
	// protocol (KIP-848).
	protocolEnv = "STRATA_CHAOS_GROUP_PROTOCOL"
	groupName   = "chaos-group"
)

// memberLine is one line a member prints.
type memberLine struct {
	Recs    []Rec           `json:"recs,omitempty"`
	Commits map[int32]int64 `json:"commits,omitempty"`
}

// runMember is a group member's main; it never returns.
func runMember(bootstrap string) {
	opts := []kgo.Opt{kgo.SeedBrokers(strings.Split(bootstrap, ",")...), kgo.ConsumerGroup(groupName),
		kgo.ConsumeTopics(topicName), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit(),
		kgo.SessionTimeout(6 * time.Second), kgo.HeartbeatInterval(500 * time.Millisecond),
		kgo.FetchMaxWait(300 * time.Millisecond), kgo.MetadataMinAge(250 * time.Millisecond)}
	if os.Getenv(protocolEnv) == "consumer" {
		// The brokers' group.consumer.* settings (cluster_test.go) match
		// the classic members' session and heartbeat.
		opts = append(opts, kgo.ServerSideBalancer(), kgo.Balancers(kgo.StickyBalancer()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	out := json.NewEncoder(os.Stdout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fs := cl.PollFetches(ctx)
		cancel()
		var recs []*kgo.Record
		var line memberLine
		fs.EachRecord(func(r *kgo.Record) {
			recs = append(recs, r)
			line.Recs = append(line.Recs, Rec{Partition: r.Partition, Offset: r.Offset, Key: string(r.Key), Value: string(r.Value)})
		})
		if len(recs) == 0 {
			continue
		}
		out.Encode(line) // processed
		commits := map[int32]int64{}
		for _, r := range recs {
			commits[r.Partition] = r.Offset + 1
		}
		ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
		err := cl.CommitRecords(ctx, recs...)
		cancel()
		if err == nil {
			out.Encode(memberLine{Commits: commits})
		}
	}
}

// group supervises the member processes.
type group struct {
	t         *testing.T
	h         *History
	bootstrap string
	consumer  bool // members of the consumer protocol
	mu        sync.Mutex
	members   map[int]*exec.Cmd
	next      int
	wg        sync.WaitGroup
}

func newGroup(t *testing.T, c *cluster, h *History, consumerProtocol bool) *group {
	g := &group{t: t, h: h, bootstrap: strings.Join(c.Bootstrap(), ","), members: map[int]*exec.Cmd{}, next: 20, consumer: consumerProtocol}
	t.Cleanup(g.StopAll)
	return g
}

// Start runs a new member process and returns its process number.
func (g *group) Start() int {
	g.mu.Lock()
	id := g.next
	g.next++
	g.mu.Unlock()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), memberEnv+"="+g.bootstrap)
	if g.consumer {
		cmd.Env = append(cmd.Env, protocolEnv+"=consumer")
	}
	cmd.SysProcAttr = deathSignal()
	stdout, err := cmd.StdoutPipe()
	require.NoError(g.t, err)
	require.NoError(g.t, cmd.Start())
	g.mu.Lock()
	g.members[id] = cmd
	g.mu.Unlock()
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			var l memberLine
			if json.Unmarshal(sc.Bytes(), &l) != nil {
				continue
			}
			if len(l.Recs) > 0 {
				g.h.Add(Op{Process: id, Type: OK, F: FGroup, Recs: l.Recs})
			}
			for p, o := range l.Commits {
				g.h.Add(Op{Process: id, Type: OK, F: FCommit, Partition: p, Offset: o})
			}
		}
		cmd.Wait()
	}()
	return id
}

// Members returns the running members' numbers.
func (g *group) Members() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []int
	for id := range g.members {
		out = append(out, id)
	}
	return out
}

// Kill kills member id with SIGKILL.
func (g *group) Kill(id int) {
	g.mu.Lock()
	cmd := g.members[id]
	delete(g.members, id)
	g.mu.Unlock()
	if cmd != nil {
		cmd.Process.Kill()
	}
}

// StopAll kills every member and waits for their output.
func (g *group) StopAll() {
	for _, id := range g.Members() {
		g.Kill(id)
	}
	g.wg.Wait()
}

// Committed returns the group's committed offsets as the brokers report
// them.
func (g *group) Committed(c *cluster) (map[int32]int64, error) {
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

// Coordinator returns the broker coordinating the group, or -1.
func (g *group) Coordinator(c *cluster) int {
	adm, done := c.admin()
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	coords := adm.FindGroupCoordinators(ctx, groupName)
	if coords.Error() != nil {
		return -1
	}
	return int(coords[groupName].NodeID)
}

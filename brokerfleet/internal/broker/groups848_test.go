package broker_test

// The consumer group protocol (KIP-848) with real franz-go clients
// (kgo.ServerSideBalancer): cooperative hand-over while members come and
// go, static members, regex subscriptions, the admin view, and the
// fallback to the classic protocol.

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/stratamq/strata/brokerfleet/internal/broker"
	"github.com/stratamq/strata/brokerfleet/internal/brokertest"
)

// startClusterWith starts n brokers on one metastore, with opts.
func startClusterWith(t *testing.T, n int, opts ...brokertest.Option) []*brokertest.Broker {
	meta := brokertest.NewMeta(t)
	var out []*brokertest.Broker
	for id := range n {
		out = append(out, brokertest.Start(t, append([]brokertest.Option{func(c *broker.Config) {
			c.Meta, c.NodeID = meta, int32(id)
		}}, opts...)...))
	}
	for _, b := range out {
		waitFor(t, "all brokers registered", func() bool { return len(metadataOnConn(t, b.Addr).Brokers) == n })
	}
	return out
}

// ownership records who owns which partition, from the members'
// assigned, revoked and lost callbacks, and every moment two members
// owned one partition.
type ownership struct {
	mu         sync.Mutex
	owner      map[int32]string
	violations []string
	// lastAt is when each partition's owner last got a record of it
	// (zero right after it was assigned); maxGap the longest time
	// between two records of a partition its owner held throughout.
	lastAt map[int32]time.Time
	maxGap time.Duration
	gapAt  string
	// events are assignments, releases and pauses over 500 ms, for a
	// failure's message.
	events []string
}

func newOwnership() *ownership {
	return &ownership{owner: map[int32]string{}, lastAt: map[int32]time.Time{}}
}

func (o *ownership) assigned(who string, ps []int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events = append(o.events, fmt.Sprintf("%s+%v@%s", who, ps, time.Now().Format("05.000")))
	for _, p := range ps {
		if cur, ok := o.owner[p]; ok && cur != who {
			o.violations = append(o.violations, fmt.Sprintf("partition %d assigned to %s while %s owns it", p, who, cur))
		}
		o.owner[p] = who
		o.lastAt[p] = time.Time{}
	}
}

func (o *ownership) released(who string, ps []int32) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.events = append(o.events, fmt.Sprintf("%s-%v@%s", who, ps, time.Now().Format("05.000")))
	for _, p := range ps {
		if o.owner[p] == who {
			delete(o.owner, p)
			delete(o.lastAt, p)
		}
	}
}

// got notes a record of p consumed by who.
func (o *ownership) got(who string, p int32, now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.owner[p] != who {
		return
	}
	if last := o.lastAt[p]; !last.IsZero() && now.Sub(last) > 500*time.Millisecond {
		o.events = append(o.events, fmt.Sprintf("%s paused on %d %s..%s", who, p, last.Format("05.000"), now.Format("05.000")))
	}
	if last := o.lastAt[p]; !last.IsZero() && now.Sub(last) > o.maxGap {
		o.maxGap, o.gapAt = now.Sub(last), fmt.Sprintf("%s on partition %d from %s to %s", who, p, last.Format("15:04:05.000"), now.Format("15:04:05.000"))
	}
	o.lastAt[p] = now
}

func (o *ownership) count(who string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, w := range o.owner {
		if w == who {
			n++
		}
	}
	return n
}

// member848 is a kgo consumer of the consumer protocol (or of the
// classic one, with classic set), committing what it processed before
// it gives partitions up.
type member848 struct {
	name string
	cl   *kgo.Client
	done chan struct{}
	lost atomic.Int64 // partitions lost (not revoked)
}

func startMember848(t *testing.T, addrs []string, group, topic, name string, own *ownership, seen *seenSet, opts ...kgo.Opt) *member848 {
	t.Helper()
	m := &member848{name: name, done: make(chan struct{})}
	flat := func(a map[string][]int32) []int32 { return a[topic] }
	base := []kgo.Opt{
		kgo.SeedBrokers(addrs...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100 * time.Millisecond),
		kgo.AutoCommitInterval(200 * time.Millisecond), kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, a map[string][]int32) { own.assigned(name, flat(a)) }),
		kgo.OnPartitionsRevoked(func(ctx context.Context, cl *kgo.Client, r map[string][]int32) {
			_ = cl.CommitUncommittedOffsets(ctx)
			own.released(name, flat(r))
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, l map[string][]int32) {
			m.lost.Add(int64(len(flat(l))))
			own.released(name, flat(l))
		}),
	}
	cl, err := kgo.NewClient(append(base, opts...)...)
	require.NoError(t, err)
	m.cl = cl
	go func() {
		defer close(m.done)
		for {
			fs := cl.PollFetches(context.Background())
			if fs.IsClientClosed() {
				return
			}
			now := time.Now()
			fs.EachRecord(func(r *kgo.Record) {
				seen.add(string(r.Value))
				own.got(name, r.Partition, now)
			})
			cl.AllowRebalance()
		}
	}()
	return m
}

func (m *member848) close() {
	m.cl.Close() // commits what was polled, then leaves
	<-m.done
}

// TestConsumerProtocolMembersComeAndGo: 12 partitions, records flowing,
// consumer-protocol members join and then leave one by one. No partition
// is ever owned by two members, members whose partitions do not move
// keep consuming (no pause over a heartbeat interval), and every record
// is consumed exactly once (commits on revocation). The classic protocol's
// cooperative balancer runs the same checks for comparison; its
// heartbeat interval is the client's, 3 s.
func TestConsumerProtocolMembersComeAndGo(t *testing.T) {
	t.Run("consumer", func(t *testing.T) {
		membersComeAndGo(t, kgo.ServerSideBalancer(), kgo.Balancers(kgo.StickyBalancer()))
	})
	// The classic protocol's cooperative-sticky balancer, on the same
	// terms, for comparison.
	t.Run("classic", func(t *testing.T) { membersComeAndGo(t) })
}

func membersComeAndGo(t *testing.T, opts ...kgo.Opt) {
	const hb = time.Second
	brokers := startClusterWith(t, 3, func(c *broker.Config) { c.GroupConsumerHeartbeatInterval = hb })
	addrs := []string{brokers[0].Addr, brokers[1].Addr, brokers[2].Addr}
	brokertest.CreateTopic(t, addrs[0], "churn", 12, nil)
	seen := &seenSet{vals: map[string]int{}}
	own := newOwnership()

	prod := brokertest.Client(t, addrs[0], kgo.ProducerLinger(2*time.Millisecond), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var mu sync.Mutex
	var acked []string
	stop, prodDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(prodDone)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			v := fmt.Sprintf("rec-%06d", i)
			// Round-robin over the partitions, so each gets a record
			// every few milliseconds.
			r := &kgo.Record{Topic: "churn", Partition: int32(i % 12), Value: []byte(v)}
			if err := prod.ProduceSync(context.Background(), r).FirstErr(); err == nil {
				mu.Lock()
				acked = append(acked, v)
				mu.Unlock()
			}
		}
	}()

	var ms []*member848
	balanced := func() bool {
		for _, m := range ms {
			if n := own.count(m.name); n < 12/len(ms) || n > (12+len(ms)-1)/len(ms) {
				return false
			}
		}
		return true
	}
	waitBalanced := func(what string) {
		t.Helper()
		start := time.Now()
		waitFor(t, what, balanced)
		t.Logf("%s: balanced after %v (at %s)", what, time.Since(start).Round(time.Millisecond), time.Now().Format("15:04:05.000"))
	}
	for i := range 4 {
		ms = append(ms, startMember848(t, addrs, "churners", "churn", fmt.Sprintf("m%d", i), own, seen, opts...))
		waitBalanced(fmt.Sprintf("%d members", len(ms)))
		time.Sleep(2 * hb) // records flow while the group is stable
	}
	for len(ms) > 1 {
		ms[0].close()
		ms = ms[1:]
		waitBalanced(fmt.Sprintf("%d members left", len(ms)))
		time.Sleep(2 * hb)
	}
	close(stop)
	<-prodDone
	mu.Lock()
	all := append([]string(nil), acked...)
	mu.Unlock()
	require.Greater(t, len(all), 1000)
	waitFor(t, "every acknowledged record consumed", func() bool { return seen.has(all) == 0 })
	ms[0].close()

	own.mu.Lock()
	defer own.mu.Unlock()
	require.Empty(t, own.violations, "partitions owned twice")
	dups := 0
	seen.mu.Lock()
	for _, n := range seen.vals {
		if n > 1 {
			dups++
		}
	}
	seen.mu.Unlock()
	t.Logf("%d records, %d consumed twice; longest pause of a partition's owner: %v (%s)", len(all), dups, own.maxGap.Round(time.Millisecond), own.gapAt)
	require.Zero(t, dups, "records consumed twice")
	require.LessOrEqual(t, own.maxGap, hb, "a member holding its partitions paused longer than a heartbeat interval: %v", own.events)
	for _, m := range ms {
		require.Zero(t, m.lost.Load(), "%s lost partitions", m.name)
	}
}

// A static member closes and comes back with its instance id within the
// session timeout: it gets its partitions back and nobody else took them.
func TestConsumerProtocolStaticMemberRestart(t *testing.T) {
	b := brokertest.Start(t)
	brokertest.CreateTopic(t, b.Addr, "static", 4, nil)
	seen := &seenSet{vals: map[string]int{}}
	own := newOwnership()
	opts := []kgo.Opt{kgo.ServerSideBalancer(), kgo.Balancers(kgo.StickyBalancer())}
	a := startMember848(t, []string{b.Addr}, "statics", "static", "a", own, seen, append(opts, kgo.InstanceID("inst-a"))...)
	waitFor(t, "a owns all", func() bool { return own.count("a") == 4 })
	c := startMember848(t, []string{b.Addr}, "statics", "static", "c", own, seen, opts...)
	waitFor(t, "2 and 2", func() bool { return own.count("a") == 2 && own.count("c") == 2 })
	own.mu.Lock()
	var had []int32
	for p, w := range own.owner {
		if w == "a" {
			had = append(had, p)
		}
	}
	own.mu.Unlock()
	sort.Slice(had, func(i, j int) bool { return had[i] < had[j] })
	a.close() // a static leave (-2): the partitions stay reserved
	time.Sleep(time.Second)
	require.Equal(t, 2, own.count("c"), "c took the static member's partitions while it restarts")
	a2 := startMember848(t, []string{b.Addr}, "statics", "static", "a2", own, seen, append(opts, kgo.InstanceID("inst-a"))...)
	waitFor(t, "a's instance owns its partitions again", func() bool { return own.count("a2") == 2 })
	own.mu.Lock()
	var got []int32
	for p, w := range own.owner {
		if w == "a2" {
			got = append(got, p)
		}
	}
	own.mu.Unlock()
	sort.Slice(got, func(i, j int) bool { return got[i] < got[j] })
	require.Equal(t, had, got)
	a2.close()
	c.close()
}

// A regex consumer picks up a topic created after it joined; kadm sees the
// group as a consumer group with its members and assignments.
func TestConsumerProtocolRegexAndAdmin(t *testing.T) {
	b := brokertest.Start(t)
	brokertest.CreateTopic(t, b.Addr, "logs-a", 2, nil)
	seen := &seenSet{vals: map[string]int{}}
	own := newOwnership()
	prod := brokertest.Client(t, b.Addr)
	m := startMember848(t, []string{b.Addr}, "regexers", "logs-a", "r", own, seen,
		kgo.ServerSideBalancer(), kgo.Balancers(kgo.StickyBalancer()), kgo.ConsumeRegex(), kgo.ConsumeTopics("^logs-"))
	require.NoError(t, prod.ProduceSync(context.Background(), &kgo.Record{Topic: "logs-a", Value: []byte("a1")}).FirstErr())
	waitFor(t, "logs-a consumed", func() bool { return seen.has([]string{"a1"}) == 0 })
	brokertest.CreateTopic(t, b.Addr, "logs-b", 3, nil)
	brokertest.CreateTopic(t, b.Addr, "other", 1, nil)
	require.NoError(t, prod.ProduceSync(context.Background(), &kgo.Record{Topic: "logs-b", Value: []byte("b1")}).FirstErr())
	require.NoError(t, prod.ProduceSync(context.Background(), &kgo.Record{Topic: "other", Value: []byte("o1")}).FirstErr())
	deadline := time.Now().Add(30 * time.Second)
	for seen.has([]string{"b1"}) != 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	require.Zero(t, seen.has([]string{"b1"}), "the regex consumer never read the topic created after it joined")
	require.Equal(t, 1, seen.has([]string{"o1"}), "the regex matched a topic it should not")

	adm := brokertest.Admin(t, b.Addr)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	listed, err := adm.ListGroups(ctx)
	require.NoError(t, err)
	require.Equal(t, "consumer", listed["regexers"].GroupType)
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{"regexers"}
	resp, err := req.RequestWith(ctx, brokertest.Client(t, b.Addr))
	require.NoError(t, err)
	g := resp.Groups[0]
	require.Zero(t, g.ErrorCode)
	require.Len(t, g.Members, 1)
	require.Equal(t, "Stable", g.State)
	n := 0
	for _, tp := range g.Members[0].Assignment.TopicPartitions {
		n += len(tp.Partitions)
	}
	require.Equal(t, 5, n, "assignment %+v", g.Members[0].Assignment)
	require.NotNil(t, g.Members[0].SubscribedTopicRegex)
	// The metrics name the group's type and its epoch.
	waitFor(t, "the group's epoch in the metrics", func() bool {
		fams, err := b.Gatherer().Gather()
		require.NoError(t, err)
		for _, f := range fams {
			if f.GetName() != "strata_consumer_group_epoch" {
				continue
			}
			for _, mt := range f.GetMetric() {
				labels := map[string]string{}
				for _, l := range mt.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["group"] == "regexers" && labels["type"] == "consumer" && int32(mt.GetGauge().GetValue()) == g.Epoch {
					return true
				}
			}
		}
		return false
	})
	m.close()
	_ = kadm.StringPtr
}

// A client that caps ConsumerGroupHeartbeat below v1 uses the classic
// protocol against the same broker.
func TestConsumerProtocolFallbackToClassic(t *testing.T) {
	b := brokertest.Start(t)
	brokertest.CreateTopic(t, b.Addr, "fallback", 2, nil)
	seen := &seenSet{vals: map[string]int{}}
	own := newOwnership()
	mv := kversion.Stable()
	mv.SetMaxKeyVersion(68, 0)
	m := startMember848(t, []string{b.Addr}, "fallbacks", "fallback", "f", own, seen,
		kgo.ServerSideBalancer(), kgo.Balancers(kgo.StickyBalancer()), kgo.MaxVersions(mv))
	waitFor(t, "f owns both", func() bool { return own.count("f") == 2 })
	adm := brokertest.Admin(t, b.Addr)
	listed, err := adm.ListGroups(context.Background())
	require.NoError(t, err)
	require.Equal(t, "classic", listed["fallbacks"].GroupType)
	m.close()
}

// TestConsumerProtocolOnlineMigration: a classic group of cooperative
// consumers is migrated to the consumer protocol member by member while
// records flow, then back; no partition is owned twice, committed offsets
// never go back, and every record is consumed exactly once.
func TestConsumerProtocolOnlineMigration(t *testing.T) {
	brokers := startClusterWith(t, 1)
	addrs := []string{brokers[0].Addr}
	brokertest.CreateTopic(t, addrs[0], "migrate", 6, nil)
	seen := &seenSet{vals: map[string]int{}}
	own := newOwnership()
	prod := brokertest.Client(t, addrs[0], kgo.ProducerLinger(2*time.Millisecond), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	var mu sync.Mutex
	var acked []string
	stop, prodDone := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(prodDone)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			v := fmt.Sprintf("rec-%06d", i)
			if err := prod.ProduceSync(context.Background(), &kgo.Record{Topic: "migrate", Partition: int32(i % 6), Value: []byte(v)}).FirstErr(); err == nil {
				mu.Lock()
				acked = append(acked, v)
				mu.Unlock()
			}
			time.Sleep(time.Millisecond)
		}
	}()
	// Committed offsets are watched: none may go back.
	adm := brokertest.Admin(t, addrs[0])
	var wmu sync.Mutex
	high := map[int32]int64{}
	var backwards []string
	watchDone := make(chan struct{})
	go func() {
		defer close(watchDone)
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			offs, err := adm.FetchOffsets(ctx, "migrating")
			cancel()
			if err != nil {
				continue
			}
			wmu.Lock()
			offs.Each(func(o kadm.OffsetResponse) {
				if o.Err == nil && o.At < high[o.Partition] {
					backwards = append(backwards, fmt.Sprintf("partition %d: %d after %d", o.Partition, o.At, high[o.Partition]))
				}
				high[o.Partition] = max(high[o.Partition], o.At)
			})
			wmu.Unlock()
		}
	}()

	consumerOpts := []kgo.Opt{kgo.ServerSideBalancer(), kgo.Balancers(kgo.StickyBalancer())}
	groupType := func() string {
		listed, err := adm.ListGroups(context.Background())
		require.NoError(t, err)
		return listed["migrating"].GroupType
	}
	var ms []*member848
	balanced := func() bool {
		for _, m := range ms {
			if own.count(m.name) != 6/len(ms) {
				return false
			}
		}
		return true
	}
	for i := range 3 {
		ms = append(ms, startMember848(t, addrs, "migrating", "migrate", fmt.Sprintf("classic%d", i), own, seen))
		waitFor(t, "classic members balanced", balanced)
	}
	require.Equal(t, "classic", groupType())
	// Upgrade one member at a time.
	for i := range 3 {
		ms = append(ms, startMember848(t, addrs, "migrating", "migrate", fmt.Sprintf("consumer%d", i), own, seen, consumerOpts...))
		waitFor(t, "the new member owns partitions", func() bool { return own.count(ms[len(ms)-1].name) > 0 })
		require.Equal(t, "consumer", groupType())
		ms[0].close()
		ms = ms[1:]
		waitFor(t, "balanced after a classic member left", balanced)
		time.Sleep(500 * time.Millisecond)
	}
	// And back.
	for i := range 3 {
		ms = append(ms, startMember848(t, addrs, "migrating", "migrate", fmt.Sprintf("back%d", i), own, seen))
		waitFor(t, "the classic member owns partitions", func() bool { return own.count(ms[len(ms)-1].name) > 0 })
		ms[0].close()
		ms = ms[1:]
		waitFor(t, "balanced after a consumer member left", balanced)
		time.Sleep(500 * time.Millisecond)
	}
	require.Equal(t, "classic", groupType())

	close(stop)
	<-prodDone
	<-watchDone
	mu.Lock()
	all := append([]string(nil), acked...)
	mu.Unlock()
	waitFor(t, "every acknowledged record consumed", func() bool { return seen.has(all) == 0 })
	for _, m := range ms {
		m.close()
	}
	own.mu.Lock()
	require.Empty(t, own.violations, "partitions owned twice: %v", own.events)
	own.mu.Unlock()
	wmu.Lock()
	require.Empty(t, backwards, "committed offsets went back")
	wmu.Unlock()
	dups := 0
	seen.mu.Lock()
	for _, n := range seen.vals {
		if n > 1 {
			dups++
		}
	}
	seen.mu.Unlock()
	t.Logf("%d records, %d consumed twice", len(all), dups)
	require.Zero(t, dups, "records consumed twice")
	// Every record's offset is committed at the end.
	offs, err := adm.FetchOffsets(context.Background(), "migrating")
	require.NoError(t, err)
	var total int64
	offs.Each(func(o kadm.OffsetResponse) { total += o.At })
	require.Equal(t, int64(len(all)), total)
}

// The consumer protocol's settings are checked as Kafka checks them.
func TestConsumerGroupConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*broker.Config)
		want   string
	}{
		{"session below its minimum", func(c *broker.Config) { c.GroupConsumerSessionTimeout = 10 * time.Second }, "group-consumer-session-timeout"},
		{"session above its maximum", func(c *broker.Config) { c.GroupConsumerSessionTimeout = 2 * time.Minute }, "group-consumer-session-timeout"},
		{"heartbeat below its minimum", func(c *broker.Config) { c.GroupConsumerHeartbeatInterval = time.Second }, "group-consumer-heartbeat-interval"},
		{"heartbeat not below the session", func(c *broker.Config) {
			c.GroupConsumerMinHeartbeatInterval, c.GroupConsumerMaxHeartbeatInterval = time.Second, time.Minute
			c.GroupConsumerHeartbeatInterval = 45 * time.Second
		}, "below the session timeout"},
		{"unknown assignor", func(c *broker.Config) { c.GroupConsumerAssignors = []string{"uniform", "sticky"} }, "group-consumer-assignors"},
		{"assignor twice", func(c *broker.Config) { c.GroupConsumerAssignors = []string{"range", "range"} }, "group-consumer-assignors"},
		{"bad policy", func(c *broker.Config) { c.GroupConsumerMigrationPolicy = "sideways" }, "group-consumer-migration-policy"},
		{"max size 0", func(c *broker.Config) { c.GroupConsumerMaxSize = 0 }, "group-consumer-max-size"},
	} {
		cfg := broker.DefaultConfig()
		cfg.Meta = brokertest.NewMeta(t)
		tc.change(&cfg)
		err := cfg.Validate()
		require.Error(t, err, tc.name)
		require.Contains(t, err.Error(), tc.want, tc.name)
	}
	cfg := broker.DefaultConfig()
	cfg.Meta = brokertest.NewMeta(t)
	cfg.GroupConsumerAssignors = []string{"range", "org.apache.kafka.coordinator.group.assignor.UniformAssignor"}
	cfg.GroupConsumerMigrationPolicy = "UPGRADE"
	require.NoError(t, cfg.Validate())
}

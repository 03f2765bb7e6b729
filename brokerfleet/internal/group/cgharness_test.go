package group

// Test helpers for the consumer protocol: a topic view tests change, and
// simulated members that heartbeat like a client (kgo's rules: full
// requests carrying what they own, revocations done before the next
// heartbeat), checking after every answer that no partition is held by
// two members.

import (
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/group/assign"
	"github.com/stratamq/strata/pkg/metastore"
)

// testTopics is a TopicView tests change.
type testTopics struct {
	mu      sync.Mutex
	version int64
	byName  map[string]assign.Topic
}

func newTestTopics() *testTopics { return &testTopics{byName: map[string]assign.Topic{}} }

// set creates a topic or changes its partition count; it returns its id.
func (t *testTopics) set(name string, partitions int32) metastore.TopicID {
	t.mu.Lock()
	defer t.mu.Unlock()
	cur, ok := t.byName[name]
	if !ok {
		cur = assign.Topic{ID: metastore.NewTopicID(), Name: name}
	}
	cur.Partitions = partitions
	t.byName[name] = cur
	t.version++
	return cur.ID
}

func (t *testTopics) remove(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.byName, name)
	t.version++
}

func (t *testTopics) id(name string) metastore.TopicID {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.byName[name].ID
}

func (t *testTopics) Version() int64 { t.mu.Lock(); defer t.mu.Unlock(); return t.version }
func (t *testTopics) Topic(name string) (assign.Topic, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	x, ok := t.byName[name]
	return x, ok
}
func (t *testTopics) TopicByID(id metastore.TopicID) (assign.Topic, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, x := range t.byName {
		if x.ID == id {
			return x, true
		}
	}
	return assign.Topic{}, false
}
func (t *testTopics) Names() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Sorted(maps.Keys(t.byName))
}

const (
	cgSessionMs   = 45_000
	cgHeartbeatMs = 5_000
)

// newCGHarness is a harness whose coordinators see topics.
func newCGHarness(t *testing.T, topics *testTopics, opts ...func(*Options)) *harness {
	withTopics := func(o *Options) {
		o.Topics = func() TopicView { return topics }
		o.TopicID = func(name string) (metastore.TopicID, bool) {
			x, ok := topics.Topic(name)
			return x.ID, ok
		}
		o.PartitionExists = func(name string, p int32) bool {
			x, ok := topics.Topic(name)
			return ok && p >= 0 && p < x.Partitions
		}
	}
	return newHarness(t, append([]func(*Options){withTopics}, opts...)...)
}

func cgAddCoordinator(h *harness, topics *testTopics) *Coordinator {
	return h.addCoordinator(func(o *Options) {
		o.Topics = func() TopicView { return topics }
		o.TopicID = func(name string) (metastore.TopicID, bool) { x, ok := topics.Topic(name); return x.ID, ok }
	})
}

// cgMember is a simulated consumer-protocol member.
type cgMember struct {
	h        *harness
	c        *Coordinator
	group    string
	id       string
	instance string
	epoch    int32
	topics   []string
	regex    *string
	assignor string
	owned    map[partKey]bool // what it was told it may own
}

func (h *harness) newMember(c *Coordinator, group, id string, topics ...string) *cgMember {
	return &cgMember{h: h, c: c, group: group, id: id, topics: topics, assignor: "uniform", owned: map[partKey]bool{}}
}

// request is the member's next full heartbeat.
func (m *cgMember) request() *kmsg.ConsumerGroupHeartbeatRequest {
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Version = 1
	r.Group, r.MemberID, r.MemberEpoch = m.group, m.id, m.epoch
	r.InstanceID = str(m.instance)
	r.RebalanceTimeoutMillis = 60_000
	if m.regex != nil {
		r.SubscribedTopicRegex = m.regex
	} else {
		r.SubscribedTopicNames = slices.Clone(m.topics)
		if r.SubscribedTopicNames == nil {
			r.SubscribedTopicNames = []string{}
		}
	}
	if m.assignor != "" {
		r.ServerAssignor = &m.assignor
	}
	r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	if m.epoch != 0 {
		by := map[metastore.TopicID][]int32{}
		for p := range m.owned {
			by[p.topic] = append(by[p.topic], p.partition)
		}
		for id, ps := range by {
			slices.Sort(ps)
			r.Topics = append(r.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: id, Partitions: ps})
		}
	}
	return r
}

// send sends r and applies a successful answer: the epoch, and an
// assignment (what is not in it is revoked at once).
func (m *cgMember) send(r *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
	resp := m.c.ConsumerHeartbeat(m.h.ctx, r, Client{ID: "client-" + m.id, Host: "/10.0.0.1"})
	if resp.ErrorCode != 0 {
		return resp
	}
	if r.MemberEpoch < 0 {
		m.epoch = r.MemberEpoch
		clear(m.owned)
		return resp
	}
	m.epoch = resp.MemberEpoch
	if resp.MemberID != nil {
		m.id = *resp.MemberID
	}
	if resp.Assignment != nil {
		m.owned = map[partKey]bool{}
		for _, t := range resp.Assignment.Topics {
			for _, p := range t.Partitions {
				m.owned[partKey{t.TopicID, p}] = true
			}
		}
	}
	return resp
}

// beat sends a full heartbeat and fails the test on an error.
func (m *cgMember) beat() *kmsg.ConsumerGroupHeartbeatResponse {
	m.h.t.Helper()
	resp := m.send(m.request())
	wantCode(m.h.t, "heartbeat of "+m.id, resp.ErrorCode, nil)
	return resp
}

// keepalive sends a heartbeat with only the group, id and epoch.
func (m *cgMember) keepalive() *kmsg.ConsumerGroupHeartbeatResponse {
	m.h.t.Helper()
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Version = 1
	r.Group, r.MemberID, r.MemberEpoch = m.group, m.id, m.epoch
	resp := m.send(r)
	wantCode(m.h.t, "keepalive of "+m.id, resp.ErrorCode, nil)
	return resp
}

func (m *cgMember) leave() {
	m.h.t.Helper()
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Version = 1
	r.Group, r.MemberID, r.MemberEpoch = m.group, m.id, -1
	wantCode(m.h.t, "leave of "+m.id, m.send(r).ErrorCode, nil)
}

// count is how many partitions m owns.
func (m *cgMember) count() int { return len(m.owned) }

// noDoubleOwners fails if two members own one partition.
func noDoubleOwners(t *testing.T, ms ...*cgMember) {
	t.Helper()
	seen := map[partKey]string{}
	for _, m := range ms {
		for p := range m.owned {
			if o, dup := seen[p]; dup {
				t.Fatalf("partition %v/%d owned by %s and %s", p.topic, p.partition, o, m.id)
			}
			seen[p] = m.id
		}
	}
}

// settle heartbeats every member round by round until a round changes
// nothing, checking ownership after each heartbeat.
func settle(t *testing.T, ms ...*cgMember) {
	t.Helper()
	for range 20 {
		changed := false
		for _, m := range ms {
			before, epoch := maps.Clone(m.owned), m.epoch
			m.beat()
			noDoubleOwners(t, ms...)
			changed = changed || epoch != m.epoch || !maps.Equal(before, m.owned)
		}
		if !changed {
			return
		}
	}
	t.Fatal("the group did not settle in 20 rounds")
}

// cgDescribe describes one consumer group.
func (h *harness) cgDescribe(c *Coordinator, group string) kmsg.ConsumerGroupDescribeResponseGroup {
	h.t.Helper()
	r := kmsg.NewPtrConsumerGroupDescribeRequest()
	r.Version = 1
	r.Groups = []string{group}
	return c.ConsumerDescribe(h.ctx, r).Groups[0]
}

func (h *harness) wantCGState(c *Coordinator, group, state string, epoch int32) {
	h.t.Helper()
	d := h.cgDescribe(c, group)
	wantCode(h.t, "describe "+group, d.ErrorCode, nil)
	if d.State != state || d.Epoch != epoch {
		h.t.Fatalf("group %s: %s at epoch %d (assignment epoch %d), want %s at %d", group, d.State, d.Epoch, d.AssignmentEpoch, state, epoch)
	}
}

func wantErr(t *testing.T, what string, resp *kmsg.ConsumerGroupHeartbeatResponse, want *kerr.Error) {
	t.Helper()
	wantCode(t, what, resp.ErrorCode, want)
}

var _ = time.Second

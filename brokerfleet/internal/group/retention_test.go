package group

import (
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/pkg/metastore"
)

// Retention in these tests: an hour, checked every minute.
const (
	retention     = time.Hour
	checkInterval = time.Minute
	// longSessionMs is the session of members that live through the
	// hours these tests span with a heartbeat every keepAliveStep.
	longSessionMs = 30 * 60 * 1000
	keepAliveStep = 10 * time.Minute
)

func withRetention(o *Options) {
	o.OffsetsRetention, o.OffsetsRetentionCheckInterval = retention, checkInterval
}

// consumer is a member of a group with a long session.
type consumer struct {
	c      *Coordinator
	group  string
	id     string
	gen    int32
	topics []string
}

// formConsumer forms a Stable group of one consumer on c, subscribed to
// topics (consumer protocol metadata), with a long session.
func (h *harness) formConsumer(c *Coordinator, group string, topics ...string) *consumer {
	h.t.Helper()
	req := func(id string) *kmsg.JoinGroupRequest {
		r := joinReq(group, id, "", "cons")
		r.SessionTimeoutMillis = longSessionMs
		var md kmsg.ConsumerMemberMetadata
		md.Topics = topics
		r.Protocols[0].Metadata = md.AppendTo(nil)
		return r
	}
	first := h.joinAsync(c, req(""), "cons").get()
	wantCode(h.t, "first join", first.ErrorCode, kerr.MemberIDRequired)
	r := h.joinAsync(c, req(first.MemberID), "cons").get()
	wantCode(h.t, "join", r.ErrorCode, nil)
	s := h.syncAsync(c, leaderSync(group, r.MemberID, "", r.Generation, []string{r.MemberID})).get()
	wantCode(h.t, "sync", s.ErrorCode, nil)
	return &consumer{c: c, group: group, id: r.MemberID, gen: r.Generation, topics: topics}
}

// commit commits offsets of topic as the consumer.
func (h *harness) commitAs(m *consumer, topic string, offs ...offset) {
	h.t.Helper()
	resp := m.c.Commit(h.ctx, commitReq(m.group, m.id, "", m.gen, topic, offs...))
	for _, p := range resp.Topics[0].Partitions {
		wantCode(h.t, "commit to "+topic, p.ErrorCode, nil)
	}
}

// simpleCommit commits offsets of topic with generation -1.
func (h *harness) simpleCommit(c *Coordinator, group, topic string, offs ...offset) {
	h.t.Helper()
	resp := c.Commit(h.ctx, commitReq(group, "", "", -1, topic, offs...))
	for _, p := range resp.Topics[0].Partitions {
		wantCode(h.t, "simple commit to "+topic, p.ErrorCode, nil)
	}
}

// keepAlive advances the clock by d (a whole number of keepAliveSteps),
// the members heartbeating after every step.
func (h *harness) keepAlive(d time.Duration, ms ...*consumer) {
	h.t.Helper()
	for ; d > 0; d -= keepAliveStep {
		h.advance(keepAliveStep)
		for _, m := range ms {
			r := kmsg.NewPtrHeartbeatRequest()
			r.Version = 4
			r.Group, r.MemberID, r.Generation = m.group, m.id, m.gen
			wantCode(h.t, "heartbeat", m.c.Heartbeat(h.ctx, r).ErrorCode, nil)
		}
	}
}

// leaveAs has the consumer leave its group.
func (h *harness) leaveAs(m *consumer) {
	h.t.Helper()
	r := kmsg.NewPtrLeaveGroupRequest()
	r.Version = 5
	r.Group, r.Members = m.group, []kmsg.LeaveGroupRequestMember{{MemberID: m.id}}
	wantCode(h.t, "leave", m.c.Leave(h.ctx, r).Members[0].ErrorCode, nil)
}

// offsetsOf returns every committed offset of a group, as "topic/p" ->
// offset.
func (h *harness) offsetsOf(c *Coordinator, group string) map[string]int64 {
	h.t.Helper()
	r := kmsg.NewPtrOffsetFetchRequest()
	r.Version = 8
	r.Groups = []kmsg.OffsetFetchRequestGroup{fetchGroupReq(group, nil)}
	resp := c.FetchOffsets(h.ctx, r)
	wantCode(h.t, "offset fetch", resp.Groups[0].ErrorCode, nil)
	out := map[string]int64{}
	for _, f := range flatten(resp.Groups[0].Topics) {
		out[fmt.Sprintf("%s/%d", f.topic, f.partition)] = f.offset
	}
	return out
}

func (h *harness) wantOffsets(c *Coordinator, group string, want map[string]int64) {
	h.t.Helper()
	if got := h.offsetsOf(c, group); !reflect.DeepEqual(got, want) {
		h.t.Fatalf("at +%v group %s has offsets %v, want %v", h.elapsed(), group, got, want)
	}
}

// wantGone fails unless the group no longer exists on c: Dead, not
// listed, and GROUP_ID_NOT_FOUND to DeleteGroups.
func (h *harness) wantGone(c *Coordinator, group string) {
	h.t.Helper()
	h.wantOffsets(c, group, map[string]int64{})
	dr := kmsg.NewPtrDescribeGroupsRequest()
	dr.Version = 5
	dr.Groups = []string{group}
	if d := c.Describe(h.ctx, dr).Groups[0]; d.ErrorCode != 0 || d.State != "Dead" {
		h.t.Fatalf("at +%v group %s: %s (error %d), want Dead", h.elapsed(), group, d.State, d.ErrorCode)
	}
	if _, ok := h.list(c)[group]; ok {
		h.t.Fatalf("at +%v expired group %s is listed", h.elapsed(), group)
	}
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Version = 2
	del.Groups = []string{group}
	wantCode(h.t, "delete an expired group", c.Delete(h.ctx, del).Groups[0].ErrorCode, kerr.GroupIDNotFound)
}

// advanceTo moves the clock to epoch+at.
func (h *harness) advanceTo(at time.Duration) {
	h.t.Helper()
	if d := at - h.elapsed(); d > 0 {
		h.advance(d)
	}
}

// holdUntil advances the clock to epoch+at in steps of a few minutes,
// checking after each that the group's offsets on c are want. The
// fetches keep the group in c's memory, where it is judged by its state
// rather than its index entry.
func (h *harness) holdUntil(c *Coordinator, group string, at time.Duration, want map[string]int64) {
	h.t.Helper()
	for h.elapsed() < at {
		h.advance(min(5*time.Minute, at-h.elapsed()))
		h.wantOffsets(c, group, want)
	}
}

// A consumer group's offsets expire retention after the group became
// empty, however old the commits, and not before; then the group goes.
func TestEmptyGroupOffsetsExpireAfterRetention(t *testing.T) {
	h := newHarness(t, withRetention)
	m := h.formConsumer(h.c, "g", "t")
	h.commitAs(m, "t", offset{partition: 0, offset: 10, epoch: -1})
	h.keepAlive(40*time.Minute, m)
	h.leaveAs(m)
	h.wantState("g", "Empty", 0)
	emptyAt := h.elapsed()

	// An hour after the commit, but not after the group became empty.
	h.holdUntil(h.c, "g", emptyAt+retention-checkInterval, map[string]int64{"t/0": 10})
	if _, ok := h.list(h.c)["g"]; !ok {
		t.Fatal("the empty group is not listed before its offsets expired")
	}
	h.advanceTo(emptyAt + retention + checkInterval)
	h.wantGone(h.c, "g")
	// Gone from the metastore too: a coordinator the shard moves to does
	// not know it.
	c2 := h.addCoordinator(withRetention)
	h.c.SetShards(nil)
	c2.SetShards(allShards())
	h.wantGone(c2, "g")
}

// A group that gets members again before its offsets expire keeps them,
// and counts again from when it next becomes empty.
func TestGroupRejoiningBeforeExpiryKeepsOffsets(t *testing.T) {
	h := newHarness(t, withRetention)
	m := h.formConsumer(h.c, "g", "t")
	h.commitAs(m, "t", offset{partition: 0, offset: 10, epoch: -1})
	h.leaveAs(m)
	h.advance(50 * time.Minute)

	m = h.formConsumer(h.c, "g", "t")
	h.keepAlive(60*time.Minute, m) // past an hour since the group was empty
	h.wantOffsets(h.c, "g", map[string]int64{"t/0": 10})
	h.leaveAs(m)
	emptyAt := h.elapsed()
	h.holdUntil(h.c, "g", emptyAt+retention-checkInterval, map[string]int64{"t/0": 10})
	h.advanceTo(emptyAt + retention + checkInterval)
	h.wantGone(h.c, "g")
}

// A group without a protocol (simple commits only) loses each offset
// retention after its own commit; committing an offset again, even
// unchanged, keeps it. The group goes with its last offset.
func TestSimpleGroupOffsetsExpirePerOffset(t *testing.T) {
	h := newHarness(t, withRetention)
	h.simpleCommit(h.c, "s", "t", offset{partition: 0, offset: 1, epoch: -1})
	h.advanceTo(20 * time.Minute)
	h.simpleCommit(h.c, "s", "t", offset{partition: 1, offset: 2, epoch: -1}, offset{partition: 2, offset: 3, epoch: -1})
	h.advanceTo(40 * time.Minute)
	h.simpleCommit(h.c, "s", "t", offset{partition: 2, offset: 3, epoch: -1}) // unchanged, committed again

	h.advanceTo(retention - checkInterval)
	h.wantOffsets(h.c, "s", map[string]int64{"t/0": 1, "t/1": 2, "t/2": 3})
	h.advanceTo(retention + checkInterval)
	h.wantOffsets(h.c, "s", map[string]int64{"t/1": 2, "t/2": 3})
	h.wantState("s", "Empty", 0)
	h.advanceTo(20*time.Minute + retention + checkInterval)
	h.wantOffsets(h.c, "s", map[string]int64{"t/2": 3})
	h.advanceTo(40*time.Minute + retention + checkInterval)
	h.wantGone(h.c, "s")
}

// A Stable consumer group loses, retention after their commit, the
// offsets of topics no member subscribes to; those of subscribed topics
// stay.
func TestStableGroupLosesOffsetsOfUnsubscribedTopics(t *testing.T) {
	h := newHarness(t, withRetention)
	m := h.formConsumer(h.c, "g", "a")
	h.commitAs(m, "a", offset{partition: 0, offset: 1, epoch: -1})
	h.commitAs(m, "b", offset{partition: 0, offset: 2, epoch: -1})
	h.keepAlive(50*time.Minute, m)
	h.wantOffsets(h.c, "g", map[string]int64{"a/0": 1, "b/0": 2})
	h.keepAlive(20*time.Minute, m)
	h.wantOffsets(h.c, "g", map[string]int64{"a/0": 1})
	h.wantState("g", "Stable", 1)
}

// The times retention counts from live in the metastore: after the
// shard moves, the next coordinator expires on the same schedule.
func TestExpirySurvivesCoordinatorMove(t *testing.T) {
	h := newHarness(t, withRetention)
	m := h.formConsumer(h.c, "g", "t")
	h.commitAs(m, "t", offset{partition: 0, offset: 10, epoch: -1})
	h.leaveAs(m)
	h.simpleCommit(h.c, "s", "t", offset{partition: 0, offset: 5, epoch: -1})
	h.advanceTo(30 * time.Minute)
	h.simpleCommit(h.c, "s", "t", offset{partition: 1, offset: 6, epoch: -1})

	h.advanceTo(40 * time.Minute)
	c2 := h.addCoordinator(withRetention)
	h.c.SetShards(nil)
	moved := allShards()
	for s := range moved {
		moved[s] = 2
	}
	c2.SetShards(moved)
	h.advanceTo(retention - checkInterval)
	h.wantOffsets(c2, "g", map[string]int64{"t/0": 10})
	h.wantOffsets(c2, "s", map[string]int64{"t/0": 5, "t/1": 6})
	h.advanceTo(retention + checkInterval)
	h.wantGone(c2, "g")
	h.wantOffsets(c2, "s", map[string]int64{"t/1": 6})
	h.advanceTo(30*time.Minute + retention + checkInterval)
	h.wantGone(c2, "s")
}

// A group that has members again says so in the metastore as soon as its
// generation forms: a coordinator the shard moves to right after does not
// count from the old emptiness, but from when the member it took over
// (membership survives the move) let its session run out.
func TestRejoinRecordedBeforeMove(t *testing.T) {
	h := newHarness(t, withRetention)
	m := h.formConsumer(h.c, "g", "t")
	h.commitAs(m, "t", offset{partition: 0, offset: 10, epoch: -1})
	h.leaveAs(m)
	h.advanceTo(50 * time.Minute)
	h.formConsumer(h.c, "g", "t") // and the shard moves before another check
	c2 := h.addCoordinator(withRetention)
	h.c.SetShards(nil)
	c2.SetShards(allShards())
	// c2 continues the group with its member (loaded when it gained the
	// shard), whose session runs out there (it heartbeats no more): the
	// group is empty from then on.
	h.advance(tickInterval)
	h.advance(longSessionMs*time.Millisecond + tickInterval)
	firstLook := h.elapsed()
	h.wantOffsets(c2, "g", map[string]int64{"t/0": 10})
	h.advanceTo(firstLook + retention - checkInterval)
	h.wantOffsets(c2, "g", map[string]int64{"t/0": 10})
	h.advanceTo(firstLook + retention + checkInterval)
	h.wantGone(c2, "g")
}

// A coordinator that still thinks it owns a group after another formed a
// newer generation cannot expire the offsets the new one keeps.
func TestStaleCoordinatorExpiryIsFenced(t *testing.T) {
	h := newHarness(t, withRetention)
	c2 := h.addCoordinator(withRetention)
	h.simpleCommit(h.c, "g", "t", offset{partition: 0, offset: 7, epoch: -1})
	var m *consumer
	for h.elapsed() < 70*time.Minute {
		h.advance(5 * time.Minute)
		// h.c keeps its view in memory: a simple group whose offset was
		// committed over an hour ago by the end.
		h.offsetsOf(h.c, "g")
		if m == nil && h.elapsed() >= 50*time.Minute {
			c2.SetShards(allShards()) // h.c has not heard
			m = h.formConsumer(c2, "g", "t")
		}
		if m != nil {
			r := kmsg.NewPtrHeartbeatRequest()
			r.Version = 4
			r.Group, r.MemberID, r.Generation = m.group, m.id, m.gen
			wantCode(t, "heartbeat", c2.Heartbeat(h.ctx, r).ErrorCode, nil)
		}
	}
	offs, err := h.meta.Offsets(h.ctx, "g")
	if err != nil || len(offs) != 1 || offs[0].Offset != 7 {
		t.Fatalf("stored offsets %+v %v, want t/0 at 7", offs, err)
	}
	h.wantOffsets(c2, "g", map[string]int64{"t/0": 7})
}

// A topic deleted and created again at once: offsets committed to the
// new topic before ForgetTopic of the old one runs survive it, even one
// equal to the old topic's.
func TestForgetTopicSparesRecreatedTopic(t *testing.T) {
	var mu sync.Mutex
	ids := map[string]metastore.TopicID{"t": metastore.NewTopicID(), "other": metastore.NewTopicID()}
	withIDs := func(o *Options) {
		o.TopicID = func(topic string) (metastore.TopicID, bool) {
			mu.Lock()
			defer mu.Unlock()
			id, ok := ids[topic]
			return id, ok
		}
	}
	h := newHarness(t, withIDs)
	old := ids["t"]
	h.simpleCommit(h.c, "g1", "t", offset{partition: 0, offset: 5, epoch: -1}, offset{partition: 1, offset: 7, epoch: -1})
	h.simpleCommit(h.c, "g1", "other", offset{partition: 0, offset: 1, epoch: -1})
	h.simpleCommit(h.c, "g2", "t", offset{partition: 0, offset: 9, epoch: -1})

	mu.Lock()
	ids["t"] = metastore.NewTopicID() // deleted and created again
	mu.Unlock()
	h.simpleCommit(h.c, "g1", "t", offset{partition: 0, offset: 5, epoch: -1}) // the same offset, of the new topic
	h.simpleCommit(h.c, "g3", "t", offset{partition: 0, offset: 3, epoch: -1})
	if err := h.c.ForgetTopic(h.ctx, "t", old); err != nil {
		t.Fatal(err)
	}
	h.wantOffsets(h.c, "g1", map[string]int64{"t/0": 5, "other/0": 1})
	h.wantOffsets(h.c, "g2", map[string]int64{})
	h.wantOffsets(h.c, "g3", map[string]int64{"t/0": 3})
	// From the metastore, too.
	c2 := h.addCoordinator(withIDs)
	h.c.SetShards(nil)
	c2.SetShards(allShards())
	h.wantOffsets(c2, "g1", map[string]int64{"t/0": 5, "other/0": 1})

	// A topic without an id is not there.
	resp := c2.Commit(h.ctx, commitReq("g1", "", "", -1, "unknown", offset{partition: 0, offset: 1, epoch: -1}))
	wantCode(t, "commit to a topic without an id", resp.Topics[0].Partitions[0].ErrorCode, kerr.UnknownTopicOrPartition)
	// A zero id forgets every offset of the name.
	if err := c2.ForgetTopic(h.ctx, "t", metastore.TopicID{}); err != nil {
		t.Fatal(err)
	}
	h.wantOffsets(c2, "g1", map[string]int64{"other/0": 1})
}

// legacyGroup stores a group's records as they were before retention
// times and topic ids were kept: offsets of topic without them, and an
// index entry without times.
func (h *harness) legacyGroup(group, protocolType, topic string, partitions ...int32) {
	h.t.Helper()
	s := h.meta.Store()
	for _, p := range partitions {
		k := metastore.Key{PK: "group/" + group, SK: fmt.Sprintf("offset/%s/%06d", topic, p)}
		v := fmt.Sprintf(`{"topic":%q,"partition":%d,"offset":%d,"leaderEpoch":-1,"generation":0}`, topic, p, 100+p)
		if _, err := s.Put(h.ctx, metastore.Item{Key: k, Value: []byte(v)}, metastore.IfAbsent()); err != nil {
			h.t.Fatal(err)
		}
	}
	k := metastore.Key{PK: fmt.Sprintf("groups/%06d", metastore.GroupShard(group)), SK: group}
	v := fmt.Sprintf(`{"group":%q,"protocolType":%q}`, group, protocolType)
	if _, err := s.Put(h.ctx, metastore.Item{Key: k, Value: []byte(v)}, metastore.IfAbsent()); err != nil {
		h.t.Fatal(err)
	}
}

// Offsets and index entries stored before retention times were kept
// count as committed (and emptied) when first loaded, and that time is
// stored: a coordinator loading them later does not start over, and an
// old offset without an id goes with a deleted topic.
func TestLegacyRecordsCountFromFirstLoad(t *testing.T) {
	h := newHarness(t, withRetention)
	h.advanceTo(3 * time.Hour) // long after any time the records could be read as
	h.legacyGroup("old", "consumer", "t", 0, 1)
	h.legacyGroup("oldsimple", "", "t", 0)
	h.legacyGroup("oldtopic", "", "deleted", 0)
	h.advance(checkInterval) // the next check loads them
	loadedAt := h.elapsed()
	offs, err := h.meta.Offsets(h.ctx, "oldsimple")
	if err != nil || len(offs) != 1 || offs[0].CommittedAt != epoch.Add(loadedAt).UnixMilli() {
		t.Fatalf("legacy offset after the first load: %+v %v, want committed at +%v", offs, err, loadedAt)
	}

	h.advanceTo(loadedAt + 30*time.Minute)
	c2 := h.addCoordinator(withRetention)
	h.c.SetShards(nil)
	c2.SetShards(allShards())
	h.wantOffsets(c2, "old", map[string]int64{"t/0": 100, "t/1": 101})
	if err := c2.ForgetTopic(h.ctx, "deleted", metastore.NewTopicID()); err != nil {
		t.Fatal(err)
	}
	h.wantOffsets(c2, "oldtopic", map[string]int64{})
	h.advance(checkInterval) // an empty group without offsets goes at the next check
	h.wantGone(c2, "oldtopic")
	h.advanceTo(loadedAt + retention - checkInterval)
	h.wantOffsets(c2, "old", map[string]int64{"t/0": 100, "t/1": 101})
	h.wantOffsets(c2, "oldsimple", map[string]int64{"t/0": 100})
	h.advanceTo(loadedAt + retention + checkInterval)
	h.wantGone(c2, "old")
	h.wantGone(c2, "oldsimple")
}

func TestExpiredOffsetsDecision(t *testing.T) {
	now := epoch.Add(10 * time.Hour)
	at := func(ago time.Duration) int64 { return now.Add(-ago).UnixMilli() }
	offs := map[tp]metastore.Offset{
		{"a", 0}: {CommittedAt: at(2 * time.Hour)},
		{"a", 1}: {CommittedAt: at(time.Minute)},
		{"b", 0}: {CommittedAt: at(retention)}, // exactly retention ago: expired (Kafka's >=)
	}
	old := map[tp]metastore.Offset{{"a", 0}: {CommittedAt: at(2 * time.Hour)}}
	all := []tp{{"a", 0}, {"a", 1}, {"b", 0}}
	for _, c := range []struct {
		name    string
		v       retentionView
		offsets map[tp]metastore.Offset
		expired []tp
		drop    bool
	}{
		{"simple: per commit", retentionView{empty: true}, offs, []tp{{"a", 0}, {"b", 0}}, false},
		{"simple: all expired", retentionView{empty: true}, old, []tp{{"a", 0}}, true},
		{"simple with handed-out member ids", retentionView{}, old, []tp{{"a", 0}}, false},
		{"empty: from when it emptied", retentionView{protocolType: "consumer", empty: true, emptySince: now.Add(-retention)}, offs, all, true},
		{"empty recently: nothing", retentionView{protocolType: "consumer", empty: true, emptySince: now.Add(-time.Minute)}, offs, nil, false},
		{"empty without offsets", retentionView{protocolType: "consumer", empty: true, emptySince: now}, nil, nil, true},
		{"empty, other protocol", retentionView{protocolType: "connect", empty: true, emptySince: now.Add(-2 * retention)}, old, []tp{{"a", 0}}, true},
		{"stable: unsubscribed topics", retentionView{protocolType: "consumer", stable: true, subscribed: map[string]bool{"a": true}}, offs, []tp{{"b", 0}}, false},
		{"stable: subscriptions unknown", retentionView{protocolType: "consumer", stable: true}, offs, nil, false},
		{"stable, other protocol", retentionView{protocolType: "connect", stable: true, subscribed: map[string]bool{}}, offs, nil, false},
		{"rebalancing", retentionView{protocolType: "consumer", subscribed: map[string]bool{}}, offs, nil, false},
	} {
		expired, drop := expiredOffsets(c.v, c.offsets, now, retention)
		if !reflect.DeepEqual(expired, c.expired) || drop != c.drop {
			t.Errorf("%s: expired %v drop %v, want %v %v", c.name, expired, drop, c.expired, c.drop)
		}
	}
}

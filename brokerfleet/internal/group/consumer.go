package group

// A consumer-protocol group (KIP-848): its members, epochs and target
// assignment, kept in memory and stored whole in the group's record
// (metastore.GroupRecord) whenever they change, before any client is
// told; so a coordinator that takes the group over continues it without
// any member rejoining. Heartbeats are in cheartbeat.go, classic members
// inside a consumer group and the migrations in cclassic.go,
// ConsumerGroupDescribe in cdescribe.go.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/group/assign"
	"github.com/stratamq/strata/pkg/metastore"
)

// TopicView is the coordinator's view of the cluster's topics, for
// resolving subscriptions. Its methods must not block.
type TopicView interface {
	// Version changes whenever any topic is created, deleted or grows.
	Version() int64
	Topic(name string) (assign.Topic, bool)
	TopicByID(id metastore.TopicID) (assign.Topic, bool)
	// Names returns every topic name.
	Names() []string
}

// noTopics is the view when Options.Topics is nil.
type noTopics struct{}

func (noTopics) Version() int64                                   { return 0 }
func (noTopics) Topic(string) (assign.Topic, bool)                { return assign.Topic{}, false }
func (noTopics) TopicByID(metastore.TopicID) (assign.Topic, bool) { return assign.Topic{}, false }
func (noTopics) Names() []string                                  { return nil }

// cmember is a member of a consumer group: one of the consumer protocol,
// or (classic != nil) one of the classic protocol inside the group while
// the group migrates.
type cmember struct {
	id, instanceID, rackID string
	clientID, clientHost   string
	rebalanceTimeoutMs     int32
	assignor               string
	topics                 []string // subscribed names, sorted
	regex                  string   // subscribed regex, "" for none
	memberAssignment
	target  assign.Assignment
	classic *classicInfo

	// Not stored: restarted by a coordinator that loads the group.
	deadline       time.Time // session expiry
	revokeDeadline time.Time // rebalance timeout while unrevoked (zero: not armed)
	revokeEpoch    int32     // the member epoch when it was armed
}

// classicInfo is what a classic-protocol member inside a consumer group
// adds: its protocols and timeouts from JoinGroup.
type classicInfo struct {
	protocolType       string
	protocols          []kmsg.JoinGroupRequestProtocol
	session, rebalance time.Duration
}

// usesClassic reports whether m is a classic-protocol member.
func (m *cmember) usesClassic() bool { return m.classic != nil }

// resolvedRegex is a regex's topics as of a topic view version.
type resolvedRegex struct {
	version int64
	topics  []string
}

// consumerGroup is a consumer group's state. Guarded by the group's mu.
type consumerGroup struct {
	epoch, assignmentEpoch int32
	// hash is the metadata hash of the subscribed topics when the
	// target was last computed: a topic created, deleted or grown bumps
	// the epoch.
	hash uint64
	// assignor is the assignor of the last target.
	assignor string
	members  map[string]*cmember
	statics  map[string]string // instance id -> member id
	// owners maps every partition some member holds (assigned or
	// pending revocation) to that member.
	owners map[partKey]string
	// Not stored.
	regexes     map[string]*regexp.Regexp
	resolved    map[string]resolvedRegex
	hashVersion int64 // the topic view version hash was checked at
	dirty       bool  // changed since last stored
}

func newConsumerGroup() *consumerGroup {
	return &consumerGroup{members: map[string]*cmember{}, statics: map[string]string{}, owners: map[partKey]string{},
		regexes: map[string]*regexp.Regexp{}, resolved: map[string]resolvedRegex{}}
}

// stateName is the group's state as KIP-848 names it.
func (cg *consumerGroup) stateName() string {
	switch {
	case len(cg.members) == 0:
		return "Empty"
	case cg.epoch > cg.assignmentEpoch:
		return "Assigning"
	}
	for _, m := range cg.members {
		if m.state != memberStable || m.epoch != cg.assignmentEpoch {
			return "Reconciling"
		}
	}
	return "Stable"
}

// rebuildOwners recomputes who holds each partition.
func (cg *consumerGroup) rebuildOwners() {
	clear(cg.owners)
	for id, m := range cg.members {
		for p := range m.assigned {
			cg.owners[p] = id
		}
		for p := range m.pending {
			cg.owners[p] = id
		}
	}
}

// sortedMembers returns the members by id.
func (cg *consumerGroup) sortedMembers() []*cmember {
	ms := make([]*cmember, 0, len(cg.members))
	for _, m := range cg.members {
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b *cmember) int { return strings.Compare(a.id, b.id) })
	return ms
}

// compileRegex compiles a subscription regex as Kafka matches it: the
// whole topic name (RE2 syntax, like Kafka's RE2/J).
func compileRegex(re string) (*regexp.Regexp, error) {
	return regexp.Compile("^(?:" + re + ")$")
}

// regex returns the compiled regex (cached).
func (cg *consumerGroup) regex(re string) (*regexp.Regexp, error) {
	if r, ok := cg.regexes[re]; ok {
		return r, nil
	}
	r, err := compileRegex(re)
	if err != nil {
		return nil, err
	}
	cg.regexes[re] = r
	return r, nil
}

// resolve returns the topics a regex matches in view, re-matching only
// when the view changed. mayDescribe, when set, keeps only the topics
// the requesting principal may describe (Kafka resolves with the
// principal of the heartbeat that triggers it).
func (cg *consumerGroup) resolve(re string, view TopicView, mayDescribe func(string) bool) []string {
	if r, ok := cg.resolved[re]; ok && r.version == view.Version() {
		return r.topics
	}
	rx, err := cg.regex(re)
	var topics []string
	if err == nil {
		for _, name := range view.Names() {
			if rx.MatchString(name) && (mayDescribe == nil || mayDescribe(name)) {
				topics = append(topics, name)
			}
		}
	}
	slices.Sort(topics)
	cg.resolved[re] = resolvedRegex{version: view.Version(), topics: topics}
	return topics
}

// dropUnusedRegexes forgets cached regexes no member uses.
func (cg *consumerGroup) dropUnusedRegexes() {
	used := map[string]bool{}
	for _, m := range cg.members {
		if m.regex != "" {
			used[m.regex] = true
		}
	}
	for re := range cg.regexes {
		if !used[re] {
			delete(cg.regexes, re)
			delete(cg.resolved, re)
		}
	}
	for re := range cg.resolved {
		if !used[re] {
			delete(cg.resolved, re)
		}
	}
}

// subscribedNames is the union of m's topic names and regex topics.
func (cg *consumerGroup) subscribedNames(m *cmember, view TopicView, mayDescribe func(string) bool) []string {
	names := slices.Clone(m.topics)
	if m.regex != "" {
		names = append(names, cg.resolve(m.regex, view, mayDescribe)...)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// allSubscribed is the union of every member's subscription.
func (cg *consumerGroup) allSubscribed(view TopicView) []string {
	var names []string
	for _, m := range cg.members {
		names = append(names, cg.subscribedNames(m, view, nil)...)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// metadataHash hashes what of the subscribed topics changes a target:
// name, id and partition count of each, in name order.
func metadataHash(names []string, view TopicView) uint64 {
	h := fnv.New64a()
	for _, n := range names {
		t, ok := view.Topic(n)
		if !ok {
			continue
		}
		fmt.Fprintf(h, "%s\x00%x\x00%d\x00", n, t.ID, t.Partitions)
	}
	return h.Sum64()
}

// preferredAssignor is the assignor most members name, or the first
// configured one; ties go to the earlier configured.
func (c *Coordinator) preferredAssignor(cg *consumerGroup) string {
	votes := map[string]int{}
	for _, m := range cg.members {
		if m.assignor != "" {
			votes[m.assignor]++
		}
	}
	best := c.opts.ConsumerAssignors[0]
	for _, a := range c.opts.ConsumerAssignors {
		if votes[a] > votes[best] {
			best = a
		}
	}
	return best
}

// computeTarget gives every member a new target with the preferred
// assignor and moves the assignment epoch to the group epoch.
func (c *Coordinator) computeTarget(cg *consumerGroup, view TopicView) {
	name := c.preferredAssignor(cg)
	a := assign.ByName(name)
	spec := assign.Spec{Topics: map[metastore.TopicID]assign.Topic{}}
	for _, m := range cg.sortedMembers() {
		am := assign.Member{ID: m.id, InstanceID: m.instanceID, RackID: m.rackID, Current: m.target}
		for _, n := range cg.subscribedNames(m, view, nil) {
			if t, ok := view.Topic(n); ok {
				spec.Topics[t.ID] = t
				am.Topics = append(am.Topics, t.ID)
			}
		}
		spec.Members = append(spec.Members, am)
	}
	out := a.Assign(spec)
	for id, m := range cg.members {
		m.target = out[id]
	}
	cg.assignmentEpoch = cg.epoch
	cg.assignor = name
	cg.dirty = true
}

// bumpEpoch increments the group epoch (its target is recomputed on the
// next heartbeat, or at once when the group has no member left).
func (cg *consumerGroup) bumpEpoch() {
	cg.epoch++
	if len(cg.members) == 0 {
		cg.assignmentEpoch = cg.epoch
	}
	cg.dirty = true
}

// removeMember fences a member out of the group: its partitions are
// free, the group epoch moves. Holds g.mu.
func (g *group) removeConsumerMember(m *cmember, reason string) {
	cg := g.cg
	delete(cg.members, m.id)
	if m.instanceID != "" && cg.statics[m.instanceID] == m.id {
		delete(cg.statics, m.instanceID)
	}
	cg.rebuildOwners()
	cg.dropUnusedRegexes()
	cg.bumpEpoch()
	if len(cg.members) == 0 {
		g.emptySince = g.c.clock.Now()
	}
	g.c.log.Info("group member removed", "group", g.name, "member", m.id, "reason", reason, "epoch", cg.epoch)
}

// sessionTimeout is how long m may go without a heartbeat.
func (c *Coordinator) sessionTimeout(m *cmember) time.Duration {
	if m.classic != nil {
		return m.classic.session
	}
	return c.opts.ConsumerSessionTimeout
}

// --- stored form ---

func toStored(s partSet, withEpochs bool) []metastore.TopicPartitions {
	by := map[metastore.TopicID][]int32{}
	for p := range s {
		by[p.topic] = append(by[p.topic], p.partition)
	}
	out := make([]metastore.TopicPartitions, 0, len(by))
	for t, ps := range by {
		slices.Sort(ps)
		tp := metastore.TopicPartitions{Topic: t, Partitions: ps}
		if withEpochs {
			tp.Epochs = make([]int32, len(ps))
			for i, p := range ps {
				tp.Epochs[i] = s[partKey{t, p}]
			}
		}
		out = append(out, tp)
	}
	slices.SortFunc(out, func(a, b metastore.TopicPartitions) int { return bytes.Compare(a.Topic[:], b.Topic[:]) })
	return out
}

func fromStored(tps []metastore.TopicPartitions) partSet {
	s := partSet{}
	for _, tp := range tps {
		for i, p := range tp.Partitions {
			e := int32(0)
			if i < len(tp.Epochs) {
				e = tp.Epochs[i]
			}
			s[partKey{tp.Topic, p}] = e
		}
	}
	return s
}

func targetToStored(a assign.Assignment) []metastore.TopicPartitions {
	out := make([]metastore.TopicPartitions, 0, len(a))
	for t, ps := range a {
		if len(ps) > 0 {
			out = append(out, metastore.TopicPartitions{Topic: t, Partitions: slices.Clone(ps)})
		}
	}
	slices.SortFunc(out, func(a, b metastore.TopicPartitions) int { return bytes.Compare(a.Topic[:], b.Topic[:]) })
	return out
}

func targetFromStored(tps []metastore.TopicPartitions) assign.Assignment {
	a := assign.Assignment{}
	for _, tp := range tps {
		a[tp.Topic] = slices.Clone(tp.Partitions)
	}
	return a
}

func classicToStored(m *cmember) *metastore.ClassicMember {
	if m.classic == nil {
		return nil
	}
	cm := &metastore.ClassicMember{ID: m.id, ProtocolType: m.classic.protocolType,
		SessionMs: int32(m.classic.session.Milliseconds()), RebalanceMs: int32(m.classic.rebalance.Milliseconds())}
	for _, p := range m.classic.protocols {
		cm.Protocols = append(cm.Protocols, metastore.ClassicProtocol{Name: p.Name, Metadata: p.Metadata})
	}
	return cm
}

func classicFromStored(cm *metastore.ClassicMember) *classicInfo {
	if cm == nil {
		return nil
	}
	ci := &classicInfo{protocolType: cm.ProtocolType, session: millis(cm.SessionMs), rebalance: millis(cm.RebalanceMs)}
	for _, p := range cm.Protocols {
		ci.protocols = append(ci.protocols, kmsg.JoinGroupRequestProtocol{Name: p.Name, Metadata: p.Metadata})
	}
	return ci
}

// record is the consumer group's stored form.
func (cg *consumerGroup) record(version int64) metastore.GroupRecord {
	r := metastore.GroupRecord{Version: version, Type: metastore.GroupTypeConsumer,
		Consumer: &metastore.ConsumerGroup{Epoch: cg.epoch, AssignmentEpoch: cg.assignmentEpoch, MetadataHash: cg.hash, Assignor: cg.assignor}}
	for _, m := range cg.sortedMembers() {
		r.Consumer.Members = append(r.Consumer.Members, metastore.ConsumerMember{
			ID: m.id, InstanceID: m.instanceID, RackID: m.rackID, ClientID: m.clientID, ClientHost: m.clientHost,
			RebalanceTimeoutMs: m.rebalanceTimeoutMs, ServerAssignor: m.assignor, Topics: m.topics, Regex: m.regex,
			Epoch: m.epoch, PreviousEpoch: m.prevEpoch, State: int8(m.state),
			Assigned: toStored(m.assigned, true), Pending: toStored(m.pending, true), Target: targetToStored(m.target),
			Classic: classicToStored(m),
		})
	}
	return r
}

// loadConsumer restores a consumer group from its record; sessions and
// rebalance timeouts restart now. Holds g.mu.
func (g *group) loadConsumer(r *metastore.ConsumerGroup, now time.Time) {
	cg := newConsumerGroup()
	cg.epoch, cg.assignmentEpoch, cg.hash, cg.assignor = r.Epoch, r.AssignmentEpoch, r.MetadataHash, r.Assignor
	for _, sm := range r.Members {
		m := &cmember{id: sm.ID, instanceID: sm.InstanceID, rackID: sm.RackID, clientID: sm.ClientID, clientHost: sm.ClientHost,
			rebalanceTimeoutMs: sm.RebalanceTimeoutMs, assignor: sm.ServerAssignor, topics: sm.Topics, regex: sm.Regex,
			memberAssignment: memberAssignment{epoch: sm.Epoch, prevEpoch: sm.PreviousEpoch, state: memberState(sm.State),
				assigned: fromStored(sm.Assigned), pending: fromStored(sm.Pending)},
			target: targetFromStored(sm.Target), classic: classicFromStored(sm.Classic)}
		if m.state > memberUnreleased || m.state < 0 {
			m.state = memberStable
		}
		m.deadline = now.Add(g.c.sessionTimeout(m))
		if m.state == memberUnrevoked {
			m.revokeDeadline, m.revokeEpoch = now.Add(millis(m.rebalanceTimeoutMs)), m.epoch
		}
		cg.members[m.id] = m
		if m.instanceID != "" {
			cg.statics[m.instanceID] = m.id
		}
	}
	cg.rebuildOwners()
	g.cg = cg
	g.protocolType = "consumer"
	if len(cg.members) > 0 {
		g.emptySince = now
	}
}

// errGroupTooLarge is saveConsumer's error when the group's record would
// not fit in one metastore item.
var errGroupTooLarge = errors.New("consumer group state exceeds one metastore item")

// saveConsumer stores the consumer group if it changed. On failure the
// group is dropped from memory (forgotten if another coordinator stored
// it since, else unloaded, so the next request reads what is stored) and
// the error says which. Holds g.mu, across the write.
func (g *group) saveConsumer(ctx context.Context) error {
	if !g.cg.dirty {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, metaTimeout)
	defer cancel()
	if !g.indexed || g.info.Type != metastore.GroupTypeConsumer || (len(g.cg.members) > 0) != (g.info.EmptySince == 0) {
		if err := g.storeInfo(ctx, g.c.clock.Now()); err != nil {
			g.loaded = false
			return err
		}
	}
	r := g.cg.record(g.fence)
	if metastore.GroupRecordBytes(r) > metastore.MaxItemBytes {
		g.loaded = false
		return errGroupTooLarge
	}
	v, err := g.c.opts.Meta.StoreGroup(ctx, g.name, r)
	switch {
	case errors.Is(err, metastore.ErrFenced):
		g.c.log.Info("group stored by another coordinator: forgetting it", "group", g.name)
		g.c.forget(g)
		return fmt.Errorf("%w: %v", errMetastoreFenced, err)
	case err != nil:
		g.c.log.Warn("store consumer group", "group", g.name, "err", err)
		g.loaded = false
		return err
	}
	g.fence = v
	g.cg.dirty = false
	return nil
}

// subscribedTopicSet is every topic name the consumer group subscribes
// to (for offset retention and OffsetDelete). Holds g.mu.
func (g *group) consumerSubscribed() map[string]bool {
	out := map[string]bool{}
	for _, n := range g.cg.allSubscribed(g.c.topics()) {
		out[n] = true
	}
	return out
}

// topics returns the current topic view.
func (c *Coordinator) topics() TopicView {
	if c.opts.Topics == nil {
		return noTopics{}
	}
	if v := c.opts.Topics(); v != nil {
		return v
	}
	return noTopics{}
}

// sortedInts returns the keys of s of one topic, sorted.
func partitionsOf(s partSet) map[metastore.TopicID][]int32 {
	out := map[metastore.TopicID][]int32{}
	for p := range s {
		out[p.topic] = append(out[p.topic], p.partition)
	}
	for _, ps := range out {
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	}
	return out
}

package group

// Classic members inside a consumer group, and the online migrations
// between the protocols (group.consumer.migration.policy, Kafka's rules):
//
//   - upgrade: a consumer-protocol member joins a classic group with
//     members; every classic member becomes a classic-protocol member of
//     the new consumer group at the classic generation, keeping its
//     assignment, and is reconciled through JoinGroup (its owned
//     partitions come with its subscription) and SyncGroup, told to
//     rejoin by REBALANCE_IN_PROGRESS on Heartbeat;
//   - a classic member joins a consumer group with members the same way;
//   - downgrade: when the last consumer-protocol member leaves, the
//     classic members left make a classic group again, which rebalances.
//
// Empty groups convert either way whatever the policy says.

import (
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/group/assign"
	"github.com/stratamq/strata/pkg/metastore"
)

func (c *Coordinator) policyAllowsUpgrade() bool {
	return c.opts.MigrationPolicy == "upgrade" || c.opts.MigrationPolicy == "bidirectional"
}

func (c *Coordinator) policyAllowsDowngrade() bool {
	return c.opts.MigrationPolicy == "downgrade" || c.opts.MigrationPolicy == "bidirectional"
}

// subscriptionOf parses a classic member's subscription from its first
// protocol (every protocol of a consumer carries the same one).
func subscriptionOf(protocols []kmsg.JoinGroupRequestProtocol) (kmsg.ConsumerMemberMetadata, error) {
	var md kmsg.ConsumerMemberMetadata
	if len(protocols) == 0 {
		return md, fmt.Errorf("no protocol")
	}
	err := md.ReadFrom(protocols[0].Metadata)
	return md, err
}

// ownedOf converts a subscription's owned partitions to partition keys
// (topics that do not exist are left out).
func ownedOf(md kmsg.ConsumerMemberMetadata, view TopicView) map[partKey]bool {
	owned := map[partKey]bool{}
	for _, t := range md.OwnedPartitions {
		if ti, ok := view.Topic(t.Topic); ok {
			for _, p := range t.Partitions {
				owned[partKey{ti.ID, p}] = true
			}
		}
	}
	return owned
}

// encodeAssignment is a classic member's assignment: its partitions by
// topic name, in the version of its subscription.
func encodeAssignment(s partSet, version int16, view TopicView) []byte {
	a := kmsg.NewConsumerMemberAssignment()
	a.Version = min(max(version, 0), 3)
	for id, ps := range partitionsOf(s) {
		t, ok := view.TopicByID(id)
		if !ok {
			continue
		}
		at := kmsg.NewConsumerMemberAssignmentTopic()
		at.Topic, at.Partitions = t.Name, ps
		a.Topics = append(a.Topics, at)
	}
	slices.SortFunc(a.Topics, func(x, y kmsg.ConsumerMemberAssignmentTopic) int {
		if x.Topic < y.Topic {
			return -1
		}
		if x.Topic > y.Topic {
			return 1
		}
		return 0
	})
	return a.AppendTo(nil)
}

// upgrade turns a classic group with members into a consumer group, or
// returns why it cannot (answered GROUP_ID_NOT_FOUND). Holds g.mu.
func (g *group) upgrade() string {
	c := g.c
	switch {
	case !c.policyAllowsUpgrade():
		return fmt.Sprintf("Cannot upgrade classic group %s to a consumer group: the migration policy is %s.", g.name, c.opts.MigrationPolicy)
	case g.protocolType != "consumer":
		return fmt.Sprintf("Cannot upgrade classic group %s to a consumer group: its protocol type is %q.", g.name, g.protocolType)
	case len(g.members) >= c.opts.ConsumerMaxSize:
		return fmt.Sprintf("Cannot upgrade classic group %s to a consumer group: its %d members exceed group.consumer.max.size.", g.name, len(g.members))
	}
	view := c.topics()
	cg := newConsumerGroup()
	cg.epoch, cg.assignmentEpoch = g.generation, g.generation
	for _, m := range g.sortedMembers() {
		md, err := subscriptionOf(m.protocols)
		if err != nil {
			return fmt.Sprintf("Cannot upgrade classic group %s to a consumer group: member %s's subscription does not parse: %v.", g.name, m.id, err)
		}
		assigned := partSet{}
		if len(m.assignment) > 0 {
			var a kmsg.ConsumerMemberAssignment
			if err := a.ReadFrom(m.assignment); err != nil {
				return fmt.Sprintf("Cannot upgrade classic group %s to a consumer group: member %s's assignment does not parse: %v.", g.name, m.id, err)
			}
			if len(a.UserData) > 0 {
				return fmt.Sprintf("Cannot upgrade classic group %s to a consumer group: member %s's assignment carries user data of a custom assignor.", g.name, m.id)
			}
			for _, t := range a.Topics {
				if ti, ok := view.Topic(t.Topic); ok {
					for _, p := range t.Partitions {
						assigned[partKey{ti.ID, p}] = g.generation
					}
				}
			}
		}
		topics := slices.Clone(md.Topics)
		slices.Sort(topics)
		cm := &cmember{id: m.id, instanceID: m.instanceID, rackID: deref(md.Rack), clientID: m.clientID, clientHost: m.clientHost,
			rebalanceTimeoutMs: int32(m.rebalance.Milliseconds()), topics: slices.Compact(topics),
			memberAssignment: memberAssignment{epoch: g.generation, prevEpoch: g.generation, state: memberStable, assigned: assigned, pending: partSet{}},
			classic:          &classicInfo{protocolType: m.protocolType, protocols: m.protocols, session: m.session, rebalance: m.rebalance},
			deadline:         m.deadline}
		cm.target = assign.Assignment{}
		for p := range assigned {
			cm.target[p.topic] = append(cm.target[p.topic], p.partition)
		}
		for _, ps := range cm.target {
			slices.Sort(ps)
		}
		cg.members[cm.id] = cm
		if cm.instanceID != "" {
			cg.statics[cm.instanceID] = cm.id
		}
	}
	g.answerParked(codeRebalanceInProgress)
	cg.rebuildOwners()
	cg.hash = metadataHash(cg.allSubscribed(view), view)
	cg.hashVersion = view.Version()
	cg.assignor = c.preferredAssignor(cg)
	cg.dirty = true
	g.members, g.statics = map[string]*member{}, map[string]string{}
	clear(g.pending)
	g.state, g.leader, g.protocol = stateEmpty, "", ""
	g.cg = cg
	g.c.log.Info("classic group upgraded to a consumer group", "group", g.name, "epoch", cg.epoch, "members", len(cg.members))
	return ""
}

// maybeDowngrade turns the consumer group back into a classic one when
// only classic members are left and the policy allows it; the classic
// group then rebalances. Holds g.mu.
func (g *group) maybeDowngrade() {
	cg, c := g.cg, g.c
	if len(cg.members) == 0 || !c.policyAllowsDowngrade() || len(cg.members) > c.opts.MaxSize {
		return
	}
	for _, m := range cg.members {
		if !m.usesClassic() {
			return
		}
	}
	view := c.topics()
	now := c.clock.Now()
	g.members, g.statics = map[string]*member{}, map[string]string{}
	for _, cm := range cg.sortedMembers() {
		version := int16(0)
		if md, err := subscriptionOf(cm.classic.protocols); err == nil {
			version = md.Version
		}
		m := &member{id: cm.id, instanceID: cm.instanceID, clientID: cm.clientID, clientHost: cm.clientHost,
			protocolType: cm.classic.protocolType, protocols: cm.classic.protocols, session: cm.classic.session, rebalance: cm.classic.rebalance,
			deadline: now.Add(cm.classic.session), joinOrder: g.joinSeq, assignment: encodeAssignment(cm.assigned, version, view), synced: true,
			downgradedFrom: max(cm.epoch, 1)}
		g.joinSeq++
		g.members[m.id] = m
		if m.instanceID != "" {
			g.statics[m.instanceID] = m.id
		}
	}
	g.cg = nil
	g.generation = cg.epoch
	g.state = stateStable
	g.protocol = g.selectProtocol()
	g.leader = g.sortedMembers()[0].id
	c.log.Info("consumer group downgraded to a classic group", "group", g.name, "generation", g.generation, "members", len(g.members))
	// Stored as a generation whose assignment is not handed out: a
	// coordinator that loads it makes the members rejoin, as this one
	// does now.
	if err := g.storeClassic(c.ctx, g.generation, g.protocol, g.leader, false); err != nil {
		c.log.Warn("store downgraded group", "group", g.name, "err", err)
		if g.gone {
			return
		}
	}
	g.prepareRebalance("downgraded from the consumer protocol")
}

// classicJoinConsumer handles JoinGroup into a consumer group that has
// members. Holds g.mu.
func (g *group) classicJoinConsumer(req *kmsg.JoinGroupRequest, clientID, clientHost string, session, rebalance time.Duration) *kmsg.JoinGroupResponse {
	c, cg := g.c, g.cg
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	fail := func(code int16, memberID string) *kmsg.JoinGroupResponse {
		resp.ErrorCode, resp.MemberID, resp.Generation = code, memberID, -1
		return resp
	}
	if c.opts.MigrationPolicy == "disabled" || req.ProtocolType != "consumer" {
		return fail(codeInconsistentProtocol, req.MemberID)
	}
	// Protocols must be compatible with those of the classic members.
	common := map[string]bool{}
	for _, p := range req.Protocols {
		common[p.Name] = true
	}
	for _, m := range cg.members {
		if m.classic == nil {
			continue
		}
		next := map[string]bool{}
		for _, p := range m.classic.protocols {
			if common[p.Name] {
				next[p.Name] = true
			}
		}
		common = next
	}
	if len(common) == 0 {
		return fail(codeInconsistentProtocol, req.MemberID)
	}
	md, err := subscriptionOf(req.Protocols)
	if err != nil {
		return fail(codeInconsistentProtocol, req.MemberID)
	}
	instance := deref(req.InstanceID)
	memberID := req.MemberID
	var m *cmember
	if instance != "" {
		if holder := cg.members[cg.statics[instance]]; holder != nil {
			if !holder.usesClassic() && holder.epoch != -2 && holder.id != memberID {
				return fail(kerr.UnreleasedInstanceID.Code, memberID)
			}
			if memberID == "" {
				memberID = newMemberID(clientID)
			}
			if holder.id != memberID {
				// The instance's new process takes its place.
				m = &cmember{}
				*m = *holder
				m.id = memberID
				m.pending = partSet{}
				delete(cg.members, holder.id)
				cg.members[m.id] = m
				cg.rebuildOwners()
				c.log.Info("static member replaced", "group", g.name, "instance", instance, "old", holder.id, "new", m.id)
			} else {
				m = holder
			}
		}
	}
	if m == nil {
		if memberID == "" {
			memberID = newMemberID(clientID)
			if req.Version >= 4 && instance == "" {
				return fail(kerr.MemberIDRequired.Code, memberID)
			}
		}
		m = cg.members[memberID]
	}
	if m == nil {
		if len(cg.members) >= c.opts.ConsumerMaxSize {
			return fail(kerr.GroupMaxSizeReached.Code, memberID)
		}
		m = &cmember{id: memberID, memberAssignment: memberAssignment{assigned: partSet{}, pending: partSet{}}, target: assign.Assignment{}}
		cg.members[m.id] = m
	}
	if instance != "" {
		m.instanceID = instance
		cg.statics[instance] = m.id
	}
	topics := slices.Clone(md.Topics)
	slices.Sort(topics)
	topics = slices.Compact(topics)
	namesChanged := !slices.Equal(topics, m.topics) || m.regex != ""
	m.topics, m.regex, m.assignor = topics, "", ""
	m.rackID = deref(md.Rack)
	m.clientID, m.clientHost = clientID, clientHost
	m.rebalanceTimeoutMs = int32(rebalance.Milliseconds())
	m.classic = &classicInfo{protocolType: req.ProtocolType, protocols: slices.Clone(req.Protocols), session: session, rebalance: rebalance}
	if m.epoch < 0 {
		m.epoch = 0
	}
	cg.dirty = true
	cg.dropUnusedRegexes()
	g.advance(m, ownedOf(md, c.topics()), namesChanged, false, nil)
	m.deadline = c.clock.Now().Add(session)
	if err := g.saveConsumer(c.ctx); err != nil {
		code, _ := saveCode(err)
		return fail(code, m.id)
	}
	resp.MemberID = m.id
	resp.Generation = m.epoch
	pt := "consumer"
	resp.ProtocolType = &pt
	name := req.Protocols[0].Name
	for _, p := range req.Protocols {
		if common[p.Name] {
			name = p.Name
			break
		}
	}
	resp.Protocol = &name
	resp.LeaderID = "" // never the leader: the coordinator assigns
	return resp
}

// classicMemberIn returns the classic member of a consumer group that a
// Heartbeat or SyncGroup names, or its error code. Holds g.mu.
func (g *group) classicMemberIn(memberID string, instanceID *string, generation int32) (*cmember, int16) {
	cg := g.cg
	m := cg.members[memberID]
	switch {
	case m == nil || !m.usesClassic():
		return nil, codeUnknownMember
	case instanceID != nil && *instanceID != "" && cg.statics[*instanceID] != memberID:
		return nil, codeFencedInstance
	case generation != m.epoch:
		return nil, codeIllegalGeneration
	}
	return m, 0
}

// classicSyncConsumer handles SyncGroup from a classic member of a
// consumer group: its assignment, as the coordinator computed it. Holds
// g.mu.
func (g *group) classicSyncConsumer(req *kmsg.SyncGroupRequest) *kmsg.SyncGroupResponse {
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	m, code := g.classicMemberIn(req.MemberID, req.InstanceID, req.Generation)
	if code != 0 {
		resp.ErrorCode = code
		return resp
	}
	knows := func(name string) bool {
		return slices.ContainsFunc(m.classic.protocols, func(p kmsg.JoinGroupRequestProtocol) bool { return p.Name == name })
	}
	if (req.ProtocolType != nil && *req.ProtocolType != "consumer") || (req.Protocol != nil && !knows(*req.Protocol)) {
		resp.ErrorCode = codeInconsistentProtocol
		return resp
	}
	m.deadline = g.c.clock.Now().Add(m.classic.session)
	if m.state != memberUnrevoked && g.cg.assignmentEpoch > m.epoch {
		resp.ErrorCode = codeRebalanceInProgress
		return resp
	}
	version := int16(0)
	if md, err := subscriptionOf(m.classic.protocols); err == nil {
		version = md.Version
	}
	pt := "consumer"
	resp.ProtocolType = &pt
	resp.Protocol = req.Protocol
	resp.MemberAssignment = encodeAssignment(m.assigned, version, g.c.topics())
	return resp
}

// classicHeartbeatConsumer handles Heartbeat from a classic member of a
// consumer group: REBALANCE_IN_PROGRESS tells it to rejoin, which is how
// it moves to a new epoch. Holds g.mu.
func (g *group) classicHeartbeatConsumer(req *kmsg.HeartbeatRequest) int16 {
	m, code := g.classicMemberIn(req.MemberID, req.InstanceID, req.Generation)
	if code != 0 {
		return code
	}
	m.deadline = g.c.clock.Now().Add(m.classic.session)
	cg := g.cg
	switch {
	case m.epoch < cg.assignmentEpoch, m.state == memberUnrevoked:
		return codeRebalanceInProgress
	case cg.epoch > cg.assignmentEpoch:
		// The group moved (a member left or was fenced) and its target
		// is computed at the next join or heartbeat of the consumer
		// protocol: have this member rejoin, which computes it.
		return codeRebalanceInProgress
	case m.state == memberUnreleased:
		for t, ps := range m.target {
			for _, p := range ps {
				k := partKey{t, p}
				if _, mine := m.assigned[k]; mine {
					continue
				}
				if _, held := cg.owners[k]; !held {
					return codeRebalanceInProgress // released meanwhile: rejoin to take it
				}
			}
		}
	}
	return 0
}

// classicLeaveConsumer handles LeaveGroup on a consumer group: the named
// members leave, whichever protocol they use. Holds g.mu.
func (g *group) classicLeaveConsumer(req *kmsg.LeaveGroupRequest, leaving []kmsg.LeaveGroupRequestMember) *kmsg.LeaveGroupResponse {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	cg := g.cg
	for _, lm := range leaving {
		code := int16(0)
		id := lm.MemberID
		if instance := deref(lm.InstanceID); instance != "" {
			cur, ok := cg.statics[instance]
			switch {
			case !ok:
				code = codeUnknownMember
			case id != "" && id != cur:
				code = codeFencedInstance
			default:
				id = cur
			}
		}
		if code == 0 {
			if m := cg.members[id]; m == nil {
				code = codeUnknownMember
			} else {
				reason := "left the group (LeaveGroup)"
				if lm.Reason != nil {
					reason += ": " + *lm.Reason
				}
				g.removeConsumerMember(m, reason)
			}
		}
		if req.Version < 3 {
			resp.ErrorCode = code
			continue
		}
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID, rm.ErrorCode = lm.MemberID, lm.InstanceID, code
		resp.Members = append(resp.Members, rm)
	}
	if g.cg != nil {
		g.maybeDowngrade()
	}
	if err := g.saveAfter(g.c.ctx); err != nil {
		code, _ := saveCode(err)
		resp.ErrorCode = code
	}
	return resp
}

// becomeClassic turns an empty consumer group into a classic one (a
// classic JoinGroup arrived), keeping its committed offsets; the classic
// generation continues after the consumer group's epoch. Holds g.mu.
func (g *group) becomeClassic() {
	g.generation = max(g.generation, g.cg.epoch)
	g.cg = nil
	g.protocolType = ""
	g.state = stateEmpty
}

var _ = metastore.GroupTypeConsumer

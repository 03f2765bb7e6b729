package group

// ConsumerGroupHeartbeat (KIP-848): members join (epoch 0), heartbeat
// with their epoch, report what they own, learn their assignment, and
// leave (-1, or -2 for a static member that will be back). Each call
// applies what changed, bumps the group epoch when subscriptions or the
// subscribed topics changed, recomputes the target lazily, reconciles
// the member (reconcile.go) and stores the group before answering.

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/group/assign"
	"github.com/stratamq/strata/pkg/metastore"
)

// Client is who sent a request.
type Client struct {
	ID, Host string
	// MayDescribe reports whether the principal may describe a topic; a
	// regex subscription resolves to those only. Nil means every topic.
	MayDescribe func(topic string) bool
}

// validateHeartbeat returns Kafka's INVALID_REQUEST message for a
// malformed heartbeat, or "".
func validateHeartbeat(r *kmsg.ConsumerGroupHeartbeatRequest) string {
	blank := func(s string) bool { return strings.TrimSpace(s) == "" }
	switch {
	case (r.Version >= 1 || r.MemberEpoch > 0 || r.MemberEpoch == -1) && blank(r.MemberID):
		return "MemberId can't be empty."
	case blank(r.Group):
		return "GroupId can't be empty."
	case len(r.Group) > maxGroupIDBytes:
		return fmt.Sprintf("GroupId is longer than %d bytes.", maxGroupIDBytes)
	case r.InstanceID != nil && blank(*r.InstanceID):
		return "InstanceId can't be empty."
	case r.RackID != nil && blank(*r.RackID):
		return "RackId can't be empty."
	case r.MemberEpoch < -2:
		return "MemberEpoch is invalid."
	case r.MemberEpoch == 0 && r.RebalanceTimeoutMillis == -1:
		return "RebalanceTimeoutMs must be provided in first request."
	case r.MemberEpoch == 0 && (r.Topics == nil || len(r.Topics) > 0):
		return "TopicPartitions must be empty when (re-)joining."
	case r.MemberEpoch == 0 && r.SubscribedTopicNames == nil && r.SubscribedTopicRegex == nil:
		return "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."
	}
	return ""
}

// assignorConfigured reports whether name is one of
// group.consumer.assignors.
func (c *Coordinator) assignorConfigured(name string) bool {
	return slices.Contains(c.opts.ConsumerAssignors, name)
}

// newConsumerMemberID is a member id for a v0 client that asks the
// coordinator for one: 16 random bytes, base64 (as Kafka's Uuid).
func newConsumerMemberID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// ConsumerHeartbeat handles ConsumerGroupHeartbeat.
func (c *Coordinator) ConsumerHeartbeat(ctx context.Context, req *kmsg.ConsumerGroupHeartbeatRequest, cl Client) *kmsg.ConsumerGroupHeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	fail := func(code int16, msg string) *kmsg.ConsumerGroupHeartbeatResponse {
		resp.ErrorCode = code
		if msg != "" {
			resp.ErrorMessage = &msg
		}
		return resp
	}
	if msg := validateHeartbeat(req); msg != "" {
		return fail(kerr.InvalidRequest.Code, msg)
	}
	if req.ServerAssignor != nil && !c.assignorConfigured(*req.ServerAssignor) {
		return fail(kerr.UnsupportedAssignor.Code, fmt.Sprintf("ServerAssignor %q is not supported. Supported assignors: %s.",
			*req.ServerAssignor, strings.Join(c.opts.ConsumerAssignors, ", ")))
	}
	if req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != "" {
		if _, err := compileRegex(*req.SubscribedTopicRegex); err != nil {
			return fail(kerr.InvalidRegularExpression.Code, fmt.Sprintf("SubscribedTopicRegex %q is not a valid regular expression: %v", *req.SubscribedTopicRegex, err))
		}
	}
	g, code := c.acquire(ctx, req.Group)
	if code != 0 {
		return fail(code, "")
	}
	defer g.mu.Unlock()
	g.touch(nil)
	if g.sg != nil {
		return fail(kerr.GroupIDNotFound.Code, fmt.Sprintf("Group %s is not a consumer group.", g.name))
	}
	if req.MemberEpoch < 0 {
		return g.consumerLeave(ctx, req, resp)
	}
	return g.consumerHeartbeat(ctx, req, cl, resp)
}

// failResp sets an error on a heartbeat response. Holds g.mu.
func failResp(resp *kmsg.ConsumerGroupHeartbeatResponse, code int16, msg string) *kmsg.ConsumerGroupHeartbeatResponse {
	resp.ErrorCode = code
	if msg != "" {
		resp.ErrorMessage = &msg
	}
	return resp
}

// saveCode is the error code of a failed saveConsumer.
func saveCode(err error) (int16, string) {
	switch {
	case errors.Is(err, errMetastoreFenced):
		return codeNotCoordinator, ""
	case errors.Is(err, errGroupTooLarge):
		return kerr.GroupMaxSizeReached.Code, "The group's state would exceed what one metastore item holds."
	}
	return codeCoordinatorNotAvailable, ""
}

// consumerLeave handles a heartbeat with epoch -1 (leave) or -2 (a
// static member leaves for a while and keeps its partitions). Holds
// g.mu.
func (g *group) consumerLeave(ctx context.Context, req *kmsg.ConsumerGroupHeartbeatRequest, resp *kmsg.ConsumerGroupHeartbeatResponse) *kmsg.ConsumerGroupHeartbeatResponse {
	cg := g.cg
	if cg == nil {
		return failResp(resp, kerr.GroupIDNotFound.Code, fmt.Sprintf("Group %s is not a consumer group.", g.name))
	}
	var m *cmember
	if req.InstanceID == nil {
		if m = cg.members[req.MemberID]; m == nil {
			return failResp(resp, codeUnknownMember, fmt.Sprintf("Member %s is not a member of group %s.", req.MemberID, g.name))
		}
	} else {
		id, ok := cg.statics[*req.InstanceID]
		switch {
		case !ok:
			return failResp(resp, codeUnknownMember, fmt.Sprintf("Instance id %s is unknown.", *req.InstanceID))
		case id != req.MemberID:
			return failResp(resp, codeFencedInstance, fmt.Sprintf("Instance id %s belongs to another member.", *req.InstanceID))
		}
		m = cg.members[id]
	}
	// kgo sends -2 without its instance id; a dynamic member's -2 is a
	// leave (Kafka answers INVALID_REQUEST to both; this is kinder).
	if req.MemberEpoch == -2 && m.instanceID != "" {
		m.epoch = -2
		m.pending = partSet{}
		for p := range m.assigned {
			m.assigned[p] = 0
		}
		m.revokeDeadline = time.Time{}
		cg.rebuildOwners()
		cg.dirty = true
		g.c.log.Info("static member left for now", "group", g.name, "member", m.id, "instance", m.instanceID)
	} else {
		g.removeConsumerMember(m, "left the group")
		g.maybeDowngrade()
	}
	if err := g.saveAfter(ctx); err != nil {
		code, msg := saveCode(err)
		return failResp(resp, code, msg)
	}
	resp.MemberID = &req.MemberID
	resp.MemberEpoch = req.MemberEpoch
	return resp
}

// saveAfter stores the group after a change, whichever type it is now
// (a downgrade may have made it classic). Holds g.mu.
func (g *group) saveAfter(ctx context.Context) error {
	if g.cg != nil {
		return g.saveConsumer(ctx)
	}
	return nil
}

// consumerHeartbeat handles a join (epoch 0) or a heartbeat. Holds g.mu.
func (g *group) consumerHeartbeat(ctx context.Context, req *kmsg.ConsumerGroupHeartbeatRequest, cl Client, resp *kmsg.ConsumerGroupHeartbeatResponse) *kmsg.ConsumerGroupHeartbeatResponse {
	c := g.c
	if g.cg == nil {
		if req.MemberEpoch != 0 {
			return failResp(resp, kerr.GroupIDNotFound.Code, fmt.Sprintf("Consumer group %s not found.", g.name))
		}
		if len(g.members) > 0 || len(g.pending) > 0 {
			if msg := g.upgrade(); msg != "" {
				return failResp(resp, kerr.GroupIDNotFound.Code, msg)
			}
		} else {
			g.becomeConsumer()
		}
		// Converted in memory only: if this request fails before the
		// group is stored, read the group again from the metastore.
		defer func() {
			if resp.ErrorCode != 0 && g.cg != nil && g.cg.dirty {
				g.loaded = false
			}
		}()
	}
	cg := g.cg
	now := c.clock.Now()
	memberID := req.MemberID
	if memberID == "" {
		memberID = newConsumerMemberID() // v0: the coordinator names the member
	}
	// Size: a member already in (or its static instance) is no newcomer.
	known := cg.members[memberID] != nil
	if req.InstanceID != nil {
		if _, ok := cg.statics[*req.InstanceID]; ok {
			known = true
		}
	}
	if !known && req.MemberEpoch == 0 && len(cg.members) >= c.opts.ConsumerMaxSize {
		return failResp(resp, kerr.GroupMaxSizeReached.Code, fmt.Sprintf("The consumer group has reached its maximum capacity of %d members.", c.opts.ConsumerMaxSize))
	}

	var m *cmember
	created := false
	create := func() *cmember {
		created = true
		return &cmember{id: memberID, memberAssignment: memberAssignment{assigned: partSet{}, pending: partSet{}}, target: assign.Assignment{}}
	}
	fenced := func() *kmsg.ConsumerGroupHeartbeatResponse {
		return failResp(resp, kerr.FencedMemberEpoch.Code, fmt.Sprintf("The consumer group member has a member epoch (%d) which is not the current one.", req.MemberEpoch))
	}
	checkEpoch := func(m *cmember) bool {
		switch {
		case req.MemberEpoch == m.epoch:
			return true
		case req.MemberEpoch > m.epoch:
			return false
		}
		// A lost response: the member may still send its previous epoch
		// while what it owns is within what it is assigned.
		if req.MemberEpoch != m.prevEpoch || req.Topics == nil {
			return false
		}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				if _, ok := m.assigned[partKey{t.TopicID, p}]; !ok {
					return false
				}
			}
		}
		return true
	}
	if req.InstanceID == nil {
		m = cg.members[memberID]
		switch {
		case m == nil && req.MemberEpoch == 0:
			m = create()
		case m == nil:
			return failResp(resp, codeUnknownMember, fmt.Sprintf("Member %s is not a member of group %s.", memberID, g.name))
		case req.MemberEpoch > 0 && m.usesClassic():
			return failResp(resp, codeUnknownMember, fmt.Sprintf("Member %s uses the classic protocol.", memberID))
		case req.MemberEpoch > 0 && !checkEpoch(m):
			return fenced()
		}
	} else {
		iid := *req.InstanceID
		holder := cg.members[cg.statics[iid]]
		switch {
		case req.MemberEpoch == 0 && holder == nil:
			if m = cg.members[memberID]; m == nil {
				m = create()
			}
		case req.MemberEpoch == 0 && (holder.epoch == -2 || holder.usesClassic()):
			// The instance comes back under a new process: it takes the
			// place of the one that left, assignment included.
			m = &cmember{}
			*m = *holder
			m.id, m.epoch, m.prevEpoch, m.classic = memberID, 0, 0, nil
			m.assigned, m.pending = maps.Clone(holder.assigned), partSet{}
			for p := range m.assigned {
				m.assigned[p] = 0
			}
			delete(cg.members, holder.id)
			cg.members[m.id] = m
			cg.rebuildOwners()
			cg.dirty = true
			c.log.Info("static member replaced", "group", g.name, "instance", iid, "old", holder.id, "new", m.id)
		case req.MemberEpoch == 0:
			return failResp(resp, kerr.UnreleasedInstanceID.Code, fmt.Sprintf("Static member %s with instance id %s is still active.", holder.id, iid))
		case holder == nil:
			return failResp(resp, codeUnknownMember, fmt.Sprintf("Instance id %s is unknown.", iid))
		case holder.id != memberID:
			return failResp(resp, codeFencedInstance, fmt.Sprintf("Instance id %s belongs to member %s.", iid, holder.id))
		default:
			m = holder
			if m.usesClassic() {
				return failResp(resp, codeUnknownMember, fmt.Sprintf("Member %s uses the classic protocol.", memberID))
			}
			if !checkEpoch(m) {
				return fenced()
			}
		}
	}
	if created {
		cg.members[m.id] = m
		cg.dirty = true
	}
	if m.classic != nil {
		// A classic member now speaks the consumer protocol.
		m.classic = nil
		cg.dirty = true
	}

	// Apply what the request carries (null: unchanged).
	namesChanged, regexChanged, assignorChanged := false, false, false
	if req.InstanceID != nil && m.instanceID != *req.InstanceID {
		if m.instanceID != "" && cg.statics[m.instanceID] == m.id {
			delete(cg.statics, m.instanceID)
		}
		m.instanceID = *req.InstanceID
		cg.dirty = true
	}
	if m.instanceID != "" {
		cg.statics[m.instanceID] = m.id
	}
	set := func(dst *string, v *string) {
		if v != nil && *dst != *v {
			*dst = *v
			cg.dirty = true
		}
	}
	set(&m.rackID, req.RackID)
	if req.RebalanceTimeoutMillis != -1 && m.rebalanceTimeoutMs != req.RebalanceTimeoutMillis {
		m.rebalanceTimeoutMs = req.RebalanceTimeoutMillis
		cg.dirty = true
	}
	if req.ServerAssignor != nil && m.assignor != *req.ServerAssignor {
		m.assignor = *req.ServerAssignor
		assignorChanged = true
		cg.dirty = true
	}
	if req.SubscribedTopicNames != nil {
		names := slices.Clone(req.SubscribedTopicNames)
		slices.Sort(names)
		names = slices.Compact(names)
		if !slices.Equal(names, m.topics) {
			m.topics = names
			namesChanged = true
			cg.dirty = true
		}
	}
	if req.SubscribedTopicRegex != nil && *req.SubscribedTopicRegex != m.regex {
		m.regex = *req.SubscribedTopicRegex
		regexChanged = true
		cg.dirty = true
		cg.dropUnusedRegexes()
	}
	set(&m.clientID, &cl.ID)
	set(&m.clientHost, &cl.Host)

	var owned map[partKey]bool
	if req.Topics != nil {
		owned = map[partKey]bool{}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				owned[partKey{t.TopicID, p}] = true
			}
		}
	}
	before := m.memberAssignment
	g.advance(m, owned, namesChanged || regexChanged, assignorChanged, cl.MayDescribe)
	m.deadline = now.Add(c.opts.ConsumerSessionTimeout)

	if err := g.saveConsumer(ctx); err != nil {
		code, msg := saveCode(err)
		return failResp(resp, code, msg)
	}
	resp.MemberID = &m.id
	resp.MemberEpoch = m.epoch
	resp.HeartbeatIntervalMillis = int32(c.opts.ConsumerHeartbeatInterval.Milliseconds())
	full := req.RebalanceTimeoutMillis != -1 && (req.SubscribedTopicNames != nil || req.SubscribedTopicRegex != nil) && req.Topics != nil
	if req.MemberEpoch == 0 || full || !sameKeys(before.assigned, m.assigned) {
		resp.Assignment = heartbeatAssignment(m.assigned)
	}
	return resp
}

// advance brings the group up to date after m's subscription or
// assignor changed (or not) and reconciles m: the group epoch moves on a
// subscription change, a new preferred assignor or a change of the
// subscribed topics; the target is recomputed when the epoch moved past
// it. owned is what m reports it owns (nil: unchanged). Holds g.mu.
func (g *group) advance(m *cmember, owned map[partKey]bool, subscriptionChanged, assignorChanged bool, mayDescribe func(string) bool) {
	c, cg := g.c, g.cg
	view := c.topics()
	for _, o := range cg.members {
		if o.regex != "" {
			cg.resolve(o.regex, view, mayDescribe)
		}
	}
	bump := subscriptionChanged
	if assignorChanged && cg.assignor != "" && c.preferredAssignor(cg) != cg.assignor {
		bump = true
	}
	if bump || cg.hashVersion != view.Version() {
		h := metadataHash(cg.allSubscribed(view), view)
		cg.hashVersion = view.Version()
		if bump || h != cg.hash {
			cg.hash = h
			cg.bumpEpoch()
		}
	}
	if cg.epoch > cg.assignmentEpoch {
		c.computeTarget(cg, view)
	}
	g.reconcileMember(m, owned, subscriptionChanged, view)
}

// reconcileMember moves m towards its target and, if that changed
// anything, records who owns what and arms or clears its rebalance
// timeout. owned is what it reports it owns (nil: unchanged). Holds g.mu.
func (g *group) reconcileMember(m *cmember, owned map[partKey]bool, subscriptionChanged bool, view TopicView) {
	cg := g.cg
	subscribed := map[metastore.TopicID]bool{}
	for _, n := range cg.subscribedNames(m, view, nil) {
		if t, ok := view.Topic(n); ok {
			subscribed[t.ID] = true
		}
	}
	if m.epoch < 0 {
		return // parked static member: nothing moves until it is back
	}
	prev := m.memberAssignment
	next := reconcile(reconcileInput{
		cur: prev, target: m.target, assignmentEpoch: cg.assignmentEpoch, owned: owned,
		subscribed: func(t metastore.TopicID) bool { return subscribed[t] }, subscriptionChanged: subscriptionChanged,
		ownedByOther: func(p partKey) bool { o, ok := cg.owners[p]; return ok && o != m.id },
	})
	if next.equal(prev) {
		return
	}
	m.memberAssignment = next
	cg.rebuildOwners()
	cg.dirty = true
	switch {
	case next.state != memberUnrevoked:
		m.revokeDeadline = time.Time{}
	default:
		m.revokeDeadline = g.c.clock.Now().Add(millis(m.rebalanceTimeoutMs))
		m.revokeEpoch = next.epoch
	}
	if next.epoch != prev.epoch || next.state != prev.state {
		g.c.log.Debug("group member reconciled", "group", g.name, "member", m.id, "epoch", next.epoch, "state", next.state.String(),
			"assigned", len(next.assigned), "pending", len(next.pending))
	}
}

func sameKeys(a, b partSet) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			return false
		}
	}
	return true
}

// heartbeatAssignment is a heartbeat response's assignment.
func heartbeatAssignment(s partSet) *kmsg.ConsumerGroupHeartbeatResponseAssignment {
	a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
	a.Topics = []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}
	for _, tp := range toStored(s, false) {
		t := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
		t.TopicID, t.Partitions = tp.Topic, tp.Partitions
		a.Topics = append(a.Topics, t)
	}
	return &a
}

// becomeConsumer turns an empty classic group (or none) into a consumer
// group, keeping its committed offsets. Holds g.mu.
func (g *group) becomeConsumer() {
	g.cg = newConsumerGroup()
	g.cg.dirty = true
	g.protocolType = "consumer"
	g.state = stateEmpty
	g.leader, g.protocol = "", ""
	clear(g.pending)
}

// tickConsumer fences members whose session or rebalance timeout ran out
// and stores the group if that changed it. Holds g.mu.
func (g *group) tickConsumer(now time.Time) {
	cg := g.cg
	for _, m := range cg.sortedMembers() {
		switch {
		case now.After(m.deadline):
			g.removeConsumerMember(m, "session timeout expired")
		case !m.revokeDeadline.IsZero() && now.After(m.revokeDeadline) && m.state == memberUnrevoked && m.epoch == m.revokeEpoch:
			g.removeConsumerMember(m, "did not revoke its partitions within the rebalance timeout")
		default:
			continue
		}
		if g.cg == nil {
			break
		}
		g.maybeDowngrade()
		if g.cg == nil {
			break
		}
	}
	if err := g.saveAfter(g.c.ctx); err != nil && g.c.ctx.Err() == nil {
		g.c.log.Warn("store consumer group after timeouts", "group", g.name, "err", err)
	}
}

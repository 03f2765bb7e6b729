package group

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/pkg/metastore"
)

func validGroupID(name string) bool { return name != "" && len(name) <= maxGroupIDBytes }

// enter checks a group id and returns the group locked and loaded, or the
// error code to answer.
func (c *Coordinator) enter(ctx context.Context, name string) (*group, int16) {
	if !validGroupID(name) {
		return nil, kerr.InvalidGroupID.Code
	}
	return c.acquire(ctx, name)
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func millis(ms int32) time.Duration { return time.Duration(ms) * time.Millisecond }

// Join handles JoinGroup. The returned function waits for the rebalance to
// complete (or ctx to end) and returns the response.
func (c *Coordinator) Join(ctx context.Context, req *kmsg.JoinGroupRequest, clientID, clientHost string) func() *kmsg.JoinGroupResponse {
	now := func(code int16, memberID string) func() *kmsg.JoinGroupResponse {
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode, resp.MemberID, resp.Generation = code, memberID, -1
		return func() *kmsg.JoinGroupResponse { return resp }
	}
	if !validGroupID(req.Group) {
		return now(kerr.InvalidGroupID.Code, req.MemberID)
	}
	session := millis(req.SessionTimeoutMillis)
	if session < c.opts.MinSessionTimeout || session > c.opts.MaxSessionTimeout {
		return now(kerr.InvalidSessionTimeout.Code, req.MemberID)
	}
	rebalance := millis(req.RebalanceTimeoutMillis)
	if req.Version == 0 || rebalance <= 0 {
		rebalance = session
	}
	if req.ProtocolType == "" || len(req.Protocols) == 0 {
		return now(codeInconsistentProtocol, req.MemberID)
	}
	g, code := c.acquire(ctx, req.Group)
	if code != 0 {
		return now(code, req.MemberID)
	}
	defer g.mu.Unlock()
	g.touch(nil)
	if len(g.members) > 0 && (req.ProtocolType != g.protocolType || len(g.commonProtocols(req.Protocols)) == 0) {
		return now(codeInconsistentProtocol, req.MemberID)
	}
	instance := deref(req.InstanceID)
	t := c.clock.Now()
	park := func(m *member) func() *kmsg.JoinGroupResponse {
		if m.join != nil {
			g.answerJoin(m, &kmsg.JoinGroupResponse{ErrorCode: codeRebalanceInProgress, MemberID: m.id, Generation: -1})
		}
		ch := make(chan *kmsg.JoinGroupResponse, 1)
		m.join, m.joinVersion = ch, req.Version
		g.maybeCompleteJoin(t)
		return func() *kmsg.JoinGroupResponse {
			var resp *kmsg.JoinGroupResponse
			select {
			case resp = <-ch:
			case <-ctx.Done():
				resp = &kmsg.JoinGroupResponse{ErrorCode: codeNotCoordinator, Generation: -1}
			case <-c.ctx.Done():
				resp = &kmsg.JoinGroupResponse{ErrorCode: codeNotCoordinator, Generation: -1}
			}
			resp.Version = req.Version
			return resp
		}
	}
	update := func(m *member) {
		m.protocols = slices.Clone(req.Protocols)
		m.session, m.rebalance = session, rebalance
		m.clientID, m.clientHost = clientID, clientHost
		g.touch(m)
	}
	add := func(id string) func() *kmsg.JoinGroupResponse {
		m := &member{id: id, instanceID: instance, protocolType: req.ProtocolType, joinOrder: g.joinSeq}
		g.joinSeq++
		update(m)
		if len(g.members) == 0 {
			g.protocolType = req.ProtocolType
		}
		g.members[id] = m
		if instance != "" {
			g.statics[instance] = id
		}
		switch g.state {
		case statePreparingRebalance:
			// Another member during the initial delay: wait a little longer
			// for more, within the rebalance timeout.
			if !g.initialUntil.IsZero() {
				g.initialUntil = minTime(t.Add(c.opts.InitialRebalanceDelay), g.rebalanceDeadline)
			}
			g.rebalanceDeadline = maxTime(g.rebalanceDeadline, t.Add(rebalance))
		default:
			g.prepareRebalance("member " + id + " joined")
		}
		return park(m)
	}

	if req.MemberID == "" {
		if instance != "" {
			if old, ok := g.statics[instance]; ok {
				return g.replaceStatic(g.members[old], newMemberID(clientID), req, update, park)
			}
			return add(newMemberID(clientID))
		}
		if req.Version >= 4 {
			// KIP-394: hand out an id first, so a client that times out and
			// retries does not leave a ghost member behind.
			id := newMemberID(clientID)
			g.pending[id] = t.Add(session)
			return now(kerr.MemberIDRequired.Code, id)
		}
		return add(newMemberID(clientID))
	}
	if instance != "" {
		if cur, ok := g.statics[instance]; ok && cur != req.MemberID {
			return now(codeFencedInstance, req.MemberID)
		}
	}
	if _, ok := g.pending[req.MemberID]; ok {
		delete(g.pending, req.MemberID)
		return add(req.MemberID)
	}
	m := g.members[req.MemberID]
	if m == nil {
		return now(codeUnknownMember, req.MemberID)
	}
	same := sameProtocols(m.protocols, req.Protocols)
	update(m)
	switch g.state {
	case stateCompletingRebalance:
		if same {
			// A resent join: answer with the generation being formed.
			resp := g.joinResponse(m)
			if m.id == g.leader {
				resp.Members = g.memberList()
			}
			resp.Version = req.Version
			return func() *kmsg.JoinGroupResponse { return resp }
		}
		g.prepareRebalance("member " + m.id + " changed its protocols")
	case stateStable:
		if same && m.id != g.leader {
			resp := g.joinResponse(m)
			resp.Version = req.Version
			return func() *kmsg.JoinGroupResponse { return resp }
		}
		g.prepareRebalance("member " + m.id + " rejoined")
	case stateEmpty:
		g.prepareRebalance("member " + m.id + " joined")
	}
	return park(m)
}

// replaceStatic hands a static member's place to a new member id (KIP-345):
// the old id is fenced and, in a stable group with unchanged protocols, the
// new one takes over the assignment without a rebalance.
func (g *group) replaceStatic(old *member, id string, req *kmsg.JoinGroupRequest, update func(*member), park func(*member) func() *kmsg.JoinGroupResponse) func() *kmsg.JoinGroupResponse {
	fenced := &kmsg.JoinGroupResponse{ErrorCode: codeFencedInstance, MemberID: old.id, Generation: -1}
	g.answerJoin(old, fenced)
	g.answerSync(old, codeFencedInstance, nil)
	delete(g.members, old.id)
	m := old
	oldID := m.id
	m.id = id
	update(m)
	g.members[id] = m
	g.statics[m.instanceID] = id
	prevLeader := g.leader
	if g.leader == oldID {
		g.leader = id
	}
	g.c.log.Info("static member replaced", "group", g.name, "instance", m.instanceID, "old", oldID, "new", id)
	switch g.state {
	case stateStable:
		// Only a change of the protocol the group would select forces a
		// rebalance (as in Kafka). Comparing the metadata bytes would
		// rebalance on nearly every restart, defeating KIP-345: a
		// restarted consumer's subscription metadata differs (it owns no
		// partitions yet, and carries generation -1).
		if g.selectProtocol() == g.protocol {
			resp := g.joinResponse(m)
			switch {
			case id == g.leader && req.Version >= 9:
				// KIP-814: the leader learns the members but keeps the
				// current assignment.
				resp.Members = g.memberList()
				resp.SkipAssignment = true
			case id == g.leader:
				// Before v9 there is no SkipAssignment. Like Kafka, name
				// the previous leader id, so the restarted leader does
				// not compute an assignment the stable group ignores.
				resp.LeaderID = prevLeader
			}
			resp.Version = req.Version
			return func() *kmsg.JoinGroupResponse { return resp }
		}
		g.prepareRebalance("static member " + m.instanceID + " changed its protocols")
	case stateCompletingRebalance:
		g.prepareRebalance("static member " + m.instanceID + " rejoined during a rebalance")
	}
	return park(m)
}

func (g *group) memberList() []kmsg.JoinGroupResponseMember {
	var all []kmsg.JoinGroupResponseMember
	for _, m := range g.sortedMembers() {
		jm := kmsg.NewJoinGroupResponseMember()
		jm.MemberID = m.id
		jm.InstanceID = strPtr(m.instanceID)
		jm.ProtocolMetadata = m.metadataFor(g.protocol)
		all = append(all, jm)
	}
	return all
}

func sameProtocols(a, b []kmsg.JoinGroupRequestProtocol) bool {
	return slices.EqualFunc(a, b, func(x, y kmsg.JoinGroupRequestProtocol) bool {
		return x.Name == y.Name && bytes.Equal(x.Metadata, y.Metadata)
	})
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Sync handles SyncGroup. The returned function waits for the leader's
// assignment when it has not arrived yet.
func (c *Coordinator) Sync(ctx context.Context, req *kmsg.SyncGroupRequest) func() *kmsg.SyncGroupResponse {
	now := func(code int16, assignment []byte) func() *kmsg.SyncGroupResponse {
		resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode, resp.MemberAssignment = code, assignment
		return func() *kmsg.SyncGroupResponse { return resp }
	}
	if !validGroupID(req.Group) {
		return now(kerr.InvalidGroupID.Code, nil)
	}
	g, code := c.acquire(ctx, req.Group)
	if code != 0 {
		return now(code, nil)
	}
	defer g.mu.Unlock()
	m, code := g.checkMember(req.MemberID, req.InstanceID)
	if code != 0 {
		return now(code, nil)
	}
	if req.Generation != g.generation {
		return now(codeIllegalGeneration, nil)
	}
	if (req.ProtocolType != nil && *req.ProtocolType != g.protocolType) || (req.Protocol != nil && *req.Protocol != g.protocol) {
		return now(codeInconsistentProtocol, nil)
	}
	g.touch(m)
	switch g.state {
	case statePreparingRebalance:
		return now(codeRebalanceInProgress, nil)
	case stateStable:
		m.synced = true
		resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ProtocolType, resp.Protocol, resp.MemberAssignment = strPtr(g.protocolType), &g.protocol, m.assignment
		return func() *kmsg.SyncGroupResponse { return resp }
	case stateEmpty:
		return now(codeUnknownMember, nil)
	}
	// CompletingRebalance: wait for the leader's assignment.
	m.synced = true
	if m.sync != nil {
		g.answerSync(m, codeRebalanceInProgress, nil)
	}
	ch := make(chan *kmsg.SyncGroupResponse, 1)
	m.sync = ch
	if m.id == g.leader {
		assigned := make(map[string][]byte, len(req.GroupAssignment))
		for _, a := range req.GroupAssignment {
			assigned[a.MemberID] = a.MemberAssignment
		}
		for _, mm := range g.members {
			mm.assignment = assigned[mm.id]
		}
		g.state = stateStable
		for _, mm := range g.members {
			g.answerSync(mm, 0, mm.assignment)
		}
	}
	return func() *kmsg.SyncGroupResponse {
		var resp *kmsg.SyncGroupResponse
		select {
		case resp = <-ch:
		case <-ctx.Done():
			resp = &kmsg.SyncGroupResponse{ErrorCode: codeNotCoordinator}
		case <-c.ctx.Done():
			resp = &kmsg.SyncGroupResponse{ErrorCode: codeNotCoordinator}
		}
		resp.Version = req.Version
		return resp
	}
}

// Heartbeat handles Heartbeat.
func (c *Coordinator) Heartbeat(ctx context.Context, req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	g, code := c.enter(ctx, req.Group)
	if code != 0 {
		resp.ErrorCode = code
		return resp
	}
	defer g.mu.Unlock()
	m, code := g.checkMember(req.MemberID, req.InstanceID)
	switch {
	case code != 0:
		resp.ErrorCode = code
	case req.Generation != g.generation:
		resp.ErrorCode = codeIllegalGeneration
	case g.state == stateEmpty:
		resp.ErrorCode = codeUnknownMember
	case g.state == statePreparingRebalance:
		g.touch(m)
		resp.ErrorCode = codeRebalanceInProgress
	default:
		g.touch(m)
	}
	return resp
}

// Leave handles LeaveGroup: one member (v0-2) or a batch (v3+), by member
// id or, for static members, by instance id.
func (c *Coordinator) Leave(ctx context.Context, req *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	leaving := req.Members
	if req.Version < 3 {
		leaving = []kmsg.LeaveGroupRequestMember{{MemberID: req.MemberID}}
	}
	g, code := c.enter(ctx, req.Group)
	if code != 0 {
		resp.ErrorCode = code
		return resp
	}
	defer g.mu.Unlock()
	g.touch(nil)
	removed := false
	for _, lm := range leaving {
		code := int16(0)
		instance := deref(lm.InstanceID)
		id := lm.MemberID
		if instance != "" {
			cur, ok := g.statics[instance]
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
			if _, ok := g.pending[id]; ok {
				delete(g.pending, id)
			} else if g.members[id] == nil {
				code = codeUnknownMember
			} else {
				reason := "left the group"
				if lm.Reason != nil {
					reason += ": " + *lm.Reason
				}
				g.removeMember(id, reason)
				removed = true
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
	if removed {
		g.memberLeft(c.clock.Now(), "members left")
	} else {
		g.maybeCompleteJoin(c.clock.Now()) // a pending member id went away
	}
	return resp
}

// Commit handles OffsetCommit. Members commit under their generation; a
// commit with generation -1 (an admin tool, or a consumer that assigns
// partitions itself) is accepted only while the group has no members.
func (c *Coordinator) Commit(ctx context.Context, req *kmsg.OffsetCommitRequest) *kmsg.OffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetCommitResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetCommitResponseTopicPartition()
			sp.Partition = rp.Partition
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	setAll := func(code int16) *kmsg.OffsetCommitResponse {
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				if resp.Topics[i].Partitions[j].ErrorCode == 0 {
					resp.Topics[i].Partitions[j].ErrorCode = code
				}
			}
		}
		return resp
	}
	if !validGroupID(req.Group) {
		return setAll(kerr.InvalidGroupID.Code)
	}
	g, code := c.acquire(ctx, req.Group)
	if code != 0 {
		return setAll(code)
	}
	defer g.mu.Unlock()
	g.touch(nil)
	generation := req.Generation
	if req.Version == 0 {
		generation = -1 // v0 has no generation: a simple commit
	}
	// Kafka's order: the member and generation first, then the state, so
	// a commit of a non-member or an old generation during
	// CompletingRebalance learns that (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION,
	// FENCED_INSTANCE_ID), not REBALANCE_IN_PROGRESS.
	switch {
	case generation < 0 && len(g.members) == 0:
		// A simple consumer or an admin reset: no member to check.
	default:
		m, code := g.checkMember(req.MemberID, req.InstanceID)
		if code != 0 {
			return setAll(code)
		}
		if generation != g.generation {
			return setAll(codeIllegalGeneration)
		}
		if g.state == stateCompletingRebalance {
			return setAll(codeRebalanceInProgress)
		}
		g.touch(m)
	}
	var offs []metastore.Offset
	for i, rt := range req.Topics {
		for j, rp := range rt.Partitions {
			sp := &resp.Topics[i].Partitions[j]
			md := deref(rp.Metadata)
			switch {
			case !c.opts.PartitionExists(rt.Topic, rp.Partition):
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				continue
			case len(md) > c.opts.MaxMetadataBytes:
				sp.ErrorCode = kerr.OffsetMetadataTooLarge.Code
				continue
			}
			o := metastore.Offset{Topic: rt.Topic, Partition: rp.Partition, Offset: rp.Offset, LeaderEpoch: rp.LeaderEpoch, Metadata: md}
			if req.Version < 6 {
				o.LeaderEpoch = -1
			}
			if cur, ok := g.offsets[tp{o.Topic, o.Partition}]; ok && cur.Offset == o.Offset && cur.LeaderEpoch == o.LeaderEpoch && cur.Metadata == o.Metadata {
				continue // unchanged: nothing to write
			}
			offs = append(offs, o)
		}
	}
	if len(offs) == 0 {
		return resp
	}
	if err := g.commit(ctx, offs); err != nil {
		if errors.Is(err, errMetastoreFenced) {
			// Another coordinator formed a newer generation: this one is
			// stale. Forget the group; the client finds the coordinator.
			c.forget(g)
			return setAll(codeNotCoordinator)
		}
		c.log.Warn("commit offsets", "group", g.name, "err", err)
		return setAll(codeCoordinatorNotAvailable)
	}
	return resp
}

// forget drops a locked group from memory.
func (c *Coordinator) forget(g *group) {
	c.mu.Lock()
	if c.groups[g.name] == g {
		delete(c.groups, g.name)
	}
	c.mu.Unlock()
	g.unload()
}

// FetchOffsets handles OffsetFetch: one group (v0-7) or several (v8+).
func (c *Coordinator) FetchOffsets(ctx context.Context, req *kmsg.OffsetFetchRequest) *kmsg.OffsetFetchResponse {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version < 8 {
		var topics []kmsg.OffsetFetchRequestGroupTopic
		for _, t := range req.Topics {
			topics = append(topics, kmsg.OffsetFetchRequestGroupTopic{Topic: t.Topic, Partitions: t.Partitions})
		}
		if req.Topics == nil {
			topics = nil
		}
		rg := c.fetchGroup(ctx, req.Group, topics, req.Topics == nil)
		resp.ErrorCode = rg.ErrorCode
		for _, t := range rg.Topics {
			rt := kmsg.NewOffsetFetchResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseTopicPartition()
				rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode
				if req.Version < 2 && rg.ErrorCode != 0 {
					rp.ErrorCode = rg.ErrorCode // v0-1 have no top-level error
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp
	}
	for _, rg := range req.Groups {
		resp.Groups = append(resp.Groups, c.fetchGroup(ctx, rg.Group, rg.Topics, rg.Topics == nil))
	}
	return resp
}

func (c *Coordinator) fetchGroup(ctx context.Context, name string, topics []kmsg.OffsetFetchRequestGroupTopic, all bool) kmsg.OffsetFetchResponseGroup {
	out := kmsg.NewOffsetFetchResponseGroup()
	out.Group = name
	fill := func(code int16) {
		for _, t := range topics {
			rt := kmsg.NewOffsetFetchResponseGroupTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
				rp.Partition, rp.Offset, rp.LeaderEpoch, rp.ErrorCode = p, -1, -1, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			out.Topics = append(out.Topics, rt)
		}
	}
	if !validGroupID(name) {
		out.ErrorCode = kerr.InvalidGroupID.Code
		fill(out.ErrorCode)
		return out
	}
	g, code := c.acquire(ctx, name)
	if code != 0 {
		out.ErrorCode = code
		fill(code)
		return out
	}
	defer g.mu.Unlock()
	g.touch(nil)
	if all {
		byTopic := map[string][]int32{}
		for k := range g.offsets {
			byTopic[k.topic] = append(byTopic[k.topic], k.partition)
		}
		names := make([]string, 0, len(byTopic))
		for t := range byTopic {
			names = append(names, t)
		}
		slices.Sort(names)
		for _, t := range names {
			ps := byTopic[t]
			slices.Sort(ps)
			topics = append(topics, kmsg.OffsetFetchRequestGroupTopic{Topic: t, Partitions: ps})
		}
	}
	for _, t := range topics {
		rt := kmsg.NewOffsetFetchResponseGroupTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch = p, -1, -1
			if o, ok := g.offsets[tp{t.Topic, p}]; ok {
				rp.Offset, rp.LeaderEpoch = o.Offset, o.LeaderEpoch
				md := o.Metadata
				rp.Metadata = &md
			} else {
				empty := ""
				rp.Metadata = &empty
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		out.Topics = append(out.Topics, rt)
	}
	return out
}

// Describe handles DescribeGroups.
func (c *Coordinator) Describe(ctx context.Context, req *kmsg.DescribeGroupsRequest) *kmsg.DescribeGroupsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, name := range req.Groups {
		dg := kmsg.NewDescribeGroupsResponseGroup()
		dg.Group = name
		dg.AuthorizedOperations = -2147483648 // not requested / not computed
		if !validGroupID(name) {
			dg.ErrorCode = kerr.InvalidGroupID.Code
			resp.Groups = append(resp.Groups, dg)
			continue
		}
		g, code := c.acquire(ctx, name)
		if code != 0 {
			dg.ErrorCode = code
			resp.Groups = append(resp.Groups, dg)
			continue
		}
		dg.State = g.stateName()
		dg.ProtocolType = g.protocolType
		if g.state == stateStable {
			dg.Protocol = g.protocol
		}
		for _, m := range g.sortedMembers() {
			dm := kmsg.NewDescribeGroupsResponseGroupMember()
			dm.MemberID, dm.InstanceID, dm.ClientID, dm.ClientHost = m.id, strPtr(m.instanceID), m.clientID, m.clientHost
			if g.state == stateStable {
				dm.ProtocolMetadata, dm.MemberAssignment = m.metadataFor(g.protocol), m.assignment
			}
			dg.Members = append(dg.Members, dm)
		}
		g.mu.Unlock()
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

// List handles ListGroups: the groups of the shards coordinated here.
func (c *Coordinator) List(ctx context.Context, req *kmsg.ListGroupsRequest) *kmsg.ListGroupsResponse {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	if !c.opts.Valid() {
		resp.ErrorCode = codeCoordinatorNotAvailable
		return resp
	}
	wantState := func(s string) bool {
		if len(req.StatesFilter) == 0 {
			return true
		}
		return slices.ContainsFunc(req.StatesFilter, func(f string) bool { return strings.EqualFold(f, s) })
	}
	if len(req.TypesFilter) > 0 && !slices.ContainsFunc(req.TypesFilter, func(f string) bool { return strings.EqualFold(f, "classic") }) {
		return resp // every group here is a classic group
	}
	seen := map[string]bool{}
	add := func(name, protocolType, state string) {
		if seen[name] || !wantState(state) {
			seen[name] = true
			return
		}
		seen[name] = true
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = name, protocolType, state, "classic"
		resp.Groups = append(resp.Groups, lg)
	}
	c.mu.Lock()
	var mem []*group
	for _, g := range c.groups {
		mem = append(mem, g)
	}
	c.mu.Unlock()
	for _, g := range mem {
		g.mu.Lock()
		if g.loaded && !g.gone && g.exists() {
			add(g.name, g.protocolType, g.stateName())
		} else if g.loaded && !g.gone {
			seen[g.name] = true // loaded and known not to exist (deleted)
		}
		g.mu.Unlock()
	}
	lctx, cancel := context.WithTimeout(ctx, metaTimeout)
	defer cancel()
	for _, shard := range c.Shards() {
		infos, err := c.opts.Meta.Groups(lctx, shard)
		if err != nil {
			c.log.Warn("list groups", "shard", shard, "err", err)
			resp.ErrorCode = codeCoordinatorNotAvailable
			resp.Groups = nil
			return resp
		}
		for _, gi := range infos {
			add(gi.Group, gi.ProtocolType, "Empty")
		}
	}
	slices.SortFunc(resp.Groups, func(a, b kmsg.ListGroupsResponseGroup) int { return strings.Compare(a.Group, b.Group) })
	return resp
}

// Delete handles DeleteGroups: only groups without members are deleted.
func (c *Coordinator) Delete(ctx context.Context, req *kmsg.DeleteGroupsRequest) *kmsg.DeleteGroupsResponse {
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, name := range req.Groups {
		dg := kmsg.NewDeleteGroupsResponseGroup()
		dg.Group = name
		dg.ErrorCode = c.deleteGroup(ctx, name)
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

func (c *Coordinator) deleteGroup(ctx context.Context, name string) int16 {
	g, code := c.enter(ctx, name)
	if code != 0 {
		return code
	}
	defer g.mu.Unlock()
	switch {
	case !g.exists():
		return kerr.GroupIDNotFound.Code
	case len(g.members) > 0:
		return kerr.NonEmptyGroup.Code
	}
	dctx, cancel := context.WithTimeout(ctx, metaTimeout)
	defer cancel()
	if err := c.opts.Meta.DeleteGroup(dctx, name); err != nil {
		c.log.Warn("delete group", "group", name, "err", err)
		return codeCoordinatorNotAvailable
	}
	clear(g.offsets)
	g.indexed = false
	g.protocolType = ""
	c.log.Info("group deleted", "group", name)
	return 0
}

// DeleteOffsets handles OffsetDelete: committed offsets of topics the
// group is not subscribed to are removed.
func (c *Coordinator) DeleteOffsets(ctx context.Context, req *kmsg.OffsetDeleteRequest) *kmsg.OffsetDeleteResponse {
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	g, code := c.enter(ctx, req.Group)
	if code != 0 {
		resp.ErrorCode = code
		return resp
	}
	defer g.mu.Unlock()
	switch {
	case !g.exists():
		resp.ErrorCode = kerr.GroupIDNotFound.Code
		return resp
	case len(g.members) > 0 && g.protocolType != "consumer":
		resp.ErrorCode = kerr.NonEmptyGroup.Code
		return resp
	}
	subscribed := map[string]bool{}
	for _, m := range g.members {
		var md kmsg.ConsumerMemberMetadata
		for _, p := range m.protocols {
			if g.protocol != "" && p.Name != g.protocol {
				continue
			}
			if md.ReadFrom(p.Metadata) == nil {
				for _, t := range md.Topics {
					subscribed[t] = true
				}
			}
		}
	}
	dctx, cancel := context.WithTimeout(ctx, metaTimeout)
	defer cancel()
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetDeleteResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetDeleteResponseTopicPartition()
			sp.Partition = rp.Partition
			switch {
			case subscribed[rt.Topic]:
				sp.ErrorCode = kerr.GroupSubscribedToTopic.Code
			case !c.opts.PartitionExists(rt.Topic, rp.Partition):
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			default:
				if err := c.opts.Meta.DeleteOffset(dctx, g.name, rt.Topic, rp.Partition); err != nil {
					c.log.Warn("delete offset", "group", g.name, "err", err)
					sp.ErrorCode = codeCoordinatorNotAvailable
				} else {
					delete(g.offsets, tp{rt.Topic, rp.Partition})
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

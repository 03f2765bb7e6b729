package group

// JoinGroup and SyncGroup: members join, the group forms a generation
// (maybeCompleteJoin in group.go), the leader hands in the assignment and
// every member collects its part. Static members (KIP-345) take over their
// instance's place without a rebalance.

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

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
	if g.sg != nil {
		return now(codeInconsistentProtocol, req.MemberID)
	}
	if g.cg != nil {
		if len(g.cg.members) > 0 {
			resp := g.classicJoinConsumer(req, clientID, clientHost, session, rebalance)
			return func() *kmsg.JoinGroupResponse { return resp }
		}
		g.becomeClassic()
	}
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
		m.downgradedFrom = 0
		m.protocols = slices.Clone(req.Protocols)
		m.session, m.rebalance = session, rebalance
		m.clientID, m.clientHost = clientID, clientHost
		g.touch(m)
	}
	full := func(id string) bool { return g.members[id] == nil && len(g.members) >= c.opts.MaxSize }
	add := func(id string) func() *kmsg.JoinGroupResponse {
		if full(id) {
			return now(kerr.GroupMaxSizeReached.Code, id)
		}
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
			if len(g.members) >= c.opts.MaxSize {
				return now(kerr.GroupMaxSizeReached.Code, "")
			}
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
// new one takes over the assignment without a rebalance. Holds g.mu.
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
		g.storeClassicState("a static member's replacement")
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

// memberList is the leader's view of the members, in join order. Holds
// g.mu.
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
	if g.cg != nil {
		resp := g.classicSyncConsumer(req)
		return func() *kmsg.SyncGroupResponse { return resp }
	}
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
		if err := g.storeClassic(ctx, g.generation, g.protocol, g.leader, true); errors.Is(err, errMetastoreFenced) {
			return func() *kmsg.SyncGroupResponse { return <-ch } // unload answered it
		} else if err != nil {
			// The generation stands; a coordinator that loads the group
			// before the next store makes its members rejoin.
			g.c.log.Warn("store group assignment", "group", g.name, "err", err)
		}
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

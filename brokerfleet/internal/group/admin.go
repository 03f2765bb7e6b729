package group

// DescribeGroups, ListGroups and DeleteGroups: the administrative view of
// the groups coordinated here.

import (
	"context"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/pkg/metastore"
)

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
		if g.sg != nil {
			dg.State, dg.ProtocolType = "Dead", "share"
			if req.Version >= 6 {
				dg.ErrorCode = kerr.GroupIDNotFound.Code
				dg.ErrorMessage = kmsg.StringPtr("Group " + name + " is not a classic group.")
			}
			g.mu.Unlock()
			resp.Groups = append(resp.Groups, dg)
			continue
		}
		if g.cg != nil {
			// Kafka describes a consumer-protocol group as Dead here (v6+
			// would add GROUP_ID_NOT_FOUND): ConsumerGroupDescribe
			// describes it.
			dg.State, dg.ProtocolType = "Dead", "consumer"
			g.mu.Unlock()
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
	wantType := func(t string) bool {
		if len(req.TypesFilter) == 0 {
			return true
		}
		return slices.ContainsFunc(req.TypesFilter, func(f string) bool { return strings.EqualFold(f, t) })
	}
	seen := map[string]bool{}
	add := func(name, protocolType, state, typ string) {
		if seen[name] || !wantState(state) || !wantType(typ) {
			seen[name] = true
			return
		}
		seen[name] = true
		lg := kmsg.NewListGroupsResponseGroup()
		lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = name, protocolType, state, typ
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
			add(g.name, g.protocolType, g.stateName(), g.typeName())
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
			if seen[gi.Group] {
				continue
			}
			if gi.ProtocolType != "" && gi.EmptySince == 0 {
				// It may have members (they survive a coordinator
				// move): read it.
				if g, code := c.acquire(lctx, gi.Group); code == 0 {
					if g.exists() {
						add(g.name, g.protocolType, g.stateName(), g.typeName())
					}
					seen[g.name] = true
					g.mu.Unlock()
					continue
				}
			}
			typ := "classic"
			switch gi.Type {
			case metastore.GroupTypeConsumer:
				typ = "consumer"
			case metastore.GroupTypeShare:
				typ = "share"
			}
			add(gi.Group, gi.ProtocolType, "Empty", typ)
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
	case g.memberCount() > 0:
		return kerr.NonEmptyGroup.Code
	}
	dctx, cancel := context.WithTimeout(ctx, metaTimeout)
	defer cancel()
	if g.sg != nil {
		if _, err := c.opts.Meta.ResetShareStates(dctx, name, nil); err != nil {
			c.log.Warn("delete share group state", "group", name, "err", err)
			return codeCoordinatorNotAvailable
		}
	}
	if err := c.opts.Meta.DeleteGroup(dctx, name); err != nil {
		c.log.Warn("delete group", "group", name, "err", err)
		return codeCoordinatorNotAvailable
	}
	if g.sg != nil {
		g.sg = nil
		g.protocolType = ""
	}
	clear(g.offsets)
	g.indexed, g.info = false, metastore.GroupInfo{}
	g.protocolType = ""
	c.log.Info("group deleted", "group", name)
	return 0
}

package group

// A classic group's membership in the group record: written when a
// generation forms (its members, not yet their assignments), when the
// leader's assignment is handed out (Stable, with assignments), when a
// static member's new id takes its place, and when the group becomes
// empty. A coordinator that loads the group continues a Stable
// generation as it was (members heartbeat on, commits are accepted);
// one whose assignment was never stored makes its members rejoin.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/pkg/metastore"
)

// classicRecord is the classic group's stored form with the given
// generation, protocol and leader; members' assignments only if stable.
// Holds g.mu.
func (g *group) classicRecord(gen int32, protocol, leader string, stable bool) metastore.GroupRecord {
	cr := &metastore.ClassicGroup{Generation: gen, ProtocolType: g.protocolType, Protocol: protocol, Leader: leader, Stable: stable}
	for _, m := range g.sortedMembers() {
		sm := metastore.ClassicMember{ID: m.id, InstanceID: m.instanceID, ClientID: m.clientID, ClientHost: m.clientHost,
			ProtocolType: m.protocolType, SessionMs: int32(m.session.Milliseconds()), RebalanceMs: int32(m.rebalance.Milliseconds())}
		for _, p := range m.protocols {
			sm.Protocols = append(sm.Protocols, metastore.ClassicProtocol{Name: p.Name, Metadata: p.Metadata})
		}
		if stable {
			sm.Assignment = m.assignment
		}
		cr.Members = append(cr.Members, sm)
	}
	return metastore.GroupRecord{Version: g.fence, Classic: cr}
}

// storeClassic stores the classic group's record. A record too large for
// one item is stored without its members (a coordinator that loads it
// makes them rejoin). If another coordinator stored the group since,
// the group is forgotten here (parked requests are told NOT_COORDINATOR)
// and the error wraps errMetastoreFenced. Holds g.mu, across the write.
func (g *group) storeClassic(ctx context.Context, gen int32, protocol, leader string, stable bool) error {
	ctx, cancel := context.WithTimeout(ctx, metaTimeout)
	defer cancel()
	r := g.classicRecord(gen, protocol, leader, stable)
	if metastore.GroupRecordBytes(r) > metastore.MaxItemBytes {
		g.c.log.Warn("classic group membership too large to store: a coordinator move makes its members rejoin", "group", g.name, "members", len(g.members))
		r.Classic.Members, r.Classic.Stable = nil, false
	}
	v, err := g.c.opts.Meta.StoreGroup(ctx, g.name, r)
	if errors.Is(err, metastore.ErrFenced) {
		g.c.log.Info("group stored by another coordinator: forgetting it", "group", g.name)
		g.c.forget(g)
		return fmt.Errorf("%w: %v", errMetastoreFenced, err)
	}
	if err != nil {
		return err
	}
	g.fence = v
	return nil
}

// storeClassicState stores the group as it is now (after a change that
// does not start a generation), logging a failure: the generation and
// offsets are safe either way, only what a new coordinator would resume
// is older. Holds g.mu.
func (g *group) storeClassicState(why string) {
	if err := g.storeClassic(g.c.ctx, g.generation, g.protocol, g.leader, g.state == stateStable); err != nil && !errors.Is(err, errMetastoreFenced) {
		g.c.log.Warn("store classic group", "group", g.name, "after", why, "err", err)
	}
}

// loadClassic restores a classic group from its record: a Stable
// generation as it was, members' sessions starting now; a generation
// whose assignment was never stored as a rebalance its members must
// rejoin. Holds g.mu.
func (g *group) loadClassic(r *metastore.ClassicGroup, now time.Time) {
	g.generation = r.Generation
	if r.ProtocolType != "" {
		g.protocolType = r.ProtocolType
	}
	if len(r.Members) == 0 {
		return
	}
	for _, sm := range r.Members {
		m := &member{id: sm.ID, instanceID: sm.InstanceID, clientID: sm.ClientID, clientHost: sm.ClientHost,
			protocolType: sm.ProtocolType, session: millis(sm.SessionMs), rebalance: millis(sm.RebalanceMs),
			joinOrder: g.joinSeq, assignment: slices.Clone(sm.Assignment), synced: r.Stable}
		g.joinSeq++
		for _, p := range sm.Protocols {
			m.protocols = append(m.protocols, kmsg.JoinGroupRequestProtocol{Name: p.Name, Metadata: p.Metadata})
		}
		m.deadline = now.Add(m.session)
		g.members[m.id] = m
		if m.instanceID != "" {
			g.statics[m.instanceID] = m.id
		}
	}
	g.protocol, g.leader = r.Protocol, r.Leader
	if r.Stable {
		g.state = stateStable
		return
	}
	// The assignment of this generation was never handed out: rebalance.
	g.state = stateStable
	g.prepareRebalance("the coordinator moved before the generation's assignment was stored")
	g.initialUntil = time.Time{}
}

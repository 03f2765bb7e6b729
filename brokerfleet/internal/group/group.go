package group

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/pkg/metastore"
)

// Error codes used here.
var (
	codeNotCoordinator          = kerr.NotCoordinator.Code
	codeCoordinatorNotAvailable = kerr.CoordinatorNotAvailable.Code
	codeUnknownMember           = kerr.UnknownMemberID.Code
	codeIllegalGeneration       = kerr.IllegalGeneration.Code
	codeRebalanceInProgress     = kerr.RebalanceInProgress.Code
	codeFencedInstance          = kerr.FencedInstanceID.Code
	codeInconsistentProtocol    = kerr.InconsistentGroupProtocol.Code
)

// state is a group's place in the rebalance protocol.
type state int8

const (
	stateEmpty               state = iota // no members (maybe committed offsets)
	statePreparingRebalance               // collecting joins
	stateCompletingRebalance              // generation formed, waiting for the leader's assignment
	stateStable                           // assignment handed out
)

var stateNames = [...]string{"Empty", "PreparingRebalance", "CompletingRebalance", "Stable"}

type tp struct {
	topic     string
	partition int32
}

// member is one consumer of a group.
type member struct {
	id, instanceID       string
	clientID, clientHost string
	protocolType         string
	protocols            []kmsg.JoinGroupRequestProtocol
	session, rebalance   time.Duration
	deadline             time.Time // session expiry, unless parked
	joinOrder            int64     // when it (re)joined, for choosing a leader
	join                 chan *kmsg.JoinGroupResponse
	joinVersion          int16
	sync                 chan *kmsg.SyncGroupResponse
	assignment           []byte
	synced               bool // sent SyncGroup in the current generation
}

// metadataFor returns the member's metadata for protocol. Holds the
// group's mu, which guards its members.
func (m *member) metadataFor(protocol string) []byte {
	for _, p := range m.protocols {
		if p.Name == protocol {
			return p.Metadata
		}
	}
	return nil
}

// group is one consumer group's coordinator state, guarded by mu (c, name
// and shard never change). Its methods expect mu held and say so; the
// request handlers take it through Coordinator.acquire.
type group struct {
	c     *Coordinator
	name  string
	shard int32

	mu     sync.Mutex
	loaded bool // generation and offsets read from the metastore
	gone   bool // forgotten by the coordinator: look it up again

	state        state
	generation   int32 // == the metastore generation record's version
	protocolType string
	protocol     string
	leader       string
	members      map[string]*member
	statics      map[string]string    // instance id -> member id
	pending      map[string]time.Time // member ids handed out by MEMBER_ID_REQUIRED -> expiry
	joinSeq      int64
	indexed      bool                // has an index entry (info)
	info         metastore.GroupInfo // the index entry as stored, if indexed
	emptySince   time.Time           // Empty: when it last became empty
	offsets      map[tp]metastore.Offset
	txnOffsets   txnOffsets // pending transactional offsets (txn.go)

	rebalanceDeadline time.Time // PreparingRebalance: complete by then regardless
	initialUntil      time.Time // PreparingRebalance of an empty group: wait for more members
	syncDeadline      time.Time // CompletingRebalance/Stable: drop members that never synced
	lastUsed          time.Time
}

func newGroup(c *Coordinator, name string, shard int32) *group {
	now := c.clock.Now()
	return &group{c: c, name: name, shard: shard, members: map[string]*member{}, statics: map[string]string{},
		pending: map[string]time.Time{}, offsets: map[tp]metastore.Offset{}, lastUsed: now, emptySince: now}
}

// load reads the group's generation, committed offsets and index entry
// from the metastore. Retention times the records lack (stored before
// they were kept, or the group had members on the coordinator before)
// are taken as now and written back, so retention counts from this first
// load and never restarts: an offset expires no earlier than before.
// Holds g.mu, across the metastore calls.
func (g *group) load(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, metaTimeout)
	defer cancel()
	gen, err := g.c.opts.Meta.Generation(ctx, g.name)
	if err != nil {
		return err
	}
	offs, err := g.c.opts.Meta.Offsets(ctx, g.name)
	if err != nil {
		return err
	}
	info, indexed, err := g.c.opts.Meta.GroupInfo(ctx, g.name)
	if err != nil {
		return err
	}
	if err := g.loadTxnOffsets(ctx); err != nil {
		return err
	}
	now := g.c.clock.Now()
	g.generation = int32(gen)
	g.offsets = make(map[tp]metastore.Offset, len(offs))
	var stamp []metastore.Offset
	for _, o := range offs {
		if o.CommittedAt == 0 {
			o.CommittedAt = now.UnixMilli()
			stamp = append(stamp, o)
		}
		g.offsets[tp{o.Topic, o.Partition}] = o
	}
	g.indexed, g.info = indexed, info
	if g.protocolType == "" {
		g.protocolType = info.ProtocolType
	}
	// Not in memory, so without members here: empty since the entry says,
	// or (it had members, elsewhere or before a restart) since now.
	g.emptySince = now
	if info.EmptySince != 0 {
		g.emptySince = time.UnixMilli(info.EmptySince)
	}
	g.loaded = true
	if len(stamp) > 0 {
		if err := g.c.opts.Meta.StampOffsets(ctx, g.name, stamp); err != nil {
			g.c.log.Warn("record commit times of old offsets", "group", g.name, "err", err)
		}
	}
	if indexed || len(offs) > 0 {
		if err := g.storeInfo(ctx, now); err != nil {
			g.c.log.Warn("update group index entry", "group", g.name, "err", err)
		}
	}
	return nil
}

// unload forgets the group: everything parked is told NOT_COORDINATOR.
// Holds g.mu.
func (g *group) unload() {
	g.gone = true
	for _, m := range g.members {
		g.answerJoin(m, &kmsg.JoinGroupResponse{ErrorCode: codeNotCoordinator})
		g.answerSync(m, codeNotCoordinator, nil)
	}
}

// exists reports whether the group is worth listing: it has members, or
// it completed a generation or committed offsets (and was not deleted
// since), which put it in its shard's index. Holds g.mu.
func (g *group) exists() bool {
	return len(g.members) > 0 || g.indexed
}

// stateName is the group's state as Kafka names it. Holds g.mu.
func (g *group) stateName() string {
	if !g.exists() {
		return "Dead"
	}
	return stateNames[g.state]
}

// idleSince returns how long the group has had nothing in memory worth
// keeping (no members, no handed-out member ids). Holds g.mu.
func (g *group) idleSince(now time.Time) time.Duration {
	if len(g.members) > 0 || len(g.pending) > 0 {
		return 0
	}
	return now.Sub(g.lastUsed)
}

// touch records a use of the group and, given a member, restarts its
// session. Holds g.mu.
func (g *group) touch(m *member) {
	now := g.c.clock.Now()
	g.lastUsed = now
	if m != nil {
		m.deadline = now.Add(m.session)
	}
}

// checkMember validates a member id and instance id against the group:
// FENCED_INSTANCE_ID when the instance now belongs to another member id,
// UNKNOWN_MEMBER_ID when the member is not in the group. Holds g.mu.
func (g *group) checkMember(memberID string, instanceID *string) (*member, int16) {
	if instanceID != nil && *instanceID != "" {
		if cur, ok := g.statics[*instanceID]; ok && cur != memberID {
			return nil, codeFencedInstance
		}
	}
	m := g.members[memberID]
	if m == nil {
		return nil, codeUnknownMember
	}
	return m, 0
}

// maxRebalanceTimeout is the longest rebalance timeout of the members.
// Holds g.mu.
func (g *group) maxRebalanceTimeout() time.Duration {
	var d time.Duration
	for _, m := range g.members {
		d = max(d, m.rebalance)
	}
	return d
}

// prepareRebalance starts collecting joins for the next generation.
// Holds g.mu.
func (g *group) prepareRebalance(reason string) {
	now := g.c.clock.Now()
	if g.state == stateCompletingRebalance {
		// The generation being formed is abandoned: members waiting for
		// their assignment must rejoin.
		for _, m := range g.members {
			g.answerSync(m, codeRebalanceInProgress, nil)
			m.assignment = nil
		}
	}
	wasEmpty := g.state == stateEmpty
	g.state = statePreparingRebalance
	g.rebalanceDeadline = now.Add(g.maxRebalanceTimeout())
	g.initialUntil = time.Time{}
	if wasEmpty && g.c.opts.InitialRebalanceDelay > 0 {
		g.initialUntil = now.Add(g.c.opts.InitialRebalanceDelay)
		if g.initialUntil.After(g.rebalanceDeadline) {
			g.initialUntil = g.rebalanceDeadline
		}
	}
	g.c.log.Debug("preparing rebalance", "group", g.name, "reason", reason, "members", len(g.members))
}

// allJoined reports whether every member (and every member id handed out)
// has a join waiting. Holds g.mu.
func (g *group) allJoined() bool {
	if len(g.pending) > 0 {
		return false
	}
	for _, m := range g.members {
		if m.join == nil {
			return false
		}
	}
	return true
}

// maybeCompleteJoin forms the next generation once every member rejoined
// (after the initial delay) or the rebalance timeout ran out. Holds g.mu.
func (g *group) maybeCompleteJoin(now time.Time) {
	if g.state != statePreparingRebalance {
		return
	}
	timedOut := !now.Before(g.rebalanceDeadline)
	if !timedOut && (!g.allJoined() || now.Before(g.initialUntil)) {
		return
	}
	// Dynamic members that did not rejoin in time leave the group. Static
	// ones stay, as in Kafka (KIP-345): a restarting instance keeps its
	// place, and only its session timeout, the sync deadline or a
	// LeaveGroup removes it.
	for id, m := range g.members {
		if m.join == nil && m.instanceID == "" {
			g.removeMember(id, "did not rejoin within the rebalance timeout")
		}
	}
	if len(g.members) == 0 {
		clear(g.pending)
		g.becameEmpty(now)
		return
	}
	// The leader must be a member that rejoined, to be told the members.
	// With none rejoined (only slow static members left), wait another
	// rebalance timeout, as Kafka does.
	leader := g.joinedLeader()
	if leader == "" {
		g.rebalanceDeadline = now.Add(g.maxRebalanceTimeout())
		return
	}
	clear(g.pending)
	ctx, cancel := context.WithTimeout(g.c.ctx, metaTimeout)
	defer cancel()
	// Index the group, or record that it is not empty any more (and its
	// protocol type), before the generation that other coordinators would
	// count from: an entry never says empty while a generation is live.
	var gen int64
	err := g.storeInfo(ctx, now)
	if err == nil {
		gen, err = g.c.opts.Meta.NewGeneration(ctx, g.name)
	}
	if err != nil {
		// The members retry (COORDINATOR_NOT_AVAILABLE is retriable) and
		// the next joins try again.
		g.c.log.Warn("start group generation", "group", g.name, "err", err)
		for _, m := range g.members {
			g.answerJoin(m, &kmsg.JoinGroupResponse{ErrorCode: codeCoordinatorNotAvailable, MemberID: m.id})
		}
		g.rebalanceDeadline = now.Add(g.maxRebalanceTimeout())
		return
	}
	g.generation = int32(gen)
	g.protocol = g.selectProtocol()
	g.leader = leader
	g.state = stateCompletingRebalance
	g.syncDeadline = now.Add(g.maxRebalanceTimeout())
	all := g.memberList()
	for _, m := range g.members {
		m.synced = false
		resp := g.joinResponse(m)
		if m.id == g.leader {
			resp.Members = all
		}
		g.answerJoin(m, resp)
	}
	g.c.log.Info("group rebalanced", "group", g.name, "generation", g.generation, "members", len(g.members), "protocol", g.protocol)
}

// joinedLeader returns the leader of the generation being formed: the
// current leader if it rejoined, else the earliest joiner of the members
// that rejoined, or "" if none did. Holds g.mu.
func (g *group) joinedLeader() string {
	if m, ok := g.members[g.leader]; ok && m.join != nil {
		return g.leader
	}
	leader, first := "", int64(0)
	for id, m := range g.members {
		if m.join != nil && (leader == "" || m.joinOrder < first) {
			leader, first = id, m.joinOrder
		}
	}
	return leader
}

// joinResponse is m's JoinGroup answer in the current generation. Holds
// g.mu.
func (g *group) joinResponse(m *member) *kmsg.JoinGroupResponse {
	resp := kmsg.NewPtrJoinGroupResponse()
	resp.Generation = g.generation
	resp.ProtocolType = strPtr(g.protocolType)
	resp.Protocol = &g.protocol
	resp.LeaderID = g.leader
	resp.MemberID = m.id
	return resp
}

// sortedMembers returns the members in join order. Holds g.mu.
func (g *group) sortedMembers() []*member {
	ms := make([]*member, 0, len(g.members))
	for _, m := range g.members {
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b *member) int { return int(a.joinOrder - b.joinOrder) })
	return ms
}

// selectProtocol picks, among the protocols every member supports, the one
// most members prefer (ties: the earliest joiner's preference order).
// Holds g.mu.
func (g *group) selectProtocol() string {
	ms := g.sortedMembers()
	candidates := g.commonProtocols(nil)
	votes := map[string]int{}
	for _, m := range ms {
		for _, p := range m.protocols {
			if candidates[p.Name] {
				votes[p.Name]++
				break
			}
		}
	}
	best, bestVotes := "", -1
	for _, p := range ms[0].protocols {
		if candidates[p.Name] && votes[p.Name] > bestVotes {
			best, bestVotes = p.Name, votes[p.Name]
		}
	}
	return best
}

// commonProtocols returns the protocols all members (and extra, if given)
// support. Holds g.mu.
func (g *group) commonProtocols(extra []kmsg.JoinGroupRequestProtocol) map[string]bool {
	var set map[string]bool
	add := func(ps []kmsg.JoinGroupRequestProtocol) {
		next := map[string]bool{}
		for _, p := range ps {
			if set == nil || set[p.Name] {
				next[p.Name] = true
			}
		}
		set = next
	}
	for _, m := range g.members {
		add(m.protocols)
	}
	if extra != nil {
		add(extra)
	}
	return set
}

// removeMember drops a member, answering what it has parked
// UNKNOWN_MEMBER_ID; it does not rebalance (memberLeft does). Holds g.mu.
func (g *group) removeMember(id, reason string) {
	m := g.members[id]
	if m == nil {
		return
	}
	delete(g.members, id)
	if m.instanceID != "" && g.statics[m.instanceID] == id {
		delete(g.statics, m.instanceID)
	}
	g.answerJoin(m, &kmsg.JoinGroupResponse{ErrorCode: codeUnknownMember})
	g.answerSync(m, codeUnknownMember, nil)
	g.c.log.Info("group member removed", "group", g.name, "member", id, "reason", reason)
}

// memberLeft rebalances the rest after a member left or expired.
// Holds g.mu.
func (g *group) memberLeft(now time.Time, reason string) {
	switch g.state {
	case stateStable, stateCompletingRebalance:
		if len(g.members) == 0 {
			g.becameEmpty(now)
			return
		}
		g.prepareRebalance(reason)
		g.maybeCompleteJoin(now)
	case statePreparingRebalance:
		g.maybeCompleteJoin(now)
	}
}

// answerJoin answers m's parked JoinGroup, if any. Holds g.mu.
func (g *group) answerJoin(m *member, resp *kmsg.JoinGroupResponse) {
	if m.join == nil {
		return
	}
	// A parked member is alive however long it waited; its session
	// restarts when it is answered (as Kafka's does when a join or sync
	// completes), so it is not expired before it can send SyncGroup.
	m.deadline = g.c.clock.Now().Add(m.session)
	m.join <- resp
	m.join = nil
}

// answerSync answers m's parked SyncGroup, if any. Holds g.mu.
func (g *group) answerSync(m *member, code int16, assignment []byte) {
	if m.sync == nil {
		return
	}
	m.deadline = g.c.clock.Now().Add(m.session) // see answerJoin
	resp := kmsg.NewPtrSyncGroupResponse()
	resp.ErrorCode = code
	if code == 0 {
		resp.ProtocolType = strPtr(g.protocolType)
		resp.Protocol = &g.protocol
		resp.MemberAssignment = assignment
	}
	m.sync <- resp
	m.sync = nil
}

// tick expires members and pending member ids whose session ran out, and
// completes rebalances whose time is up. Holds g.mu.
func (g *group) tick(now time.Time) {
	for id, exp := range g.pending {
		if now.After(exp) {
			delete(g.pending, id)
		}
	}
	expired := false
	for id, m := range g.members {
		if m.join != nil || m.sync != nil {
			continue // parked members are alive
		}
		if now.After(m.deadline) {
			g.removeMember(id, "session timeout expired")
			expired = true
		}
	}
	if expired {
		g.memberLeft(now, "member session expired")
	}
	if (g.state == stateCompletingRebalance || g.state == stateStable) && !g.syncDeadline.IsZero() && now.After(g.syncDeadline) {
		g.syncDeadline = time.Time{}
		lost := false
		for id, m := range g.members {
			if !m.synced {
				g.removeMember(id, "did not sync within the rebalance timeout")
				lost = true
			}
		}
		if lost {
			g.memberLeft(now, "members did not sync")
		}
	}
	g.maybeCompleteJoin(now)
}

// errMetastoreFenced is the error commits get when another coordinator
// started a newer generation.
var errMetastoreFenced = errors.New("generation superseded in the metastore")

// commit stores offsets under the group's current generation.
// Holds g.mu, across the metastore calls.
func (g *group) commit(ctx context.Context, offs []metastore.Offset) error {
	ctx, cancel := context.WithTimeout(ctx, metaTimeout)
	defer cancel()
	if !g.indexed {
		if err := g.storeInfo(ctx, g.c.clock.Now()); err != nil {
			return err
		}
	}
	err := g.c.opts.Meta.CommitOffsets(ctx, g.name, int64(g.generation), offs)
	if errors.Is(err, metastore.ErrFenced) {
		return fmt.Errorf("%w: %v", errMetastoreFenced, err)
	}
	if err != nil {
		return err
	}
	for _, o := range offs {
		o.Generation = int64(g.generation)
		g.offsets[tp{o.Topic, o.Partition}] = o
	}
	return nil
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

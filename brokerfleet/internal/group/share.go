package group

// Share groups (KIP-932): members heartbeat (ShareGroupHeartbeat) with
// the topics they subscribe to, and the coordinator gives each its
// target assignment at once (the simple share assignor: members share
// partitions, nothing is revoked first). The membership is stored in the
// group's record before any member learns of a change, like a consumer
// group's; the records' state lives with the partition leaders
// (package share).

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/group/assign"
	"github.com/stratamq/strata/brokerfleet/internal/share"
	"github.com/stratamq/strata/pkg/metastore"
)

// shareMaxSize is Kafka's group.share.max.size default.
const shareMaxSize = 200

// smember is a share group member.
type smember struct {
	id, rackID           string
	clientID, clientHost string
	topics               []string // sorted
	epoch                int32
	assigned             assign.Assignment
	deadline             time.Time // not stored
}

// shareGroup is a share group's state. Guarded by the group's mu.
type shareGroup struct {
	epoch       int32
	members     map[string]*smember
	hash        uint64 // subscribed topics' metadata when last assigned
	hashVersion int64
	dirty       bool
}

func newShareGroup() *shareGroup { return &shareGroup{members: map[string]*smember{}} }

func (sg *shareGroup) sortedMembers() []*smember {
	ms := make([]*smember, 0, len(sg.members))
	for _, m := range sg.members {
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b *smember) int { return strings.Compare(a.id, b.id) })
	return ms
}

func (sg *shareGroup) stateName() string {
	if len(sg.members) == 0 {
		return "Empty"
	}
	return "Stable"
}

func (sg *shareGroup) subscribed() []string {
	var names []string
	for _, m := range sg.members {
		names = append(names, m.topics...)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// assign recomputes every member's assignment and moves the group epoch.
func (sg *shareGroup) assign(view TopicView) {
	spec := assign.Spec{Topics: map[metastore.TopicID]assign.Topic{}}
	for _, m := range sg.sortedMembers() {
		am := assign.Member{ID: m.id, RackID: m.rackID}
		for _, n := range m.topics {
			if t, ok := view.Topic(n); ok {
				spec.Topics[t.ID] = t
				am.Topics = append(am.Topics, t.ID)
			}
		}
		spec.Members = append(spec.Members, am)
	}
	out := assign.Simple{}.Assign(spec)
	sg.epoch++
	for id, m := range sg.members {
		m.assigned = out[id]
	}
	sg.hash = metadataHash(sg.subscribed(), view)
	sg.hashVersion = view.Version()
	sg.dirty = true
}

// ShareConfig returns a group's share config (Options.ShareConfig, or
// the defaults).
func (c *Coordinator) shareConfig(group string) share.Config {
	if c.opts.ShareConfig != nil {
		return c.opts.ShareConfig(group)
	}
	return share.DefaultConfig()
}

// validateShareHeartbeat returns Kafka's INVALID_REQUEST message, or "".
func validateShareHeartbeat(r *kmsg.ShareGroupHeartbeatRequest) string {
	blank := func(s string) bool { return strings.TrimSpace(s) == "" }
	switch {
	case blank(r.GroupID):
		return "GroupId can't be empty."
	case len(r.GroupID) > maxGroupIDBytes:
		return fmt.Sprintf("GroupId is longer than %d bytes.", maxGroupIDBytes)
	case blank(r.MemberID):
		return "MemberId can't be empty."
	case len(r.MemberID) > 36:
		return "MemberId can't be longer than 36 characters."
	case r.RackID != nil && blank(*r.RackID):
		return "RackId can't be empty."
	case r.MemberEpoch < -1:
		return "MemberEpoch is invalid."
	case r.MemberEpoch == 0 && len(r.SubscribedTopicNames) == 0:
		return "SubscribedTopicNames must be set in first request."
	}
	return ""
}

// ShareHeartbeat handles ShareGroupHeartbeat.
func (c *Coordinator) ShareHeartbeat(ctx context.Context, req *kmsg.ShareGroupHeartbeatRequest, cl Client) *kmsg.ShareGroupHeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.ShareGroupHeartbeatResponse)
	fail := func(code int16, msg string) *kmsg.ShareGroupHeartbeatResponse {
		resp.ErrorCode = code
		if msg != "" {
			resp.ErrorMessage = &msg
		}
		return resp
	}
	if msg := validateShareHeartbeat(req); msg != "" {
		return fail(kerr.InvalidRequest.Code, msg)
	}
	g, code := c.acquire(ctx, req.GroupID)
	if code != 0 {
		return fail(code, "")
	}
	defer g.mu.Unlock()
	g.touch(nil)
	if g.sg == nil {
		if g.cg != nil || g.memberCount() > 0 || g.indexed || len(g.offsets) > 0 {
			return fail(kerr.GroupIDNotFound.Code, fmt.Sprintf("Group %s is not a share group.", g.name))
		}
		if req.MemberEpoch != 0 {
			return fail(kerr.GroupIDNotFound.Code, fmt.Sprintf("Share group %s not found.", g.name))
		}
		g.becomeShare()
		defer func() {
			if resp.ErrorCode != 0 && g.sg != nil && g.sg.dirty {
				g.loaded = false
			}
		}()
	}
	sg := g.sg
	cfg := c.shareConfig(g.name)
	m := sg.members[req.MemberID]
	if req.MemberEpoch == -1 {
		if m == nil {
			return fail(codeUnknownMember, fmt.Sprintf("Member %s is not a member of group %s.", req.MemberID, g.name))
		}
		g.removeShareMember(m, "left the group")
		if err := g.saveShare(ctx); err != nil {
			code, msg := saveCode(err)
			return fail(code, msg)
		}
		resp.MemberID, resp.MemberEpoch = &req.MemberID, -1
		return resp
	}
	view := c.topics()
	changed := false
	switch {
	case m == nil && req.MemberEpoch != 0:
		return fail(codeUnknownMember, fmt.Sprintf("Member %s is not a member of group %s.", req.MemberID, g.name))
	case m == nil:
		if len(sg.members) >= shareMaxSize {
			return fail(kerr.GroupMaxSizeReached.Code, fmt.Sprintf("The share group has reached its maximum capacity of %d members.", shareMaxSize))
		}
		m = &smember{id: req.MemberID, assigned: assign.Assignment{}}
		sg.members[m.id] = m
		changed = true
	case req.MemberEpoch != 0 && req.MemberEpoch != m.epoch:
		return fail(kerr.FencedMemberEpoch.Code, fmt.Sprintf("The share group member has a member epoch (%d) which is not the current one (%d).", req.MemberEpoch, m.epoch))
	}
	if req.SubscribedTopicNames != nil {
		names := slices.Clone(req.SubscribedTopicNames)
		slices.Sort(names)
		names = slices.Compact(names)
		if !slices.Equal(names, m.topics) {
			m.topics = names
			changed = true
		}
	}
	if req.RackID != nil && *req.RackID != m.rackID {
		m.rackID = *req.RackID
		sg.dirty = true
	}
	if m.clientID != cl.ID || m.clientHost != cl.Host {
		m.clientID, m.clientHost = cl.ID, cl.Host
		sg.dirty = true
	}
	if !changed && sg.hashVersion != view.Version() {
		if metadataHash(sg.subscribed(), view) != sg.hash {
			changed = true
		}
		sg.hashVersion = view.Version()
	}
	if changed {
		sg.assign(view)
	}
	told := m.epoch != sg.epoch || req.MemberEpoch == 0
	if m.epoch != sg.epoch {
		m.epoch = sg.epoch // the target is the assignment: nothing to revoke first
		sg.dirty = true
	}
	m.deadline = c.clock.Now().Add(cfg.SessionTimeout)
	if err := g.saveShare(ctx); err != nil {
		code, msg := saveCode(err)
		return fail(code, msg)
	}
	resp.MemberID = &m.id
	resp.MemberEpoch = m.epoch
	resp.HeartbeatIntervalMillis = int32(cfg.HeartbeatInterval.Milliseconds())
	if told {
		a := kmsg.NewShareGroupHeartbeatResponseAssignment()
		a.TopicPartitions = []kmsg.ShareGroupHeartbeatResponseAssignmentTopicPartition{}
		for _, tp := range targetToStored(m.assigned) {
			t := kmsg.NewShareGroupHeartbeatResponseAssignmentTopicPartition()
			t.TopicID, t.Partitions = tp.Topic, tp.Partitions
			a.TopicPartitions = append(a.TopicPartitions, t)
		}
		resp.Assignment = &a
	}
	return resp
}

// becomeShare makes an empty group without offsets a share group.
// Holds g.mu.
func (g *group) becomeShare() {
	g.sg = newShareGroup()
	g.sg.dirty = true
	g.protocolType = "share"
	g.state = stateEmpty
}

// removeShareMember drops a member; the others are assigned again.
// Holds g.mu.
func (g *group) removeShareMember(m *smember, reason string) {
	delete(g.sg.members, m.id)
	g.sg.assign(g.c.topics())
	if len(g.sg.members) == 0 {
		g.emptySince = g.c.clock.Now()
	}
	g.c.log.Info("share group member removed", "group", g.name, "member", m.id, "reason", reason, "epoch", g.sg.epoch)
}

// tickShare fences members whose session ran out. Holds g.mu.
func (g *group) tickShare(now time.Time) {
	for _, m := range g.sg.sortedMembers() {
		if now.After(m.deadline) {
			g.removeShareMember(m, "session timeout expired")
		}
	}
	if err := g.saveShare(g.c.ctx); err != nil && g.c.ctx.Err() == nil {
		g.c.log.Warn("store share group after timeouts", "group", g.name, "err", err)
	}
}

// record is the share group's stored form.
func (sg *shareGroup) record(version int64) metastore.GroupRecord {
	r := metastore.GroupRecord{Version: version, Type: metastore.GroupTypeShare, Share: &metastore.ShareGroup{Epoch: sg.epoch}}
	for _, m := range sg.sortedMembers() {
		r.Share.Members = append(r.Share.Members, metastore.ShareMember{ID: m.id, RackID: m.rackID, ClientID: m.clientID,
			ClientHost: m.clientHost, Topics: m.topics, Epoch: m.epoch, Assigned: targetToStored(m.assigned)})
	}
	return r
}

// loadShare restores a share group from its record; sessions restart
// now. Holds g.mu.
func (g *group) loadShare(r *metastore.ShareGroup, now time.Time) {
	sg := newShareGroup()
	sg.epoch = r.Epoch
	for _, sm := range r.Members {
		sg.members[sm.ID] = &smember{id: sm.ID, rackID: sm.RackID, clientID: sm.ClientID, clientHost: sm.ClientHost,
			topics: sm.Topics, epoch: sm.Epoch, assigned: targetFromStored(sm.Assigned),
			deadline: now.Add(g.c.shareConfig(g.name).SessionTimeout)}
	}
	g.sg = sg
	g.protocolType = "share"
}

// saveShare stores the share group if it changed; on failure the group
// is dropped from memory like a consumer group. Holds g.mu, across the
// write.
func (g *group) saveShare(ctx context.Context) error {
	if !g.sg.dirty {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, metaTimeout)
	defer cancel()
	if !g.indexed || g.info.Type != metastore.GroupTypeShare || (len(g.sg.members) > 0) != (g.info.EmptySince == 0) {
		if err := g.storeInfo(ctx, g.c.clock.Now()); err != nil {
			g.loaded = false
			return err
		}
	}
	r := g.sg.record(g.fence)
	if metastore.GroupRecordBytes(r) > metastore.MaxItemBytes {
		g.loaded = false
		return errGroupTooLarge
	}
	v, err := g.c.opts.Meta.StoreGroup(ctx, g.name, r)
	switch {
	case errors.Is(err, metastore.ErrFenced):
		g.c.forget(g)
		return fmt.Errorf("%w: %v", errMetastoreFenced, err)
	case err != nil:
		g.loaded = false
		return err
	}
	g.fence = v
	g.sg.dirty = false
	return nil
}

// ShareGroupEmpty checks that name is an empty share group (or no group
// at all), as AlterShareGroupOffsets and DeleteShareGroupOffsets need:
// GROUP_ID_NOT_FOUND for a group of another type, NON_EMPTY_GROUP for
// one with members.
func (c *Coordinator) ShareGroupEmpty(ctx context.Context, name string) int16 {
	g, code := c.acquire(ctx, name)
	if code != 0 {
		return code
	}
	defer g.mu.Unlock()
	switch {
	case g.sg == nil && (g.cg != nil || g.memberCount() > 0 || g.indexed):
		return kerr.GroupIDNotFound.Code
	case g.sg != nil && len(g.sg.members) > 0:
		return kerr.NonEmptyGroup.Code
	}
	return 0
}

// EnsureShareGroup makes name an (empty) share group if it is no group
// yet, as AlterShareGroupOffsets does.
func (c *Coordinator) EnsureShareGroup(ctx context.Context, name string) int16 {
	g, code := c.acquire(ctx, name)
	if code != 0 {
		return code
	}
	defer g.mu.Unlock()
	if g.sg != nil {
		return 0
	}
	if g.cg != nil || g.memberCount() > 0 || g.indexed {
		return kerr.GroupIDNotFound.Code
	}
	g.becomeShare()
	if err := g.saveShare(ctx); err != nil {
		code, _ := saveCode(err)
		return code
	}
	return 0
}

// ShareSubscribed returns the topics a share group's members subscribe
// to, and GROUP_ID_NOT_FOUND when it is not a share group.
func (c *Coordinator) ShareSubscribed(ctx context.Context, name string) ([]string, int16) {
	g, code := c.acquire(ctx, name)
	if code != 0 {
		return nil, code
	}
	defer g.mu.Unlock()
	if g.sg == nil {
		return nil, kerr.GroupIDNotFound.Code
	}
	return g.sg.subscribed(), 0
}

package group

// OffsetCommit, OffsetFetch and OffsetDelete: committed offsets, fenced by
// the group's generation in the metastore.

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/pkg/metastore"
)

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
	var partitionCode func(topic string, partition int32) int16
	switch {
	case g.cg != nil:
		var code int16
		if code, partitionCode = g.consumerCommitCheck(req.Version, generation, req.MemberID); code != 0 {
			return setAll(code)
		}
	case !g.exists() && generation >= 0 && req.Version >= 9:
		return setAll(kerr.GroupIDNotFound.Code)
	case generation < 0 && len(g.members) == 0:
		// A simple consumer or an admin reset: no member to check.
	default:
		m, code := g.checkMember(req.MemberID, req.InstanceID)
		if code != 0 {
			return setAll(code)
		}
		if !g.generationOK(m, generation) {
			return setAll(codeIllegalGeneration)
		}
		if g.state == stateCompletingRebalance {
			return setAll(codeRebalanceInProgress)
		}
		g.touch(m)
	}
	now := c.clock.Now()
	var offs []metastore.Offset
	for i, rt := range req.Topics {
		var id metastore.TopicID
		known := true
		if c.opts.TopicID != nil {
			id, known = c.opts.TopicID(rt.Topic)
		}
		for j, rp := range rt.Partitions {
			sp := &resp.Topics[i].Partitions[j]
			md := deref(rp.Metadata)
			switch {
			case !known || !c.opts.PartitionExists(rt.Topic, rp.Partition):
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				continue
			case len(md) > c.opts.MaxMetadataBytes:
				sp.ErrorCode = kerr.OffsetMetadataTooLarge.Code
				continue
			}
			if partitionCode != nil {
				if sp.ErrorCode = partitionCode(rt.Topic, rp.Partition); sp.ErrorCode != 0 {
					continue
				}
			}
			o := metastore.Offset{Topic: rt.Topic, Partition: rp.Partition, Offset: rp.Offset, LeaderEpoch: rp.LeaderEpoch, Metadata: md,
				TopicID: id, CommittedAt: now.UnixMilli()}
			if req.Version < 6 {
				o.LeaderEpoch = -1
			}
			if cur, ok := g.offsets[tp{o.Topic, o.Partition}]; ok && unchanged(cur, o, now, c.opts.OffsetsRetentionCheckInterval) {
				continue // nothing to write
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
	if c.opts.Committed != nil {
		c.opts.Committed(g.name, offs)
	}
	return resp
}

// consumerCommitCheck validates a commit to a consumer group: the code
// for the whole request, or a check of each partition when the member
// commits at an older epoch (KIP-1251: accepted for partitions it has
// held since that epoch). A commit of generation -1 without members (an
// admin tool) needs no member. Holds g.mu.
func (g *group) consumerCommitCheck(version int16, epoch int32, memberID string) (int16, func(string, int32) int16) {
	cg := g.cg
	if epoch < 0 && len(cg.members) == 0 {
		return 0, nil
	}
	m := cg.members[memberID]
	if m == nil {
		return codeUnknownMember, nil
	}
	stale := kerr.StaleMemberEpoch.Code
	if m.usesClassic() {
		stale = codeIllegalGeneration
	} else if version < 9 {
		return kerr.UnsupportedVersion.Code, nil
	}
	switch {
	case epoch == m.epoch:
		return 0, nil
	case epoch > m.epoch || epoch < 0:
		return stale, nil
	}
	view := g.c.topics()
	return 0, func(topic string, partition int32) int16 {
		t, ok := view.Topic(topic)
		if !ok {
			return stale
		}
		k := partKey{t.ID, partition}
		e, held := m.assigned[k]
		if !held {
			e, held = m.pending[k]
		}
		if !held || epoch < e {
			return stale
		}
		return 0
	}
}

// unchanged reports whether committing o over cur need not write: the
// same offset of the same topic, and cur's commit time is recent enough.
// A re-commit keeps an offset from expiring (Kafka stamps every commit),
// so the stored time is refreshed once it is a check interval old: expiry
// is then at most that much early, the granularity of the checks anyway.
func unchanged(cur, o metastore.Offset, now time.Time, refresh time.Duration) bool {
	return cur.Offset == o.Offset && cur.LeaderEpoch == o.LeaderEpoch && cur.Metadata == o.Metadata &&
		cur.TopicID == o.TopicID && now.Sub(commitTime(cur, now)) < refresh
}

// forget drops a group from memory. Holds g.mu, and takes c.mu (the lock
// order in doc.go allows it).
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
		rg := c.fetchGroup(ctx, req.Group, nil, -1, topics, req.Topics == nil, req.RequireStable)
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
		memberID, epoch := rg.MemberID, rg.MemberEpoch
		if req.Version < 9 {
			memberID, epoch = nil, -1
		}
		resp.Groups = append(resp.Groups, c.fetchGroup(ctx, rg.Group, memberID, epoch, rg.Topics, rg.Topics == nil, req.RequireStable))
	}
	return resp
}

// With requireStable (KIP-447), a partition with a transactional offset
// not yet committed or aborted is UNSTABLE_OFFSET_COMMIT (retriable), so
// a consumer taking over from a transactional one starts after its last
// transaction ends.
func (c *Coordinator) fetchGroup(ctx context.Context, name string, memberID *string, epoch int32, topics []kmsg.OffsetFetchRequestGroupTopic, all, requireStable bool) kmsg.OffsetFetchResponseGroup {
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
	if g.cg != nil && (memberID != nil || epoch >= 0) {
		// A member of a consumer group fetches at its current epoch.
		m := g.cg.members[deref(memberID)]
		switch {
		case m == nil:
			out.ErrorCode = codeUnknownMember
		case epoch != m.epoch && m.usesClassic():
			out.ErrorCode = codeIllegalGeneration
		case epoch != m.epoch:
			out.ErrorCode = kerr.StaleMemberEpoch.Code
		}
		if out.ErrorCode != 0 {
			fill(out.ErrorCode)
			return out
		}
	}
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
			if requireStable && g.txnOffsets.pendingAt(tp{t.Topic, p}) {
				rp.ErrorCode = kerr.UnstableOffsetCommit.Code
			} else if o, ok := g.offsets[tp{t.Topic, p}]; ok {
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
	if g.cg != nil {
		subscribed = g.consumerSubscribed()
	}
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

package group

// Transactional offset commits (KIP-98, KIP-447): TxnOffsetCommit stores
// a transaction's offsets as pending (metastore.PendingOffset, under the
// group's generation, like OffsetCommit); the transaction's marker for
// the group's shard (CompleteTxn, which the transaction coordinator
// sends through WriteTxnMarkers) makes them the committed offsets, or
// drops them. Until then OffsetFetch with RequireStable answers those
// partitions UNSTABLE_OFFSET_COMMIT.

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/pkg/metastore"
)

// txnOffsets are a group's pending transactional offsets by partition and
// producer. Guarded by the group's mu.
type txnOffsets map[tp]map[int64]metastore.PendingOffset

// pendingAt reports whether a transaction has an offset pending for t.
func (x txnOffsets) pendingAt(t tp) bool { return len(x[t]) > 0 }

func (x txnOffsets) put(o metastore.PendingOffset) {
	k := tp{o.Topic, o.Partition}
	if x[k] == nil {
		x[k] = map[int64]metastore.PendingOffset{}
	}
	x[k][o.ProducerID] = o
}

func (x txnOffsets) drop(pid int64) {
	for k, byPID := range x {
		delete(byPID, pid)
		if len(byPID) == 0 {
			delete(x, k)
		}
	}
}

// loadTxnOffsets reads the group's pending transactional offsets. Holds
// g.mu.
func (g *group) loadTxnOffsets(ctx context.Context) error {
	pending, err := g.c.opts.Meta.PendingOffsets(ctx, g.name)
	if err != nil {
		return err
	}
	g.txnOffsets = txnOffsets{}
	for _, o := range pending {
		g.txnOffsets.put(o)
	}
	return nil
}

// ErrNotCoordinator is returned by CompleteTxn when this coordinator does
// not serve the shard (any more): the marker goes to the new one.
var ErrNotCoordinator = errors.New("group: not the coordinator of the shard")

// TxnCommit handles TxnOffsetCommit. Members commit under their
// generation (v3+ carry it, KIP-447); a commit without member or
// generation is a producer's outside the group's protocol and needs no
// membership. verify asks the transaction coordinator whether the group
// is part of the producer's ongoing transaction (KIP-890); it runs with
// the group's lock held, so no marker for the group gets between the
// answer and the write.
func (c *Coordinator) TxnCommit(ctx context.Context, req *kmsg.TxnOffsetCommitRequest, verify func(ctx context.Context) int16) *kmsg.TxnOffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewTxnOffsetCommitResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			sp.Partition = rp.Partition
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	setAll := func(code int16) *kmsg.TxnOffsetCommitResponse {
		for i := range resp.Topics {
			for j := range resp.Topics[i].Partitions {
				if resp.Topics[i].Partitions[j].ErrorCode == 0 {
					resp.Topics[i].Partitions[j].ErrorCode = code
				}
			}
		}
		return resp
	}
	g, code := c.enter(ctx, req.Group)
	if code != 0 {
		return setAll(code)
	}
	defer g.mu.Unlock()
	g.touch(nil)
	var partitionCode func(topic string, partition int32) int16
	identified := req.Version >= 3 && (req.Generation >= 0 || req.MemberID != "" || deref(req.InstanceID) != "")
	switch {
	case g.cg != nil && identified:
		// A member of a consumer-protocol group commits at its member
		// epoch, as with OffsetCommit (no version gate: any
		// TxnOffsetCommit version carries the epoch as generation).
		code, pc := g.consumerCommitCheck(9, req.Generation, req.MemberID)
		if code != 0 {
			return setAll(code)
		}
		partitionCode = pc
	case identified:
		m, code := g.checkMember(req.MemberID, req.InstanceID)
		if code != 0 {
			return setAll(code)
		}
		if !g.generationOK(m, req.Generation) {
			return setAll(codeIllegalGeneration)
		}
		g.touch(m)
	}
	switch code := verify(ctx); code {
	case 0:
	case kerr.NotCoordinator.Code, kerr.CoordinatorLoadInProgress.Code:
		// The transaction coordinator's answer, not this one's: the
		// client must not look for another group coordinator.
		return setAll(codeCoordinatorNotAvailable)
	default:
		return setAll(code)
	}
	now := c.clock.Now()
	var offs []metastore.PendingOffset
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
			leaderEpoch := rp.LeaderEpoch
			if req.Version < 2 {
				leaderEpoch = -1
			}
			offs = append(offs, metastore.PendingOffset{ProducerID: req.ProducerID, ProducerEpoch: req.ProducerEpoch,
				Topic: rt.Topic, Partition: rp.Partition, Offset: rp.Offset, LeaderEpoch: leaderEpoch, Metadata: md,
				TopicID: id, CommittedAt: now.UnixMilli()})
		}
	}
	if len(offs) == 0 {
		return resp
	}
	wctx, cancel := context.WithTimeout(ctx, metaTimeout)
	defer cancel()
	if !g.indexed {
		if err := g.storeInfo(wctx, now); err != nil {
			c.log.Warn("index group", "group", g.name, "err", err)
			return setAll(codeCoordinatorNotAvailable)
		}
	}
	if err := c.opts.Meta.PutPendingOffsets(wctx, g.name, g.fence, req.ProducerID, offs); err != nil {
		if errors.Is(err, metastore.ErrFenced) {
			c.forget(g)
			return setAll(codeNotCoordinator)
		}
		c.log.Warn("store transactional offsets", "group", g.name, "err", err)
		return setAll(codeCoordinatorNotAvailable)
	}
	for _, o := range offs {
		g.txnOffsets.put(o)
	}
	return resp
}

// CompleteTxn applies a transaction's marker to the groups of a shard this
// coordinator serves: with commit, producer pid's pending offsets become
// the groups' committed offsets; otherwise they are dropped. A repeated
// marker finds nothing left to do.
func (c *Coordinator) CompleteTxn(ctx context.Context, shard int32, pid int64, commit bool) error {
	c.mu.Lock()
	_, owned := c.shards[shard]
	c.mu.Unlock()
	if !owned || !c.opts.Valid() {
		return fmt.Errorf("shard %d: %w", shard, ErrNotCoordinator)
	}
	groups, err := c.opts.Meta.PendingGroups(ctx, shard, pid)
	if err != nil {
		return err
	}
	for _, name := range groups {
		if err := c.completeGroup(ctx, name, pid, commit); err != nil {
			return fmt.Errorf("group %q: %w", name, err)
		}
	}
	return nil
}

func (c *Coordinator) completeGroup(ctx context.Context, name string, pid int64, commit bool) error {
	for attempt := 0; ; attempt++ {
		g, code := c.acquire(ctx, name)
		if code == codeNotCoordinator {
			return ErrNotCoordinator
		} else if code != 0 {
			return fmt.Errorf("load group: %s", kerr.ErrorForCode(code))
		}
		err := g.completeTxn(ctx, pid, commit)
		if errors.Is(err, metastore.ErrFenced) && attempt < 2 {
			c.forget(g) // another writer got there: read it again
			g.mu.Unlock()
			continue
		}
		g.mu.Unlock()
		return err
	}
}

// completeTxn applies pid's marker to the group. Holds g.mu, across the
// metastore calls.
func (g *group) completeTxn(ctx context.Context, pid int64, commit bool) error {
	ctx, cancel := context.WithTimeout(ctx, metaTimeout)
	defer cancel()
	all, err := g.c.opts.Meta.PendingOffsets(ctx, g.name)
	if err != nil {
		return err
	}
	var mine []metastore.PendingOffset
	for _, o := range all {
		if o.ProducerID == pid {
			mine = append(mine, o)
		}
	}
	if err := g.c.opts.Meta.CompletePendingOffsets(ctx, g.name, pid, commit, g.fence, mine); err != nil {
		return err
	}
	if commit {
		offs := make([]metastore.Offset, 0, len(mine))
		for _, o := range mine {
			off := metastore.Offset{Topic: o.Topic, Partition: o.Partition, Offset: o.Offset,
				LeaderEpoch: o.LeaderEpoch, Metadata: o.Metadata, Generation: g.fence, TopicID: o.TopicID, CommittedAt: o.CommittedAt}
			g.offsets[tp{o.Topic, o.Partition}] = off
			offs = append(offs, off)
		}
		if g.c.opts.Committed != nil && len(offs) > 0 {
			g.c.opts.Committed(g.name, offs)
		}
	}
	g.txnOffsets.drop(pid)
	return nil
}

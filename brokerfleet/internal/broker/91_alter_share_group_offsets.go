package broker

// AlterShareGroupOffsets, version 0 (KIP-932): sets the start offset of
// an empty share group's partitions (creating the group if it is no
// group yet), asked of the group's coordinator. Each partition's state
// is rewritten under its version with nothing in flight; a leader that
// holds the old state fails its next write, or notices at the next
// session that adds the partition, and reads it again. A group with
// members answers NON_EMPTY_GROUP, a group of another type
// GROUP_ID_NOT_FOUND.

import (
	"context"
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/pkg/metastore"
)

func init() {
	register(91, 0, 0, answer(handleAlterShareGroupOffsets), authorizeAlterShareGroupOffsets)
}

func handleAlterShareGroupOffsets(b *Broker, cc *clientConn, req *kmsg.AlterShareGroupOffsetsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
	if code := b.coord.EnsureShareGroup(cc.ctx, req.GroupID); code != 0 {
		resp.ErrorCode = code
		return resp
	}
	if code := b.coord.ShareGroupEmpty(cc.ctx, req.GroupID); code != 0 {
		resp.ErrorCode = code
		return resp
	}
	s := b.cat.Snapshot()
	for _, rt := range req.Topics {
		t := kmsg.NewAlterShareGroupOffsetsResponseTopic()
		t.Topic = rt.Topic
		ts := s.Topic(rt.Topic)
		if ts != nil {
			t.TopicID = ts.Meta.ID
		}
		for _, rp := range rt.Partitions {
			p := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
			p.Partition = rp.Partition
			switch {
			case ts == nil || rp.Partition < 0 || int(rp.Partition) >= len(ts.States):
				p.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case rp.StartOffset < 0:
				p.ErrorCode = kerr.InvalidRequest.Code
			default:
				key := metastore.ShareKey{Group: req.GroupID, Topic: ts.Meta.ID, Partition: rp.Partition}
				if err := (shareAPI{b}).setShareStart(cc.ctx, key, rp.StartOffset); err != nil {
					b.log.Warn("alter share group offset", "group", req.GroupID, "topic", rt.Topic, "partition", rp.Partition, "err", err)
					p.ErrorCode = kerr.CoordinatorNotAvailable.Code
				}
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

// setShareStart rewrites a share partition's state to start at off with
// nothing in flight.
func (b shareAPI) setShareStart(ctx context.Context, key metastore.ShareKey, off int64) error {
	ctx, cancel := context.WithTimeout(ctx, metaTimeout)
	defer cancel()
	for range 10 {
		st, err := b.meta.ShareState(ctx, key)
		if err != nil {
			return err
		}
		_, err = b.meta.StoreShareState(ctx, key, metastore.ShareState{Version: st.Version, LeaderEpoch: st.LeaderEpoch,
			StartOffset: off, EndOffset: off, Initialized: true})
		if !errors.Is(err, metastore.ErrFenced) {
			return err
		}
	}
	return errors.New("share state: too many concurrent writers")
}

// authorizeAlterShareGroupOffsets is the ACL rule of
// AlterShareGroupOffsets: READ on the group (the whole request) and on
// each topic (TOPIC_AUTHORIZATION_FAILED for its partitions).
func authorizeAlterShareGroupOffsets(a access, r *kmsg.AlterShareGroupOffsetsRequest) (kmsg.Response, func(kmsg.Response)) {
	if !a.can(opRead, resGroup, r.GroupID) {
		resp := r.ResponseKind().(*kmsg.AlterShareGroupOffsetsResponse)
		resp.ErrorCode = errGroupAuthz
		return resp, nil
	}
	denied := filter(&r.Topics, func(t *kmsg.AlterShareGroupOffsetsRequestTopic) bool { return a.can(opRead, resTopic, t.Topic) })
	if len(denied) == 0 {
		return nil, nil
	}
	return nil, func(resp kmsg.Response) {
		rr := resp.(*kmsg.AlterShareGroupOffsetsResponse)
		for _, t := range denied {
			rt := kmsg.NewAlterShareGroupOffsetsResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewAlterShareGroupOffsetsResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, errTopicAuthz
				rt.Partitions = append(rt.Partitions, rp)
			}
			rr.Topics = append(rr.Topics, rt)
		}
	}
}

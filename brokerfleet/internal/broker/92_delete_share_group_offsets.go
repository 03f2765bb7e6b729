package broker

// DeleteShareGroupOffsets, version 0 (KIP-932): forgets an empty share
// group's state of whole topics (each partition's state rewritten as
// uninitialized, so the next leader starts it from
// share.auto.offset.reset), asked of the group's coordinator.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/pkg/metastore"
)

func init() {
	register(92, 0, 0, answer(handleDeleteShareGroupOffsets), authorizeDeleteShareGroupOffsets)
}

func handleDeleteShareGroupOffsets(b *Broker, cc *clientConn, req *kmsg.DeleteShareGroupOffsetsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
	if _, code := b.coord.ShareSubscribed(cc.ctx, req.GroupID); code != 0 {
		resp.ErrorCode = code
		return resp
	}
	if code := b.coord.ShareGroupEmpty(cc.ctx, req.GroupID); code != 0 {
		resp.ErrorCode = code
		return resp
	}
	s := b.cat.Snapshot()
	ctx, cancel := context.WithTimeout(cc.ctx, metaTimeout)
	defer cancel()
	for _, rt := range req.Topics {
		t := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
		t.Topic = rt.Topic
		ts := s.Topic(rt.Topic)
		if ts == nil {
			t.ErrorCode = kerr.UnknownTopicOrPartition.Code
			resp.Topics = append(resp.Topics, t)
			continue
		}
		t.TopicID = ts.Meta.ID
		id := ts.Meta.ID
		if _, err := b.meta.ResetShareStates(ctx, req.GroupID, func(k metastore.ShareKey) bool { return k.Topic == id }); err != nil {
			b.log.Warn("delete share group offsets", "group", req.GroupID, "topic", rt.Topic, "err", err)
			t.ErrorCode = kerr.CoordinatorNotAvailable.Code
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}

// authorizeDeleteShareGroupOffsets is the ACL rule of
// DeleteShareGroupOffsets: DELETE on the group, READ on each topic.
func authorizeDeleteShareGroupOffsets(a access, r *kmsg.DeleteShareGroupOffsetsRequest) (kmsg.Response, func(kmsg.Response)) {
	if !a.can(opDelete, resGroup, r.GroupID) {
		resp := r.ResponseKind().(*kmsg.DeleteShareGroupOffsetsResponse)
		resp.ErrorCode = errGroupAuthz
		return resp, nil
	}
	denied := filter(&r.Topics, func(t *kmsg.DeleteShareGroupOffsetsRequestTopic) bool { return a.can(opRead, resTopic, t.Topic) })
	if len(denied) == 0 {
		return nil, nil
	}
	return nil, func(resp kmsg.Response) {
		rr := resp.(*kmsg.DeleteShareGroupOffsetsResponse)
		for _, t := range denied {
			rt := kmsg.NewDeleteShareGroupOffsetsResponseTopic()
			rt.Topic, rt.ErrorCode = t.Topic, errTopicAuthz
			rr.Topics = append(rr.Topics, rt)
		}
	}
}

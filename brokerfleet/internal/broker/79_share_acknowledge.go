package broker

// ShareAcknowledge, versions 1-2 (KIP-932; v2 adds IsRenewAck of
// KIP-1222, which allows the RENEW type): a share group member
// acknowledges records it acquired, without fetching. The session epoch
// must be the session's next (0 is INVALID_SHARE_SESSION_EPOCH); -1
// closes the session after the acknowledgements and releases what the
// member still holds. Each partition's acknowledgements are answered
// once stored: INVALID_RECORD_STATE for records the member does not
// hold, INVALID_REQUEST for malformed or overlapping batches.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/security"
	"github.com/stratamq/strata/brokerfleet/internal/share"
)

func init() { register(79, 1, 2, later(handleShareAcknowledge), authorizeShareAcknowledge) }

func handleShareAcknowledge(b *Broker, cc *clientConn, req *kmsg.ShareAcknowledgeRequest) func() kmsg.Response {
	return func() kmsg.Response { return shareAPI{b}.shareAcknowledge(cc, req) }
}

func (b shareAPI) shareAcknowledge(cc *clientConn, req *kmsg.ShareAcknowledgeRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
	group, member := derefStr(req.GroupID), derefStr(req.MemberID)
	cfg := b.groupCfg.share(group)
	resp.AcquisitionLockTimeoutMillis = int32(cfg.LockDuration.Milliseconds())
	fail := func(code int16, msg string) kmsg.Response {
		resp.ErrorCode = code
		if msg != "" {
			resp.ErrorMessage = &msg
		}
		return resp
	}
	if group == "" || member == "" || len(member) > 36 {
		return fail(kerr.InvalidRequest.Code, "GroupId and MemberId must be set (MemberId at most 36 characters).")
	}
	renew := req.Version >= 2 && req.IsRenewAck
	acks := map[share.TP][]share.AckBatch{}
	var order []share.TP
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			tp := share.TP{Topic: t.TopicID, Partition: p.Partition}
			if _, ok := acks[tp]; !ok {
				order = append(order, tp)
			}
			for _, ab := range p.AcknowledgementBatches {
				acks[tp] = append(acks[tp], share.AckBatch{First: ab.FirstOffset, Last: ab.LastOffset, Types: ab.AcknowledgeTypes})
			}
		}
	}
	key := share.SessionKey{Group: group, Member: member}
	ctx, s := cc.ctx, b.cat.Snapshot()
	var closed []share.TP
	switch req.ShareSessionEpoch {
	case 0:
		return fail(kerr.InvalidShareSessionEpoch.Code, "ShareAcknowledge cannot open a share session.")
	case -1:
		var code int16
		if closed, code = b.shares.Sessions.Close(key); code != 0 {
			return fail(code, "")
		}
	default:
		if _, code := b.shares.Sessions.Use(key, req.ShareSessionEpoch, nil, nil); code != 0 {
			return fail(code, "")
		}
	}
	codes := b.shareAcks(ctx, s, group, member, acks, renew, cfg)
	hints := map[int32]bool{}
	for _, tp := range order {
		var rt *kmsg.ShareAcknowledgeResponseTopic
		for i := range resp.Topics {
			if resp.Topics[i].TopicID == tp.Topic {
				rt = &resp.Topics[i]
			}
		}
		if rt == nil {
			t := kmsg.NewShareAcknowledgeResponseTopic()
			t.TopicID = tp.Topic
			resp.Topics = append(resp.Topics, t)
			rt = &resp.Topics[len(resp.Topics)-1]
		}
		sp := kmsg.NewShareAcknowledgeResponseTopicPartition()
		sp.Partition, sp.ErrorCode = tp.Partition, codes[tp]
		sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = -1, -1
		if sp.ErrorCode == kerr.NotLeaderForPartition.Code {
			if t := b.resolveShare(s, tp); t.leader >= 0 {
				sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = t.leader, t.leaderEpoch
				hints[t.leader] = true
			}
		}
		rt.Partitions = append(rt.Partitions, sp)
	}
	if closed != nil {
		b.shareRelease(ctx, s, group, member, closed, cfg)
	}
	for id := range hints {
		if br, live := s.Peers()[id]; live {
			if h, p, err := security.SplitHostPort(br.Endpoint); err == nil {
				ne := kmsg.NewShareAcknowledgeResponseNodeEndpoint()
				ne.NodeID, ne.Host, ne.Port = id, h, p
				resp.NodeEndpoints = append(resp.NodeEndpoints, ne)
			}
		}
	}
	return resp
}

// authorizeShareAcknowledge is the ACL rule of ShareAcknowledge: READ on
// the group and on each topic, as ShareFetch.
func authorizeShareAcknowledge(a access, r *kmsg.ShareAcknowledgeRequest) (kmsg.Response, func(kmsg.Response)) {
	if !a.can(opRead, resGroup, derefStr(r.GroupID)) {
		resp := r.ResponseKind().(*kmsg.ShareAcknowledgeResponse)
		resp.ErrorCode = errGroupAuthz
		return resp, nil
	}
	s := a.b.cat.Snapshot()
	denied := filter(&r.Topics, func(t *kmsg.ShareAcknowledgeRequestTopic) bool {
		ts := s.TopicByID(t.TopicID)
		return ts != nil && a.can(opRead, resTopic, ts.Meta.Name)
	})
	if len(denied) == 0 {
		return nil, nil
	}
	return nil, func(resp kmsg.Response) {
		rr := resp.(*kmsg.ShareAcknowledgeResponse)
		for _, t := range denied {
			rt := kmsg.NewShareAcknowledgeResponseTopic()
			rt.TopicID = t.TopicID
			for _, p := range t.Partitions {
				sp := kmsg.NewShareAcknowledgeResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p.Partition, errTopicAuthz
				if s.TopicByID(t.TopicID) == nil {
					sp.ErrorCode = kerr.UnknownTopicID.Code
				}
				sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = -1, -1
				rt.Partitions = append(rt.Partitions, sp)
			}
			rr.Topics = append(rr.Topics, rt)
		}
	}
}

package broker

// ShareFetch, versions 1-2 (KIP-932; v1 is Kafka 4.1's stable form with
// MaxRecords and BatchSize of KIP-1206, v2 adds ShareAcquireMode and
// IsRenewAck of KIP-1222): a share group member acquires records of the
// partitions of its share session on this broker, with piggybacked
// acknowledgements applied (and stored) first. Epoch 0 opens a session
// (acknowledgements then are INVALID_REQUEST), -1 closes it after the
// acknowledgements, releasing what the member still holds; other epochs
// must be the session's next (INVALID_SHARE_SESSION_EPOCH,
// SHARE_SESSION_NOT_FOUND). Nothing acquired: the request waits up to
// MaxWaitMillis for records to arrive or become available again.

import (
	"context"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/catalog"
	"github.com/stratamq/strata/brokerfleet/internal/security"
	"github.com/stratamq/strata/brokerfleet/internal/share"
)

func init() { register(78, 1, 2, later(handleShareFetch), authorizeShareFetch) }

// defaultShareMaxRecords is what a request without MaxRecords acquires
// at most (KIP-1206's default).
const defaultShareMaxRecords = 500

func handleShareFetch(b *Broker, cc *clientConn, req *kmsg.ShareFetchRequest) func() kmsg.Response {
	return func() kmsg.Response { return shareAPI{b}.shareFetch(cc, req) }
}

// shareFetchResp builds a ShareFetch response partition by partition.
type shareFetchResp struct {
	resp  *kmsg.ShareFetchResponse
	idx   map[share.TP][2]int
	hints map[int32]bool
}

func (r *shareFetchResp) part(tp share.TP) *kmsg.ShareFetchResponseTopicPartition {
	if i, ok := r.idx[tp]; ok {
		return &r.resp.Topics[i[0]].Partitions[i[1]]
	}
	ti := -1
	for i := range r.resp.Topics {
		if r.resp.Topics[i].TopicID == tp.Topic {
			ti = i
			break
		}
	}
	if ti < 0 {
		t := kmsg.NewShareFetchResponseTopic()
		t.TopicID = tp.Topic
		r.resp.Topics = append(r.resp.Topics, t)
		ti = len(r.resp.Topics) - 1
	}
	sp := kmsg.NewShareFetchResponseTopicPartition()
	sp.Partition = tp.Partition
	sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = -1, -1
	r.resp.Topics[ti].Partitions = append(r.resp.Topics[ti].Partitions, sp)
	r.idx[tp] = [2]int{ti, len(r.resp.Topics[ti].Partitions) - 1}
	return &r.resp.Topics[ti].Partitions[len(r.resp.Topics[ti].Partitions)-1]
}

func (b shareAPI) shareFetch(cc *clientConn, req *kmsg.ShareFetchRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ShareFetchResponse)
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
	var adds []share.TP
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			tp := share.TP{Topic: t.TopicID, Partition: p.Partition}
			adds = append(adds, tp)
			for _, ab := range p.AcknowledgementBatches {
				acks[tp] = append(acks[tp], share.AckBatch{First: ab.FirstOffset, Last: ab.LastOffset, Types: ab.AcknowledgeTypes})
			}
			if renew && len(p.AcknowledgementBatches) == 0 {
				return fail(kerr.InvalidRequest.Code, "A renewal carries acknowledgements only.")
			}
		}
	}
	if renew && (req.MaxBytes != 0 || req.MinBytes != 0 || req.MaxRecords != 0 || req.MaxWaitMillis != 0) {
		return fail(kerr.InvalidRequest.Code, "A renewal must not ask for records.")
	}
	var forget []share.TP
	for _, t := range req.ForgottenTopicsData {
		for _, p := range t.Partitions {
			forget = append(forget, share.TP{Topic: t.TopicID, Partition: p})
		}
	}
	key := share.SessionKey{Group: group, Member: member}
	ctx := cc.ctx
	s := b.cat.Snapshot()
	out := &shareFetchResp{resp: resp, idx: map[share.TP][2]int{}, hints: map[int32]bool{}}

	var parts []share.TP
	fresh := false
	switch req.ShareSessionEpoch {
	case -1:
		closed, code := b.shares.Sessions.Close(key)
		if code != 0 {
			return fail(code, "")
		}
		b.answerShareAcks(ctx, s, out, group, member, acks, renew, cfg)
		b.shareRelease(ctx, s, group, member, closed, cfg)
		return resp
	case 0:
		if len(acks) > 0 {
			return fail(kerr.InvalidRequest.Code, "A new share session cannot carry acknowledgements.")
		}
		if code := b.shares.Sessions.Open(key, adds); code != 0 {
			return fail(code, "")
		}
		parts, fresh = adds, true
	default:
		var code int16
		if parts, code = b.shares.Sessions.Use(key, req.ShareSessionEpoch, adds, forget); code != 0 {
			return fail(code, "")
		}
	}
	b.answerShareAcks(ctx, s, out, group, member, acks, renew, cfg)
	for _, tp := range adds {
		out.part(tp) // a partition added to the session is answered even without records
	}
	if renew {
		return resp
	}

	maxRecords := int(req.MaxRecords)
	if maxRecords <= 0 {
		maxRecords = defaultShareMaxRecords
	}
	maxBytes := int(req.MaxBytes)
	if maxBytes <= 0 || maxBytes > int(b.cfg.FetchMaxBytes) {
		maxBytes = int(b.cfg.FetchMaxBytes)
	}
	partMax := map[share.TP]int{}
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			if p.PartitionMaxBytes > 0 {
				partMax[share.TP{Topic: t.TopicID, Partition: p.Partition}] = int(p.PartitionMaxBytes)
			}
		}
	}
	// Rotate where acquisition starts, so no partition starves.
	if n := len(parts); n > 1 && req.ShareSessionEpoch > 0 {
		k := int(req.ShareSessionEpoch) % n
		parts = append(parts[k:len(parts):len(parts)], parts[:k]...)
	}
	deadline := time.Now().Add(time.Duration(max(req.MaxWaitMillis, 0)) * time.Millisecond)
	targets := make([]shareTarget, 0, len(parts))
	sps := make([]*share.Partition, len(parts))
	for _, tp := range parts {
		t := b.resolveShare(s, tp)
		if t.p == nil {
			b.shareFetchError(s, out, t)
			continue
		}
		targets = append(targets, t)
	}
	for {
		records, bytes := 0, 0
		for i, t := range targets {
			if records >= maxRecords || bytes >= maxBytes {
				break
			}
			if sps[i] == nil {
				sp, code := b.sharePartition(ctx, group, t, fresh)
				if code != 0 {
					t.code = code
					b.shareFetchError(s, out, t)
					targets[i].p = nil
					continue
				}
				sps[i] = sp
			}
			if targets[i].p == nil {
				continue
			}
			limit := maxBytes - bytes
			if pm, ok := partMax[t.tp]; ok && pm < limit {
				limit = pm
			}
			data, ranges, err := sps[i].Acquire(member, b.shareReaderFor(ctx, t, cfg.ReadCommitted), maxRecords-records, limit, cfg)
			if err != nil {
				sps[i] = nil // fenced: read it again next round
				continue
			}
			if len(ranges) == 0 {
				continue
			}
			if req.BatchSize > 0 && req.ShareAcquireMode == 0 {
				ranges = splitRanges(ranges, int64(req.BatchSize))
			}
			sp := out.part(t.tp)
			sp.Records = append(sp.Records, data...)
			for _, r := range ranges {
				ar := kmsg.NewShareFetchResponseTopicPartitionAcquiredRecord()
				ar.FirstOffset, ar.LastOffset, ar.DeliveryCount = r.First, r.Last, r.Count
				sp.AcquiredRecords = append(sp.AcquiredRecords, ar)
				records += int(r.Last - r.First + 1)
			}
			bytes += len(data)
		}
		if records > 0 || !time.Now().Before(deadline) || len(targets) == 0 {
			break
		}
		if !b.waitShare(ctx, targets, sps, deadline) {
			break
		}
	}
	b.addShareEndpoints(s, resp, out.hints)
	return resp
}

// waitShare waits until a target's high watermark moves, records of a
// share partition become available, or deadline; false if the
// connection went away.
func (b shareAPI) waitShare(ctx context.Context, targets []shareTarget, sps []*share.Partition, deadline time.Time) bool {
	ch := make(chan struct{}, 1)
	woke := make(chan struct{}, 1)
	var cancels []func()
	for i, t := range targets {
		if t.p == nil {
			continue
		}
		cancels = append(cancels, t.p.Watch(ch))
		if sps[i] != nil {
			w := sps[i].Wake()
			stop := make(chan struct{})
			go func() {
				select {
				case <-w:
					select {
					case woke <- struct{}{}:
					default:
					}
				case <-stop:
				}
			}()
			cancels = append(cancels, func() { close(stop) })
		}
	}
	defer func() {
		for _, c := range cancels {
			c()
		}
	}()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-ch:
	case <-woke:
	case <-timer.C:
	case <-ctx.Done():
		return false
	}
	return true
}

// shareFetchError answers a partition that cannot be fetched here.
func (b shareAPI) shareFetchError(s *catalog.Snapshot, out *shareFetchResp, t shareTarget) {
	sp := out.part(t.tp)
	sp.ErrorCode = t.code
	if t.leader >= 0 {
		sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = t.leader, t.leaderEpoch
		out.hints[t.leader] = true
	}
}

// answerShareAcks applies a ShareFetch's acknowledgements and records
// each partition's result.
func (b shareAPI) answerShareAcks(ctx context.Context, s *catalog.Snapshot, out *shareFetchResp, group, member string, acks map[share.TP][]share.AckBatch, renew bool, cfg share.Config) {
	if len(acks) == 0 {
		return
	}
	for tp, code := range b.shareAcks(ctx, s, group, member, acks, renew, cfg) {
		out.part(tp).AcknowledgeErrorCode = code
	}
}

// addShareEndpoints names the leaders the response points to.
func (b shareAPI) addShareEndpoints(s *catalog.Snapshot, resp *kmsg.ShareFetchResponse, ids map[int32]bool) {
	for id := range ids {
		br, live := s.Peers()[id]
		if !live {
			continue
		}
		h, p, err := security.SplitHostPort(br.Endpoint)
		if err != nil {
			continue
		}
		ne := kmsg.NewShareFetchResponseNodeEndpoint()
		ne.NodeID, ne.Host, ne.Port = id, h, p
		if br.Rack != "" {
			ne.Rack = kmsg.StringPtr(br.Rack)
		}
		resp.NodeEndpoints = append(resp.NodeEndpoints, ne)
	}
}

// splitRanges cuts acquired ranges into pieces of at most n offsets
// (KIP-1206's batch-optimized mode).
func splitRanges(rs []share.Range, n int64) []share.Range {
	if n <= 0 || n >= math.MaxInt32 {
		return rs
	}
	var out []share.Range
	for _, r := range rs {
		for f := r.First; f <= r.Last; f += n {
			out = append(out, share.Range{First: f, Last: min(f+n-1, r.Last), Count: r.Count})
		}
	}
	return out
}

func derefStr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// authorizeShareFetch is the ACL rule of ShareFetch: READ on the group
// (GROUP_AUTHORIZATION_FAILED for the whole request) and READ on each
// topic (TOPIC_AUTHORIZATION_FAILED for its partitions, which never enter
// the session).
func authorizeShareFetch(a access, r *kmsg.ShareFetchRequest) (kmsg.Response, func(kmsg.Response)) {
	if !a.can(opRead, resGroup, derefStr(r.GroupID)) {
		resp := r.ResponseKind().(*kmsg.ShareFetchResponse)
		resp.ErrorCode = errGroupAuthz
		return resp, nil
	}
	s := a.b.cat.Snapshot()
	denied := filter(&r.Topics, func(t *kmsg.ShareFetchRequestTopic) bool {
		ts := s.TopicByID(t.TopicID)
		return ts != nil && a.can(opRead, resTopic, ts.Meta.Name)
	})
	if len(denied) == 0 {
		return nil, nil
	}
	return nil, func(resp kmsg.Response) {
		rr := resp.(*kmsg.ShareFetchResponse)
		for _, t := range denied {
			rt := kmsg.NewShareFetchResponseTopic()
			rt.TopicID = t.TopicID
			for _, p := range t.Partitions {
				sp := kmsg.NewShareFetchResponseTopicPartition()
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

package broker

// Fetch, versions 4-12. A fetch with a replica id (>= 0) is a follower
// pulling from its leader: it reads past the high watermark, and its fetch
// offset records how far it has replicated. v4 adds isolation level and the
// last stable offset;
// v5 the log start offset; v7 fetch sessions (we never create one: the
// session id answered is 0, so clients send full requests); v9 the current
// leader epoch; v11 rack and preferred read replica; v12 is flexible and
// adds the last fetched epoch.

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/catalog"
	"github.com/stratamq/strata/brokerfleet/internal/partition"
	"github.com/stratamq/strata/pkg/clock"
	"github.com/stratamq/strata/pkg/segment"
)

func init() { register(1, 4, 12, later(handleFetch), authorizeFetch) }

// maxFetchWait caps a client's MaxWaitMillis.
const maxFetchWait = 30 * time.Second

// handleFetch returns the function that answers the fetch: it reads the
// requested partitions and, while fewer than MinBytes are available, waits
// up to MaxWaitMillis for a high watermark to move.
func handleFetch(b *Broker, cc *clientConn, req *kmsg.FetchRequest) func() kmsg.Response {
	return func() kmsg.Response {
		if req.SessionID != 0 {
			resp := req.ResponseKind().(*kmsg.FetchResponse)
			resp.ErrorCode = kerr.FetchSessionIDNotFound.Code
			return resp
		}
		wait := min(time.Duration(max(req.MaxWaitMillis, 0))*time.Millisecond, maxFetchWait)
		deadline := b.clock.Now().Add(wait)
		resp, n, stop := readFetch(b, req)
		if n >= int(req.MinBytes) || stop || wait <= 0 {
			return resp
		}
		// Register before re-reading so no move is missed. Followers wait
		// for appends (they read uncommitted data), consumers for the high
		// watermark.
		wake := make(chan struct{}, 1)
		for _, p := range fetchPartitions(b, req) {
			if req.ReplicaID >= 0 {
				defer p.WatchAppends(wake)()
			} else {
				defer p.Watch(wake)()
			}
		}
		timer := b.clock.NewTimer(clock.Until(b.clock, deadline))
		defer timer.Stop()
		for {
			resp, n, stop = readFetch(b, req)
			if n >= int(req.MinBytes) || stop {
				return resp
			}
			select {
			case <-wake:
			case <-timer.C():
				resp, _, _ = readFetch(b, req)
				return resp
			case <-cc.ctx.Done():
				return resp
			}
		}
	}
}

func fetchPartitions(b *Broker, req *kmsg.FetchRequest) []*partition.Partition {
	var out []*partition.Partition
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			if p, _ := leaderOf(b.cat.Snapshot(), rt.Topic, rp.Partition); p != nil {
				out = append(out, p)
			}
		}
	}
	return out
}

// readFetch builds one fetch response from what is committed now. It
// returns the bytes of records read and whether a partition error makes
// waiting pointless (Kafka answers at once on errors).
func readFetch(b *Broker, req *kmsg.FetchRequest) (*kmsg.FetchResponse, int, bool) {
	s := b.cat.Snapshot()
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	remaining := int(req.MaxBytes)
	if req.Version < 3 || remaining <= 0 {
		remaining = int(b.cfg.MaxRequestBytes)
	}
	total, stop := 0, false
	for _, rt := range req.Topics {
		st := kmsg.NewFetchResponseTopic()
		st.Topic = rt.Topic
		st.TopicID = rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewFetchResponseTopicPartition()
			sp.Partition = rp.Partition
			// Empty, not null: librdkafka rejects a null record set.
			sp.RecordBatches = []byte{}
			p, code := leaderOf(s, rt.Topic, rp.Partition)
			switch {
			case p == nil:
				sp.ErrorCode = code
				stop = true
				if code == kerr.NotLeaderForPartition.Code {
					if leader, epoch, _, _, ok := currentLeader(s, rt.Topic, rp.Partition); ok && leader != b.cfg.NodeID {
						sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = leader, epoch
					}
				}
			case rp.CurrentLeaderEpoch > p.LeaderEpoch():
				sp.ErrorCode = kerr.UnknownLeaderEpoch.Code
				stop = true
			case rp.CurrentLeaderEpoch >= 0 && rp.CurrentLeaderEpoch < p.LeaderEpoch():
				sp.ErrorCode = kerr.FencedLeaderEpoch.Code
				stop = true
			default:
				sp.HighWatermark = p.HighWatermark()
				sp.LastStableOffset = sp.HighWatermark
				sp.LogStartOffset = p.LogStartOffset()
				if req.ReplicaID >= 0 {
					sp.LogStartOffset = p.LocalLogStartOffset() // where a follower can start
				}
				limit := min(int(rp.PartitionMaxBytes), remaining)
				if limit <= 0 && total > 0 {
					break
				}
				var data []byte
				var err error
				if req.ReplicaID >= 0 {
					// A follower: its fetch offset is its log end, which may
					// move the high watermark; it reads uncommitted data.
					p.ReplicaFetched(req.ReplicaID, rp.FetchOffset)
					sp.HighWatermark = p.HighWatermark()
					if b.reassignThrottle != nil && throttled(s, rt.Topic, rp.Partition, req.ReplicaID) {
						// A replica being added by a reassignment: at most the
						// throttle's rate (the follower polls again).
						if limit = b.reassignThrottle.Allow(max(limit, 0)); limit == 0 {
							break
						}
						data, err = p.ReadUncommitted(nil, rp.FetchOffset, limit)
						b.reassignThrottle.Spend(len(data))
					} else {
						data, err = p.ReadUncommitted(nil, rp.FetchOffset, max(limit, 0))
					}
				} else {
					data, err = p.Read(nil, rp.FetchOffset, max(limit, 0), total == 0)
					if b.tier != nil && errors.Is(err, segment.ErrOffsetOutOfRange) && rp.FetchOffset < p.LocalLogStartOffset() && rp.FetchOffset >= p.LogStartOffset() {
						// Below the local log: the tier has it.
						if ts := s.Topic(rt.Topic); ts != nil {
							ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
							data, err = b.tier.Read(ctx, ts.Meta.ID, rp.Partition, rp.FetchOffset, max(limit, 1))
							cancel()
						}
					}
				}
				if err != nil {
					sp.ErrorCode = errorCode(err)
					if !errors.Is(err, partition.ErrClosed) {
						stop = true
					}
					break
				}
				if len(data) > 0 {
					sp.RecordBatches = data
				}
				total += len(data)
				remaining -= len(data)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, total, stop
}

// throttled reports whether replica's fetches of a partition count against
// the reassignment throttle: it is being added by a reassignment.
func throttled(s *catalog.Snapshot, topic string, idx, replica int32) bool {
	t := s.Topic(topic)
	if t == nil {
		return false
	}
	st, _, ok := t.Partition(idx)
	return ok && slices.Contains(st.AddingReplicas, replica)
}

// authorizeFetch is the ACL rule of Fetch.
func authorizeFetch(a access, r *kmsg.FetchRequest) (kmsg.Response, func(kmsg.Response)) {
	replica := r.ReplicaID >= 0
	var denied []kmsg.FetchRequestTopic
	if replica && !a.cluster(opClusterAction) {
		denied, r.Topics = r.Topics, nil
	} else if !replica {
		denied = filter(&r.Topics, func(t *kmsg.FetchRequestTopic) bool { return a.can(opRead, resTopic, t.Topic) })
	}
	if len(denied) == 0 {
		return nil, nil
	}
	fix := func(resp kmsg.Response) {
		rr := resp.(*kmsg.FetchResponse)
		for _, t := range denied {
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, tp := range t.Partitions {
				rp := kmsg.NewFetchResponseTopicPartition()
				rp.Partition, rp.ErrorCode = tp.Partition, errTopicAuthz
				rp.HighWatermark, rp.LastStableOffset, rp.LogStartOffset = -1, -1, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			rr.Topics = append(rr.Topics, rt)
		}
	}
	if len(r.Topics) == 0 { // nothing left to wait for: answer now, not after MaxWait
		resp := r.ResponseKind().(*kmsg.FetchResponse)
		fix(resp)
		return resp, nil
	}
	return nil, fix
}

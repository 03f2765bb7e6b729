package broker

// WriteTxnMarkers, versions 0-2: a transaction coordinator (or Kafka's
// hanging-transaction tool) asks the leader of each partition to write a
// commit or abort marker for a producer, and the coordinator of a group
// shard (topic __consumer_offsets, partition = shard) to apply or drop
// the producer's pending offsets. Markers are appended in request order
// at once and answered once committed (acks=all). A marker of an older
// producer epoch than the partition knows is INVALID_PRODUCER_EPOCH, one
// of an older coordinator epoch than the producer's last marker
// TRANSACTION_COORDINATOR_FENCED. v1 is flexible; v2 adds the transaction
// version, ignored.
//
// ACLs: CLUSTER_ACTION (else every partition CLUSTER_AUTHORIZATION_FAILED).

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/txn"
	"github.com/stratamq/strata/pkg/segment"
)

func init() { register(27, 0, 2, later(handleWriteTxnMarkers), authorizeWriteTxnMarkers) }

// markerCommitWait bounds how long a marker waits to be committed.
const markerCommitWait = 30 * time.Second

func handleWriteTxnMarkers(b *Broker, cc *clientConn, req *kmsg.WriteTxnMarkersRequest) func() kmsg.Response {
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	type pending struct {
		sp     *kmsg.WriteTxnMarkersResponseMarkerTopicPartition
		w      markerWait
		shard  int32 // for a group shard
		group  bool
		marker segment.Marker
	}
	var waits []pending
	for _, rm := range req.Markers {
		sm := kmsg.NewWriteTxnMarkersResponseMarker()
		sm.ProducerID = rm.ProducerID
		for _, rt := range rm.Topics {
			st := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			st.Topic = rt.Topic
			st.Partitions = make([]kmsg.WriteTxnMarkersResponseMarkerTopicPartition, len(rt.Partitions))
			sm.Topics = append(sm.Topics, st)
		}
		resp.Markers = append(resp.Markers, sm)
	}
	for i, rm := range req.Markers {
		m := segment.Marker{ProducerID: rm.ProducerID, ProducerEpoch: rm.ProducerEpoch, Commit: rm.Committed, CoordinatorEpoch: rm.CoordinatorEpoch}
		for j, rt := range rm.Topics {
			for k, p := range rt.Partitions {
				sp := &resp.Markers[i].Topics[j].Partitions[k]
				sp.Partition = p
				if rt.Topic == txn.OffsetsTopic {
					waits = append(waits, pending{sp: sp, shard: p, group: true, marker: m})
					continue
				}
				w, code := appendMarker(b, rt.Topic, p, m)
				if sp.ErrorCode = code; code == 0 {
					waits = append(waits, pending{sp: sp, w: w})
				}
			}
		}
	}
	return func() kmsg.Response {
		ctx, cancel := context.WithTimeout(cc.ctx, markerCommitWait)
		defer cancel()
		for _, w := range waits {
			if w.group {
				w.sp.ErrorCode = completeGroupTxn(b, ctx, w.shard, w.marker)
			} else {
				w.sp.ErrorCode = w.w.wait(ctx, b)
			}
		}
		return resp
	}
}

// authorizeWriteTxnMarkers is the ACL rule of WriteTxnMarkers.
func authorizeWriteTxnMarkers(a access, r *kmsg.WriteTxnMarkersRequest) (kmsg.Response, func(kmsg.Response)) {
	if a.cluster(opClusterAction) {
		return nil, nil
	}
	resp := r.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	for _, rm := range r.Markers {
		sm := kmsg.NewWriteTxnMarkersResponseMarker()
		sm.ProducerID = rm.ProducerID
		for _, rt := range rm.Topics {
			st := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
			st.Topic = rt.Topic
			for _, p := range rt.Partitions {
				sp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
				sp.Partition, sp.ErrorCode = p, errClusterAuthz
				st.Partitions = append(st.Partitions, sp)
			}
			sm.Topics = append(sm.Topics, st)
		}
		resp.Markers = append(resp.Markers, sm)
	}
	return resp, nil
}

package broker

// The broker's side of transactions: writing a coordinator's markers
// (locally as a partition's leader or a group shard's coordinator, or
// through WriteTxnMarkers to the broker that is), and asking a
// transaction coordinator to verify that a partition or group is part of
// a producer's transaction (locally, or through AddPartitionsToTxn v4
// with VerifyOnly, KIP-890).

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/catalog"
	"github.com/stratamq/strata/brokerfleet/internal/group"
	"github.com/stratamq/strata/brokerfleet/internal/partition"
	"github.com/stratamq/strata/brokerfleet/internal/topic"
	"github.com/stratamq/strata/brokerfleet/internal/txn"
	"github.com/stratamq/strata/pkg/metastore"
	"github.com/stratamq/strata/pkg/segment"
)

// markerWriter is the broker's txn.Markers.
type markerWriter struct{ b *Broker }

// WriteMarkers writes m to every partition: those this broker leads (or
// whose group shard it coordinates) here, the others with one
// WriteTxnMarkers per broker, in parallel.
func (w markerWriter) WriteMarkers(ctx context.Context, m segment.Marker, parts []txn.TopicPartition) []error {
	b := w.b
	s := b.cat.Snapshot()
	errs := make([]error, len(parts))
	byNode := map[int32][]int{}
	for i, tp := range parts {
		node, err := markerNode(s, tp)
		if err != nil {
			errs[i] = err
			continue
		}
		byNode[node] = append(byNode[node], i)
	}
	var wg sync.WaitGroup
	for node, idx := range byNode {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if node == b.cfg.NodeID {
				// Append every marker first, then wait: the waits for
				// replication overlap.
				waits := make([]markerWait, len(idx))
				codes := make([]int16, len(idx))
				for k, i := range idx {
					if parts[i].Topic != txn.OffsetsTopic {
						waits[k], codes[k] = appendMarker(b, parts[i].Topic, parts[i].Partition, m)
					}
				}
				for k, i := range idx {
					switch {
					case parts[i].Topic == txn.OffsetsTopic:
						codes[k] = completeGroupTxn(b, ctx, parts[i].Partition, m)
					case codes[k] == 0:
						codes[k] = waits[k].wait(ctx, b)
					}
					errs[i] = markerError(s, parts[i], codes[k])
				}
				return
			}
			codes, err := sendMarkers(b, ctx, s, node, m, parts, idx)
			for k, i := range idx {
				if err != nil {
					errs[i] = err
				} else {
					errs[i] = markerError(s, parts[i], codes[k])
				}
			}
		}()
	}
	wg.Wait()
	return errs
}

// errNoMarkerNode is a partition without a leader (or a group shard
// without a coordinator) for now: retried.
var errNoMarkerNode = errors.New("no leader or coordinator to write the marker to")

// markerNode returns the broker a marker for tp goes to.
func markerNode(s *catalog.Snapshot, tp txn.TopicPartition) (int32, error) {
	if tp.Topic == txn.OffsetsTopic {
		sh, ok := s.Shards()[tp.Partition]
		if !ok || sh.Broker < 0 {
			return 0, errNoMarkerNode
		}
		return sh.Broker, nil
	}
	t := s.Topic(tp.Topic)
	if t == nil {
		return 0, txn.ErrGone
	}
	st, _, ok := t.Partition(tp.Partition)
	if !ok {
		return 0, txn.ErrGone
	}
	if st.Leader < 0 {
		return 0, errNoMarkerNode
	}
	return st.Leader, nil
}

// markerError turns a partition's answer to a marker into what the
// coordinator does with it.
func markerError(s *catalog.Snapshot, tp txn.TopicPartition, code int16) error {
	switch code {
	case 0:
		return nil
	case kerr.TransactionCoordinatorFenced.Code, kerr.InvalidProducerEpoch.Code, kerr.ProducerFenced.Code:
		return fmt.Errorf("%s-%d: %w: %v", tp.Topic, tp.Partition, txn.ErrFenced, kerr.ErrorForCode(code))
	case kerr.UnknownTopicOrPartition.Code:
		if tp.Topic != txn.OffsetsTopic && s.Topic(tp.Topic) == nil {
			return txn.ErrGone
		}
	}
	return fmt.Errorf("%s-%d: %w", tp.Topic, tp.Partition, kerr.ErrorForCode(code))
}

// completeGroupTxn applies a marker to the groups of a shard this broker
// coordinates.
func completeGroupTxn(b *Broker, ctx context.Context, shard int32, m segment.Marker) int16 {
	err := b.coord.CompleteTxn(ctx, shard, m.ProducerID, m.Commit)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, group.ErrNotCoordinator):
		return kerr.NotCoordinator.Code
	}
	b.log.Warn("apply a transaction marker to groups", "shard", shard, "producer_id", m.ProducerID, "err", err)
	return kerr.CoordinatorNotAvailable.Code
}

// markerWait is an appended marker waiting to be committed.
type markerWait struct {
	p   *partition.Partition
	end int64
}

// appendMarker appends a marker to a partition this broker leads.
func appendMarker(b *Broker, topicName string, idx int32, m segment.Marker) (markerWait, int16) {
	p, code := b.awaitLeader(b.ctx, topicName, idx)
	switch {
	case code != 0:
		return markerWait{}, code
	case !b.cat.LeaseValid(), !b.tier.Ready(topicName, idx, p):
		return markerWait{}, kerr.NotLeaderForPartition.Code
	}
	res, err := p.AppendMarker(m)
	if err != nil {
		return markerWait{}, errCodeOf(err)
	}
	if p.Config().Durability == topic.DurabilityObject && b.tier != nil {
		b.tier.KickWAL()
	}
	return markerWait{p: p, end: res.LastOffset + 1}, 0
}

// wait waits, as acks=all does, until the marker is committed while this
// broker still proves it leads.
func (w markerWait) wait(ctx context.Context, b *Broker) int16 {
	err := w.p.WaitCommitted(ctx, w.end)
	switch {
	case err != nil && !errors.Is(err, partition.ErrNotLeader):
		return kerr.RequestTimedOut.Code
	case err == nil && b.cat.LeaseValid() && w.p.IsLeader():
		return 0
	}
	return kerr.NotLeaderForPartition.Code
}

// peerAddr returns where this broker reaches broker node.
func peerAddr(b *Broker, s *catalog.Snapshot, node int32) (string, bool) {
	br, live := s.Peers()[node]
	if !live {
		return "", false
	}
	return b.cfg.Security.InterBrokerEndpoint(br), true
}

// sendMarkers sends the marker for parts[idx...] to broker node and
// returns the code of each.
func sendMarkers(b *Broker, ctx context.Context, s *catalog.Snapshot, node int32, m segment.Marker, parts []txn.TopicPartition, idx []int) ([]int16, error) {
	addr, ok := peerAddr(b, s, node)
	if !ok {
		return nil, fmt.Errorf("broker %d: %w", node, errNoMarkerNode)
	}
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.Version = 1
	mk := kmsg.NewWriteTxnMarkersRequestMarker()
	mk.ProducerID, mk.ProducerEpoch, mk.Committed, mk.CoordinatorEpoch = m.ProducerID, m.ProducerEpoch, m.Commit, m.CoordinatorEpoch
	pos := map[txn.TopicPartition]int{}
	for k, i := range idx {
		tp := parts[i]
		pos[tp] = k
		if n := len(mk.Topics); n == 0 || mk.Topics[n-1].Topic != tp.Topic {
			t := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
			t.Topic = tp.Topic
			mk.Topics = append(mk.Topics, t)
		}
		t := &mk.Topics[len(mk.Topics)-1]
		t.Partitions = append(t.Partitions, tp.Partition)
	}
	req.Markers = []kmsg.WriteTxnMarkersRequestMarker{mk}
	r, err := b.peers.do(ctx, addr, req)
	if err != nil {
		return nil, err
	}
	resp := r.(*kmsg.WriteTxnMarkersResponse)
	codes := make([]int16, len(idx))
	for k := range codes {
		codes[k] = kerr.UnknownServerError.Code // unanswered
	}
	for _, rm := range resp.Markers {
		for _, rt := range rm.Topics {
			for _, rp := range rt.Partitions {
				if k, ok := pos[txn.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}]; ok {
					codes[k] = rp.ErrorCode
				}
			}
		}
	}
	return codes, nil
}

// verifyTxn asks the coordinator of transactional id whether each
// partition is part of the producer's ongoing transaction.
func verifyTxn(b *Broker, ctx context.Context, id string, pid int64, epoch int16, parts []txn.TopicPartition) []int16 {
	out := make([]int16, len(parts))
	fill := func(code int16) []int16 {
		for i := range out {
			out[i] = code
		}
		return out
	}
	s := b.cat.Snapshot()
	sh, ok := s.Shards()[metastore.GroupShard(id)]
	switch {
	case !ok || sh.Broker < 0:
		return fill(kerr.CoordinatorNotAvailable.Code)
	case sh.Broker == b.cfg.NodeID:
		return b.txn.Verify(ctx, id, pid, epoch, parts)
	}
	addr, live := peerAddr(b, s, sh.Broker)
	if !live {
		return fill(kerr.CoordinatorNotAvailable.Code)
	}
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = 4
	tx := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, tx.VerifyOnly = id, pid, epoch, true
	for _, tp := range parts {
		if n := len(tx.Topics); n == 0 || tx.Topics[n-1].Topic != tp.Topic {
			t := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
			t.Topic = tp.Topic
			tx.Topics = append(tx.Topics, t)
		}
		t := &tx.Topics[len(tx.Topics)-1]
		t.Partitions = append(t.Partitions, tp.Partition)
	}
	req.Transactions = []kmsg.AddPartitionsToTxnRequestTransaction{tx}
	r, err := b.peers.do(ctx, addr, req)
	if err != nil {
		b.log.Debug("verify a transaction", "transactional_id", id, "coordinator", sh.Broker, "err", err)
		return fill(kerr.CoordinatorNotAvailable.Code)
	}
	resp := r.(*kmsg.AddPartitionsToTxnResponse)
	if resp.ErrorCode != 0 {
		return fill(resp.ErrorCode)
	}
	fill(kerr.UnknownServerError.Code)
	for _, rt := range resp.Transactions {
		for _, t := range rt.Topics {
			for _, p := range t.Partitions {
				for i, tp := range parts {
					if tp.Topic == t.Topic && tp.Partition == p.Partition {
						out[i] = p.ErrorCode
					}
				}
			}
		}
	}
	return out
}

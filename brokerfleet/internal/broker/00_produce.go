package broker

// Produce, versions 0-11. v0-2 (magic 0/1 message sets) are advertised for
// librdkafka but answered UNSUPPORTED_VERSION, as Kafka 4 does. v3 requires
// exactly one RecordBatch v2 per partition; v5 adds the log start offset;
// v8 adds error messages; v9+ are flexible. Transactional batches need the
// request's transactional id; a producer's first one in a partition is
// verified with its transaction coordinator (KIP-890 part 1: the
// partition must have been added to the ongoing transaction). v12 (whose
// produce adds the partition itself, transaction version 2) is not
// served.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/partition"
	"github.com/stratamq/strata/brokerfleet/internal/topic"
	"github.com/stratamq/strata/brokerfleet/internal/txn"
	"github.com/stratamq/strata/pkg/clock"
	"github.com/stratamq/strata/pkg/segment"
)

func init() { register(0, 0, 11, later(handleProduce), authorizeProduce) }

// produceWait is an appended batch an acks=all response waits for.
type produceWait struct {
	part  *partition.Partition
	resp  *kmsg.ProduceResponseTopicPartition
	topic string
	end   int64
	epoch int32 // the leader epoch the batch was appended under
}

// handleProduce appends in arrival order and returns the function that
// produces the response (nil for acks=0, which gets none).
func handleProduce(b *Broker, cc *clientConn, req *kmsg.ProduceRequest) func() kmsg.Response {
	start := b.clock.Now()
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	var waits []produceWait
	for _, rt := range req.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	for ti, rt := range req.Topics {
		for pi, rp := range rt.Partitions {
			sp := &resp.Topics[ti].Partitions[pi]
			p, res, err := produceOne(b, req, rt.Topic, rp.Partition, rp.Records)
			// Appended (copied to the log) or refused: the frame is let go
			// (conn.go releases its budget), so nothing may keep it.
			req.Topics[ti].Partitions[pi].Records = nil
			if err != nil {
				sp.ErrorCode = errCodeOf(err)
				sp.ErrorMessage = errorMessage(err)
				if sp.ErrorCode == kerr.NotLeaderForPartition.Code && req.Version >= 10 {
					hintLeader(b, resp, sp, rt.Topic, rp.Partition, -1)
				}
				continue
			}
			sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = res.BaseOffset, res.LogAppendTime, res.LogStart
			if req.Acks == -1 {
				waits = append(waits, produceWait{part: p, resp: sp, topic: rt.Topic, end: res.LastOffset + 1, epoch: p.LeaderEpoch()})
			}
		}
	}
	b.metrics.ProduceAppended(clock.Since(b.clock, start))
	if req.Acks == 0 {
		return nil
	}
	return func() kmsg.Response {
		if len(waits) == 0 {
			return resp
		}
		if b.cfg.UnsafeAckBeforeReplication { // test-only: see Config
			return resp
		}
		ctx, cancel := context.WithTimeout(cc.ctx, time.Duration(max(req.TimeoutMillis, 0))*time.Millisecond)
		defer cancel()
		defer func() {
			// The wake-up: from the last batch committing to here.
			if w := waits[len(waits)-1]; w.resp.ErrorCode == 0 {
				if d, ok := w.part.CommittedSince(w.end); ok {
					b.metrics.ProduceWoken(d)
				}
			}
		}()
		for _, w := range waits {
			err := w.part.WaitCommitted(ctx, w.end)
			switch {
			case err != nil && !errors.Is(err, partition.ErrNotLeader):
				w.resp.ErrorCode = kerr.RequestTimedOut.Code
				w.resp.ErrorMessage = errorMessage(fmt.Errorf("batch not committed within %d ms: %w", req.TimeoutMillis, err))
				continue
			case err == nil && b.cat.LeaseValid() && w.part.IsLeader():
				continue // committed, and this broker still proves it leads
			}
			// Deposed while waiting (the new leader may have cut the
			// batch), or committed but this broker can no longer prove it
			// leads (it acknowledges nothing past its safe deadline): the
			// client retries at the leader, and idempotence dedups a batch
			// that did commit.
			w.resp.ErrorCode = kerr.NotLeaderForPartition.Code
			if err != nil {
				w.resp.ErrorMessage = errorMessage(err)
			}
			if req.Version >= 10 {
				// Name the leader now, which may be this broker again under
				// a newer epoch (a quick flip), so the client retries at
				// once instead of waiting for its next metadata refresh.
				// The role changed inside a reconcile that publishes its
				// view right after: wait for that view.
				awaitView(b, ctx, w.topic, w.resp.Partition, w.part.LeaderEpoch())
				hintLeader(b, resp, w.resp, w.topic, w.resp.Partition, w.epoch)
			}
		}
		return resp
	}
}

// codedError carries a Kafka error code chosen by a handler.
type codedError struct {
	code int16
	msg  string
}

func (e *codedError) Error() string { return e.msg }

func errCodeOf(err error) int16 {
	if ce, ok := err.(*codedError); ok {
		return ce.code
	}
	return errorCode(err)
}

func coded(e *kerr.Error, format string, args ...any) error {
	return &codedError{code: e.Code, msg: fmt.Sprintf(format, args...)}
}

// produceOne validates and appends one partition's batch.
func produceOne(b *Broker, req *kmsg.ProduceRequest, topicName string, idx int32, records []byte) (*partition.Partition, partition.AppendResult, error) {
	switch {
	case req.Version < 3:
		return nil, partition.AppendResult{}, coded(kerr.UnsupportedVersion, "produce v%d (message format v0/v1) is not supported; use v3 or later", req.Version)
	case req.Acks != 0 && req.Acks != 1 && req.Acks != -1:
		return nil, partition.AppendResult{}, coded(kerr.InvalidRequiredAcks, "acks=%d; must be -1, 0 or 1", req.Acks)
	}
	p, code := b.awaitLeader(b.ctx, topicName, idx)
	if code != 0 {
		return nil, partition.AppendResult{}, &codedError{code: code, msg: fmt.Sprintf("%s-%d: %s", topicName, idx, kerr.ErrorForCode(code))}
	}
	if !b.cat.LeaseValid() {
		// Without a lease it can prove, this broker must not accept writes:
		// a successor may already lead.
		return nil, partition.AppendResult{}, fmt.Errorf("%s-%d: broker registration lease not held: %w", topicName, idx, errNotLeader)
	}
	if !b.tier.Ready(topicName, idx, p) {
		// A new leader reads the tier's manifest before its first write.
		return nil, partition.AppendResult{}, fmt.Errorf("%s-%d: loading the tier manifest: %w", topicName, idx, errNotLeader)
	}
	h, err := segment.ParseHeader(records)
	if err != nil {
		return nil, partition.AppendResult{}, coded(kerr.CorruptMessage, "record batch: %v", err)
	}
	cfg := p.Config()
	switch {
	case h.Size() > len(records):
		return nil, partition.AppendResult{}, coded(kerr.CorruptMessage, "record batch declares %d bytes, %d sent", h.Size(), len(records))
	case h.Size() < len(records):
		return nil, partition.AppendResult{}, coded(kerr.InvalidRecord, "a produce request must carry exactly one record batch per partition")
	case h.Size() > int(cfg.MaxMessageBytes):
		return nil, partition.AppendResult{}, coded(kerr.MessageTooLarge, "record batch of %d bytes exceeds max.message.bytes=%d", h.Size(), cfg.MaxMessageBytes)
	case !segment.CheckCRC(records):
		return nil, partition.AppendResult{}, coded(kerr.CorruptMessage, "record batch CRC mismatch")
	case h.IsControl():
		return nil, partition.AppendResult{}, coded(kerr.InvalidRecord, "clients may not produce control batches")
	case h.IsTransactional() && req.TransactionID == nil:
		// Kafka's answer: a transactional batch needs the transactional
		// id it is authorized under.
		return nil, partition.AppendResult{}, coded(kerr.TransactionalIDAuthorizationFailed, "a transactional batch needs the request's transactional id")
	case h.IsTransactional() && h.ProducerID < 0:
		return nil, partition.AppendResult{}, coded(kerr.InvalidRecord, "a transactional batch needs a producer id")
	case h.NumRecords <= 0 || int64(h.NumRecords) != int64(h.LastOffsetDelta)+1:
		return nil, partition.AppendResult{}, coded(kerr.InvalidRecord, "record batch holds %d records but its last offset delta is %d", h.NumRecords, h.LastOffsetDelta)
	}
	if req.Acks == -1 {
		if isr := p.ISR(); int32(len(isr)) < cfg.MinInsyncReplicas {
			return nil, partition.AppendResult{}, coded(kerr.NotEnoughReplicas, "%s-%d: %d in-sync replicas, min.insync.replicas=%d", topicName, idx, len(isr), cfg.MinInsyncReplicas)
		}
	}
	if cfg.SchemaValidation {
		if err := checkSchemas(b, topicName, records, h, cfg.MaxMessageBytes); err != nil {
			return nil, partition.AppendResult{}, err
		}
	}
	if cfg.Compact {
		if err := checkKeys(topicName, records, h, cfg.MaxMessageBytes); err != nil {
			return nil, partition.AppendResult{}, err
		}
	}
	var guard *partition.TxnGuard
	if h.IsTransactional() && !p.TxnVerified(h.ProducerID, h.ProducerEpoch) {
		var err error
		if guard, err = verifyProduce(b, *req.TransactionID, topicName, idx, p, h); err != nil {
			return nil, partition.AppendResult{}, err
		}
	}
	res, err := p.AppendTxn(records, h, guard)
	if err != nil {
		return nil, partition.AppendResult{}, err
	}
	b.metrics.Produced(topicName, int(h.NumRecords), len(records))
	if cfg.Durability == topic.DurabilityObject && b.tier != nil {
		b.tier.KickWAL() // acks=all waits for the flush to S3
	}
	return p, res, nil
}

// verifyWait bounds a transactional batch's verification with its
// coordinator.
const verifyWait = 5 * time.Second

// verifyProduce asks the transaction coordinator whether the partition is
// part of the producer's ongoing transaction before the producer's first
// transactional batch here (KIP-890 part 1), under a guard that a marker
// written meanwhile voids. Not part of it: INVALID_TXN_STATE; a fenced
// producer INVALID_PRODUCER_EPOCH; a coordinator that cannot answer now
// NOT_ENOUGH_REPLICAS, which every client retries.
func verifyProduce(b *Broker, id, topicName string, idx int32, p *partition.Partition, h segment.Header) (*partition.TxnGuard, error) {
	if topicName == txn.OffsetsTopic {
		// The name transactions give group coordinator shards: a topic
		// of that name is never part of one (AddPartitionsToTxn refuses it).
		return nil, coded(kerr.InvalidTxnState, "%s-%d: transactions cannot write to %s", topicName, idx, txn.OffsetsTopic)
	}
	g := p.GuardTxn(h.ProducerID, h.ProducerEpoch)
	ctx, cancel := context.WithTimeout(b.ctx, verifyWait)
	defer cancel()
	code := verifyTxn(b, ctx, id, h.ProducerID, h.ProducerEpoch, []txn.TopicPartition{{Topic: topicName, Partition: idx}})[0]
	switch code {
	case 0:
		return g, nil
	case kerr.NotCoordinator.Code, kerr.CoordinatorNotAvailable.Code, kerr.CoordinatorLoadInProgress.Code, kerr.ConcurrentTransactions.Code:
		return nil, coded(kerr.NotEnoughReplicas, "%s-%d: the transaction coordinator cannot verify the transaction now (%s); retry", topicName, idx, kerr.ErrorForCode(code))
	case kerr.ProducerFenced.Code:
		return nil, coded(kerr.InvalidProducerEpoch, "%s-%d: producer %d epoch %d is fenced", topicName, idx, h.ProducerID, h.ProducerEpoch)
	}
	return nil, &codedError{code: code, msg: fmt.Sprintf("%s-%d: producer %d epoch %d: the partition is not in its transaction (%s)", topicName, idx, h.ProducerID, h.ProducerEpoch, kerr.ErrorForCode(code))}
}

// viewWait bounds how long a NOT_LEADER answer waits for the view of the
// reconcile that changed the partition's role.
const viewWait = time.Second

// awaitView waits, at most viewWait, until this broker's view shows the
// partition at leader epoch epoch or later.
func awaitView(b *Broker, ctx context.Context, topicName string, idx, epoch int32) {
	var timeout <-chan time.Time
	for {
		ch := b.cat.Reconciled()
		if t := b.cat.Snapshot().Topic(topicName); t == nil {
			return
		} else if st, _, ok := t.Partition(idx); !ok || st.LeaderEpoch >= epoch {
			return
		}
		if timeout == nil {
			tm := b.clock.NewTimer(viewWait)
			defer tm.Stop()
			timeout = tm.C()
		}
		select {
		case <-ch:
		case <-timeout:
			return
		case <-ctx.Done():
			return
		}
	}
}

// hintLeader fills a NOT_LEADER_OR_FOLLOWER answer with the current leader
// and its address (KIP-951), so the client re-routes without a metadata
// round trip. This broker is named only when it leads under an epoch newer
// than selfAfter (it lost and regained leadership while the batch
// waited); -1 never names it.
func hintLeader(b *Broker, resp *kmsg.ProduceResponse, sp *kmsg.ProduceResponseTopicPartition, topicName string, idx int32, selfAfter int32) {
	leader, epoch, host, port, ok := currentLeader(b.cat.Snapshot(), topicName, idx)
	if !ok || (leader == b.cfg.NodeID && (selfAfter < 0 || epoch <= selfAfter)) {
		return
	}
	sp.CurrentLeader.LeaderID, sp.CurrentLeader.LeaderEpoch = leader, epoch
	for _, br := range resp.Brokers {
		if br.NodeID == leader {
			return
		}
	}
	br := kmsg.NewProduceResponseBroker()
	br.NodeID, br.Host, br.Port = leader, host, port
	resp.Brokers = append(resp.Brokers, br)
}

// authorizeProduce is the ACL rule of Produce.
func authorizeProduce(a access, r *kmsg.ProduceRequest) (kmsg.Response, func(kmsg.Response)) {
	txnDenied := r.TransactionID != nil && !a.can(opWrite, resTxnID, *r.TransactionID)
	denied := filter(&r.Topics, func(t *kmsg.ProduceRequestTopic) bool { return !txnDenied && a.can(opWrite, resTopic, t.Topic) })
	if len(denied) == 0 {
		return nil, nil
	}
	for _, t := range denied {
		for i := range t.Partitions {
			t.Partitions[i].Records = nil // the frame is let go after the append (conn.go)
		}
	}
	code := errTopicAuthz
	if txnDenied {
		code = errTxnAuthz
	}
	return nil, func(resp kmsg.Response) {
		rr := resp.(*kmsg.ProduceResponse)
		for _, t := range denied {
			rt := kmsg.NewProduceResponseTopic()
			rt.Topic = t.Topic
			for _, tp := range t.Partitions {
				rp := kmsg.NewProduceResponseTopicPartition()
				rp.Partition, rp.ErrorCode, rp.BaseOffset = tp.Partition, code, -1
				rt.Partitions = append(rt.Partitions, rp)
			}
			rr.Topics = append(rr.Topics, rt)
		}
	}
}

package broker

// Produce, versions 0-11. v0-2 (magic 0/1 message sets) are advertised for
// librdkafka but answered UNSUPPORTED_VERSION, as Kafka 4 does. v3 requires
// exactly one RecordBatch v2 per partition; v5 adds the log start offset;
// v8 adds error messages; v9+ are flexible.

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/partition"
	"github.com/stratamq/strata/brokerfleet/internal/topic"
	"github.com/stratamq/strata/pkg/segment"
)

func init() { register(0, 0, 11, later(handleProduce), authorizeProduce) }

// produceWait is an appended batch an acks=all response waits for.
type produceWait struct {
	part *partition.Partition
	resp *kmsg.ProduceResponseTopicPartition
	end  int64
}

// handleProduce appends in arrival order and returns the function that
// produces the response (nil for acks=0, which gets none).
func handleProduce(b *Broker, cc *clientConn, req *kmsg.ProduceRequest) func() kmsg.Response {
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
			if err != nil {
				sp.ErrorCode = errCodeOf(err)
				sp.ErrorMessage = errorMessage(err)
				if sp.ErrorCode == kerr.NotLeaderForPartition.Code && req.Version >= 10 {
					hintLeader(b, resp, sp, rt.Topic, rp.Partition)
				}
				continue
			}
			sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = res.BaseOffset, res.LogAppendTime, res.LogStart
			if req.Acks == -1 {
				waits = append(waits, produceWait{part: p, resp: sp, end: res.LastOffset + 1})
			}
		}
	}
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
		for _, w := range waits {
			if err := w.part.WaitCommitted(ctx, w.end); err != nil {
				w.resp.ErrorCode = kerr.RequestTimedOut.Code
				w.resp.ErrorMessage = errorMessage(fmt.Errorf("batch not committed within %d ms: %w", req.TimeoutMillis, err))
				continue
			}
			if !b.cat.LeaseValid() || !w.part.IsLeader() {
				// Committed by followers, but this broker can no longer
				// prove it leads: it acknowledges nothing past its safe
				// deadline. The client retries; idempotence dedups.
				w.resp.ErrorCode = kerr.NotLeaderForPartition.Code
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
	case req.TransactionID != nil:
		return nil, partition.AppendResult{}, coded(kerr.InvalidRequest, "transactions are not supported")
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
	case h.IsTransactional():
		return nil, partition.AppendResult{}, coded(kerr.InvalidRecord, "transactional batches are not supported")
	case h.NumRecords <= 0 || int64(h.NumRecords) != int64(h.LastOffsetDelta)+1:
		return nil, partition.AppendResult{}, coded(kerr.InvalidRecord, "record batch holds %d records but its last offset delta is %d", h.NumRecords, h.LastOffsetDelta)
	}
	if req.Acks == -1 {
		if isr := p.ISR(); int32(len(isr)) < cfg.MinInsyncReplicas {
			return nil, partition.AppendResult{}, coded(kerr.NotEnoughReplicas, "%s-%d: %d in-sync replicas, min.insync.replicas=%d", topicName, idx, len(isr), cfg.MinInsyncReplicas)
		}
	}
	if cfg.SchemaValidation {
		if err := checkSchemas(b, topicName, records, h); err != nil {
			return nil, partition.AppendResult{}, err
		}
	}
	res, err := p.Append(records, h)
	if err != nil {
		return nil, partition.AppendResult{}, err
	}
	b.metrics.Produced(topicName, int(h.NumRecords), len(records))
	if cfg.Durability == topic.DurabilityObject && b.tier != nil {
		b.tier.KickWAL() // acks=all waits for the flush to S3
	}
	return p, res, nil
}

// hintLeader fills a NOT_LEADER_OR_FOLLOWER answer with the current leader
// and its address (KIP-951), so the client re-routes without a metadata
// round trip.
func hintLeader(b *Broker, resp *kmsg.ProduceResponse, sp *kmsg.ProduceResponseTopicPartition, topicName string, idx int32) {
	leader, epoch, host, port, ok := currentLeader(b.cat.Snapshot(), topicName, idx)
	if !ok || leader == b.cfg.NodeID {
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

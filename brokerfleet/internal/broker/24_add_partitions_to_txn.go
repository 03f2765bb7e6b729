package broker

// AddPartitionsToTxn, versions 0-4. A producer (v0-3) adds the partitions
// it is about to write to its transaction, at the transactional id's
// coordinator. v1 is unchanged, v2 answers PRODUCER_FENCED where older
// versions get INVALID_PRODUCER_EPOCH, v3 is flexible. v4 (KIP-890) is
// between brokers: a batch of transactions, each with VerifyOnly, which a
// partition leader (or a group coordinator) sends to ask whether a
// partition is part of a producer's ongoing transaction before it takes
// the producer's first transactional batch; v4 without VerifyOnly adds
// the partitions. v5 (transaction version 2) is not served.
//
// A request naming a partition that does not exist adds nothing: those
// partitions are UNKNOWN_TOPIC_OR_PARTITION, the others
// OPERATION_NOT_ATTEMPTED, as in Kafka.
//
// ACLs: v0-3 WRITE on the transactional id (else every partition
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and WRITE on each topic (denied
// topics TOPIC_AUTHORIZATION_FAILED, the rest OPERATION_NOT_ATTEMPTED);
// v4 CLUSTER_ACTION (else CLUSTER_AUTHORIZATION_FAILED).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/txn"
)

func init() { register(24, 0, 4, answer(handleAddPartitionsToTxn), authorizeAddPartitionsToTxn) }

func handleAddPartitionsToTxn(b *Broker, cc *clientConn, req *kmsg.AddPartitionsToTxnRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	ctx, cancel := context.WithTimeout(cc.ctx, metaTimeout)
	defer cancel()
	if req.Version >= 4 {
		for _, tx := range req.Transactions {
			topics := make([]kmsg.AddPartitionsToTxnRequestTopic, len(tx.Topics))
			for i, t := range tx.Topics {
				topics[i] = kmsg.AddPartitionsToTxnRequestTopic{Topic: t.Topic, Partitions: t.Partitions}
			}
			codes := addPartitions(ctx, b, tx.TransactionalID, tx.ProducerID, tx.ProducerEpoch, topics, tx.VerifyOnly)
			rt := kmsg.NewAddPartitionsToTxnResponseTransaction()
			rt.TransactionalID = tx.TransactionalID
			for i, t := range tx.Topics {
				st := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
				st.Topic = t.Topic
				for j, p := range t.Partitions {
					sp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
					sp.Partition, sp.ErrorCode = p, codes[i][j]
					st.Partitions = append(st.Partitions, sp)
				}
				rt.Topics = append(rt.Topics, st)
			}
			resp.Transactions = append(resp.Transactions, rt)
		}
		return resp
	}
	codes := addPartitions(ctx, b, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Topics, false)
	for i, t := range req.Topics {
		st := kmsg.NewAddPartitionsToTxnResponseTopic()
		st.Topic = t.Topic
		for j, p := range t.Partitions {
			sp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			sp.Partition, sp.ErrorCode = p, fencedCode(codes[i][j], req.Version >= 2)
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// addPartitions adds (or, with verifyOnly, verifies) the partitions of
// topics to a producer's transaction, and returns each one's code.
func addPartitions(ctx context.Context, b *Broker, id string, pid int64, epoch int16, topics []kmsg.AddPartitionsToTxnRequestTopic, verifyOnly bool) [][]int16 {
	codes := make([][]int16, len(topics))
	var parts []txn.TopicPartition
	missing := false
	for i, t := range topics {
		codes[i] = make([]int16, len(t.Partitions))
		for j, p := range t.Partitions {
			if !verifyOnly && (t.Topic == txn.OffsetsTopic || !b.partitionExists(t.Topic, p)) {
				codes[i][j], missing = kerr.UnknownTopicOrPartition.Code, true
			}
			parts = append(parts, txn.TopicPartition{Topic: t.Topic, Partition: p})
		}
	}
	each := func(fn func(i, j, k int)) {
		k := 0
		for i, t := range topics {
			for j := range t.Partitions {
				fn(i, j, k)
				k++
			}
		}
	}
	switch {
	case missing:
		each(func(i, j, _ int) {
			if codes[i][j] == 0 {
				codes[i][j] = kerr.OperationNotAttempted.Code
			}
		})
	case verifyOnly:
		got := b.txn.Verify(ctx, id, pid, epoch, parts)
		each(func(i, j, k int) { codes[i][j] = got[k] })
	default:
		code := b.txn.AddPartitions(ctx, id, pid, epoch, parts)
		each(func(i, j, _ int) { codes[i][j] = code })
	}
	return codes
}

// authorizeAddPartitionsToTxn is the ACL rule of AddPartitionsToTxn.
func authorizeAddPartitionsToTxn(a access, r *kmsg.AddPartitionsToTxnRequest) (kmsg.Response, func(kmsg.Response)) {
	resp := r.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	if r.Version >= 4 {
		if !a.cluster(opClusterAction) {
			resp.ErrorCode = errClusterAuthz
			return resp, nil
		}
		return nil, nil
	}
	txnOK := a.can(opWrite, resTxnID, r.TransactionalID)
	denied := map[string]bool{}
	for _, t := range r.Topics {
		if txnOK && !a.can(opWrite, resTopic, t.Topic) {
			denied[t.Topic] = true
		}
	}
	if txnOK && len(denied) == 0 {
		return nil, nil
	}
	for _, t := range r.Topics {
		st := kmsg.NewAddPartitionsToTxnResponseTopic()
		st.Topic = t.Topic
		for _, p := range t.Partitions {
			sp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			sp.Partition = p
			switch {
			case !txnOK:
				sp.ErrorCode = errTxnAuthz
			case denied[t.Topic]:
				sp.ErrorCode = errTopicAuthz
			default:
				sp.ErrorCode = kerr.OperationNotAttempted.Code
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

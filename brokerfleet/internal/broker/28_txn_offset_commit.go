package broker

// TxnOffsetCommit, versions 0-3: a transactional producer commits a
// group's offsets inside its transaction, at the group's coordinator.
// They stay pending until the transaction's marker reaches the group
// (committed, or dropped on abort); OffsetFetch with RequireStable answers
// their partitions UNSTABLE_OFFSET_COMMIT meanwhile. The group coordinator
// first asks the transaction coordinator whether the group was added to
// the producer's ongoing transaction (AddOffsetsToTxn); if not, the
// answer is INVALID_TXN_STATE. v2 adds leader epochs and answers
// PRODUCER_FENCED where older versions get INVALID_PRODUCER_EPOCH; v3
// (KIP-447) is flexible and carries the member and generation, fenced
// like OffsetCommit (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION,
// FENCED_INSTANCE_ID).
//
// ACLs: WRITE on the transactional id and READ on the group (else every
// partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED or
// GROUP_AUTHORIZATION_FAILED), READ on each topic (denied topics
// TOPIC_AUTHORIZATION_FAILED).

import (
	"context"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/txn"
)

func init() { register(28, 0, 3, answer(handleTxnOffsetCommit), authorizeTxnOffsetCommit) }

func handleTxnOffsetCommit(b *Broker, cc *clientConn, req *kmsg.TxnOffsetCommitRequest) kmsg.Response {
	verify := func(ctx context.Context) int16 {
		vctx, cancel := context.WithTimeout(ctx, metaTimeout)
		defer cancel()
		return verifyTxn(b, vctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, []txn.TopicPartition{txn.GroupPartition(req.Group)})[0]
	}
	resp := b.coord.TxnCommit(cc.ctx, req, verify)
	for i := range resp.Topics {
		for j := range resp.Topics[i].Partitions {
			p := &resp.Topics[i].Partitions[j]
			p.ErrorCode = fencedCode(p.ErrorCode, req.Version >= 2)
		}
	}
	return resp
}

// authorizeTxnOffsetCommit is the ACL rule of TxnOffsetCommit.
func authorizeTxnOffsetCommit(a access, r *kmsg.TxnOffsetCommitRequest) (kmsg.Response, func(kmsg.Response)) {
	whole := int16(0)
	switch {
	case !a.can(opWrite, resTxnID, r.TransactionalID):
		whole = errTxnAuthz
	case !a.can(opRead, resGroup, r.Group):
		whole = errGroupAuthz
	}
	answer := func(rr *kmsg.TxnOffsetCommitResponse, topics []kmsg.TxnOffsetCommitRequestTopic, code int16) {
		for _, t := range topics {
			rt := kmsg.NewTxnOffsetCommitResponseTopic()
			rt.Topic = t.Topic
			for _, tp := range t.Partitions {
				rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = tp.Partition, code
				rt.Partitions = append(rt.Partitions, rp)
			}
			rr.Topics = append(rr.Topics, rt)
		}
	}
	if whole != 0 {
		resp := r.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
		answer(resp, r.Topics, whole)
		return resp, nil
	}
	denied := filter(&r.Topics, func(t *kmsg.TxnOffsetCommitRequestTopic) bool { return a.can(opRead, resTopic, t.Topic) })
	if len(denied) == 0 {
		return nil, nil
	}
	return nil, func(resp kmsg.Response) { answer(resp.(*kmsg.TxnOffsetCommitResponse), denied, errTopicAuthz) }
}

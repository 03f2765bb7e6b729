package broker

// DescribeTransactions, version 0: a transactional id's state at its
// coordinator (state, producer id and epoch, timeout, start time, the
// partitions in the transaction). An id this broker does not coordinate
// is NOT_COORDINATOR, an id without state TRANSACTIONAL_ID_NOT_FOUND.
//
// ACLs: DESCRIBE on each transactional id (else
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED); the partitions of topics the
// principal may not describe are left out, as in Kafka.

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(65, 0, 0, answer(handleDescribeTransactions), authorizeDescribeTransactions) }

func handleDescribeTransactions(b *Broker, cc *clientConn, req *kmsg.DescribeTransactionsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	ctx, cancel := context.WithTimeout(cc.ctx, metaTimeout)
	defer cancel()
	for _, id := range req.TransactionalIDs {
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID = id
		t, code := b.txn.Describe(ctx, id)
		st.ErrorCode = code
		if code == 0 {
			st.State, st.TimeoutMillis, st.ProducerID, st.ProducerEpoch = t.State, t.TimeoutMs, t.ProducerID, t.ProducerEpoch
			st.StartTimestamp = -1
			if t.StartMs > 0 && t.State != "Empty" {
				st.StartTimestamp = t.StartMs
			}
			for _, tt := range t.Partitions {
				rt := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
				rt.Topic, rt.Partitions = tt.Topic, slices.Clone(tt.Partitions)
				st.Topics = append(st.Topics, rt)
			}
		}
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return resp
}

// authorizeDescribeTransactions is the ACL rule of DescribeTransactions.
func authorizeDescribeTransactions(a access, r *kmsg.DescribeTransactionsRequest) (kmsg.Response, func(kmsg.Response)) {
	denied := filter(&r.TransactionalIDs, func(id *string) bool { return a.can(opDescribe, resTxnID, *id) })
	return nil, func(resp kmsg.Response) {
		rr := resp.(*kmsg.DescribeTransactionsResponse)
		for i := range rr.TransactionStates {
			st := &rr.TransactionStates[i]
			filter(&st.Topics, func(t *kmsg.DescribeTransactionsResponseTransactionStateTopic) bool {
				return a.can(opDescribe, resTopic, t.Topic)
			})
		}
		for _, id := range denied {
			st := kmsg.NewDescribeTransactionsResponseTransactionState()
			st.TransactionalID, st.ErrorCode = id, errTxnAuthz
			rr.TransactionStates = append(rr.TransactionStates, st)
		}
	}
}

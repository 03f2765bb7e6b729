package broker

// ListTransactions, versions 0-1: the transactions this broker
// coordinates (clients ask every broker), filtered by state and producer
// id; v1 adds a duration filter: only transactions that began longer ago
// than it. States Kafka does not know are listed back as unknown.
//
// ACLs: only the transactional ids the principal may DESCRIBE are listed.

import (
	"context"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/pkg/metastore"
)

func init() { register(66, 0, 1, answer(handleListTransactions), authorizeListTransactions) }

var txnStates = []string{metastore.TxnEmpty, metastore.TxnOngoing, metastore.TxnPrepareCommit, metastore.TxnPrepareAbort,
	metastore.TxnCompleteCommit, metastore.TxnCompleteAbort, "Dead", "PrepareEpochFence"}

func handleListTransactions(b *Broker, cc *clientConn, req *kmsg.ListTransactionsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ListTransactionsResponse)
	for _, s := range req.StateFilters {
		if !slices.Contains(txnStates, s) {
			resp.UnknownStateFilters = append(resp.UnknownStateFilters, s)
		}
	}
	ctx, cancel := context.WithTimeout(cc.ctx, metaTimeout)
	defer cancel()
	txns, code := b.txn.List(ctx)
	if code != 0 {
		resp.ErrorCode = code
		return resp
	}
	now := b.clock.Now().UnixMilli()
	for _, t := range txns {
		switch {
		case len(req.StateFilters) > 0 && !slices.Contains(req.StateFilters, t.State):
			continue
		case len(req.ProducerIDFilters) > 0 && !slices.Contains(req.ProducerIDFilters, t.ProducerID):
			continue
		case req.Version >= 1 && req.DurationFilterMillis >= 0 && (t.StartMs <= 0 || now-t.StartMs < req.DurationFilterMillis):
			continue
		}
		st := kmsg.NewListTransactionsResponseTransactionState()
		st.TransactionalID, st.ProducerID, st.TransactionState = t.ID, t.ProducerID, t.State
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	slices.SortFunc(resp.TransactionStates, func(x, y kmsg.ListTransactionsResponseTransactionState) int {
		switch {
		case x.TransactionalID < y.TransactionalID:
			return -1
		case x.TransactionalID > y.TransactionalID:
			return 1
		}
		return 0
	})
	return resp
}

// authorizeListTransactions is the ACL rule of ListTransactions.
func authorizeListTransactions(a access, r *kmsg.ListTransactionsRequest) (kmsg.Response, func(kmsg.Response)) {
	return nil, func(resp kmsg.Response) {
		rr := resp.(*kmsg.ListTransactionsResponse)
		filter(&rr.TransactionStates, func(t *kmsg.ListTransactionsResponseTransactionState) bool {
			return a.can(opDescribe, resTxnID, t.TransactionalID)
		})
	}
}

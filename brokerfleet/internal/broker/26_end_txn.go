package broker

// EndTxn, versions 0-4: commit or abort the producer's transaction. The
// coordinator writes its decision (PrepareCommit or PrepareAbort), then
// every partition's leader writes the marker and the groups apply or drop
// the transaction's offsets; the answer waits a few seconds for that (in
// the connection's writer) and is success once the decision is written.
// v2 answers PRODUCER_FENCED where older versions get
// INVALID_PRODUCER_EPOCH; v3 is flexible; v4 is unchanged. v5 (the
// per-transaction epoch bump of transaction version 2, KIP-890 part 2) is
// not served.
//
// ACLs: WRITE on the transactional id.

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(26, 0, 4, later(handleEndTxn), authorizeEndTxn) }

func handleEndTxn(b *Broker, cc *clientConn, req *kmsg.EndTxnRequest) func() kmsg.Response {
	wait := b.txn.EndTxn(cc.ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit)
	return func() kmsg.Response {
		resp := req.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = fencedCode(wait(), req.Version >= 2)
		return resp
	}
}

// authorizeEndTxn is the ACL rule of EndTxn.
func authorizeEndTxn(a access, r *kmsg.EndTxnRequest) (kmsg.Response, func(kmsg.Response)) {
	if a.can(opWrite, resTxnID, r.TransactionalID) {
		return nil, nil
	}
	resp := r.ResponseKind().(*kmsg.EndTxnResponse)
	resp.ErrorCode = errTxnAuthz
	return resp, nil
}

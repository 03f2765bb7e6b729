package broker

// InitProducerId, versions 0-4. v2 is flexible; v3 lets a producer pass its
// current id and epoch to recover (KIP-360); v4 answers PRODUCER_FENCED
// where older versions get INVALID_PRODUCER_EPOCH (KIP-588). An idempotent
// producer always gets a fresh id with epoch 0: ids are never reused, so
// that is always safe. Ids come in blocks from the metastore; while it is
// unreachable the answer is COORDINATOR_NOT_AVAILABLE, which clients
// retry. A transactional id goes to its transaction coordinator
// (internal/txn), which bumps the epoch and fences older instances;
// this broker answers NOT_COORDINATOR when it is not the id's.

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(22, 0, 4, answer(handleInitProducerID), authorizeInitProducerID) }

func handleInitProducerID(b *Broker, cc *clientConn, req *kmsg.InitProducerIDRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	ctx, cancel := context.WithTimeout(b.ctx, metaTimeout)
	defer cancel()
	if req.TransactionalID != nil {
		pid, epoch := int64(-1), int16(-1)
		if req.Version >= 3 {
			pid, epoch = req.ProducerID, req.ProducerEpoch
		}
		timeout := time.Duration(req.TransactionTimeoutMillis) * time.Millisecond
		resp.ProducerID, resp.ProducerEpoch, resp.ErrorCode = b.txn.InitProducerID(ctx, *req.TransactionalID, timeout, pid, epoch)
		resp.ErrorCode = fencedCode(resp.ErrorCode, req.Version >= 4)
		return resp
	}
	id, err := b.pids.allocate(ctx)
	if err != nil {
		b.log.Warn("allocate producer id", "err", err)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return resp
}

// fencedCode answers PRODUCER_FENCED as INVALID_PRODUCER_EPOCH to request
// versions older than KIP-588's (known is false for those).
func fencedCode(code int16, known bool) int16 {
	if code == kerr.ProducerFenced.Code && !known {
		return kerr.InvalidProducerEpoch.Code
	}
	return code
}

// authorizeInitProducerID is the ACL rule of InitProducerID.
func authorizeInitProducerID(a access, r *kmsg.InitProducerIDRequest) (kmsg.Response, func(kmsg.Response)) {
	resp := r.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if r.TransactionalID != nil {
		if !a.can(opWrite, resTxnID, *r.TransactionalID) {
			resp.ErrorCode = errTxnAuthz
			return resp, nil
		}
	} else if !a.cluster(opIdempotentWrite) && !a.mayWriteSomeTopic() {
		// KIP-679: WRITE on any topic allows idempotence.
		resp.ErrorCode = errClusterAuthz
		return resp, nil
	}
	return nil, nil
}

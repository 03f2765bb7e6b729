package broker

// InitProducerId, versions 0-4. v2 is flexible; v3 lets a producer pass its
// current id and epoch to recover (KIP-360). An idempotent producer always
// gets a fresh id with epoch 0: ids are never reused, so that is always
// safe. Ids come in blocks from the metastore; while it is unreachable the
// answer is COORDINATOR_NOT_AVAILABLE, which clients retry. Transactions
// are not supported.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(22, 0, 4, answer(handleInitProducerID), authorizeInitProducerID) }

func handleInitProducerID(b *Broker, cc *clientConn, req *kmsg.InitProducerIDRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	if req.TransactionalID != nil {
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp
	}
	ctx, cancel := context.WithTimeout(b.ctx, metaTimeout)
	defer cancel()
	id, err := b.pids.allocate(ctx)
	if err != nil {
		b.log.Warn("allocate producer id", "err", err)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return resp
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

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

func (b *Broker) handleInitProducerID(req *kmsg.InitProducerIDRequest) kmsg.Response {
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

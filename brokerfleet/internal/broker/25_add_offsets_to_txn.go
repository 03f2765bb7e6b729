package broker

// AddOffsetsToTxn, versions 0-3: a transactional producer that will commit
// a group's offsets in its transaction (TxnOffsetCommit) adds the group,
// at the transactional id's coordinator: the group's coordinator shard
// joins the transaction, so the transaction's marker reaches the group.
// v2 answers PRODUCER_FENCED where older versions get
// INVALID_PRODUCER_EPOCH; v3 is flexible.
//
// ACLs: WRITE on the transactional id, READ on the group.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(25, 0, 3, answer(handleAddOffsetsToTxn), authorizeAddOffsetsToTxn) }

func handleAddOffsetsToTxn(b *Broker, cc *clientConn, req *kmsg.AddOffsetsToTxnRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	if req.Group == "" || len(req.Group) > maxGroupIDBytes {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return resp
	}
	ctx, cancel := context.WithTimeout(cc.ctx, metaTimeout)
	defer cancel()
	code := b.txn.AddOffsets(ctx, req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group)
	resp.ErrorCode = fencedCode(code, req.Version >= 2)
	return resp
}

// maxGroupIDBytes bounds a group id (the group coordinator's limit).
const maxGroupIDBytes = 1000

// authorizeAddOffsetsToTxn is the ACL rule of AddOffsetsToTxn.
func authorizeAddOffsetsToTxn(a access, r *kmsg.AddOffsetsToTxnRequest) (kmsg.Response, func(kmsg.Response)) {
	resp := r.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	switch {
	case !a.can(opWrite, resTxnID, r.TransactionalID):
		resp.ErrorCode = errTxnAuthz
	case !a.can(opRead, resGroup, r.Group):
		resp.ErrorCode = errGroupAuthz
	default:
		return nil, nil
	}
	return resp, nil
}

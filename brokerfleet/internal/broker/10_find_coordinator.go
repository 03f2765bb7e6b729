package broker

// FindCoordinator, versions 0-4: key type 0 (group) or 1 (transactional
// id; both map to the same shards), one key (v0-3) or many (v4+).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(10, 0, 4, answer(handleFindCoordinator), authorizeFindCoordinator) }

func handleFindCoordinator(b *Broker, cc *clientConn, req *kmsg.FindCoordinatorRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	s := b.cat.Snapshot()
	keys := req.CoordinatorKeys
	if req.Version < 4 {
		keys = []string{req.CoordinatorKey}
	}
	for _, key := range keys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key = key
		switch {
		case req.CoordinatorType != 0 && req.CoordinatorType != 1:
			c.NodeID, c.Port, c.ErrorCode = -1, -1, kerr.InvalidRequest.Code
			c.ErrorMessage = kmsg.StringPtr("coordinator type must be 0 (group) or 1 (transaction)")
		case key == "":
			c.NodeID, c.Port, c.ErrorCode = -1, -1, kerr.InvalidRequest.Code
			c.ErrorMessage = kmsg.StringPtr("empty coordinator key")
		default:
			c.NodeID, c.Host, c.Port, c.ErrorCode = b.coordinatorFor(s, key)
		}
		resp.Coordinators = append(resp.Coordinators, c)
	}
	if req.Version < 4 && len(resp.Coordinators) == 1 {
		c := resp.Coordinators[0]
		resp.ErrorCode, resp.ErrorMessage, resp.NodeID, resp.Host, resp.Port = c.ErrorCode, c.ErrorMessage, c.NodeID, c.Host, c.Port
		resp.Coordinators = nil
	}
	return resp
}

// authorizeFindCoordinator is the ACL rule of FindCoordinator.
func authorizeFindCoordinator(a access, r *kmsg.FindCoordinatorRequest) (kmsg.Response, func(kmsg.Response)) {
	rt, code := resGroup, errGroupAuthz
	if r.CoordinatorType == 1 {
		rt, code = resTxnID, errTxnAuthz
	}
	if r.Version < 4 {
		if a.can(opDescribe, rt, r.CoordinatorKey) {
			return nil, nil
		}
		resp := r.ResponseKind().(*kmsg.FindCoordinatorResponse)
		resp.ErrorCode, resp.NodeID, resp.Port = code, -1, -1
		return resp, nil
	}
	denied := filter(&r.CoordinatorKeys, func(k *string) bool { return a.can(opDescribe, rt, *k) })
	if len(denied) == 0 {
		return nil, nil
	}
	return nil, func(resp kmsg.Response) {
		rr := resp.(*kmsg.FindCoordinatorResponse)
		for _, k := range denied {
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key, c.NodeID, c.Port, c.ErrorCode = k, -1, -1, code
			rr.Coordinators = append(rr.Coordinators, c)
		}
	}
}

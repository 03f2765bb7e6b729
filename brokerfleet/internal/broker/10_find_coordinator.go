package broker

// FindCoordinator, versions 0-4: key type 0 (group) or 1 (transactional
// id; both map to the same shards), one key (v0-3) or many (v4+).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func (b *Broker) handleFindCoordinator(req *kmsg.FindCoordinatorRequest) kmsg.Response {
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

package broker

// FindCoordinator, versions 0-6: key type 0 (group) or 1 (transactional
// id; both map to the same shards), one key (v0-3) or many (v4+); v5
// adds TRANSACTION_ABORTABLE (never answered here), v6 key type 2
// (KIP-932's share coordinator, "group:topicId:partition"): a share
// partition's state lives with the partition's leader, which is named.

import (
	"encoding/base64"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/catalog"
	"github.com/stratamq/strata/brokerfleet/internal/security"
	"github.com/stratamq/strata/pkg/metastore"
)

func init() { register(10, 0, 6, answer(handleFindCoordinator), authorizeFindCoordinator) }

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
		case req.CoordinatorType == 2 && req.Version >= 6:
			c.NodeID, c.Host, c.Port, c.ErrorCode = shareAPI{b}.shareCoordinatorFor(s, key)
			if c.ErrorCode == kerr.InvalidRequest.Code {
				c.ErrorMessage = kmsg.StringPtr("a share coordinator key is groupId:topicId:partition")
			}
		case req.CoordinatorType != 0 && req.CoordinatorType != 1:
			c.NodeID, c.Port, c.ErrorCode = -1, -1, kerr.InvalidRequest.Code
			c.ErrorMessage = kmsg.StringPtr("coordinator type must be 0 (group), 1 (transaction) or 2 (share, v6+)")
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
	if r.CoordinatorType == 2 {
		// Kafka: the share coordinator is for brokers (CLUSTER_ACTION).
		if a.cluster(opClusterAction) {
			return nil, nil
		}
		resp := r.ResponseKind().(*kmsg.FindCoordinatorResponse)
		for _, k := range r.CoordinatorKeys {
			c := kmsg.NewFindCoordinatorResponseCoordinator()
			c.Key, c.NodeID, c.Port, c.ErrorCode = k, -1, -1, errClusterAuthz
			resp.Coordinators = append(resp.Coordinators, c)
		}
		return resp, nil
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

// shareCoordinatorFor answers a share coordinator key
// (groupId:topicId:partition, the topic id in Kafka's base64 form or
// hex): the partition's leader.
func (b shareAPI) shareCoordinatorFor(s *catalog.Snapshot, key string) (int32, string, int32, int16) {
	bad := func() (int32, string, int32, int16) { return -1, "", -1, kerr.InvalidRequest.Code }
	i := strings.LastIndexByte(key, ':')
	if i <= 0 {
		return bad()
	}
	j := strings.LastIndexByte(key[:i], ':')
	if j <= 0 {
		return bad()
	}
	p, err := strconv.ParseInt(key[i+1:], 10, 32)
	if err != nil || p < 0 {
		return bad()
	}
	var id metastore.TopicID
	raw := key[j+1 : i]
	if dec, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(raw, "=")); err == nil && len(dec) == len(id) {
		copy(id[:], dec)
	} else if err := id.UnmarshalText([]byte(raw)); err != nil {
		return bad()
	}
	t := s.TopicByID(id)
	if t == nil {
		return -1, "", -1, kerr.CoordinatorNotAvailable.Code
	}
	st, _, ok := t.Partition(int32(p))
	if !ok || st.Leader < 0 {
		return -1, "", -1, kerr.CoordinatorNotAvailable.Code
	}
	if st.Leader == b.cfg.NodeID {
		h, port := b.Addr()
		return b.cfg.NodeID, h, port, 0
	}
	peer, live := s.Peers()[st.Leader]
	if !live {
		return -1, "", -1, kerr.CoordinatorNotAvailable.Code
	}
	h, port, err := security.SplitHostPort(peer.Endpoint)
	if err != nil {
		return -1, "", -1, kerr.CoordinatorNotAvailable.Code
	}
	return st.Leader, h, port, 0
}

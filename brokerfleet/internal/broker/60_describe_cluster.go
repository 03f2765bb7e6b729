package broker

// DescribeCluster, versions 0-1. v1 adds the endpoint type (only brokers,
// 1, is served).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/security"
)

func init() { register(60, 0, 1, answer(handleDescribeCluster), authorizeDescribeCluster) }

func handleDescribeCluster(b *Broker, cc *clientConn, req *kmsg.DescribeClusterRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	if req.Version >= 1 && req.EndpointType != 1 {
		resp.ErrorCode = kerr.UnsupportedEndpointType.Code
		return resp
	}
	for _, cb := range b.clusterBrokers(b.cat.Snapshot()) {
		host, port, err := security.SplitHostPort(cb.Endpoint)
		if err != nil {
			continue
		}
		br := kmsg.NewDescribeClusterResponseBroker()
		br.NodeID, br.Host, br.Port = cb.ID, host, port
		if cb.Rack != "" {
			br.Rack = kmsg.StringPtr(cb.Rack)
		}
		resp.Brokers = append(resp.Brokers, br)
	}
	resp.ClusterID = b.cfg.ClusterID
	resp.ControllerID = b.cat.Snapshot().Controller()
	return resp
}

// authorizeDescribeCluster is the ACL rule of DescribeCluster.
func authorizeDescribeCluster(a access, r *kmsg.DescribeClusterRequest) (kmsg.Response, func(kmsg.Response)) {
	if !a.cluster(opDescribe) {
		resp := r.ResponseKind().(*kmsg.DescribeClusterResponse)
		resp.ErrorCode = errClusterAuthz
		return resp, nil
	}
	return nil, nil
}

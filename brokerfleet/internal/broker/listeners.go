package broker

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/stratamq/strata/brokerfleet/internal/security"
)

// rewriteEndpoints replaces the default listener's broker addresses in a
// response with those of the listener the client connected on; brokers
// without that listener are left out (or answered as unavailable).
func (b *Broker) rewriteEndpoints(cc *clientConn, p *pending) {
	if cc.sec == nil || cc.sec.Listener().Name == b.cfg.Security.Default().Name {
		return
	}
	listener := cc.sec.Listener().Name
	fix := func(resp kmsg.Response) {
		type hostPort struct {
			host string
			port int32
		}
		var eps map[int32]hostPort
		addr := func(id int32) (string, int32, bool) {
			if eps == nil {
				eps = map[int32]hostPort{}
				for _, br := range b.clusterBrokers(b.cat.Snapshot()) {
					if ep, ok := b.cfg.Security.Endpoint(br, listener); ok {
						if h, port, err := security.SplitHostPort(ep); err == nil {
							eps[br.ID] = hostPort{h, port}
						}
					}
				}
			}
			e, ok := eps[id]
			if !ok {
				return "", -1, false
			}
			return e.host, e.port, true
		}
		switch r := resp.(type) {
		case *kmsg.MetadataResponse:
			filter(&r.Brokers, func(br *kmsg.MetadataResponseBroker) bool {
				var ok bool
				br.Host, br.Port, ok = addr(br.NodeID)
				return ok
			})
		case *kmsg.DescribeClusterResponse:
			filter(&r.Brokers, func(br *kmsg.DescribeClusterResponseBroker) bool {
				var ok bool
				br.Host, br.Port, ok = addr(br.NodeID)
				return ok
			})
		case *kmsg.FindCoordinatorResponse:
			if r.Version < 4 {
				if r.ErrorCode == 0 {
					var ok bool
					if r.Host, r.Port, ok = addr(r.NodeID); !ok {
						r.ErrorCode, r.NodeID = kerr.CoordinatorNotAvailable.Code, -1
					}
				}
			}
			for i := range r.Coordinators {
				c := &r.Coordinators[i]
				if c.ErrorCode == 0 {
					var ok bool
					if c.Host, c.Port, ok = addr(c.NodeID); !ok {
						c.ErrorCode, c.NodeID = kerr.CoordinatorNotAvailable.Code, -1
					}
				}
			}
		case *kmsg.ProduceResponse:
			filter(&r.Brokers, func(br *kmsg.ProduceResponseBroker) bool {
				var ok bool
				br.Host, br.Port, ok = addr(br.NodeID)
				return ok
			})
		case *kmsg.ShareFetchResponse:
			filter(&r.NodeEndpoints, func(br *kmsg.ShareFetchResponseNodeEndpoint) bool {
				var ok bool
				br.Host, br.Port, ok = addr(br.NodeID)
				return ok
			})
		case *kmsg.ShareAcknowledgeResponse:
			filter(&r.NodeEndpoints, func(br *kmsg.ShareAcknowledgeResponseNodeEndpoint) bool {
				var ok bool
				br.Host, br.Port, ok = addr(br.NodeID)
				return ok
			})
		}
	}
	amend(p, fix)
}

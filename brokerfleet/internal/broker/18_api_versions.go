package broker

// ApiVersions, versions 0-4. v3 is flexible and carries the client's
// software name and version. A request of a version above ours is answered
// with v0, UNSUPPORTED_VERSION and our ranges (KIP-511), in conn.go. On a
// session that ended (KIP-368) it closes the connection, as every request
// does.

import "github.com/twmb/franz-go/pkg/kmsg"

func init() { registerPublic(18, 0, 4, handleApiVersions) }

func handleApiVersions(b *Broker, cc *clientConn, req *kmsg.ApiVersionsRequest, p *pending) bool {
	if sessionEnded(b, cc, p) {
		return true
	}
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	resp.ApiKeys = apiVersions()
	p.resp = resp
	return true
}

package broker

// ApiVersions, versions 0-4. v3 is flexible and carries the client's
// software name and version. A request of a version above ours is answered
// with v0, UNSUPPORTED_VERSION and our ranges (KIP-511), in conn.go.

import "github.com/twmb/franz-go/pkg/kmsg"

func init() { registerPublic(18, 0, 4, answer(handleApiVersions)) }

func handleApiVersions(b *Broker, cc *clientConn, req *kmsg.ApiVersionsRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	resp.ApiKeys = apiVersions()
	return resp
}

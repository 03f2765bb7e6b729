package broker

// OffsetFetch, versions 1-9: one group (v1-7) or many at once (v8+); v9
// carries a consumer-protocol member's id and epoch (KIP-848), checked
// against the group.

import "github.com/twmb/franz-go/pkg/kmsg"

func init() { register(9, 1, 9, answer(handleOffsetFetch), authorizeOffsetFetch) }

func handleOffsetFetch(b *Broker, cc *clientConn, req *kmsg.OffsetFetchRequest) kmsg.Response {
	return b.coord.FetchOffsets(cc.ctx, req)
}

// authorizeOffsetFetch is the ACL rule of OffsetFetch.
func authorizeOffsetFetch(a access, r *kmsg.OffsetFetchRequest) (kmsg.Response, func(kmsg.Response)) {
	return authorizeOffsetFetchGroups(a, r)
}
